"""The job-level lever on `tpch` (issue 23 item 4): every job policy × load, paired seeds, with weighted-fair's α
and fair's share tuned on validation seeds 900-909 only, then measured on evaluation seeds 0-9.

Reports per load and policy: mean, P50, P99 JCT (mean over seeds ± 95% CI), paired ratios (per seed) to fifo and
to the best tuned heuristic (the lowest mean JCT among fifo, fair, drf, sjf-cp, weighted-fair), and the oracle's
headroom below that heuristic. Prints JSON and writes it to --out.
Usage: python bench/simulator/job_policy_lever.py [--seeds 10] [--jobs 2] [--duration 21600] [--out FILE]
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

LOADS = (0.7, 0.85, 0.95)
VALIDATION_SEED = 900
ALPHAS = tuple(float(a) for a in np.round(np.arange(-2.0, 2.01, 0.5), 2))
SHARES = (0.5, 1.0, 1.5, 2.0, 3.0)
HEURISTICS = ("fifo", "fair", "drf", "sjf-cp", "weighted-fair")
KEYS = ("jct_mean_s", "jct_p50_s", "jct_p99_s", "jct_mean_small_s", "jct_mean_medium_s", "jct_mean_large_s",
        "executor_util", "executor_starts", "cluster_util", "jobs_unfinished")


def _run(task: tuple[float, float, str, int]) -> tuple[float, str, int, dict[str, float]]:
    load, duration, policy, seed = task
    m = run_jobs(JobSource(load=load, duration_s=duration), policy, seed)
    return load, policy, seed, {k: float(m[k]) for k in (*KEYS, "tasks_done", "wall_s")}  # type: ignore[arg-type]


def _grid(pool: Pool, tasks: list[tuple[float, float, str, int]]) -> dict[tuple[float, str], dict[int, dict]]:
    out: dict[tuple[float, str], dict[int, dict]] = {}
    for i, (load, policy, seed, m) in enumerate(pool.imap_unordered(_run, tasks)):
        out.setdefault((load, policy), {})[seed] = m
        if (i + 1) % 20 == 0:
            print(f"  {i + 1}/{len(tasks)}", file=sys.stderr, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=6 * 3600.0)
    ap.add_argument("--out", default="bench/results/job_policy_lever.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    val = list(range(VALIDATION_SEED, VALIDATION_SEED + args.seeds))
    test = list(range(args.seeds))
    candidates = [f"weighted-fair:{a:g}" for a in ALPHAS] + [f"fair:{s:g}" for s in SHARES]
    with Pool(args.jobs) as pool:
        print("tuning on validation seeds", file=sys.stderr)
        tuned_runs = _grid(pool, [(ld, args.duration, p, s) for ld in LOADS for p in candidates for s in val])
        tuned: dict[str, dict[str, object]] = {}
        for ld in LOADS:
            score = {p: float(np.mean([m["jct_mean_s"] for m in tuned_runs[(ld, p)].values()])) for p in candidates}
            wf = min((p for p in candidates if p.startswith("weighted-fair")), key=lambda p: score[p])
            fa = min((p for p in candidates if p.startswith("fair")), key=lambda p: score[p])
            tuned[str(ld)] = {"weighted-fair": wf, "fair": fa, "validation_jct_mean_s": score}
        print("evaluating on seeds 0..", file=sys.stderr)
        tasks = []
        for ld in LOADS:
            t = tuned[str(ld)]
            for name in ("fifo", t["fair"], "drf", "sjf-cp", t["weighted-fair"], "srpt-oracle"):
                tasks += [(ld, args.duration, str(name), s) for s in test]
        runs = _grid(pool, tasks)
    result: dict[str, object] = {"loads": {}}
    for ld in LOADS:
        t = tuned[str(ld)]
        names = {"fifo": "fifo", "fair": str(t["fair"]), "drf": "drf", "sjf-cp": "sjf-cp",
                 "weighted-fair": str(t["weighted-fair"]), "srpt-oracle": "srpt-oracle"}
        per = {k: runs[(ld, v)] for k, v in names.items()}
        best = min(HEURISTICS, key=lambda k: np.mean([m["jct_mean_s"] for m in per[k].values()]))
        table = {}
        for k, r in per.items():
            entry: dict[str, object] = {"setting": names[k]}
            for key in KEYS:
                entry[key] = mean_ci([r[s][key] for s in test])
            for ref in ("fifo", best):
                entry[f"ratio_jct_mean_vs_{'fifo' if ref == 'fifo' else 'best'}"] = mean_ci(
                    [r[s]["jct_mean_s"] / per[ref][s]["jct_mean_s"] for s in test])
            table[k] = entry
        result["loads"][str(ld)] = {"best_heuristic": best, "best_setting": names[best], "policies": table,  # type: ignore[index]
                                    "fifo_over_best": mean_ci([per["fifo"][s]["jct_mean_s"] / per[best][s]["jct_mean_s"]
                                                               for s in test]),
                                    "oracle_headroom": mean_ci([1 - per["srpt-oracle"][s]["jct_mean_s"]
                                                                / per[best][s]["jct_mean_s"] for s in test])}
    result["tuning"] = tuned
    result["settings"] = {"scenario": "tpch", "nodes": JobSource().nodes, "duration_s": args.duration,
                          "validation_seeds": val, "evaluation_seeds": test, "alphas": ALPHAS, "shares": SHARES,
                          "wall_s": time.perf_counter() - t0}
    result["machine"] = machine_info()
    text = json.dumps(result, indent=2)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
