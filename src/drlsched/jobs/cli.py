"""The job-level side of `drlsched simulate` and `drlsched evaluate`: `--scenario tpch` or `--trace DIR
--trace-format spark-profiles`, with `--job-policy` / `--job-policies`, `--batch N`, `--executor-idle-timeout`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from drlsched.cli_args import make_output_dir, positive_float, positive_int
from drlsched.cli_common import emit_json
from drlsched.errors import UserError
from drlsched.jobs import plots
from drlsched.jobs.metrics import JOB_METRIC_KEYS, NETWORK_KEYS
from drlsched.jobs.policies import JOB_POLICIES, make_job_policy
from drlsched.jobs.workload import DEFAULT_DURATION_S, DEFAULT_NODES, JobSource, check_source, run_jobs_full
from drlsched.metrics import null_warning
from drlsched.scenarios import SCENARIOS

JOB_SCENARIOS = ("tpch",)
JOB_TRACE_FORMATS = ("spark-profiles",)
TASK_SCENARIOS = ("spark-tpcds",)  # pod scenarios that are also job workloads when a job policy is given
ALIBABA = "alibaba-v2018"  # a pod trace that is also a job workload when a job policy is given
BASELINE = "fifo"


def add_job_arguments(p: argparse.ArgumentParser, many: bool) -> None:
    g = p.add_argument_group("job-level scheduling (--scenario tpch, --trace-format spark-profiles)")
    if many:
        g.add_argument("--job-policies", metavar="A,B", help=f"job policies to compare: {', '.join(JOB_POLICIES)} "
                       "(weighted-fair:ALPHA, fair:SHARE), ppo:DIR/policy.pt (drlsched train-jobs)")
    else:
        g.add_argument("--job-policy", metavar="NAME",
                       help=f"which job runs next and with how many executors: {', '.join(JOB_POLICIES)} "
                            "(weighted-fair:ALPHA, fair:SHARE), ppo:DIR/policy.pt (drlsched train-jobs); default "
                            "fifo")
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
    """tpch and spark-profiles always; alibaba-v2018 and spark-tpcds only with --job-policy/--job-policies (else
    their pods, as before)."""
    fmt = getattr(args, "trace_format", None)
    if (fmt == ALIBABA or args.scenario in TASK_SCENARIOS) and (getattr(args, "job_policy", None)
                                                                 or getattr(args, "job_policies", None)):
        return True
    return args.scenario in JOB_SCENARIOS or fmt in JOB_TRACE_FORMATS


def job_source(args: argparse.Namespace) -> JobSource:
    if args.scenario is not None and args.trace:
        raise UserError("give exactly one of --scenario NAME or --trace PATH (with --trace-format)")
    if args.scenario in TASK_SCENARIOS:  # the pod scenario's queries with tasks, on its nodes
        scenario = SCENARIOS[args.scenario]
        source = JobSource(scenario=args.scenario, nodes=args.nodes or scenario.default_nodes,
                           duration_s=args.duration or scenario.default_duration_s, load=args.load, batch=args.batch,
                           idle_timeout_s=args.executor_idle_timeout, nic_gbps=args.nic_gbps,
                           rack_oversubscription=args.rack_oversubscription)
        check_source(source)
        return source
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
    args.policy = args.policy or "k8s-default"  # without nodes (tpch) executor pods are slots: it moves nothing
    make_policy(args.policy)  # an unknown placement policy fails as it does elsewhere
    metrics, _ = run_jobs_full(source, args.job_policy, args.seed, args.policy)
    if args.json == "-":
        json.dump(metrics, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"{args.job_policy} + {args.policy} on {metrics['scenario']} (seed {args.seed}, "
          f"{metrics['executors']} executors, "
          f"{metrics['jobs']} jobs, {metrics['wall_s']:.2f} s wall, "
          f"{metrics['task_completions_per_s']:.0f} task completions/s)")
    print_metrics(metrics, metric_keys(source))
    warning = null_warning([metrics])
    if warning:
        print(warning, file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(metrics, indent=2) + "\n")
        print(f"metrics written to {args.json}")
    return 0



def print_metrics(metrics: dict[str, object], keys: tuple[str, ...]) -> None:
    for key in keys:
        value = metrics[key]
        shown = "n/a" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
        print(f"  {key:24s} {shown}")


REPLAY_KEYS = ("executor_start_p50_s", "executor_start_p99_s")


def replay(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    """`drlsched replay` on a job workload: the engine drives the tasks, `drlsched admit` the executors
    (jobs/replay.py)."""
    from drlsched.jobs.replay import replay_jobs
    from drlsched.k8s.objects import node_specs

    source = job_source(args)
    if source.placed:
        raise UserError(f"replay --job-policy runs the tpch and spark-profiles job workloads, not {source.name} "
                        "(its executors are placed by a placement policy)")
    policy = args.job_policy or "fifo"
    make_job_policy(policy)
    core = connect(args)
    nodes = node_specs(core)
    if not nodes:
        raise UserError("the cluster has no nodes")
    if args.nodes is None:  # the engine's pool and bandwidth are those of the cluster's nodes
        source = dataclasses.replace(source, nodes=len(nodes))
    cfg = source.config()
    arrivals = source.arrivals(args.seed)
    cpu_m, mem_mib = (arrivals[0].spec.executor_cpu_m, arrivals[0].spec.executor_mem_mib) if arrivals else (1, 1)
    fit = sum(min(n.cpu_m // cpu_m, n.mem_mib // mem_mib) for n in nodes)
    if fit < cfg.executors:
        print(f"drlsched: warning: the nodes fit {fit} executors, the workload's pool is {cfg.executors}: "
              "executor pods will wait for room", file=sys.stderr)
    show = not args.quiet and sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if show:
            print(f"\rreplay: {done}/{total} jobs finished", end="", file=sys.stderr, flush=True)

    result = replay_jobs(arrivals, cfg, policy, core, namespace=args.namespace, speedup=args.speedup,
                         horizon_s=args.horizon, pending_timeout_s=args.pending_timeout, seed=args.seed,
                         keep_pods=args.keep_pods, progress=progress)
    if show:
        print(file=sys.stderr)
    metrics: dict[str, object] = {"job_policy": policy, "scenario": source.name, "seed": args.seed,
                                  "nodes": source.nodes, "executors": cfg.executors, "jobs": len(arrivals),
                                  "load": source.load, "batch": source.batch, **result.metrics}
    warning = null_warning([metrics])
    if warning:
        print(warning, file=sys.stderr)
    if emit_json(args.json, metrics):
        return 0
    print(f"{policy} on {source.name} (replay, seed {args.seed}, {cfg.executors} executors, {len(arrivals)} jobs, "
          f"{metrics['wall_s']:.1f} s wall, speedup {args.speedup:g})")
    print_metrics(metrics, (*JOB_METRIC_KEYS[:-1], *REPLAY_KEYS))
    print(f"metrics written to {args.json}")
    return 0


def metric_keys(source: JobSource) -> tuple[str, ...]:
    """The keys a run on `source` reports: the job metrics, and the network's where executors are on nodes."""
    return (*JOB_METRIC_KEYS, *NETWORK_KEYS) if source.placed else JOB_METRIC_KEYS


