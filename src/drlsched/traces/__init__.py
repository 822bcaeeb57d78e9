"""Readers for public cluster traces, producing `drlsched.workload.Workload`.

`load_trace` reads a trace once into an arrival-sorted Parquet store (kept under `--cache DIR`, else in a
temporary directory that lives as long as the workload), then streams the selected window from it. The
returned `Workload.pods` can be iterated several times (one replay per policy), each time from disk.
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa

from drlsched.errors import UserError
from drlsched.traces import alibaba_v2018, google_2019, openb_v2023, pai_v2020, spar_v2018, store
from drlsched.traces.context import Context
from drlsched.traces.csvio import BadRows
from drlsched.traces.files import discover
from drlsched.traces.nodes import scale
from drlsched.traces.podtable import to_specs
from drlsched.traces.window import Window, batches, extent
from drlsched.workload import PodSpec, Workload

_READERS: dict[str, ModuleType] = {m.NAME: m for m in (alibaba_v2018, spar_v2018, pai_v2020, openb_v2023,
                                                       google_2019)}
FORMATS: tuple[str, ...] = tuple(_READERS)


def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", metavar="PATH",
                        help="trace directory or file (gzip is read transparently)")
    parser.add_argument("--trace-format", metavar="FMT", choices=FORMATS,
                        help=f"trace format: {', '.join(FORMATS)}")
    add_selection_arguments(parser)


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by workload commands and `trace-info` (the core adds --nodes, --duration, --seed)."""
    parser.add_argument("--start", type=float, default=0.0, metavar="S",
                        help="window start, seconds after the trace's first arrival (default 0)")
    parser.add_argument("--sample-rate", type=float, default=1.0, metavar="P",
                        help="keep each job with probability P, drawn from --seed (default 1)")
    parser.add_argument("--max-pods", type=int, metavar="N", help="stop after N pods")
    parser.add_argument("--arrival-speedup", type=float, default=1.0, metavar="K",
                        help="divide the time between arrivals by K, pod durations unchanged: loads the cluster of "
                             "a sparse trace such as openb (--start and --duration stay in trace time; default 1)")
    parser.add_argument("--cache", metavar="DIR",
                        help="keep the parsed, sorted trace here (Parquet) for reuse")
    parser.add_argument("--skip-bad-rows", action="store_true",
                        help="skip and count malformed rows instead of stopping at the first")
    parser.add_argument("--machine-cpu-millis", type=int, metavar="M",
                        help="millicores of a normalised CPU amount of 1.0 (v2018: 100 units; Google: 1 NCU)")
    parser.add_argument("--machine-memory-mib", type=int, metavar="MIB",
                        help="MiB of a normalised memory amount of 1.0 (v2018: 100 units; Google: 1.0)")


@dataclass(frozen=True)
class TraceSelection:
    """A trace and the window of it a command reads: the trace options, plus the core's sizes and seed."""

    path: str
    format: str
    start: float = 0.0
    duration: float | None = None
    sample_rate: float = 1.0
    max_pods: int | None = None
    arrival_speedup: float = 1.0
    nodes: int | None = None
    seed: int = 0
    cache: str | None = None
    skip_bad_rows: bool = False
    machine_cpu_millis: int | None = None
    machine_memory_mib: int | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, path: str, *, nodes: int | None, duration: float | None,
                  seed: int) -> TraceSelection:
        """The options `add_selection_arguments` parsed, with the trace's path and the command's own sizes."""
        return cls(path=path, format=args.trace_format, start=args.start, duration=duration,
                   sample_rate=args.sample_rate, max_pods=args.max_pods, arrival_speedup=args.arrival_speedup,
                   nodes=nodes, seed=seed, cache=args.cache, skip_bad_rows=args.skip_bad_rows,
                   machine_cpu_millis=args.machine_cpu_millis, machine_memory_mib=args.machine_memory_mib)


class TracePods:
    """Re-iterable pods of a stored window.

    A temporary store (no --cache) is opened once and its directory deleted at once: the open file lives as
    long as this object, and nothing is left behind however the process ends (pool workers skip finalisers).
    """

    def __init__(self, pods_file: Path, window: Window, temporary: Path | None = None) -> None:
        self.window = window
        self.source: Path | pa.NativeFile = pods_file
        if temporary is not None:
            self.source = pa.OSFile(str(pods_file))
            shutil.rmtree(temporary, ignore_errors=True)

    def __iter__(self) -> Iterator[PodSpec]:
        for table in batches(self.source, self.window):
            yield from to_specs(table)


def _positive(value: float | None, option: str, allow_zero: bool = False) -> None:
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise UserError(f"{option} must be a {'non-negative' if allow_zero else 'positive'} number, "
                        f"got {value}")


