"""Issue 15 §3, the two targets outside `colocation`: `ml-gpu` at load 1, and the `spark-tpcds` table with reclaim and
the shared network on. Held-out seeds 0..n-1 (training draws seeds >= 1000), paired per-seed ratios with 95% CIs.

The best heuristic of each is an option, chosen beforehand on validation seeds 900..904 (docs/learning.md, "Measured:
ml-gpu and spark-tpcds"): on `ml-gpu` the lowest mean P99 JCT (first-fit), on `spark-tpcds` the lowest mean cross-node
traffic, the objective of the `traffic` reward preset (data-local); further heuristics can be listed for the table.

- `ml_gpu_load1`: P99 JCT of PPO / the best heuristic (target <= 1) and the trained objective: with the JCT-only reward
  (bench/learning/rewards/jct-only.yaml) that is mean JCT (the term's episode sum is proportional to it by Little's
  law), computed from each run's JCT sample (exact up to evaluate.MAX_JCT_SAMPLES jobs), target <= 0.95.
- `spark_tpcds_reclaim_table`: P99 JCT, CPU utilisation and cross-node traffic (and evictions, pending times, mean
  JCT) of k8s-default, the heuristics and PPO, mean ± 95% CI, with paired ratios to k8s-default and to the best
  heuristic. A reporting target (no threshold): met once the table is measured; `ppo_vs_best_verdict` says per
  metric whether PPO's paired ratio CI lies on the better side of 1, the worse side, or covers it.

Imported by bench/learning/rl_targets.py (its --ppo-mlgpu / --ppo-spark options); runnable alone (prints only these
targets): python bench/learning/rl_targets_placement.py --ppo-mlgpu runs/g/policy.pt --ppo-spark runs/s/policy.pt
  [--seeds 10]
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from _targets import train_cost

from drlsched.evaluate import RunSpec, mean_ci, paired_ratios, run_all
from drlsched.machine import machine_info
from drlsched.reclaim import ReclaimConfig
from drlsched.simulator import SimConfig
from drlsched.source import WorkloadSource

# The article's three columns, then evictions and the pending times (a JCT change that is waiting shows there).
SPARK_KEYS = ("jct_p99_s", "cpu_util", "cross_node_traffic_gb", "evictions", "pending_p99_s", "be_pending_p99_s")
HIGHER_IS_BETTER = {"cpu_util"}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("ml-gpu and spark-tpcds targets (without --ppo-mlgpu / --ppo-spark: met null)")
    g.add_argument("--ppo-mlgpu", metavar="PATH", help="policy trained on ml-gpu at load 1 (JCT-only reward)")
    g.add_argument("--mlgpu-best", default="first-fit",
                   help="the best heuristic on ml-gpu, chosen on validation seeds 900..904 (default first-fit)")
    g.add_argument("--mlgpu-nodes", type=int, default=40)
    g.add_argument("--mlgpu-duration", type=float, default=3600.0)
    g.add_argument("--ppo-spark", metavar="PATH", help="policy trained on spark-tpcds with the settings below")
    g.add_argument("--spark-heuristics", default="data-local,first-fit",
                   help="heuristics in the spark table, the best (chosen on validation seeds 900..904) first "
                        "(default data-local,first-fit)")
    g.add_argument("--spark-reclaim", default="koordinator", help="reclaim model (default koordinator)")
    g.add_argument("--spark-nic-gbps", type=float, default=1.0)
    g.add_argument("--spark-rack-oversubscription", type=float, default=4.0)
    g.add_argument("--spark-nodes", type=int, help="default: the scenario's (20)")
    g.add_argument("--spark-duration", type=float, help="default: the scenario's (1800 s)")


def mean_jct(run: dict[str, object]) -> float:
    jct = run["jct"]
    assert isinstance(jct, list)
    return float(np.mean(jct)) if jct else 0.0


def measure(policies: dict[str, str], source: WorkloadSource, config: SimConfig, seeds: list[int], jobs: int
            ) -> list[dict[str, object]]:
    """Every policy (label -> name) on every seed; each run's metrics gain `jct_mean_s`."""
    source(seeds[0]).validate_nodes()
    specs = [RunSpec(name, s, source, config, label) for s in seeds for label, name in policies.items()]
    runs = run_all(specs, jobs)
    for r in runs:
        r["metrics"]["jct_mean_s"] = mean_jct(r)  # type: ignore[index]
    return runs


def table(runs: list[dict[str, object]], labels: list[str], keys: tuple[str, ...]) -> dict[str, dict[str, object]]:
    """Per policy and metric: mean ± 95% CI over seeds."""
    return {label: {k: mean_ci([float(r["metrics"][k]) for r in runs  # type: ignore[index]
                                if r["metrics"]["policy"] == label]) for k in keys}  # type: ignore[index]
            for label in labels}


