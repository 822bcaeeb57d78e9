"""The seed's table on `spark-tpcds` with tasks (issue 23 item 2, issue 24 item 5's shape, heuristics only):
default (`fifo` + `k8s-default`) against the best tuned job heuristic with the best placement policy.

Tuning on validation seeds 900.. only (never the evaluation seeds): first every job heuristic (fifo, fair with its
share, drf, sjf-cp, weighted-fair with its α; srpt-oracle is clairvoyant and not a candidate) under k8s-default,
by mean P99 JCT over the validation seeds; then, for that heuristic, the placement policy (k8s-default, data-local,
most-allocated) by mean P99 JCT, where a placement within 1% of the best P99 is preferred for less cross-node
traffic (placement barely moves JCT here: the shuffles are small; the rule is fixed before looking at the
evaluation seeds). Evaluation on seeds 0..: rows P99 JCT, CPU utilisation (busy executor-seconds / (cores ×
makespan)) and cross-node traffic, each mean ± 95% CI over the seeds, and the per-seed paired ratio to the default
with its 95% CI. Prints JSON and writes it to --out.
Usage: python bench/simulator/spark_tpcds_table.py [--seeds 10] [--val-seeds 5] [--jobs 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from multiprocessing.pool import Pool
from pathlib import Path

import numpy as np

from drlsched.evaluate import mean_ci
from drlsched.jobs.workload import JobSource, run_jobs
from drlsched.machine import machine_info

VALIDATION_SEED = 900
ALPHAS = (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0)
SHARES = (0.5, 1.0, 2.0)
JOB_CANDIDATES = ("fifo", *(f"fair:{s:g}" for s in SHARES), "drf", "sjf-cp", *(f"weighted-fair:{a:g}" for a in ALPHAS))
PLACEMENTS = ("k8s-default", "data-local", "most-allocated")
DEFAULT = ("fifo", "k8s-default")
ROWS = (("P99 JCT (s)", "jct_p99_s"), ("CPU utilisation", "cluster_util"),
        ("cross-node traffic (GB)", "cross_node_traffic_gb"))
KEYS = ("jct_mean_s", "jct_p50_s", "jct_p99_s", "cluster_util", "executor_util", "executor_starts",
        "cross_node_traffic_gb", "cross_rack_traffic_gb", "network_wait_s", "jobs", "jobs_unfinished", "wall_s")
PLACEMENT_TIE = 0.01


def _run(task: tuple[JobSource, str, str, int]) -> tuple[str, str, int, dict[str, float]]:
    source, job_policy, placement, seed = task
    m = run_jobs(source, job_policy, seed, placement)
    return job_policy, placement, seed, {k: float(m[k]) for k in KEYS}  # type: ignore[arg-type]


def _grid(pool: Pool, tasks: list[tuple[JobSource, str, str, int]]) -> dict[tuple[str, str], dict[int, dict]]:
    out: dict[tuple[str, str], dict[int, dict]] = {}
    for i, (jp, pl, seed, m) in enumerate(pool.imap_unordered(_run, tasks)):
        out.setdefault((jp, pl), {})[seed] = m
        if (i + 1) % 10 == 0:
            print(f"  {i + 1}/{len(tasks)}", file=sys.stderr, flush=True)
    return out


def _mean(runs: dict[int, dict], key: str) -> float:
    return float(np.mean([m[key] for m in runs.values()]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="evaluation seeds 0..N-1")
    ap.add_argument("--val-seeds", type=int, default=5, help="validation seeds 900..900+N-1 (tuning)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--out", default="bench/results/spark_tpcds_table.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    source = JobSource(scenario="spark-tpcds", nodes=args.nodes, duration_s=args.duration, load=args.load)
    val = list(range(VALIDATION_SEED, VALIDATION_SEED + args.val_seeds))
    test = list(range(args.seeds))
    with Pool(args.jobs) as pool:
        print("tuning the job heuristic (k8s-default) on validation seeds", file=sys.stderr)
        job_runs = _grid(pool, [(source, jp, "k8s-default", s) for jp in JOB_CANDIDATES for s in val])
        job_score = {jp: _mean(job_runs[(jp, "k8s-default")], "jct_p99_s") for jp in JOB_CANDIDATES}
        best_job = min(JOB_CANDIDATES, key=lambda jp: job_score[jp])
        print(f"tuning the placement for {best_job}", file=sys.stderr)
        others = [p for p in PLACEMENTS if p != "k8s-default"]
        place_runs = _grid(pool, [(source, best_job, p, s) for p in others for s in val])
        place_runs[(best_job, "k8s-default")] = job_runs[(best_job, "k8s-default")]
        p99 = {p: _mean(place_runs[(best_job, p)], "jct_p99_s") for p in PLACEMENTS}
        traffic = {p: _mean(place_runs[(best_job, p)], "cross_node_traffic_gb") for p in PLACEMENTS}
        near = [p for p in PLACEMENTS if p99[p] <= (1 + PLACEMENT_TIE) * min(p99.values())]
        best_place = min(near, key=lambda p: traffic[p])
        print(f"evaluating {DEFAULT} and {(best_job, best_place)} on seeds 0..{args.seeds - 1}", file=sys.stderr)
        runs = _grid(pool, [(source, jp, pl, s) for jp, pl in (DEFAULT, (best_job, best_place)) for s in test])
    base, tuned = runs[DEFAULT], runs[(best_job, best_place)]
    table = []
    for title, key in ROWS:
        ratio = [tuned[s][key] / base[s][key] if base[s][key] else None for s in test]
        table.append({"row": title, "key": key, "default": mean_ci([base[s][key] for s in test]),
                      "tuned": mean_ci([tuned[s][key] for s in test]), "paired_ratio": mean_ci(ratio)})
    extra = {k: {"default": mean_ci([base[s][k] for s in test]), "tuned": mean_ci([tuned[s][k] for s in test]),
                 "paired_ratio": mean_ci([tuned[s][k] / base[s][k] if base[s][k] else None for s in test])}
             for k in ("jct_mean_s", "jct_p50_s", "executor_starts", "network_wait_s", "cross_rack_traffic_gb")}
    result = {
        "bench": "spark_tpcds_table",
        "workload": {"scenario": "spark-tpcds (with tasks)", "nodes": args.nodes, "duration_s": args.duration,
                     "load": args.load, "executors": source.config().executors},
        "default": {"job_policy": DEFAULT[0], "placement": DEFAULT[1]},
        "tuned": {"job_policy": best_job, "placement": best_place},
        "tuning": {"validation_seeds": val, "objective": "mean P99 JCT over the validation seeds",
                   "job_heuristics_p99_s": job_score, "placement_p99_s": p99, "placement_cross_node_gb": traffic,
                   "placement_tie": PLACEMENT_TIE},
        "evaluation_seeds": test,
        "table": table,
        "also": extra,
        "runs": {f"{jp}+{pl}": {str(s): m for s, m in sorted(r.items())} for (jp, pl), r in runs.items()},
        "wall_s": time.perf_counter() - t0,
        "machine": machine_info(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
