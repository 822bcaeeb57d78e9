"""Simulator throughput: k8s-default on `batch`, placements per second from 10 to 5,000 nodes, one core.

Each size runs in a fresh subprocess (single-threaded numpy) so its peak RSS is its own; pods are generated
before the clock starts (generation is reported separately). Prints JSON: per size the median of --repeats
runs, the spread, and peak memory. Usage: python bench/sim_throughput.py [--repeats 3] [--sizes 10,100,500]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from _machine import machine_info

TARGET_PODS = 25_000


def one(nodes: int, seed: int) -> dict[str, float]:
    from drlsched.policies import make_policy
    from drlsched.scenarios import make_scenario
    from drlsched.simulator import SimConfig, Simulator

    # Offered load scales with the cluster: a window long enough for TARGET_PODS pods, cut at that many.
    duration = max(60.0, 900.0 * 40 * 2 * TARGET_PODS / (nodes * 29_000))
    w = make_scenario("batch", nodes=nodes, duration=duration, seed=seed)
    t0 = time.perf_counter()
    w.pods = list(itertools.islice(w.pods, TARGET_PODS))
    gen_s = time.perf_counter() - t0
    sim = Simulator(w, make_policy("k8s-default"), seed, SimConfig(series=False))
    m = sim.run()
    return {"pods": m["pods"], "placements": m["pods_scheduled"], "sim_wall_s": m["wall_s"],
            "placements_per_s": m["placements_per_s"], "generation_s": gen_s,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="10,50,100,500,1000,2000,5000")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.seed)))
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        runs = []
        for r in range(args.repeats):
            out = subprocess.run([sys.executable, __file__, "--one", str(n), "--seed", str(args.seed + r)],
                                 capture_output=True, text=True, env=env, check=True)
            runs.append(json.loads(out.stdout))
        pps = [x["placements_per_s"] for x in runs]
        rows.append({"nodes": n, "pods_median": statistics.median(x["pods"] for x in runs),
                     "placements_per_s_median": round(statistics.median(pps)),
                     "placements_per_s_min": round(min(pps)), "placements_per_s_max": round(max(pps)),
                     "generation_s_median": round(statistics.median(x["generation_s"] for x in runs), 3),
                     "peak_rss_mib_max": round(max(x["peak_rss_mib"] for x in runs), 1)})
        print(json.dumps(rows[-1]), file=sys.stderr)
    targets = {"500": 20_000, "5000": 3_000}
    print(json.dumps({"benchmark": "sim_throughput", "policy": "k8s-default", "scenario": "batch",
                      "repeats": args.repeats, "targets_placements_per_s": targets, "results": rows,
                      "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()