def _validate(sel: TraceSelection) -> tuple[Path, str]:
    if not sel.path:
        raise UserError("no trace given: pass --trace PATH (a trace directory or file)")
    fmt = sel.format
    if not fmt:
        raise UserError(f"--trace-format is required (one of {', '.join(FORMATS)})")
    if fmt not in _READERS:
        raise UserError(f"unknown trace format {fmt!r} (expected one of {', '.join(FORMATS)})")
    _positive(sel.start, "--start", allow_zero=True)
    _positive(sel.duration, "--duration")
    _positive(sel.max_pods, "--max-pods")
    _positive(sel.arrival_speedup, "--arrival-speedup")
    _positive(sel.nodes, "--nodes")
    _positive(sel.machine_cpu_millis, "--machine-cpu-millis")
    _positive(sel.machine_memory_mib, "--machine-memory-mib")
    if not (math.isfinite(sel.sample_rate) and 0 < sel.sample_rate <= 1):
        raise UserError(f"--sample-rate must be in (0, 1], got {sel.sample_rate}")
    path = Path(sel.path).expanduser()
    if not path.exists():
        raise UserError(f"trace path {path} does not exist")
    return path, fmt


def _stored(sel: TraceSelection, path: Path, fmt: str) -> tuple[dict[str, Any], Path, Path | None]:
    """The store's meta, its directory, and the temporary directory to remove with it (no --cache)."""
    reader = _READERS[fmt]
    found = discover(path, reader.ROLES, fmt)
    sources = store.stamp(p for paths in found.values() for p in paths)
    cpu_m = sel.machine_cpu_millis or reader.DEFAULT_MACHINE[0]
    mem_mib = sel.machine_memory_mib or reader.DEFAULT_MACHINE[1]
    key: dict[str, object] = {"format": fmt, "path": str(path.resolve()), "cpu": cpu_m, "mem": mem_mib}
    seed = sel.seed
    early = getattr(reader, "SAMPLES_WHILE_READING", False) and sel.sample_rate < 1.0
    if early:  # the store then holds only the sampled jobs: a cache entry of its own
        key.update(sample_rate=sel.sample_rate, seed=seed)
    temporary: Path | None = None
    if sel.cache:
        directory = store.entry_dir(Path(sel.cache).expanduser(), key)
        meta = store.load_meta(directory, sources)
        if meta is not None:
            if meta["info"].get("bad_rows") and not sel.skip_bad_rows:
                raise UserError(f"malformed row at {meta['info']['first_bad_row']} (use --skip-bad-rows to "
                                f"skip such rows)")
            meta["info"]["cache"] = "hit"
            return meta, directory, temporary
    else:
        temporary = Path(tempfile.mkdtemp(prefix="drlsched-trace-"))
        directory = temporary / "store"
    bad = BadRows(skip=sel.skip_bad_rows, info={"bad_rows": 0})
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix=".scratch-", dir=directory.parent) as scratch:
            ctx = Context(found, bad, cpu_m, mem_mib, reader.DEFAULT_NODES, Path(scratch),
                          sample_rate=sel.sample_rate if early else 1.0, seed=seed)
            if early:
                ctx.info["sampled_while_reading"] = sel.sample_rate
            meta = store.write(reader.read(ctx), directory, ctx.nodes, bad, sources)
    except BaseException:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        raise
    meta["info"]["cache"] = "built" if sel.cache else "none"
    return meta, directory, temporary


def load_trace(sel: TraceSelection) -> Workload:
    return load_window(sel, allow_empty=False)


def load_window(sel: TraceSelection, allow_empty: bool) -> Workload:
    """`load_trace`, optionally accepting a window without pods (trace-info on a machine table alone)."""
    path, fmt = _validate(sel)
    meta, directory, temporary = _stored(sel, path, fmt)
    pods = TracePods(directory / store.PODS_FILE, Window(0.0, 0.0), temporary)
    origin = meta["first_arrival"]
    if meta["info"].get("unsampled_first_arrival_s") is not None:  # jobs before it were sampled out early
        origin = min(origin, meta["info"]["unsampled_first_arrival_s"]) if meta["pods"] else \
            meta["info"]["unsampled_first_arrival_s"]
    lo = origin + sel.start
    duration = sel.duration
    pods.window = Window(lo=lo, hi=math.inf if duration is None else lo + duration,
                         sample_rate=sel.sample_rate, seed=sel.seed, max_pods=sel.max_pods,
                         speedup=sel.arrival_speedup)
    count, last = extent(pods.source, pods.window)
    if not count and not allow_empty:
        span = f"{meta['first_arrival']:g}..{meta['last_arrival']:g} s" if meta["pods"] else "no pods at all"
        raise UserError(f"the trace window selects no pods (the trace has {meta['pods']} pods, arrivals "
                        f"{span}; check --start, --duration, --sample-rate)")
    if duration is None:
        # Trace times are whole seconds: the window ends one second after its last arrival.
        duration = last + 1.0 if count else 0.0
    else:
        duration /= pods.window.speedup  # the simulated arrival window
    nodes = store.nodes_from_meta(meta)
    info: dict[str, object] = dict(meta["info"])
    info.update(format=fmt, source=str(path), pods=count, trace_pods=meta["pods"], nodes_in_trace=len(nodes),
                window_start_s=lo, arrival_speedup=pods.window.speedup, trace_first_arrival_s=origin,
                trace_last_arrival_s=meta["last_arrival"], sample_rate=sel.sample_rate, seed=pods.window.seed)
    return Workload(name=f"{fmt}:{path.name}", nodes=scale(nodes, sel.nodes),
                    pods=pods, duration_s=float(duration), info=info)