def _one(task: tuple[JobSource, str, int, str, str]) -> tuple[dict[str, object], list[float]]:
    source, job_policy, seed, placement, label = task
    metrics, jct = run_jobs_full(source, job_policy, seed, placement)
    metrics["label"] = label
    return metrics, jct


def evaluate(args: argparse.Namespace) -> int:
    from drlsched.cli_common import parse_policies
    from drlsched.evaluate import ci_cell, mean_ci, ratio_or_none

    source = job_source(args)
    args.policies = args.policies or "k8s-default"  # without nodes (tpch) executor pods are slots: it moves nothing
    placements = parse_policies(args.policies)
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
    # Where executors are on nodes, each job policy under each placement policy is an entry of its own
    # (job+placement); elsewhere placement moves nothing and an entry is a job policy.
    pairs = ([(n, p, f"{n}+{p}") for n in names for p in placements] if source.placed
             else [(n, placements[0], n) for n in names])
    tasks = [(source, n, s, p, label) for n, p, label in pairs for s in seeds]
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(_one, tasks))
    else:
        results = [_one(t) for t in tasks]
    by = {(m["label"], m["seed"]): (m, jct) for m, jct in results}
    labels = [label for _, _, label in pairs]
    keys = metric_keys(source)
    summary = {n: {k: mean_ci([by[(n, s)][0][k] for s in seeds]) for k in keys} for n in labels}
    base = next((label for n, _, label in pairs if n == BASELINE), labels[0])
    ratio_keys = RATIO_KEYS + (("cluster_util", "cross_node_traffic_gb") if source.placed else ())
    ratios = {n: {k: mean_ci([ratio_or_none(by[(n, s)][0][k], by[(base, s)][0][k]) for s in seeds]) for k in ratio_keys}
              for n in labels if n != base}
    meta = {"workload": source.name, "seeds": seeds, "job_policies": names, "placement_policies": args.policies,
            "entries": labels,
            "nodes": source.nodes, "load": source.load, "batch": source.batch, "baseline": base,
            "wall_s": time.perf_counter() - t0}
    results_json = {"meta": meta, "policies": summary, f"ratio_vs_{base}": ratios,
                    "runs": [m for m, _ in results]}
    (out / "results.json").write_text(json.dumps(results_json, indent=2) + "\n")
    warning = null_warning([m for m, _ in results])
    if warning:
        print(warning, file=sys.stderr)
    columns = _COLUMNS + (NETWORK_COLUMNS if source.placed else ())
    table = _table(summary, labels, columns)
    plots.jct_cdf(out / "jct_cdf.png", {n: [by[(n, s)][1] for s in seeds] for n in labels})
    plots.metric_bars(out / "job_metrics.png", summary, labels, columns)
    heads = [_RATIO_TITLES.get(k, k) for k in ratio_keys]
    lines = [f"# drlsched evaluation: {source.name} (job policies)", "",
             f"{len(seeds)} paired seed(s) ({', '.join(map(str, seeds))}); means ± 95% CI half-widths.", "", table,
             "", f"Paired ratio to `{base}` (mean ± 95% CI):", "", "| Entry | " + " | ".join(heads) + " |",
             "|---|" + "---|" * len(heads)]
    for n, r in ratios.items():
        lines.append(f"| {n} | " + " | ".join(ci_cell(r[k], ".3f", ".3f") for k in ratio_keys) + " |")
    lines += ["", "Metric definitions: docs/simulator.md \"Jobs, stages and executors\".", "",
              "![jct_cdf](jct_cdf.png)", "", "![job_metrics](job_metrics.png)"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print(table)
    print(f"\n{len(results)} runs in {meta['wall_s']:.1f} s; results: {out / 'results.json'}, report: "
          f"{out / 'report.md'}")
    return 0


_COLUMNS = (("jct_mean_s", "mean JCT (s)"), ("jct_p50_s", "P50 JCT (s)"), ("jct_p99_s", "P99 JCT (s)"),
            ("jct_mean_small_s", "small (s)"), ("jct_mean_medium_s", "medium (s)"), ("jct_mean_large_s", "large (s)"),
            ("makespan_s", "makespan (s)"), ("executor_util", "executor util"), ("executor_starts", "executor starts"),
            ("cluster_util", "cluster util"))
NETWORK_COLUMNS = (("cross_node_traffic_gb", "cross-node (GB)"), ("cross_rack_traffic_gb", "cross-rack (GB)"),
                   ("network_wait_s", "network wait (s)"))
RATIO_KEYS = ("jct_mean_s", "jct_p50_s", "jct_p99_s")
_RATIO_TITLES = {"jct_mean_s": "mean JCT", "jct_p50_s": "P50 JCT", "jct_p99_s": "P99 JCT",
                 "cluster_util": "cluster util", "cross_node_traffic_gb": "cross-node traffic"}


def _table(summary: dict[str, dict[str, dict[str, float | None]]], names: list[str],
           columns: tuple[tuple[str, str], ...]) -> str:
    from drlsched.evaluate import ci_cell

    rows = ["| Entry | " + " | ".join(t for _, t in columns) + " |", "|---|" + "---|" * len(columns)]
    for n in names:
        cells = [ci_cell(summary[n][k], ".4g", ".2g") for k, _ in columns]
        rows.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
