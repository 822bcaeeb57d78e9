"""Issue 24 §4, second workload: the learned job policy (tpch-trained) on the Alibaba v2018 batch sample.

The sample (spar's one hour of cluster-trace-v2018 batch jobs, ../shared/traces/alibaba-v2018-sample/; Alibaba's
research/study terms) has recorded arrivals and task durations, so a seed moves nothing: the paired units are time
windows instead. The hour is cut into --window-s windows by arrival; each window's jobs arrive as recorded (shifted
to start at 0) on a cluster of --executors one-task executors and run until all finish. The first --val-windows
windows (in time order) are validation: every job heuristic candidate is run there and the best by mean JCT is
"the best tuned heuristic"; the next --windows windows are evaluation (held out, paired). The learned policy is not
trained on this workload at all. Per policy: mean ± 95% CI of mean, P50 and P99 JCT over the evaluation windows;
per pair the paired ratios. Prints JSON (and writes it to --out) and a markdown table on stderr.
Usage: nice python bench/learning/job_policy_compare_alibaba.py --policy DIR/policy.pt [--trace DIR] [--jobs 2]
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

from drlsched.errors import UserError
from drlsched.evaluate import mean_ci, ratio_or_none
from drlsched.jobs.alibaba import load_jobs
from drlsched.jobs.engine import EngineConfig, JobEngine
from drlsched.jobs.model import JobArrival
from drlsched.jobs.policies import make_job_policy
from drlsched.machine import machine_info
from drlsched.rl.job_guard import GuardedJobPolicy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from job_policy_compare import print_tables

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT.parent / "shared" / "traces" / "alibaba-v2018-sample"
KEYS = ("jct_mean_s", "jct_p50_s", "jct_p99_s")
ALPHAS = (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0)
CANDIDATES = ("fifo", "fair:1", "drf", "sjf-cp", *(f"weighted-fair:{a:g}" for a in ALPHAS))


def window(trace: str, window_s: float, k: int) -> list[JobArrival]:
    """Window k's jobs (arrival in [k·w, (k+1)·w)), arrivals shifted so the window starts at 0."""
    lo, hi = k * window_s, (k + 1) * window_s
    picked = [a for a in load_jobs(trace)[0] if lo <= a.arrival_s < hi]
    return [JobArrival(i, a.arrival_s - lo, a.spec) for i, a in enumerate(picked)]


def _run(task: tuple[str, float, int, str, int]) -> dict[str, Any]:
    trace, window_s, executors, spec, k = task
    logging.getLogger("drlsched.jobs").setLevel(logging.ERROR)  # the guard's switches are counted, not printed
    policy = make_job_policy(spec)
    m = JobEngine(window(trace, window_s, k), policy, EngineConfig(executors=executors), k).run()
    out: dict[str, Any] = {"policy": spec, "window": k, **{key: m[key] for key in (*KEYS, "jobs_unfinished")}}
    if isinstance(policy, GuardedJobPolicy):
        out["delegated_share"] = policy.delegated / max(policy.decisions, 1)
    return out


