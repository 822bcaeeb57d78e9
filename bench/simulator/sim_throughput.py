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
`--nic-gbps`/`--rack-oversubscription` set the links of the reclaim model's runs only (the "all on" run: reclaim
and scarce, shared links), so `<model>_over_none` compares it with the plain run.

For the queue's speed targets (issue 22):
- `--seeds 0,1,2` runs every size `--repeats` times on each seed (not seed + repeat) and reports per seed, with
  `whole_over_first` per seed in the pods sweep (the whole scenario's throughput over its first cut's);
- `--default-size` runs the scenario at its own default nodes and duration, all its pods (`--sizes` ignored);
- `--before SRC` makes every run also with PYTHONPATH=SRC (another checkout's `src`, e.g. main's), interleaved,
  and prints `before_*` and `after_over_before` beside each median: the "after" runs import whatever the
  caller's PYTHONPATH names.
Usage: python bench/simulator/sim_throughput.py [--sweep pods] [--repeats 3] [--sizes 10,100,500] [--reclaim
       koordinator] [--dedicated-links] [--scenario spark-tpcds] [--seeds 0,1,2] [--default-size]
       [--before /work/main/src] [--nic-gbps 1 --rack-oversubscription 4]
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
        reclaim: str = "none", scenario: str = "batch", share_links: bool = True, nic_gbps: float = 10.0,
        rack_oversubscription: float = 1.0) -> dict[str, float]:
    """`pods` pods (0: all) of a window scaled to hold about that many (`batch`; other scenarios: their default
    window, cut at `pods`), or of the default scenario (nodes 0: the scenario's default size)."""
    from drlsched.policies import make_policy
    from drlsched.reclaim import ReclaimConfig
    from drlsched.scenarios import make_scenario
    from drlsched.simulator import SimConfig, Simulator

    # Offered load scales with the cluster: a window long enough for TARGET_PODS pods, cut at that many.
    duration = None if whole_scenario or scenario != "batch" else max(
        60.0, 900.0 * 40 * 2 * TARGET_PODS / (nodes * 29_000))
    w = make_scenario(scenario, nodes=nodes or None, duration=duration, seed=seed)
    t0 = time.perf_counter()
    w.pods = list(itertools.islice(w.pods, pods or None))
    gen_s = time.perf_counter() - t0
    cfg = SimConfig(series=False, reclaim=ReclaimConfig(reclaim), share_links=share_links, nic_gbps=nic_gbps,
                    rack_oversubscription=rack_oversubscription)
    sim = Simulator(w, make_policy("k8s-default"), seed, cfg)
    m = sim.run()
    return {"nodes": len(w.nodes), "pods": m["pods"], "placements": m["pods_scheduled"], "sim_wall_s": m["wall_s"],
            "network_wait_s": m["network_wait_s"], "cpu_util": m["cpu_util"],
            "placements_per_s": m["placements_per_s"], "generation_s": gen_s,
            "failed_attempts_per_pod": sim.queue.failed_attempts / max(1, int(m["pods"])),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sweep", choices=("nodes", "pods"), default="nodes")
    ap.add_argument("--sizes", help="nodes (sweep nodes, default 10,...,5000) or pods, 0 = the whole scenario "
                                    "(sweep pods, default 25000,100000,0)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--pods", type=int, default=TARGET_PODS, help=argparse.SUPPRESS)
    ap.add_argument("--whole", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seeds", help="comma-separated seeds, each run --repeats times (default: seed + repeat)")
    ap.add_argument("--default-size", action="store_true",
                    help="the scenario at its default nodes and duration, all its pods (--sizes ignored)")
    ap.add_argument("--before", metavar="SRC", help="also run everything with PYTHONPATH=SRC, side by side")
    ap.add_argument("--reclaim", default="none", help="also run every size with this reclaim model")
    ap.add_argument("--nic-gbps", type=float, default=10.0, help="the reclaim model's runs: NIC speed")
    ap.add_argument("--rack-oversubscription", type=float, default=1.0,
                    help="the reclaim model's runs: rack uplink oversubscription")
    ap.add_argument("--dedicated-links", action="store_true",
                    help="also run every size with link sharing off (every remote read at the whole NIC)")
    ap.add_argument("--scenario", default="batch",
                    choices=("batch", "spark-tpcds", "mixed", "colocation", "ecommerce", "ml-gpu"))
    args = ap.parse_args()
    if args.repeats < 1 or args.nic_gbps <= 0 or args.rack_oversubscription <= 0:
        ap.error("--repeats, --nic-gbps and --rack-oversubscription must be positive")
    if args.before and not os.path.isdir(args.before):
        ap.error(f"--before {args.before}: no such directory")
    try:
        args.seed_list = [int(x) for x in args.seeds.split(",")] if args.seeds else None
        args.size_list = [int(x) for x in (args.sizes or "").split(",") if x]
    except ValueError:
        ap.error("--seeds and --sizes take comma-separated integers")
    return args


def _row(runs: list[dict[str, float]]) -> dict[str, float]:
    pps = [x["placements_per_s"] for x in runs]
    return {"nodes": runs[0]["nodes"], "pods_median": statistics.median(x["pods"] for x in runs),
            "failed_attempts_per_pod_median": round(statistics.median(x["failed_attempts_per_pod"] for x in runs), 3),
            "placements_per_s_median": round(statistics.median(pps)),
            "placements_per_s_min": round(min(pps)), "placements_per_s_max": round(max(pps)),
            "generation_s_median": round(statistics.median(x["generation_s"] for x in runs), 3),
            "peak_rss_mib_max": round(max(x["peak_rss_mib"] for x in runs), 1)}


def main() -> None:
    args = _args()
    if args.one is not None:
        print(json.dumps(one(args.one, args.seed, args.pods, args.whole, args.reclaim, args.scenario,
                             not args.dedicated_links, args.nic_gbps, args.rack_oversubscription)))
        return
    # Variants: label -> extra arguments of a run; "none" (no reclaim, shared links) is the reference.
    variants = {"none": [], args.reclaim: ["--reclaim", args.reclaim, "--nic-gbps", str(args.nic_gbps),
                                           "--rack-oversubscription", str(args.rack_oversubscription)]
                } if args.reclaim != "none" else {"none": []}
    if args.dedicated_links:
        variants["dedicated_links"] = ["--dedicated-links"]
    models = list(variants)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    envs = {"after": env, **({"before": dict(env, PYTHONPATH=args.before)} if args.before else {})}
    by_pods = args.sweep == "pods"
    if args.default_size:
        sizes = [0]
    else:
        sizes = args.size_list or ([25000, 100000, 0] if by_pods else [10, 50, 100, 500, 1000, 2000, 5000])
    rows = []
    for seed in args.seed_list or [None]:
        seed_rows = []
        for size in sizes:
            n, pods = (500, size) if by_pods else (size, TARGET_PODS)
            if args.default_size:
                n, pods = 0, 0
            runs: dict[tuple[str, str], list[dict[str, float]]] = {(m, e): [] for m in models for e in envs}
            for r in range(args.repeats):
                for model, side in itertools.product(models, envs):  # interleaved: the machine's load hits all alike
                    s = args.seed + r if seed is None else seed
                    cmd = [sys.executable, __file__, "--one", str(n), "--seed", str(s), "--pods", str(pods),
                           "--scenario", args.scenario, *variants[model]]
                    out = subprocess.run([*cmd, "--whole"] if by_pods or args.default_size else cmd,
                                         capture_output=True, text=True, env=envs[side], check=True)
                    runs[model, side].append(json.loads(out.stdout))
            row: dict[str, object] = {**({"seed": seed} if seed is not None else {}), "pods_cut": pods,
                                      **_row(runs["none", "after"])}
            med = {k: statistics.median(x["placements_per_s"] for x in v) for k, v in runs.items()}
            for m in models[1:]:
                row[f"{m}_placements_per_s_median"] = round(med[m, "after"])
                if m != "dedicated_links":
                    row[f"{m}_over_none"] = round(med[m, "after"] / med["none", "after"], 3)
            if args.dedicated_links:
                row["network_wait_s_median"] = round(
                    statistics.median(x["network_wait_s"] for x in runs["none", "after"]), 3)
                row["shared_links_over_dedicated"] = round(med["none", "after"] / med["dedicated_links", "after"], 3)
                if args.reclaim != "none":
                    row["all_on_over_all_off"] = round(med[args.reclaim, "after"] / med["dedicated_links", "after"], 3)
            if args.before:
                for m in models:
                    key = "" if m == "none" else f"{m}_"
                    row[f"before_{key}placements_per_s_median"] = round(med[m, "before"])
                    row[f"{key}after_over_before"] = round(med[m, "after"] / med[m, "before"], 3)
                if args.reclaim != "none":
                    row[f"before_{args.reclaim}_over_none"] = round(med[args.reclaim, "before"] /
                                                                    med["none", "before"], 3)
            print(json.dumps(row), file=sys.stderr)
            seed_rows.append(row)
        if by_pods and len(seed_rows) > 1:
            first, whole = seed_rows[0]["placements_per_s_median"], seed_rows[-1]["placements_per_s_median"]
            seed_rows[-1]["whole_over_first"] = round(whole / max(1, first), 3)  # type: ignore[operator]
        rows += seed_rows
    if by_pods:
        pps = [r["placements_per_s_median"] for r in rows]
        targets = {"whole_scenario_500_nodes": 5_000, "max_over_min_ratio": 2.0}
        extra = {"max_over_min_ratio": round(max(pps) / max(1, min(pps)), 2)}  # type: ignore[type-var,operator]
    else:
        targets, extra = {"500": 20_000, "5000": 3_000}, {}
    print(json.dumps({"benchmark": "sim_throughput", "sweep": args.sweep, "policy": "k8s-default",
                      "scenario": args.scenario, "default_size": args.default_size,
                      "reclaim": [m for m in models if m != "dedicated_links"], "variants": models,
                      "reclaim_links": {"nic_gbps": args.nic_gbps, "rack_oversubscription": args.rack_oversubscription},
                      "repeats": args.repeats, "seeds": args.seed_list,
                      "before": args.before, "after": os.environ.get("PYTHONPATH"),
                      "targets_placements_per_s": targets, **extra,
                      "results": rows, "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()
