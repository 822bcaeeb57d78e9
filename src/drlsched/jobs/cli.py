"""The job-level side of `drlsched simulate` and `drlsched evaluate`: `--scenario tpch` or `--trace DIR
--trace-format spark-profiles`, with `--job-policy` / `--job-policies`, `--batch N`, `--executor-idle-timeout`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from drlsched.cli_args import make_output_dir, positive_float, positive_int
from drlsched.errors import UserError
from drlsched.jobs.metrics import JOB_METRIC_KEYS
from drlsched.jobs.policies import JOB_POLICIES, make_job_policy
from drlsched.jobs.workload import DEFAULT_DURATION_S, DEFAULT_NODES, JobSource, check_source, run_jobs_full
from drlsched.metrics import null_warning

JOB_SCENARIOS = ("tpch",)
JOB_TRACE_FORMATS = ("spark-profiles",)
ALIBABA = "alibaba-v2018"  # a pod trace that is also a job workload when a job policy is given
BASELINE = "fifo"


def add_job_arguments(p: argparse.ArgumentParser, many: bool) -> None:
    g = p.add_argument_group("job-level scheduling (--scenario tpch, --trace-format spark-profiles)")
    if many:
        g.add_argument("--job-policies", metavar="A,B", help=f"job policies to compare: {', '.join(JOB_POLICIES)} "
                       "(weighted-fair:ALPHA, fair:SHARE)")
    else:
        g.add_argument("--job-policy", metavar="NAME",
                       help=f"which job runs next and with how many executors: {', '.join(JOB_POLICIES)} "
                            "(weighted-fair:ALPHA, fair:SHARE; default fifo)")
    g.add_argument("--batch", type=positive_int, metavar="N", help="N jobs all arriving at t=0 instead of Poisson")
    g.add_argument("--executor-idle-timeout", type=positive_float, default=60.0, metavar="SECONDS",
                   help="an idle executor leaves its job after this long (Spark's executorIdleTimeout, default 60)")


def extend_trace_formats(p: argparse.ArgumentParser) -> None:
    """--trace-format also takes the job formats (the pod trace readers stay as they are)."""
    for action in p._actions:
        if action.dest == "trace_format" and action.choices is not None:
            action.choices = (*action.choices, *JOB_TRACE_FORMATS)
            action.help = f"{action.help}, {', '.join(JOB_TRACE_FORMATS)}"


def is_job_workload(args: argparse.Namespace) -> bool:
    """tpch and spark-profiles always; alibaba-v2018 only with --job-policy/--job-policies (else its pods)."""
    fmt = getattr(args, "trace_format", None)
    if fmt == ALIBABA and (getattr(args, "job_policy", None) or getattr(args, "job_policies", None)):
        return True
    return args.scenario in JOB_SCENARIOS or fmt in JOB_TRACE_FORMATS


def job_source(args: argparse.Namespace) -> JobSource:
    if args.scenario is not None and args.trace:
        raise UserError("give exactly one of --scenario NAME or --trace PATH (with --trace-format)")
    alibaba = args.trace if getattr(args, "trace_format", None) == ALIBABA else None
    source = JobSource(profiles=args.trace if args.trace and alibaba is None else None, alibaba=alibaba,
                       nodes=args.nodes or DEFAULT_NODES,
                       duration_s=args.duration or DEFAULT_DURATION_S, load=args.load, batch=args.batch,
                       idle_timeout_s=args.executor_idle_timeout,
                       skip_bad_rows=bool(getattr(args, "skip_bad_rows", False)))
    check_source(source)
    return source


def simulate(args: argparse.Namespace) -> int:
    from drlsched.policies import make_policy

    source = job_source(args)
    args.job_policy = args.job_policy or "fifo"
    make_job_policy(args.job_policy)
    args.policy = args.policy or "k8s-default"  # executor pods are identical here: placement moves nothing
    make_policy(args.policy)  # an unknown placement policy fails as it does elsewhere
    metrics, _ = run_jobs_full(source, args.job_policy, args.seed)
    metrics["policy"] = args.policy  # placement: executor pods are identical here, so it does not move them
    if args.json == "-":
        json.dump(metrics, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"{args.job_policy} on {metrics['scenario']} (seed {args.seed}, {metrics['executors']} executors, "
          f"{metrics['jobs']} jobs, {metrics['wall_s']:.2f} s wall, "
          f"{metrics['task_completions_per_s']:.0f} task completions/s)")
    for key in JOB_METRIC_KEYS:
        value = metrics[key]
        shown = "n/a" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
        print(f"  {key:24s} {shown}")
    warning = null_warning([metrics])
    if warning:
        print(warning, file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(metrics, indent=2) + "\n")
        print(f"metrics written to {args.json}")
    return 0


def _ratio(value: object, base: object) -> float | None:
    """A paired ratio; missing (None) where either run has no value or the baseline's is 0."""
    if value is None or base is None or not float(base):  # type: ignore[arg-type]
        return None
    return float(value) / float(base)  # type: ignore[arg-type]