def _runs(tasks: list[tuple[str, float, int, str, int]], jobs: int) -> dict[tuple[str, int], dict[str, Any]]:
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            runs = list(pool.map(_run, tasks))
    else:
        runs = [_run(t) for t in tasks]
    return {(r["policy"], r["window"]): r for r in runs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", required=True, help="the learned job policy's policy.pt")
    ap.add_argument("--trace", default=str(TRACE), help="a directory holding spar's sample_tasks.csv "
                    "(or a raw v2018 batch_task.csv)")
    ap.add_argument("--window-s", type=float, default=120.0)
    ap.add_argument("--val-windows", type=int, default=5, help="the first N windows: heuristic tuning")
    ap.add_argument("--windows", type=int, default=10, help="the next N windows: evaluation (paired)")
    ap.add_argument("--executors", type=int, default=5000, help="one-task executors (625 nodes of 8)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "job_policy_compare_alibaba.json"))
    args = ap.parse_args()
    if not (Path(args.trace) / "sample_tasks.csv").is_file() and not any(Path(args.trace).glob("batch_task*.csv")):
        print(f"error: {args.trace}: no Alibaba v2018 sample here (sample_tasks.csv or batch_task.csv); pass --trace "
              "DIR", file=sys.stderr)
        return 2
    if not Path(args.policy).is_file():
        print(f"error: {args.policy}: no such file", file=sys.stderr)
        return 2
    if args.window_s <= 0 or args.val_windows < 1 or args.windows < 2 or args.executors < 1:
        print("error: --window-s, --executors and --val-windows must be positive, --windows at least 2",
              file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        arrivals, dropped = load_jobs(args.trace)
        make_job_policy(f"ppo:{args.policy}")  # a bad checkpoint fails here, in one line
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    val = list(range(args.val_windows))
    test = list(range(args.val_windows, args.val_windows + args.windows))
    sizes = {k: len(window(args.trace, args.window_s, k)) for k in val + test}
    if min(sizes.values()) == 0:
        print(f"error: windows {[k for k, n in sizes.items() if not n]} of {args.window_s:g} s hold no job "
              "(fewer or shorter windows)", file=sys.stderr)
        return 2
    common = (args.trace, args.window_s, args.executors)
    print(f"tuning {len(CANDIDATES)} heuristics on windows {val}", file=sys.stderr)
    tuning = _runs([(*common, c, k) for c in CANDIDATES for k in val], args.jobs)
    score = {c: mean_ci([tuning[(c, k)]["jct_mean_s"] for k in val])["mean"] for c in CANDIDATES}
    best = min(CANDIDATES, key=lambda c: score[c])  # type: ignore[arg-type, return-value]
    learned = f"ppo:{args.policy}"
    names = {"fifo": "fifo", "best": best, "learned": f"{learned}:fallback=none", "learned guarded": learned,
             "learned guarded, fallback best": f"{learned}:fallback={best}"}
    print(f"evaluating {list(names.values())} on windows {test}", file=sys.stderr)
    by = _runs([(*common, p, k) for p in dict.fromkeys(names.values()) for k in test], args.jobs)
    policies = {role: {"setting": p, **{key: mean_ci([by[(p, k)][key] for k in test]) for key in KEYS}}
                for role, p in names.items()}
    for role, p in names.items():
        if "delegated_share" in by[(p, test[0])]:
            policies[role]["delegated_share"] = mean_ci([by[(p, k)]["delegated_share"] for k in test])
    pairs = [("learned_vs_fifo", "learned", "fifo"), ("learned_vs_best", "learned", "best"),
             ("guarded_vs_best", "learned guarded", "best"), ("guarded_best_vs_best", "learned guarded, fallback best",
                                                              "best"), ("best_vs_fifo", "best", "fifo")]
    ratios = {label: {key: mean_ci([ratio_or_none(by[(names[a], k)][key], by[(names[b], k)][key]) for k in test])
                      for key in KEYS} for label, a, b in pairs}
    out = {"bench": "job_policy_compare_alibaba", "workload": "alibaba-v2018 batch sample (spar, one hour)",
           "trace": args.trace, "jobs_in_trace": len(arrivals), "dropped": dict(dropped),
           "window_s": args.window_s, "executors": args.executors,
           "validation_windows": val, "evaluation_windows": test, "jobs_per_window": sizes,
           "split_note": "time windows in order: the first ones tune the heuristic, the next ones evaluate; the "
                         "learned policy was trained on tpch only",
           "tuning": {"objective": "mean JCT over the validation windows", "mean_jct_s": score, "best": best},
           "policies": policies, "ratios": ratios,
           "unfinished_jobs": sum(int(r["jobs_unfinished"]) for r in by.values()),
           "runs": {f"{p}@{k}": r for (p, k), r in sorted(by.items())},
           "wall_s": time.perf_counter() - t0, "machine": machine_info()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    print_tables(policies, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
