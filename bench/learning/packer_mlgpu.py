"""The learned GPU packer's P99 JCT on the `ml-gpu` scenario at load 1 against every heuristic, paired seeds.

Each policy simulates the same `ml-gpu` workloads (seeds 0..n-1; the packer trained on openb's default list, never
on ml-gpu, and on fill seeds 1000+/2000+, so every seed here is held out), as `drlsched evaluate` runs them
(`drlsched.evaluate.run_all`). Per heuristic: mean ± 95% CI of P99 and mean JCT, and the paired ratio packer /
heuristic over the seeds. By default the best heuristic is the one with the lowest mean P99 JCT on these same
seeds (the choice favours it: it is picked after seeing them). With `--select-seeds A:B` it is picked on the
validation seeds A..B-1 instead (every baseline runs there, the packer does not), and only the packer, that
heuristic and the `--heldout-baselines` run on the held-out seeds 0..n-1. The issue's target: the packer's P99 JCT
<= the best heuristic's. Prints JSON.
Usage: python bench/learning/packer_mlgpu.py --policy packer:PATH [--seeds 20] [--jobs 2]
       [--select-seeds 900:910 [--heldout-baselines first-fit,fgd]] [--nodes N] [--duration S]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from drlsched.cli import build_parser
from drlsched.cli_common import sim_config, workload_source
from drlsched.evaluate import RunSpec, mean_ci, metric_value, paired_ratios, run_all
from drlsched.machine import machine_info
from drlsched.policies import BASELINES
from drlsched.scenarios import SCENARIOS

KEYS = ("jct_p99_s", "jct_mean_s")


def per_policy_stats(runs: list[dict[str, object]], policies: list[str]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for p in policies:
        mine = [r["metrics"] for r in runs if r["metrics"]["policy"] == p]  # type: ignore[index]
        out[p] = {k: mean_ci([metric_value(m, k) for m in mine]) for k in KEYS}  # type: ignore[arg-type]
        out[p]["pods_unscheduled"] = mean_ci([float(m["pods"]) - float(m["pods_scheduled"])  # type: ignore
                                              for m in mine])
    return out


def lowest_p99(stats: dict[str, dict[str, object]], names: list[str]) -> str:
    return min(names, key=lambda b: stats[b]["jct_p99_s"]["mean"])  # type: ignore[index,no-any-return]


def seed_range(text: str) -> list[int]:
    """`A:B` → seeds A..B-1; bad text is one line and exit 2."""
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        a = b = 0
    if b <= a or a < 0:
        print(f"--select-seeds: want A:B with 0 <= A < B, got {text!r}", file=sys.stderr)
        sys.exit(2)
    return list(range(a, b))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True, help="packer:PATH")
    ap.add_argument("--baselines", default=",".join(BASELINES))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--select-seeds", default=None, metavar="A:B",
                    help="pick the best heuristic on seeds A..B-1 (validation), not on the held-out seeds")
    ap.add_argument("--heldout-baselines", default="",
                    help="with --select-seeds: other baselines to run on the held-out seeds beside the chosen one")
    ap.add_argument("--nodes", type=int, default=None)
    ap.add_argument("--duration", type=float, default=None)
    args = ap.parse_args()
    baselines = [b for b in args.baselines.split(",") if b]
    size = [*(["--nodes", str(args.nodes)] if args.nodes else []),
            *(["--duration", str(args.duration)] if args.duration else [])]
    ev = build_parser().parse_args(["evaluate", "--scenario", "ml-gpu", "--load", str(args.load), *size,
                                    "--policies", ",".join([args.policy, *baselines]), "--out", "unused"])
    factory, config = workload_source(ev), sim_config(ev, ev.reclaim[0])
    seeds = list(range(args.seeds))
    selection: dict[str, object] | None = None
    t0 = time.perf_counter()
    if args.select_seeds is not None:
        val_seeds = seed_range(args.select_seeds)
        if set(val_seeds) & set(seeds):
            print(f"--select-seeds {args.select_seeds} overlaps the held-out seeds 0..{args.seeds - 1}",
                  file=sys.stderr)
            sys.exit(2)
        val_runs = run_all([RunSpec(p, s, factory, config) for s in val_seeds for p in baselines], args.jobs)
        val_stats = per_policy_stats(val_runs, baselines)
        best = lowest_p99(val_stats, baselines)
        selection = {"seeds": val_seeds, "picked": best, "per_policy": val_stats}
        extra = [b for b in args.heldout_baselines.split(",") if b and b != best]
        baselines = [best, *extra]
    policies = [args.policy, *baselines]
    runs = run_all([RunSpec(p, s, factory, config) for s in seeds for p in policies], args.jobs)
    wall = time.perf_counter() - t0
    per_policy = per_policy_stats(runs, policies)
    paired = {b: paired_ratios(runs, [args.policy], b, KEYS)[args.policy] for b in baselines}
    if selection is None:
        best = lowest_p99(per_policy, baselines)
    mine_p99, best_p99 = per_policy[args.policy]["jct_p99_s"]["mean"], per_policy[best]["jct_p99_s"]["mean"]
    ratio = paired[best]["jct_p99_s"]
    print(json.dumps({"bench": "packer_mlgpu", "scenario": "ml-gpu", "load": args.load, "seeds": seeds,
                      "nodes": ev.nodes or SCENARIOS["ml-gpu"].default_nodes,
                      "duration_s": ev.duration or SCENARIOS["ml-gpu"].default_duration_s,
                      "policy": args.policy, "best_heuristic": best,
                      "best_picked_on": "validation seeds" if selection else "these same seeds (favours it)",
                      "selection": selection,
                      "target": "packer P99 JCT <= the best heuristic's",
                      "met": bool(mine_p99 <= best_p99),  # type: ignore[operator]
                      "paired_p99_ratio_vs_best": ratio, "per_policy": per_policy,
                      "paired_ratio_packer_over": paired, "wall_s": round(wall, 1), "machine": machine_info()},
                     indent=2))


if __name__ == "__main__":
    main()
