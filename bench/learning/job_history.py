"""Issue 24 item 1: does the history input (`train-jobs --history lstm`, rl.job_history) help the learned job
policy see the load shift? Two checkpoints trained by the same recipe, seeds and budget, one with and one without
history (here: both fine-tuned from the committed policy, the history branch's output starting at zero), served
unguarded (`:fallback=none`, so the guard does not hide the difference), beside the best tuned heuristic.

Validation seeds 900…909 at loads 0.7, 0.85 (training), 0.95 and 1.2; held-out seeds 0…9 once, at 0.85 and 1.2
(reported, never tuned on). Per setting and policy: mean ± 95% CI of mean and P99 JCT; paired ratios
with/without history and each to the best heuristic. Prints JSON (and writes it to --out).
Usage: nice python bench/learning/job_history.py --with H/policy.pt --without N/policy.pt [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from drlsched.evaluate import mean_ci, ratio_or_none
from drlsched.jobs.workload import JobSource, run_jobs
from drlsched.machine import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
from job_policy_compare import ROOT, best_heuristic

KEYS = ("jct_mean_s", "jct_p99_s")
VALIDATION = ("validation", tuple(range(900, 910)), (0.7, 0.85, 0.95, 1.2))
HELD_OUT = ("held_out", tuple(range(10)), (0.85, 1.2))


def _run(task: tuple[float, str, int]) -> dict[str, Any]:
    load, spec, seed = task
    return dict(run_jobs(JobSource(load=load), spec, seed))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--with", dest="with_history", required=True, help="policy.pt trained with --history lstm")
    ap.add_argument("--without", required=True, help="policy.pt trained the same way without history")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "job_history.json"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    roles = {"history": f"ppo:{args.with_history}:fallback=none", "no_history": f"ppo:{args.without}:fallback=none"}
    tasks = []
    for _, seeds, loads in (VALIDATION, HELD_OUT):
        for load in loads:
            for spec in (best_heuristic(load), *roles.values()):
                tasks += [(load, spec, s) for s in seeds]
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        runs = dict(zip(tasks, pool.map(_run, tasks), strict=True))
    results: dict[str, Any] = {}
    for split, seeds, loads in (VALIDATION, HELD_OUT):
        for load in loads:
            names = {"best": best_heuristic(load), **roles}
            by = {role: [runs[(load, spec, s)] for s in seeds] for role, spec in names.items()}
            row: dict[str, Any] = {"split": split, "load": load, "seeds": list(seeds), "best_setting": names["best"],
                                   "policies": {role: {k: mean_ci([r[k] for r in rs]) for k in KEYS}
                                                for role, rs in by.items()}}
            row["ratios"] = {f"{a}_vs_{b}": {k: mean_ci([ratio_or_none(x[k], y[k]) for x, y in
                                                         zip(by[a], by[b], strict=True)]) for k in KEYS}
                             for a, b in (("history", "no_history"), ("history", "best"), ("no_history", "best"))}
            results[f"{split} load {load:g}"] = row
    out = {"bench": "job_history", "workload": "tpch", "trained_load": 0.85, "policies": roles,
           "seeds_note": "training 1000+, checkpoint choice 900-902 (inside validation 900-909), held out 0-9",
           "settings": results, "wall_s": time.perf_counter() - t0, "machine": machine_info()}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