def _one(task: tuple[JobSource, str, int]) -> tuple[dict[str, object], list[float]]:
    return run_jobs_full(*task)


def evaluate(args: argparse.Namespace) -> int:
    from drlsched.cli_common import parse_policies
    from drlsched.evaluate import mean_ci

    source = job_source(args)
    args.policies = args.policies or "k8s-default"  # executor pods are identical here: placement moves nothing
    parse_policies(args.policies)
    if not args.job_policies:
        raise UserError("a job workload needs --job-policies A,B (e.g. fifo,fair,weighted-fair:-1)")
    names = [x.strip() for x in args.job_policies.split(",")]
    if len(set(names)) != len(names) or not all(names):
        raise UserError(f"--job-policies: empty or repeated name in {args.job_policies!r}")
    for n in names:
        make_job_policy(n)
    seeds = [args.seed + i for i in range(args.seeds)]
    out = make_output_dir(args.out)
    t0 = time.perf_counter()
    tasks = [(source, n, s) for n in names for s in seeds]
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(_one, tasks))
    else:
        results = [_one(t) for t in tasks]
    by = {(m["job_policy"], m["seed"]): (m, jct) for m, jct in results}
    summary = {n: {k: mean_ci([by[(n, s)][0][k] for s in seeds]) for k in JOB_METRIC_KEYS} for n in names}
    base = names[0] if BASELINE not in names else BASELINE
    ratios = {n: {k: mean_ci([_ratio(by[(n, s)][0][k], by[(base, s)][0][k]) for s in seeds])
                  for k in ("jct_mean_s", "jct_p50_s", "jct_p99_s")}
              for n in names if n != base}
    meta = {"workload": source.name, "seeds": seeds, "job_policies": names, "placement_policies": args.policies,
            "nodes": source.nodes, "load": source.load, "batch": source.batch, "baseline": base,
            "wall_s": time.perf_counter() - t0}
    results_json = {"meta": meta, "policies": summary, f"ratio_vs_{base}": ratios,
                    "runs": [m for m, _ in results]}
    (out / "results.json").write_text(json.dumps(results_json, indent=2) + "\n")
    warning = null_warning([m for m, _ in results])
    if warning:
        print(warning, file=sys.stderr)
    table = _table(summary, names)
    _cdf(out, names, seeds, by)
    lines = [f"# drlsched evaluation: {source.name} (job policies)", "",
             f"{len(seeds)} paired seed(s) ({', '.join(map(str, seeds))}); means ± 95% CI half-widths.", "", table,
             "", f"Paired ratio to `{base}` (mean ± 95% CI):", "", "| Job policy | mean JCT | P50 JCT | P99 JCT |",
             "|---|---|---|---|"]
    for n, r in ratios.items():
        lines.append(f"| {n} | " + " | ".join(_cell(r[k], ".3f", ".3f")
                                              for k in ("jct_mean_s", "jct_p50_s", "jct_p99_s")) + " |")
    lines += ["", "Metric definitions: docs/simulator.md \"Jobs, stages and executors\".", "",
              "![jct_cdf](jct_cdf.png)"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print(table)
    print(f"\n{len(results)} runs in {meta['wall_s']:.1f} s; results: {out / 'results.json'}, report: "
          f"{out / 'report.md'}")
    return 0


_COLUMNS = (("jct_mean_s", "mean JCT (s)"), ("jct_p50_s", "P50 JCT (s)"), ("jct_p99_s", "P99 JCT (s)"),
            ("jct_mean_small_s", "small (s)"), ("jct_mean_medium_s", "medium (s)"), ("jct_mean_large_s", "large (s)"),
            ("makespan_s", "makespan (s)"), ("executor_util", "executor util"), ("executor_starts", "executor starts"))


def _cell(stat: dict[str, float | None], mean_fmt: str, ci_fmt: str) -> str:
    mean, ci = stat["mean"], stat["ci95"]
    return "n/a" if mean is None or ci is None else f"{mean:{mean_fmt}} ± {ci:{ci_fmt}}"


def _table(summary: dict[str, dict[str, dict[str, float]]], names: list[str]) -> str:
    rows = ["| Job policy | " + " | ".join(t for _, t in _COLUMNS) + " |", "|---|" + "---|" * len(_COLUMNS)]
    for n in names:
        cells = [_cell(summary[n][k], ".4g", ".2g") for k, _ in _COLUMNS]
        rows.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _cdf(out: Path, names: list[str], seeds: list[int], by: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for n in names:
        jct = np.sort(np.concatenate([np.asarray(by[(n, s)][1], dtype=float) for s in seeds]))
        if jct.size:
            ax.plot(jct, np.arange(1, jct.size + 1) / jct.size, label=n, linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("CDF")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "jct_cdf.png", dpi=110)
    plt.close(fig)
