"""Simulator throughput: k8s-default on `batch` (or `--scenario`), placements per second, one core.

Two sweeps (`--sweep`):
- `nodes`: from 10 to 5,000 nodes, the first 25,000 pods of a load-scaled window at each size;
- `pods`: 500 nodes, the default `batch` scenario (900 s, load 1) cut at 25k and 100k pods and whole (~450k pods),
  where the cluster saturates and the unschedulable queue grows: throughput must stay flat as the workload
  grows, and the queue's failed scheduling attempts per pod are reported (`drlsched.sched.queue`: kube-scheduler
  would make them all; most are evaluated in place, in array operations, rather than one pod at a time).
Each run is a fresh subprocess (single-threaded numpy) so its peak RSS is its own; pods are generated before the
clock starts (generation is reported separately). Prints JSON: per size the median of --repeats runs, the spread,
and peak memory. With `--reclaim MODEL` every run is made twice, without and with the reclaim model (BE pods on
reclaimed resources, CPU shares, evictions), and both throughputs are printed side by side. With
`--dedicated-links` every run is also made with link sharing off (each remote read gets the whole NIC, the model
before `drlsched.network`), and `shared_links_over_dedicated` is the ratio of the two; with both options,
`all_on_over_all_off` compares the reclaim model with shared links to no reclaim with dedicated links.
Usage: python bench/simulator/sim_throughput.py [--sweep pods] [--repeats 3] [--sizes 10,100,500] [--reclaim
       koordinator] [--dedicated-links] [--scenario spark-tpcds]
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

from drlsched.machine import machine_info

TARGET_PODS = 25_000


def one(nodes: int, seed: int, pods: int = TARGET_PODS, whole_scenario: bool = False,
        reclaim: str = "none", scenario: str = "batch", share_links: bool = True) -> dict[str, float]:
    """`pods` pods (0: all) of a window scaled to hold about that many (`batch`; other scenarios: their default
    window, cut at `pods`), or of the default scenario."""
    from drlsched.policies import make_policy
    from drlsched.reclaim import ReclaimConfig
    from drlsched.scenarios import make_scenario
    from drlsched.simulator import SimConfig, Simulator

    # Offered load scales with the cluster: a window long enough for TARGET_PODS pods, cut at that many.
    duration = None if whole_scenario or scenario != "batch" else max(
        60.0, 900.0 * 40 * 2 * TARGET_PODS / (nodes * 29_000))
    w = make_scenario(scenario, nodes=nodes, duration=duration, seed=seed)
    t0 = time.perf_counter()
    w.pods = list(itertools.islice(w.pods, pods or None))
    gen_s = time.perf_counter() - t0
    sim = Simulator(w, make_policy("k8s-default"), seed, SimConfig(series=False, reclaim=ReclaimConfig(reclaim),
                                                                   share_links=share_links))
    m = sim.run()
    return {"pods": m["pods"], "placements": m["pods_scheduled"], "sim_wall_s": m["wall_s"],
            "network_wait_s": m["network_wait_s"], "cpu_util": m["cpu_util"],
            "placements_per_s": m["placements_per_s"], "generation_s": gen_s,
            "failed_attempts_per_pod": sim.queue.failed_attempts / max(1, int(m["pods"])),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sweep", choices=("nodes", "pods"), default="nodes")
    ap.add_argument("--sizes", help="nodes (sweep nodes, default 10,...,5000) or pods, 0 = the whole scenario "
                                    "(sweep pods, default 25000,100000,0)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--pods", type=int, default=TARGET_PODS, help=argparse.SUPPRESS)
    ap.add_argument("--whole", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reclaim", default="none", help="also run every size with this reclaim model")
    ap.add_argument("--dedicated-links", action="store_true",
                    help="also run every size with link sharing off (every remote read at the whole NIC)")
    ap.add_argument("--scenario", default="batch", choices=("batch", "spark-tpcds", "mixed", "colocation"))
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.seed, args.pods, args.whole, args.reclaim, args.scenario,
                             not args.dedicated_links)))
        return
    # Variants: label -> extra arguments of a run; "none" (no reclaim, shared links) is the reference.
    variants = {"none": [], args.reclaim: ["--reclaim", args.reclaim]} if args.reclaim != "none" else {"none": []}
    if args.dedicated_links:
        variants["dedicated_links"] = ["--dedicated-links"]
    models = list(variants)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    by_pods = args.sweep == "pods"
    sizes = args.sizes or ("25000,100000,0" if by_pods else "10,50,100,500,1000,2000,5000")
    rows = []
    for size in [int(x) for x in sizes.split(",")]:
        n, pods = (500, size) if by_pods else (size, TARGET_PODS)
        by_model: dict[str, list[dict[str, float]]] = {m: [] for m in models}
        for r in range(args.repeats):
            for model in models:  # interleaved, so a change in the machine's load hits all alike
                cmd = [sys.executable, __file__, "--one", str(n), "--seed", str(args.seed + r), "--pods", str(pods),
                       "--scenario", args.scenario, *variants[model]]
                out = subprocess.run([*cmd, "--whole"] if by_pods else cmd, capture_output=True, text=True,
                                     env=env, check=True)
                by_model[model].append(json.loads(out.stdout))
        runs = by_model["none"]
        pps = [x["placements_per_s"] for x in runs]
        rows.append({"nodes": n, "pods_median": statistics.median(x["pods"] for x in runs),
                     "failed_attempts_per_pod_median": round(
                         statistics.median(x["failed_attempts_per_pod"] for x in runs), 3),
                     "placements_per_s_median": round(statistics.median(pps)),
                     "placements_per_s_min": round(min(pps)), "placements_per_s_max": round(max(pps)),
                     "generation_s_median": round(statistics.median(x["generation_s"] for x in runs), 3),
                     "peak_rss_mib_max": round(max(x["peak_rss_mib"] for x in runs), 1)})
        med = {m: statistics.median(x["placements_per_s"] for x in by_model[m]) for m in models}
        for m in models[1:]:
            rows[-1][f"{m}_placements_per_s_median"] = round(med[m])
            if m != "dedicated_links":
                rows[-1][f"{m}_over_none"] = round(med[m] / med["none"], 3)
        if args.dedicated_links:
            rows[-1]["network_wait_s_median"] = round(statistics.median(x["network_wait_s"] for x in runs), 3)
            rows[-1]["shared_links_over_dedicated"] = round(med["none"] / med["dedicated_links"], 3)
            if args.reclaim != "none":
                rows[-1]["all_on_over_all_off"] = round(med[args.reclaim] / med["dedicated_links"], 3)
        print(json.dumps(rows[-1]), file=sys.stderr)
    if by_pods:
        pps = [r["placements_per_s_median"] for r in rows]
        targets = {"whole_scenario_500_nodes": 5_000, "max_over_min_ratio": 2.0}
        extra = {"max_over_min_ratio": round(max(pps) / max(1, min(pps)), 2)}
    else:
        targets, extra = {"500": 20_000, "5000": 3_000}, {}
    print(json.dumps({"benchmark": "sim_throughput", "sweep": args.sweep, "policy": "k8s-default",
                      "scenario": args.scenario,
                      "reclaim": [m for m in models if m != "dedicated_links"], "variants": models,
                      "repeats": args.repeats,
                      "targets_placements_per_s": targets, **extra,
                      "results": rows, "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()
