"""What the workload commands (`simulate`, `evaluate`, `replay`, `train`) share: the workload options, the
`WorkloadSource` built from them, and output helpers."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drlsched.cli_args import positive_float, positive_int
from drlsched.errors import UserError
from drlsched.policies import make_policy
from drlsched.reclaim import RECLAIM_MODELS, ReclaimConfig
from drlsched.scenarios import SCENARIOS
from drlsched.simulator import SimConfig
from drlsched.source import WorkloadSource
from drlsched.traces import TraceSelection, add_trace_arguments
from drlsched.usage_trace import USAGE_FORMATS, load_usage, parse_usage_series, parse_usage_window


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """--scenario or --trace, and the sizes every workload command shares."""
    p.add_argument("--scenario", choices=sorted([*SCENARIOS, "tpch"]), metavar="NAME",
                   help=f"synthetic scenario: {', '.join(SCENARIOS)}, tpch (Spark jobs: simulate, evaluate)")
    add_trace_arguments(p)
    p.add_argument("--nodes", type=positive_int, help="cluster size (default: the scenario's or the trace's)")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS", help="arrival window in seconds")
    p.add_argument("--load", type=positive_float, default=1.0,
                   help="arrival-rate factor; 1 offers about 80%% of the bottleneck resource (default 1)")
    p.add_argument("--tick", type=positive_float, metavar="SECONDS",
                   help="usage resampling and metric sampling period (default max(15 s, duration/4000))")
    p.add_argument("--rebalance", type=positive_float, metavar="SECONDS",
                   help="rebalancing period at which policies may migrate pods (default: off)")
    p.add_argument("--allow-unschedulable", action="store_true",
                   help="count pods that fit no node even when empty, instead of stopping with an error")
    add_reclaim_arguments(p)
    add_network_arguments(p)
    add_usage_arguments(p)


def add_usage_arguments(p: argparse.ArgumentParser) -> None:
    """--usage-trace and its form and part (docs/simulator.md "Real usage series")."""
    g = p.add_argument_group("real usage series (CPU of the LS pods)")
    g.add_argument("--usage-trace", metavar="PATH",
                   help="replay real CPU usage series onto the LS pods: an Alibaba v2018 machine_usage or "
                        "container_usage file, a Bitbrains VM file or folder, a Google 2011 per-job CSV")
    g.add_argument("--usage-format", choices=USAGE_FORMATS, metavar="FMT",
                   help=f"form of --usage-trace: {', '.join(USAGE_FORMATS)} (default: recognised by its header)")
    g.add_argument("--usage-window", metavar="START:END",
                   help="replay only this time window of every series, from the trace's start, units s/m/h/d, a side "
                        "may be empty (e.g. 0:5d to train, 5d: to evaluate); each seed starts at its own point")
    g.add_argument("--usage-series", metavar="FROM:TO",
                   help="replay only this share of the series, in file order (e.g. 0:0.5 to train, 0.5:1 to "
                        "evaluate); each seed starts at its own point")


def usage_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The --usage-* options as `WorkloadSource` fields; a bad option, file or part fails here, before any run."""
    if not args.usage_trace:
        given = [f"--usage-{k}" for k in ("format", "window", "series") if getattr(args, f"usage_{k}")]
        if given:
            raise UserError(f"{', '.join(given)} needs --usage-trace PATH")
        return {}
    window = parse_usage_window(args.usage_window) if args.usage_window else None
    series = parse_usage_series(args.usage_series) if args.usage_series else None
    load_usage(args.usage_trace, args.usage_format, window, series)
    return {"usage_trace": args.usage_trace, "usage_format": args.usage_format, "usage_window": window,
            "usage_series": series}


def _share(text: str) -> float:
    """A share of a node's capacity, in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not (0 < value <= 1):  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def _reclaim_models(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(","))
    bad = [x for x in names if x not in RECLAIM_MODELS]
    if bad or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected one or more of {', '.join(RECLAIM_MODELS)} (comma-separated, "
                                         f"no repeats), got {text!r}")
    return names


def add_reclaim_arguments(p: argparse.ArgumentParser) -> None:
    """--reclaim MODEL and its thresholds (BE pods on reclaimed resources; docs/simulator.md)."""
    g = p.add_argument_group("colocation (BE pods on reclaimed resources)")
    g.add_argument("--reclaim", type=_reclaim_models, default=("none",), metavar="MODEL",
                   help=f"how BE pods are admitted: {', '.join(RECLAIM_MODELS)} (default none: on requests); "
                        "evaluate takes a comma-separated list and compares policy@model")
    add_reclaim_thresholds(g)
    g.add_argument("--interference", type=float, default=0.0, metavar="F",
                   help="slowdown per co-running pod with reclaim, e.g. 0.003 (Borg's CPI study; default 0: off)")
    g.add_argument("--ls-slowdown-target", type=float, default=4.0, metavar="X",
                   help="an LS pod violates its SLA when its slowdown stays above X (default 4)")
    g.add_argument("--forecast-horizon", type=float, default=300.0, metavar="SECONDS",
                   help="forecast model: admit against the forecast's upper bound over this long (default 300)")
    g.add_argument("--forecast-sigmas", type=float, default=3.0, metavar="Z",
                   help="forecast model: z of the prediction interval's upper bound (default 3)")


def add_reclaim_thresholds(g: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The shares of a node a reclaim model hands out and BE pods may use (the simulator and `drlsched reclaim`)."""
    g.add_argument("--reclaim-cpu-threshold", type=_share, metavar="SHARE",
                   help="share of node CPU the model may hand out (default: koordinator 0.6, forecast 0.75, "
                        "borg/peak 1.0)")
    g.add_argument("--reclaim-mem-threshold", type=_share, metavar="SHARE",
                   help="share of node memory the model may hand out (default 0.65)")
    g.add_argument("--suppress-threshold", type=_share, metavar="SHARE",
                   help="BE pods together get at most capacity x SHARE - LS usage (default: koordinator 0.65, "
                        "others 1.0)")


