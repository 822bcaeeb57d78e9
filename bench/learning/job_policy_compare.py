"""Issue 24 §4: the learned job policy against `fifo` and the best tuned heuristic on `tpch`, continuous arrivals.

Seeds: evaluation seeds 0–9 (held out: `drlsched train-jobs` trains on seeds 1000 and up, picks its checkpoint on
validation seeds 900–902, and the heuristics were tuned on 900–909 by bench/simulator/job_policy_lever.py, whose
evaluation seeds these also are). The best tuned heuristic at the load is read from
bench/results/job_policy_lever.json (`weighted-fair:-2` at every measured load); `srpt-oracle`, clairvoyant, is run
beside them as the headroom reference. Per policy: mean ± 95% CI of mean, P50 and P99 JCT over the seeds; per pair
the paired ratios (mean ± 95% CI). Prints JSON (and writes it to --out) and a markdown table on stderr.
Usage: nice python bench/learning/job_policy_compare.py --policy DIR/policy.pt [--load 0.85 | --batch 20] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from drlsched.evaluate import ci_cell, mean_ci, ratio_or_none
from drlsched.jobs.workload import JobSource, run_jobs
from drlsched.machine import machine_info

ROOT = Path(__file__).resolve().parents[2]
LEVER = ROOT / "bench" / "results" / "job_policy_lever.json"
KEYS = ("jct_mean_s", "jct_p50_s", "jct_p99_s")


def _run(task: tuple[JobSource, str, int]) -> dict[str, Any]:
    source, policy, seed = task
    return run_jobs(source, policy, seed)


def best_heuristic(load: float) -> str:
    loads = json.loads(LEVER.read_text())["loads"]
    key = min(loads, key=lambda k: abs(float(k) - load))
    return str(loads[key]["best_setting"])


def print_tables(policies: dict[str, Any], ratios: dict[str, Any]) -> None:
    """The policies' JCTs and the paired ratios as markdown tables, on stderr (stdout holds the JSON)."""
    lines = ["| policy | mean JCT (s) | P50 JCT (s) | P99 JCT (s) |", "|---|---|---|---|"]
    for role, p in policies.items():
        lines.append(f"| {role} (`{p['setting']}`) | " + " | ".join(ci_cell(p[k], ".0f", ".0f") for k in KEYS) + " |")
    lines += ["", "| paired ratio | mean JCT | P50 JCT | P99 JCT |", "|---|---|---|---|"]
    for label, r in ratios.items():
        lines.append(f"| {label} | " + " | ".join(ci_cell(r[k], ".3f", ".3f") for k in KEYS) + " |")
    print("\n".join(lines), file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True, help="the learned job policy's policy.pt")
    ap.add_argument("--load", type=float, default=0.85)
    ap.add_argument("--batch", type=int, help="N jobs all at t=0 instead of Poisson arrivals (Decima's batch: 20); "
                    "the best heuristic is then the continuous one's at --load")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "job_policy_compare.json"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    best = best_heuristic(args.load)
    learned = f"ppo:{args.policy}"
    names = {"fifo": "fifo", "best": best, "learned": learned, "oracle": "srpt-oracle"}
    source = JobSource(load=args.load, batch=args.batch)
    seeds = list(range(args.seeds))
    tasks = [(source, p, s) for p in names.values() for s in seeds]
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            runs = list(pool.map(_run, tasks))
    else:
        runs = [_run(t) for t in tasks]
    by = {(r["job_policy"], r["seed"]): r for r in runs}
    policies = {role: {"setting": p, **{k: mean_ci([by[(p, s)][k] for s in seeds]) for k in KEYS}}
                for role, p in names.items()}
    ratios: dict[str, dict[str, Any]] = {}
    for label, num, den in (("learned_vs_fifo", learned, "fifo"), ("learned_vs_best", learned, best),
                            ("best_vs_fifo", best, "fifo"), ("oracle_vs_best", "srpt-oracle", best)):
        ratios[label] = {k: mean_ci([ratio_or_none(by[(num, s)][k], by[(den, s)][k]) for s in seeds]) for k in KEYS}
    vs_best = ratios["learned_vs_best"]
    targets = {"mean_jct_le_0.85x_best_ci_below_1": bool(vs_best["jct_mean_s"]["mean"] <= 0.85
                                                         and vs_best["jct_mean_s"]["mean"]
                                                         + vs_best["jct_mean_s"]["ci95"] < 1.0),
               "p99_jct_le_0.95x_best": bool(vs_best["jct_p99_s"]["mean"] <= 0.95)}
    train = Path(args.policy).parent / "train.json"
    out = {"bench": "job_policy_compare", "workload": "tpch", "load": args.load, "batch": args.batch,
           "nodes": source.nodes,
           "duration_s": source.duration_s, "seeds": seeds,
           "seeds_note": "held out: training 1000+, checkpoint choice 900-902, heuristic tuning 900-909",
           "policies": policies, "ratios": ratios, "targets": targets,
           "training": json.loads(train.read_text()) if train.exists() else None,
           "wall_s": time.perf_counter() - t0, "machine": machine_info()}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    print_tables(policies, ratios)


if __name__ == "__main__":
    main()
