"""Issue 24 §4: the learned job policy's distribution-shift guard, measured: the policy trained at load 0.85 with
and without its guard (`ppo:PATH` vs `ppo:PATH:fallback=none`) against the best tuned heuristic (its fallback) on
`tpch` at the training load, the shifted loads 0.7 and 0.95, a far shift (load 1.2), Decima's batch of 20 (fewer
jobs than the guard's window: never judged) and a batch of 60.

Seeds: evaluation seeds 0…N−1 (held out, as in job_policy_compare.py). Per setting and policy: mean ± 95% CI of
mean and P99 JCT; paired ratios to the best heuristic and guarded/unguarded; the guarded runs' share of
decisions it delegated and its switches. Prints JSON (and writes it to --out).
Usage: nice python bench/learning/job_policy_guard.py --policy DIR/policy.pt [--seeds 5] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from drlsched.evaluate import mean_ci, ratio_or_none
from drlsched.jobs.engine import JobEngine
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.workload import JobSource
from drlsched.machine import machine_info
from drlsched.rl.job_guard import MARGIN, GuardedJobPolicy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from job_policy_compare import ROOT, best_heuristic

KEYS = ("jct_mean_s", "jct_p99_s")
SETTINGS = (("load 0.85 (training)", 0.85, None), ("load 0.7", 0.7, None), ("load 0.95", 0.95, None),
            ("load 1.2", 1.2, None), ("batch 20", 0.85, 20), ("batch 60", 0.85, 60))


def _run(task: tuple[float, int | None, str, int]) -> dict[str, Any]:
    load, batch, spec, seed = task
    logging.getLogger("drlsched.jobs").setLevel(logging.ERROR)  # the switches are counted, not printed
    source = JobSource(load=load, batch=batch)
    policy = make_job_policy(spec)
    out: dict[str, Any] = dict(JobEngine(source.arrivals(seed), policy, source.config(), seed).run())
    if isinstance(policy, GuardedJobPolicy):
        out.update(delegated_share=policy.delegated / max(policy.decisions, 1), switches=policy.switches)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True, help="the learned job policy's policy.pt")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "job_policy" / "guard.json"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    seeds = list(range(args.seeds))
    roles = {"guarded": f"ppo:{args.policy}", "unguarded": f"ppo:{args.policy}:fallback=none"}
    tasks = []
    for _, load, batch in SETTINGS:
        for spec in (best_heuristic(load), *roles.values()):
            tasks += [(load, batch, spec, s) for s in seeds]
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        runs = dict(zip(tasks, pool.map(_run, tasks), strict=True))
    results: dict[str, Any] = {}
    for label, load, batch in SETTINGS:
        best = best_heuristic(load)
        names = {"best": best, **roles}
        by = {role: [runs[(load, batch, spec, s)] for s in seeds] for role, spec in names.items()}
        row: dict[str, Any] = {"load": load, "batch": batch, "best_setting": best,
                               "policies": {role: {k: mean_ci([r[k] for r in rs]) for k in KEYS}
                                            for role, rs in by.items()}}
        row["ratios"] = {f"{a}_vs_{b}": {k: mean_ci([ratio_or_none(x[k], y[k]) for x, y in
                                                     zip(by[a], by[b], strict=True)]) for k in KEYS}
                         for a, b in (("unguarded", "best"), ("guarded", "best"), ("guarded", "unguarded"))}
        row["guard"] = {"delegated_share": mean_ci([r["delegated_share"] for r in by["guarded"]]),
                        "switches": mean_ci([float(r["switches"]) for r in by["guarded"]])}
        results[label] = row
    out = {"bench": "job_policy_guard", "workload": "tpch", "trained_load": 0.85, "margin": MARGIN,
           "seeds": seeds, "seeds_note": "held out: training 1000+, checkpoint choice 900-902, tuning 900-909",
           "settings": results, "wall_s": time.perf_counter() - t0, "machine": machine_info()}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
