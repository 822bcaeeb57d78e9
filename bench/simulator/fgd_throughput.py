"""FGD against k8s-default: placements per second in the fill experiment on openb's 1,523-node cluster, one core.

Each (policy, seed) fill runs in a fresh single-threaded subprocess: the openb default pod list submitted in a
seeded random order until 130% of the cluster's GPUs are requested (docs/fill.md). Placements/s = pods placed /
wall time of the placement loop (loading the trace is excluded). Prints JSON: per policy the median over seeds,
and fgd's slowdown against k8s-default (the issue's target: at most 3x).
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


def one(trace: str, policy: str, seed: int) -> dict[str, float]:
    from drlsched.fill import FillRun, fill_once
    from drlsched.traces import add_trace_arguments, load_trace

    parser = argparse.ArgumentParser()
    add_trace_arguments(parser)
    args = parser.parse_args(["--trace", trace, "--trace-format", "alibaba-gpu-v2023"])
    args.nodes, args.duration, args.seed = None, None, seed
    workload = load_trace(args)
    curve = fill_once(FillRun(policy, seed, workload.nodes, list(workload.iter_pods()), 1.3))
    return {"nodes": len(workload.nodes), "pods_submitted": int(curve["demand"].size),
            "placed": int(curve["placed"]), "wall_s": float(curve["wall_s"]),
            "placements_per_s": float(curve["placed"]) / float(curve["wall_s"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", default=str(DEFAULT_TRACE))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--one", nargs=2, metavar=("POLICY", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.trace, args.one[0], int(args.one[1]))))
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    results = {}
    for policy in POLICIES:
        runs = []
        for seed in range(args.seeds):
            out = subprocess.run([sys.executable, __file__, "--trace", args.trace, "--one", policy, str(seed)],
                                 capture_output=True, text=True, env=env, check=True)
            runs.append(json.loads(out.stdout))
        pps = [r["placements_per_s"] for r in runs]
        results[policy] = {"nodes": runs[0]["nodes"], "pods_submitted_median": statistics.median(
            r["pods_submitted"] for r in runs), "placements_per_s_median": round(statistics.median(pps)),
            "placements_per_s_min": round(min(pps)), "placements_per_s_max": round(max(pps)),
            "fill_wall_s_median": round(statistics.median(r["wall_s"] for r in runs), 3)}
        print(json.dumps({policy: results[policy]}), file=sys.stderr)
    slowdown = results["k8s-default"]["placements_per_s_median"] / max(results["fgd"]["placements_per_s_median"], 1)
    print(json.dumps({"benchmark": "fgd_throughput", "experiment": "fill to 130% GPU demand, openb default list",
                      "seeds": args.seeds, "results": results, "fgd_slowdown_vs_k8s_default": round(slowdown, 2),
                      "target_slowdown_at_most": 3.0, "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()