def add_network_arguments(p: argparse.ArgumentParser) -> None:
    """--nic-gbps and --rack-oversubscription: the links that remote shuffle reads share (docs/simulator.md)."""
    g = p.add_argument_group("network (links shared by remote shuffle reads in the simulator)")
    g.add_argument("--nic-gbps", type=positive_float, default=10.0, metavar="GBPS",
                   help="each node's NIC, per direction, in Gbit/s (default 10)")
    g.add_argument("--rack-oversubscription", type=positive_float, default=1.0, metavar="RATIO",
                   help="a rack's uplink carries (nodes in the rack x NIC) / RATIO per direction (default 1: "
                        "non-blocking; 3-4 is common in oversubscribed data-centre fabrics)")


def single_reclaim(args: argparse.Namespace) -> str:
    """The one --reclaim model of a command that runs a single simulation."""
    if len(args.reclaim) != 1:
        raise UserError(f"--reclaim takes one model here (a list is for evaluate), got {','.join(args.reclaim)}")
    return str(args.reclaim[0])


def reclaim_config(args: argparse.Namespace, model: str | None = None) -> ReclaimConfig:
    return ReclaimConfig(model=model or single_reclaim(args), cpu_threshold=args.reclaim_cpu_threshold,
                         mem_threshold=args.reclaim_mem_threshold, suppress_threshold=args.suppress_threshold,
                         interference=args.interference, ls_slowdown_target=args.ls_slowdown_target,
                         forecast_horizon_s=args.forecast_horizon, forecast_sigmas=args.forecast_sigmas)


def trace_selection(args: argparse.Namespace) -> TraceSelection | None:
    """The --trace options of a workload command, or None without --trace."""
    if not args.trace:
        return None
    if not args.trace_format:
        raise UserError("--trace needs --trace-format")
    return TraceSelection.from_args(args, args.trace, nodes=args.nodes, duration=args.duration, seed=0)


def workload_source(args: argparse.Namespace) -> WorkloadSource:
    """The workload options as a `WorkloadSource` (which refuses none or both of --scenario and --trace)."""
    usage = usage_fields(args)
    return WorkloadSource(scenario=args.scenario, trace=trace_selection(args), nodes=args.nodes,
                          duration=args.duration, load=args.load, **usage)


def sim_config(args: argparse.Namespace, reclaim: str | None = None) -> SimConfig:
    return SimConfig(tick_s=args.tick, rebalance_s=args.rebalance, allow_unschedulable=args.allow_unschedulable,
                     nic_gbps=args.nic_gbps, rack_oversubscription=args.rack_oversubscription,
                     reclaim=reclaim_config(args, reclaim))


def fmt(value: object) -> str:
    if value is None:  # a statistic over an empty sample
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def emit_json(dest: str, data: object) -> bool:
    """Writes `data` as indented JSON to the file `dest`, or to stdout for "-"; True when it went to stdout (the
    caller then prints nothing else there)."""
    text = json.dumps(data, indent=2) + "\n"
    if dest == "-":
        sys.stdout.write(text)
        return True
    try:
        Path(dest).write_text(text)
    except OSError as err:
        raise UserError(f"cannot write {dest}: {err.strerror}") from None
    return False


def write_json(path: Path, data: object) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n")
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}") from None


def progress_bar(enabled: bool, label: str) -> tuple[Any, Callable[[float, float], None] | None]:
    """A percentage bar on stderr for a simulation, and its update(t, duration) callback (None, None if off)."""
    if not enabled:
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=100, desc=label, unit="%", file=sys.stderr, leave=False,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}")

    def update(t: float, duration: float) -> None:
        pct = min(100, int(100 * t / max(duration, 1e-9)))
        if pct > bar.n:
            bar.update(pct - bar.n)

    return bar, update


def parse_policies(text: str) -> list[str]:
    """A --policies list: distinct known names (or loadable checkpoints), checked before any run."""
    names = [p.strip() for p in text.split(",")]
    if not all(names):
        raise UserError(f"--policies has an empty name: {text!r} (expected e.g. k8s-default,fgd)")
    if len(set(names)) != len(names):
        raise UserError(f"--policies lists a policy twice: {text}")
    for name in names:
        make_policy(name)  # unknown names fail here, before any run
    return names