def side(ratio: dict[str, float], higher_is_better: bool) -> str:
    """better / worse when the ratio's 95% CI (2+ seeds) lies wholly on one side of 1, else tie."""
    lo, hi = ratio["mean"] - ratio["ci95"], ratio["mean"] + ratio["ci95"]
    if ratio["n"] < 2 or lo <= 1.0 <= hi:
        return "tie"
    return "better" if (lo > 1.0) == higher_is_better else "worse"


def ml_gpu_target(args: argparse.Namespace, seeds: list[int], jobs: int) -> dict[str, object]:
    best = args.mlgpu_best
    policies = {"k8s-default": "k8s-default", best: best, "ppo": f"ppo:{args.ppo_mlgpu}"}
    source = WorkloadSource(scenario="ml-gpu", nodes=args.mlgpu_nodes, duration=args.mlgpu_duration, load=1.0)
    runs = measure(policies, source, SimConfig(), seeds, jobs)
    keys = ("jct_p99_s", "jct_mean_s", "jct_p50_s", "pending_p99_s", "gpu_alloc")
    vs_best = paired_ratios(runs, ["ppo"], best, keys)["ppo"]
    vs_default = paired_ratios(runs, [best, "ppo"], "k8s-default", keys)
    p99, obj = vs_best["jct_p99_s"], vs_best["jct_mean_s"]
    verdict = {k: side(r, k == "gpu_alloc") for k, r in vs_best.items()}  # type: ignore[arg-type]
    return {
        "best_heuristic": best,
        "cluster": {"scenario": "ml-gpu", "nodes": args.mlgpu_nodes, "duration": args.mlgpu_duration, "load": 1.0},
        "objective": "mean JCT (the reward's JCT term; bench/learning/rewards/jct-only.yaml)",
        "measured": {"jct_p99_ratio": p99, "jct_mean_ratio": obj, "ppo_vs_best": vs_best,
                     "ppo_vs_best_verdict": verdict,
                     "vs_k8s_default": vs_default, "table": table(runs, list(policies), keys),
                     "jct_p99_per_seed": {label: [round(float(r["metrics"]["jct_p99_s"]))  # type: ignore[index]
                                                  for r in runs if r["metrics"]["policy"] == label]  # type: ignore[index]
                                          for label in policies}},
        "target": {"jct_p99_ratio": "<= 1", "jct_mean_ratio": "<= 0.95"},
        "met": p99["mean"] <= 1.0 and obj["mean"] <= 0.95,
        "training": train_cost(args.ppo_mlgpu),
    }


def spark_target(args: argparse.Namespace, seeds: list[int], jobs: int) -> dict[str, object]:
    heuristics = args.spark_heuristics.split(",")
    best = heuristics[0]
    policies = {h: h for h in dict.fromkeys(["k8s-default", *heuristics])} | {"ppo": f"ppo:{args.ppo_spark}"}
    source = WorkloadSource(scenario="spark-tpcds", nodes=args.spark_nodes, duration=args.spark_duration)
    config = SimConfig(reclaim=ReclaimConfig(args.spark_reclaim), nic_gbps=args.spark_nic_gbps,
                       rack_oversubscription=args.spark_rack_oversubscription)
    runs = measure(policies, source, config, seeds, jobs)
    labels, keys = list(policies), (*SPARK_KEYS, "jct_mean_s")
    vs_default = paired_ratios(runs, labels, "k8s-default", keys)
    vs_best = paired_ratios(runs, ["ppo"], best, keys)["ppo"]
    verdict = {k: side(r, k in HIGHER_IS_BETTER) for k, r in vs_best.items()}  # type: ignore[arg-type]
    return {
        "best_heuristic": best,
        "settings": {"scenario": "spark-tpcds", "nodes": args.spark_nodes, "duration": args.spark_duration,
                     "reclaim": args.spark_reclaim, "nic_gbps": args.spark_nic_gbps,
                     "rack_oversubscription": args.spark_rack_oversubscription},
        "measured": {"table": table(runs, labels, keys), "ratio_vs_k8s_default": vs_default, "ppo_vs_best": vs_best,
                     "ppo_vs_best_verdict": verdict},
        "target": "the article's table (P99 JCT, CPU utilisation, cross-node traffic) with 95% CIs; no threshold",
        "met": True,
        "training": train_cost(args.ppo_spark),
    }


def targets(args: argparse.Namespace, seeds: list[int], jobs: int) -> dict[str, object]:
    """The two targets, each measured if its policy is given, else {measured: None, met: None}."""
    out: dict[str, object] = {}
    for name, path, fn in (("ml_gpu_load1", args.ppo_mlgpu, ml_gpu_target),
                           ("spark_tpcds_reclaim_table", args.ppo_spark, spark_target)):
        out[name] = fn(args, seeds, jobs) if path else {"measured": None, "target": "see issue 15 §3",
                                                        "met": None, "note": "no policy given"}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    seeds = list(range(args.seeds))
    print(json.dumps({"machine": machine_info(), "seeds": seeds, "targets": targets(args, seeds, args.jobs)},
                     indent=2))


if __name__ == "__main__":
    main()
