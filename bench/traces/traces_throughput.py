"""Trace loading throughput per format, peak memory of a 1,000,000-pod v2018 trace, and replay throughput.

For each format a synthetic trace of --pods pods (bench/traces/traces_gen.py) is loaded in a fresh subprocess:
`build` = parse + sort into the Parquet store (load_trace), `stream` = iterating every PodSpec (validated),
`cached` = load_trace + stream again from a --cache hit. Peak RSS is the subprocess's own. The 1M-pod run
uses the raw v2018 format (batch_task + unsorted batch_instance). Replay runs drlsched.simulator.simulate
(k8s-default) on a window of each trace when the simulator is present. Prints one JSON object.
Usage: python bench/traces/traces_throughput.py [--pods 200000] [--big 1000000] [--replay-pods 3000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from traces_gen import GENERATORS

from drlsched.machine import machine_info

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def child(trace: str, fmt: str, cache: str) -> None:
    """Runs in a subprocess: build, stream, then a cache hit; prints timings and peak RSS."""
    from drlsched.traces import TraceSelection, load_trace

    began = time.perf_counter()
    workload = load_trace(TraceSelection(trace, fmt, cache=cache))
    built = time.perf_counter()
    pods = sum(1 for _ in workload.iter_pods())
    streamed = time.perf_counter()
    again = load_trace(TraceSelection(trace, fmt, cache=cache))
    assert again.info["cache"] == "hit"
    hit_pods = sum(1 for _ in again.iter_pods())
    cached = time.perf_counter()
    assert hit_pods == pods
    print(json.dumps({
        "pods": pods, "build_s": round(built - began, 3), "stream_s": round(streamed - built, 3),
        "cached_s": round(cached - streamed, 3),
        "pods_per_s": round(pods / (streamed - began)), "cached_pods_per_s": round(pods / (cached - streamed)),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "info": {k: v for k, v in workload.info.items() if isinstance(v, int | float)},
    }))


def _measure(trace: Path, fmt: str, cache: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, __file__, "--child", str(trace), fmt, str(cache)], check=True,
                         capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def _replay(trace: Path, fmt: str, pods: int, cache: Path) -> dict[str, object] | None:
    try:
        from drlsched.simulator import simulate
    except ImportError:
        return None
    from drlsched.traces import TraceSelection, load_trace

    workload = load_trace(TraceSelection(str(trace), fmt, cache=str(cache), max_pods=pods))
    began = time.perf_counter()
    metrics = simulate(workload, "k8s-default", 0)
    elapsed = time.perf_counter() - began
    del metrics
    return {"pods": workload.info["pods"], "nodes": len(workload.nodes), "seconds": round(elapsed, 2),
            "pods_per_s": round(int(workload.info["pods"]) / elapsed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=200_000)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--replay-pods", type=int, default=3_000)
    parser.add_argument("--child", nargs=3, metavar=("TRACE", "FMT", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    result: dict[str, object] = {"machine": machine_info(), "pods_per_format": args.pods, "formats": {},
                                 "replay": {}}
    with tempfile.TemporaryDirectory(prefix="drlsched-bench-") as tmp:
        root = Path(tmp)
        for fmt, generate in GENERATORS.items():
            trace = root / fmt
            trace.mkdir()
            began = time.perf_counter()
            written = generate(trace, args.pods, 0)
            generated = time.perf_counter() - began
            measured = _measure(trace, fmt, root / "cache")
            measured.update(generated_pods=written, generate_s=round(generated, 2))
            result["formats"][fmt] = measured  # type: ignore[index]
            replay = _replay(trace, fmt, args.replay_pods, root / "cache")
            if replay is not None:
                result["replay"][fmt] = replay  # type: ignore[index]
        if (REAL / "alibaba-gpu-v2023").is_dir():
            result["formats"]["alibaba-gpu-v2023 (real sample)"] = _measure(  # type: ignore[index]
                REAL / "alibaba-gpu-v2023", "alibaba-gpu-v2023", root / "cache")
        if args.big:
            big = root / "big-v2018"
            big.mkdir()
            written = GENERATORS["alibaba-v2018"](big, args.big, 1)
            size = sum(p.stat().st_size for p in big.iterdir())
            measured = _measure(big, "alibaba-v2018", root / "cache")
            measured.update(generated_pods=written, source_mib=round(size / 2**20, 1))
            result["one_million_v2018"] = measured
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
