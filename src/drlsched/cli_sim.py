"""`drlsched simulate` and `drlsched evaluate`: run policies on scenarios or traces, print and save metrics."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from drlsched.autoscale.cli_simulate import add_scaler_arguments, cmd_scaled, wants_scaler
from drlsched.cli_args import make_output_dir, non_negative_int, positive_int
from drlsched.cli_common import (
    add_workload_arguments,
    fmt,
    parse_policies,
    progress_bar,
    sim_config,
    workload_source,
    write_json,
)
from drlsched.distributed import add_backend_arguments, check_backend_arguments, load_ray_backend
from drlsched.errors import UserError
from drlsched.evaluate import RunSpec, aggregate, default_jobs, paired_ratios, run_all, to_jsonable
from drlsched.jobs import cli as jobs_cli
from drlsched.metrics import (
    ANOMALY_KEYS,
    COLOCATION_KEYS,
    METRIC_KEYS,
    NULLABLE_KEYS,
    has_metric,
    metric_value,
    null_warning,
)
from drlsched.policies import BASELINES, make_policy
from drlsched.report import BASELINE, table_markdown, write_plots, write_report
from drlsched.simulator import Simulator

MAX_SEEDS = 1000


def cmd_simulate(args: argparse.Namespace) -> int:
    if wants_scaler(args):  # one service under a replica scaler: the autoscale driver (docs/autoscaling.md)
        return cmd_scaled(args)
    if jobs_cli.is_job_workload(args):
        return jobs_cli.simulate(args)
    if not args.policy:
        raise UserError("--policy is required (or --scaler to scale a service)")
    factory = workload_source(args)
    config = sim_config(args)
    policy = make_policy(args.policy)
    workload = factory(args.seed)
    show = not args.quiet and sys.stderr.isatty()
    bar, update = progress_bar(show, f"{args.policy} on {workload.name}")
    try:
        metrics = to_jsonable(Simulator(workload, policy, args.seed, config, update).run())
    finally:
        if bar is not None:
            bar.close()
    assert isinstance(metrics, dict)
    warning = null_warning([metrics])
    if warning:
        print(warning, file=sys.stderr)
    if args.json == "-":
        json.dump(metrics, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"{metrics['policy']} on {metrics['scenario']} (seed {metrics['seed']}, {metrics['nodes']} nodes, "
              f"{metrics['pods']} pods, {metrics['wall_s']:.2f} s wall, "
              f"{metrics['placements_per_s']:.0f} placements/s)")
        for key in (*METRIC_KEYS, *ANOMALY_KEYS, *COLOCATION_KEYS):
            print(f"  {key:32s} {fmt(metric_value(metrics, key))}")
        for example in metrics.get("unschedulable_examples", []):
            print(f"  unschedulable: {example}")
        if args.json:
            write_json(Path(args.json), metrics)
            print(f"metrics written to {args.json}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    if wants_scaler(args):  # replica scalers on one service (docs/autoscaling.md "evaluate")
        from drlsched.autoscale.evaluate import evaluate as evaluate_scalers

        return evaluate_scalers(args)
    if jobs_cli.is_job_workload(args):
        return jobs_cli.evaluate(args)
    if not args.policies:
        raise UserError("--policies is required")
    factory = workload_source(args)
    check_backend_arguments(args)
    backend = load_ray_backend() if args.backend == "ray" else None  # a missing Ray fails before any work
    policies = parse_policies(args.policies)
    if args.seeds > MAX_SEEDS:
        raise UserError(f"--seeds must be at most {MAX_SEEDS}, got {args.seeds}")
    seeds = [args.seed + i for i in range(args.seeds)]
    out = make_output_dir(args.out)
    factory(seeds[0]).validate_nodes()  # bad workload options fail before spawning workers
    includes = [_load_result(Path(p)) for p in args.include or []]
    models = list(args.reclaim)
    configs = {m: sim_config(args, m) for m in models}  # bad reclaim settings fail before any run
    if len(models) > 1:  # each policy under each reclaim model is an entry of its own: policy@model
        specs = [RunSpec(p, s, factory, configs[m], f"{p}@{m}") for s in seeds for m in models for p in policies]
        policies = [f"{p}@{m}" for m in models for p in policies]
        baseline = f"{BASELINE}@{models[0]}"
    else:
        specs = [RunSpec(p, s, factory, configs[models[0]]) for s in seeds for p in policies]
        baseline = BASELINE
    t0 = time.perf_counter()
    show = not args.quiet
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=len(specs), desc="evaluate", unit="run", file=sys.stderr)
    try:
        on_done = (lambda _s: bar.update(1)) if bar is not None else None
        if backend is None:
            runs = run_all(specs, args.jobs, on_done)
        else:
            with backend.session(args.address, num_cpus=args.jobs):
                runs = backend.run_all(specs, on_done)
    finally:
        if bar is not None:
            bar.close()
    for included in includes:
        runs.append({"metrics": included, "series": [], "jct": []})
        if included["policy"] not in policies:
            policies.append(str(included["policy"]))
    warning = null_warning([r["metrics"] for r in runs])  # type: ignore[misc]
    if warning:
        print(warning, file=sys.stderr)
    summary = aggregate(runs, policies)
    workload_name = str(runs[0]["metrics"]["scenario"]) if runs else ""  # type: ignore[index]
    meta = {"workload": workload_name, "seeds": len(seeds), "seed_list": ", ".join(map(str, seeds)),
            "policies": policies, "wall_s": time.perf_counter() - t0, "nodes": args.nodes,
            "duration": args.duration, "load": args.load, "reclaim": ",".join(models), "baseline": baseline}
    results: dict[str, object] = {"meta": meta, "policies": summary}
    if baseline in policies:
        results[f"ratio_vs_{baseline}"] = paired_ratios(runs, policies, baseline)
    results["runs"] = [r["metrics"] for r in runs]
    write_json(out / "results.json", to_jsonable(results))
    plots = write_plots(out, runs, policies)
    ratios = results.get(f"ratio_vs_{baseline}")
    report = write_report(out, summary, policies, meta, plots, ratios, baseline)  # type: ignore[arg-type]
    print(table_markdown(summary, policies, baseline))
    print(f"\n{len(runs)} runs in {meta['wall_s']:.1f} s; results: {out / 'results.json'}, report: {report}")
    return 0


def _load_result(path: Path) -> dict[str, object]:
    """A metrics JSON from `simulate --json` or `replay --json`, checked before it joins a report."""
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{path} is not JSON: {err.msg} at line {err.lineno}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a metrics object, got {type(data).__name__}")
    keys = (*METRIC_KEYS, *ANOMALY_KEYS)
    missing = [k for k in (*keys, "policy", "seed", "scenario", "wall_s", "placements_per_s")
               if not has_metric(data, k)]
    if "anomalies" not in data:  # one name for the whole group, not its six parts
        missing = [k for k in missing if k not in ANOMALY_KEYS] + ["anomalies"]
    if missing:
        old = " (written before these keys existed? run simulate or replay again)" if set(missing) <= {
            "anomaly_rate", "anomalies"} else ""
        raise UserError(f"{path}: not a drlsched metrics file (missing {', '.join(missing)}){old}")
    # null: a statistic over an empty sample (NULLABLE_KEYS), or a part a replay cannot observe; missing, not 0
    bad = [k for k in keys if not _number_or_null(metric_value(data, k), k in NULLABLE_KEYS or k in ANOMALY_KEYS)]
    if bad:
        raise UserError(f"{path}: non-numeric {', '.join(bad)}")
    return data


def _number_or_null(value: object, nullable: bool) -> bool:
    if value is None:
        return nullable
    return isinstance(value, int | float) and not isinstance(value, bool)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("simulate", help="run one policy on a scenario or trace and print its metrics",
                       description="Run one policy on a scenario or trace; print a summary and write metrics "
                                   "JSON.")
    add_workload_arguments(p)
    p.add_argument("--policy", metavar="NAME", help=f"one of: {', '.join(BASELINES)} (required without --scaler)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    p.add_argument("--json", metavar="FILE|-", help="write the metrics JSON to FILE, or to stdout with -")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    jobs_cli.add_job_arguments(p, many=False)
    jobs_cli.extend_trace_formats(p)
    add_scaler_arguments(p)
    p.set_defaults(func=cmd_simulate)

    e = sub.add_parser("evaluate", help="compare policies on the same workloads over paired seeds",
                       description="Run every policy on the same workloads (paired seeds); write results.json, "
                                   "report.md and plots to --out.")
    add_workload_arguments(e)
    e.add_argument("--policies", metavar="A,B,C",
                   help="comma-separated policy names (required but on job workloads, where placement moves nothing)")
    e.add_argument("--seeds", type=positive_int, default=3, help="number of seeds (default 3)")
    e.add_argument("--seed", type=non_negative_int, default=0, help="first seed (default 0)")
    e.add_argument("--out", required=True, metavar="DIR", help="output directory")
    e.add_argument("--jobs", type=positive_int, default=default_jobs(),
                   help="parallel worker processes (default: up to 2); with --backend ray and no --address, the "
                        "CPUs of the local Ray")
    e.add_argument("--include", nargs="+", metavar="FILE",
                   help="metrics JSON files from `replay --json` (or `simulate --json`) to report beside the runs")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    add_backend_arguments(e)
    jobs_cli.add_job_arguments(e, many=True)
    jobs_cli.extend_trace_formats(e)
    add_scaler_arguments(e, many=True)
    e.set_defaults(func=cmd_evaluate)
