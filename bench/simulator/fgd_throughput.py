"""FGD against k8s-default: placements per second on openb's 1,523-node cluster, one core, in `fill` and in
`simulate`, in one run.

Each (experiment, policy, seed) runs in a fresh single-threaded subprocess. fill: the openb default pod list
submitted in a seeded random order until 130% of the cluster's GPUs are requested (docs/fill.md). simulate:
`drlsched simulate --trace <openb> --policy P --arrival-speedup 1000000 --allow-unschedulable` (the trace's
arrivals compressed so the queue, not the clock, decides), the simulator's own `placements_per_s`.
Placements/s = pods placed / wall time of the placement loop (loading the trace is excluded). Prints JSON: per
experiment and policy the median over seeds, and fgd's slowdown against k8s-default (the issue's target: at most
3x in both).
Usage: python bench/simulator/fgd_throughput.py [--trace ../shared/traces/alibaba-gpu-v2023] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from drlsched.machine import machine_info

DEFAULT_TRACE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "alibaba-gpu-v2023"
POLICIES = ("k8s-default", "fgd")


def one(trace: str, experiment: str, policy: str, seed: int) -> dict[str, float]:
    from drlsched.cli import build_parser
    from drlsched.cli_common import sim_config, workload_source
    from drlsched.fill import FillRun, fill_once
    from drlsched.policies import make_policy
    from drlsched.simulator import Simulator

    common = ["--trace", trace, "--trace-format", "alibaba-gpu-v2023", "--seed", str(seed)]
    if experiment == "fill":
        args = build_parser().parse_args(["fill", *common, "--policies", policy, "--out", "unused"])
        workload = workload_source(args)(seed)
        curve = fill_once(FillRun(policy, seed, workload.nodes, list(workload.iter_pods()), 1.3))
        return {"nodes": len(workload.nodes), "pods": int(curve["demand"].size), "placed": int(curve["placed"]),
                "wall_s": float(curve["wall_s"]),
                "placements_per_s": float(curve["placed"]) / float(curve["wall_s"])}
    args = build_parser().parse_args(["simulate", *common, "--policy", policy, "--arrival-speedup", "1000000",
                                      "--allow-unschedulable"])
    workload = workload_source(args)(seed)
    m = Simulator(workload, make_policy(policy), seed, sim_config(args)).run()
    return {"nodes": int(m["nodes"]), "pods": int(m["pods"]), "placed": int(m["pods_scheduled"]),
            "wall_s": float(m["wall_s"]), "placements_per_s": float(m["placements_per_s"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", default=str(DEFAULT_TRACE))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--experiments", default="fill,simulate")
    ap.add_argument("--one", nargs=3, metavar=("EXPERIMENT", "POLICY", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.trace, args.one[0], args.one[1], int(args.one[2]))))
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    results: dict[str, dict[str, dict[str, float]]] = {}
    slowdown = {}
    for experiment in args.experiments.split(","):
        raw: dict[str, list[dict[str, float]]] = {p: [] for p in POLICIES}
        for seed in range(args.seeds):  # policies alternate, so a change in the machine's load hits both
            for policy in POLICIES:
                out = subprocess.run([sys.executable, __file__, "--trace", args.trace, "--one", experiment,
                                      policy, str(seed)], capture_output=True, text=True, env=env, check=True)
                raw[policy].append(json.loads(out.stdout))
                print(experiment, policy, seed, out.stdout.strip(), file=sys.stderr)
        res = results[experiment] = {}
        for policy, runs in raw.items():
            pps = [r["placements_per_s"] for r in runs]
            res[policy] = {"nodes": runs[0]["nodes"], "pods_median": statistics.median(r["pods"] for r in runs),
                           "placements_per_s_median": round(statistics.median(pps)),
                           "placements_per_s_min": round(min(pps)), "placements_per_s_max": round(max(pps)),
                           "wall_s_median": round(statistics.median(r["wall_s"] for r in runs), 3)}
        slowdown[experiment] = round(res["k8s-default"]["placements_per_s_median"]
                                     / max(res["fgd"]["placements_per_s_median"], 1), 2)
    print(json.dumps({"benchmark": "fgd_throughput", "experiments": {
        "fill": "fill to 130% GPU demand, openb default list",
        "simulate": "simulate --arrival-speedup 1000000 --allow-unschedulable, openb default list"},
        "seeds": args.seeds, "results": results, "fgd_slowdown_vs_k8s_default": slowdown,
        "target_slowdown_at_most": 3.0, "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()
