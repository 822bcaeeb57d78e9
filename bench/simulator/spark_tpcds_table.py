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

With `--learned DIR/policy.pt` (issue 24 item 5) the drlsched column is the learned job policy instead: bare
(`:fallback=none`), guarded as served (`ppo:PATH`, fallback `weighted-fair:-2`) and guarded with the tuned
heuristic of --heuristic-from as its fallback, each with its own placement chosen on the validation seeds by the
rule above; the default and the tuned heuristic (read from --heuristic-from, chosen on validation seeds) run beside
them on the evaluation seeds. Also recorded: the guard's share of delegated decisions and the arrival rate and mean
job work of the workload's 30-arrival windows against the policy's training range (why it does or does not
transfer).
Usage: python bench/simulator/spark_tpcds_table.py [--seeds 10] [--val-seeds 5] [--jobs 2] [--out FILE]
       python bench/simulator/spark_tpcds_table.py --learned bench/results/job_policy/policy.pt [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from multiprocessing.pool import Pool
from pathlib import Path

import numpy as np

from drlsched.evaluate import mean_ci, ratio_or_none
from drlsched.jobs.engine import job_work
from drlsched.jobs.placed import PlacedJobEngine
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.spark_tpcds import spark_tpcds_jobs
from drlsched.jobs.workload import JobSource, run_jobs
from drlsched.machine import machine_info
from drlsched.policies import make_policy
from drlsched.rl.job_guard import GuardedJobPolicy, window_stats

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


def _grid(pool: Pool, tasks: list[tuple[JobSource, str, str, int]], run: Callable = _run
          ) -> dict[tuple[str, str], dict[int, dict]]:
    out: dict[tuple[str, str], dict[int, dict]] = {}
    for i, (jp, pl, seed, m) in enumerate(pool.imap_unordered(run, tasks)):
        out.setdefault((jp, pl), {})[seed] = m
        if (i + 1) % 10 == 0:
            print(f"  {i + 1}/{len(tasks)}", file=sys.stderr, flush=True)
    return out


def _run_guarded(task: tuple[JobSource, str, str, int]) -> tuple[str, str, int, dict[str, float]]:
    """`_run` built by hand so that a guarded policy's delegated share can be read after the run."""
    source, job_policy, placement, seed = task
    logging.getLogger("drlsched.jobs").setLevel(logging.ERROR)  # the guard's switches are counted, not printed
    nodes, arrivals = spark_tpcds_jobs(source.nodes, source.duration_s, source.load, seed)
    policy = make_job_policy(job_policy)
    engine = PlacedJobEngine(arrivals, policy, source.config(), seed, nodes, make_policy(placement),
                             source.nic_gbps, source.rack_oversubscription)
    m: dict[str, object] = {"jobs": len(arrivals), "jobs_unfinished": 0, **engine.run(), **engine.network_summary()}
    m["wall_s"] = engine.acc.wall_s
    out = {k: float(m[k]) for k in KEYS}  # type: ignore[arg-type]
    if isinstance(policy, GuardedJobPolicy):
        out["delegated_share"] = policy.delegated / max(policy.decisions, 1)
        out["switches"] = float(policy.switches)
    return job_policy, placement, seed, out


def _mean(runs: dict[int, dict], key: str) -> float:
    return float(np.mean([m[key] for m in runs.values()]))


def _pick_placement(runs: dict[tuple[str, str], dict[int, dict]], jp: str) -> tuple[str, dict, dict]:
    """The placement rule above: least mean P99 on the validation seeds, ties within 1% to less traffic."""
    p99 = {p: _mean(runs[(jp, p)], "jct_p99_s") for p in PLACEMENTS}
    traffic = {p: _mean(runs[(jp, p)], "cross_node_traffic_gb") for p in PLACEMENTS}
    near = [p for p in PLACEMENTS if p99[p] <= (1 + PLACEMENT_TIE) * min(p99.values())]
    return min(near, key=lambda p: traffic[p]), p99, traffic


def _shift(source: JobSource, policy_spec: str, seeds: list[int]) -> dict[str, object]:
    """The workload's 30-arrival windows (arrival rate, mean job work) against the guard's training range."""
    policy = make_job_policy(policy_spec)
    if not isinstance(policy, GuardedJobPolicy):
        return {"guarded": False}
    b = policy.bounds
    rates, works = [], []
    for seed in seeds:
        _, arrivals = spark_tpcds_jobs(source.nodes, source.duration_s, source.load, seed)
        r, w = window_stats(np.array([a.arrival_s for a in arrivals]),
                            np.array([job_work(a.spec, source.config()) for a in arrivals]), b.window)
        rates.append(r)
        works.append(w)
    r, w = np.concatenate(rates), np.concatenate(works)
    pct = (5, 50, 95)
    return {"guarded": True, "window": b.window, "seeds": seeds,
            "training_rate_per_s": list(b.rate_per_s), "training_work_s": list(b.work_s),
            "workload_rate_per_s_p5_p50_p95": [float(x) for x in np.percentile(r, pct)],
            "workload_work_s_p5_p50_p95": [float(x) for x in np.percentile(w, pct)],
            "rate_x_training_high": float(np.median(r) / b.rate_per_s[1]),
            "work_x_training_low": float(np.median(w) / b.work_s[0])}


def learned_main(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    source = JobSource(scenario="spark-tpcds", nodes=args.nodes, duration_s=args.duration, load=args.load)
    tuned = json.loads(Path(args.heuristic_from).read_text())
    heur = (str(tuned["tuned"]["job_policy"]), str(tuned["tuned"]["placement"]))
    variants = {"bare": f"ppo:{args.learned}:fallback=none", "guarded": f"ppo:{args.learned}",
                f"guarded, fallback {heur[0]}": f"ppo:{args.learned}:fallback={heur[0]}"}
    val = list(range(VALIDATION_SEED, VALIDATION_SEED + args.val_seeds))
    test = list(range(args.seeds))
    with Pool(args.jobs) as pool:
        print("choosing each learned variant's placement on validation seeds", file=sys.stderr)
        vruns = _grid(pool, [(source, jp, p, s) for jp in variants.values() for p in PLACEMENTS for s in val],
                      _run_guarded)
        picks = {name: _pick_placement(vruns, jp) for name, jp in variants.items()}
        cols = {"default": DEFAULT, f"tuned heuristic ({heur[0]} + {heur[1]})": heur,
                **{f"learned {name} + {picks[name][0]}": (jp, picks[name][0]) for name, jp in variants.items()}}
        print(f"evaluating {list(cols.values())} on seeds 0..{args.seeds - 1}", file=sys.stderr)
        runs = _grid(pool, [(source, jp, pl, s) for jp, pl in cols.values() for s in test], _run_guarded)
    base = runs[DEFAULT]
    columns = {}
    for label, key in cols.items():
        r = runs[key]
        col = {"job_policy": key[0], "placement": key[1],
               **{k: mean_ci([r[s][k] for s in test]) for k in KEYS[:7]},
               "paired_ratio_to_default": {k: mean_ci([ratio_or_none(r[s][k], base[s][k]) for s in test])
                                           for k in KEYS[:7]}}
        if "delegated_share" in r[test[0]]:
            col["delegated_share"] = mean_ci([r[s]["delegated_share"] for s in test])
        columns[label] = col
    targets = {label: {"p99_le_0.69x_default": bool(c["paired_ratio_to_default"]["jct_p99_s"]["mean"] <= 0.69),
                       "cpu_util_not_lower": bool(c["paired_ratio_to_default"]["cluster_util"]["mean"] >= 1.0)}
               for label, c in columns.items() if label != "default"}
    result = {
        "bench": "spark_tpcds_table_learned",
        "workload": {"scenario": "spark-tpcds (with tasks)", "nodes": args.nodes, "duration_s": args.duration,
                     "load": args.load, "executors": source.config().executors},
        "policy": args.learned, "heuristic_from": args.heuristic_from,
        "placement_choice": {"validation_seeds": val, "rule": "least mean P99 JCT, within 1% the least traffic",
                             **{name: {"placement": pl, "p99_s": p99, "cross_node_gb": tr}
                                for name, (pl, p99, tr) in picks.items()},
                             "validation_delegated_share": {
                                 name: _mean({s: vruns[(jp, picks[name][0])][s] for s in val}, "delegated_share")
                                 for name, jp in variants.items() if name != "bare"}},
        "distribution_shift": _shift(source, variants["guarded"], val),
        "evaluation_seeds": test, "columns": columns, "targets": targets,
        "runs": {f"{jp}+{pl}": {str(s): m for s, m in sorted(r.items())} for (jp, pl), r in runs.items()},
        "wall_s": time.perf_counter() - t0, "machine": machine_info(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="evaluation seeds 0..N-1")
    ap.add_argument("--val-seeds", type=int, default=5, help="validation seeds 900..900+N-1 (tuning)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--out", help="default bench/results/spark_tpcds_table.json (_learned.json with --learned)")
    ap.add_argument("--learned", metavar="PATH", help="the learned job policy's policy.pt as the drlsched column")
    ap.add_argument("--heuristic-from", default="bench/results/spark_tpcds_table.json",
                    help="with --learned: the heuristic run's JSON, for its tuned job policy and placement")
    args = ap.parse_args()
    if args.learned is not None:
        for path in (args.learned, args.heuristic_from):
            if not Path(path).is_file():
                print(f"error: {path}: no such file", file=sys.stderr)
                return 2
        args.out = args.out or "bench/results/spark_tpcds_table_learned.json"
        return learned_main(args)
    args.out = args.out or "bench/results/spark_tpcds_table.json"
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
