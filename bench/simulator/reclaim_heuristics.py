"""The heuristics on `batch` and `spark-tpcds` under a reclaim model: every baseline × {none, koordinator at its
defaults, koordinator with higher thresholds} over paired seeds, saturated (`--load 2`) so that requests bind.

Utilisation is reported two ways: `cpu_util` (over the busy window, first arrival to last completion: the same
work finished sooner reads higher) and `cpu_util_window` (over the arrival window: the steady state, where the
request-bound ceiling shows — requests ~96% of CPU × usage 0.75 of requests in `batch`, 0.85 in `spark-tpcds`).
Prints JSON (per scenario, variant and policy: the mean over seeds of each key) and, with --md, writes the tables.
Usage: python bench/simulator/reclaim_heuristics.py [--seeds 3] [--jobs 2] [--md reclaim_heuristics.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from functools import partial

from drlsched.machine import machine_info

KEYS = ("cpu_util", "cpu_util_window", "cpu_util_reclaimed", "jct_p99_s", "sla_violation_rate", "evictions",
        "be_pending_p99_s", "pods_unschedulable", "makespan_s")
# Variants: label -> (reclaim model, CPU threshold, suppress threshold); None = the model's default.
VARIANTS = {"none": ("none", None, None), "koordinator": ("koordinator", None, None),
            "koordinator 0.9/0.95": ("koordinator", 0.9, 0.95)}
SIZES = {"batch": (20, 600.0), "spark-tpcds": (10, 600.0)}  # nodes, arrival window (s)


def _workload(scenario: str, nodes: int, duration: float, load: float, seed: int):  # type: ignore[no-untyped-def]
    from drlsched.scenarios import make_scenario

    return make_scenario(scenario, nodes=nodes, duration=duration, load=load, seed=seed)


def main() -> None:
    from drlsched.evaluate import RunSpec, run_all
    from drlsched.policies import BASELINES
    from drlsched.reclaim import ReclaimConfig
    from drlsched.simulator import SimConfig

    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--load", type=float, default=2.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--policies", default=",".join(BASELINES))
    ap.add_argument("--scenarios", default="batch,spark-tpcds")
    ap.add_argument("--md", help="also write the markdown tables here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    policies = args.policies.split(",")
    specs = []
    for scenario in args.scenarios.split(","):
        nodes, duration = SIZES[scenario]
        factory = partial(_workload, scenario, nodes, duration, args.load)
        for label, (model, cpu, suppress) in VARIANTS.items():
            cfg = SimConfig(series=False, reclaim=ReclaimConfig(model, cpu_threshold=cpu, suppress_threshold=suppress))
            specs += [RunSpec(p, seed, factory, cfg, label=f"{scenario}|{label}|{p}") for p in policies
                      for seed in range(args.seeds)]
    runs: list[dict] = [r["metrics"] for r in run_all(specs, args.jobs)]  # type: ignore[misc]
    table: dict[str, dict[str, float | None]] = {}
    for key in dict.fromkeys(str(m["policy"]) for m in runs):
        mine = [m for m in runs if m["policy"] == key]
        table[key] = {k: _mean([m[k] for m in mine]) for k in KEYS}
    if args.md:
        _write_md(args.md, table)
    print(json.dumps({"benchmark": "reclaim_heuristics", "load": args.load, "seeds": args.seeds,
                      "sizes": {s: SIZES[s] for s in args.scenarios.split(",")}, "results": table,
                      "wall_s": round(time.perf_counter() - t0, 1), "machine": machine_info()}, indent=2))


def _mean(values: list[object]) -> float | None:
    """Mean over the runs with a value; None (null) where every run's sample was empty (no LS pod: no SLA rate)."""
    have = [float(v) for v in values if v is not None]  # type: ignore[arg-type]
    return round(statistics.fmean(have), 4) if have else None


def _pct(value: float | None, scale: float = 100.0, fmt: str = "{:.1f}") -> str:
    return "n/a" if value is None else fmt.format(scale * value)


def _write_md(path: str, table: dict[str, dict[str, float | None]]) -> None:
    lines = []
    for scenario in dict.fromkeys(k.split("|")[0] for k in table):
        lines += [f"`{scenario}`:", "",
                  "| policy @ reclaim | CPU util (%) | CPU util, window (%) | CPU on reclaimed (%) | P99 JCT (s) | "
                  "SLA violation (%) | evictions | makespan (s) |", "|---|---|---|---|---|---|---|---|"]
        for key, m in table.items():
            s, variant, policy = key.split("|")
            if s == scenario:
                lines.append(f"| {policy} @ {variant} | {_pct(m['cpu_util'])} | {_pct(m['cpu_util_window'])} | "
                             f"{_pct(m['cpu_util_reclaimed'])} | {_pct(m['jct_p99_s'], 1, '{:.0f}')} | "
                             f"{_pct(m['sla_violation_rate'])} | {_pct(m['evictions'], 1, '{:.0f}')} | "
                             f"{_pct(m['makespan_s'], 1, '{:.0f}')} |")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
