"""`drlsched evaluate --scalers A,B ...`: replica scalers on the same loads (paired seeds of the flash-sale scenario,
or one --load-trace under every seed's start-up draws), aggregated as mean ± 95% CI, with the paired ratio of each
scaler's replica-hours and violation minutes to the first scaler, and two plots: replicas and load over time for
each scaler (the first seed), and SLA violation against replica-hours (docs/autoscaling.md "evaluate")."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from drlsched.autoscale.cli_simulate import check_scaled_arguments, scaled_inputs
from drlsched.autoscale.driver import LEARNED_PREFIX, SCALERS, Driver
from drlsched.cli_args import make_output_dir
from drlsched.errors import UserError
from drlsched.evaluate import ci_cell, mean_ci, ratio_or_none, to_jsonable
from drlsched.metrics import null_warning

SCALER_KEYS = ("sla_violation_rate", "violation_minutes", "slowdown_p99_burst", "replica_hours", "node_hours",
               "overprovision_ratio", "scale_actions", "time_to_scale_p50_s")
RATIO_KEYS = ("replica_hours", "violation_minutes", "sla_violation_rate")
_OVERRIDES = {"target": ("target_utilization", int), "fraction": ("overprovision_fraction", float),
              "lead": ("lead_s", float)}


def parse_scaler(text: str) -> tuple[str, dict[str, Any]]:
    """`NAME[:key=value...]` (keys target, fraction, lead) as the scaler's name and DriverConfig overrides;
    `ppo:PATH` as it is."""
    if text.strip().startswith(LEARNED_PREFIX):  # ppo:PATH (a path may hold colons; no overrides)
        return text.strip(), {}
    name, *parts = text.strip().split(":")
    if name not in SCALERS:
        raise UserError(f"--scalers: unknown scaler {name!r}; choose from {', '.join(SCALERS)} or "
                        f"{LEARNED_PREFIX}PATH")
    overrides: dict[str, Any] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or key not in _OVERRIDES:
            raise UserError(f"--scalers: {text!r}: expected NAME:key=value with key one of {', '.join(_OVERRIDES)}")
        field, kind = _OVERRIDES[key]
        try:
            overrides[field] = kind(value)
        except ValueError:
            raise UserError(f"--scalers: {text!r}: {key} must be a{'n integer' if kind is int else ' number'}, "
                            f"got {value!r}") from None
    return name, overrides


def _run(task: tuple[argparse.Namespace, str, dict[str, Any], int, str]) -> dict[str, Any]:
    args, name, overrides, seed, label = task
    spec, curve, config = scaled_inputs(args, name, seed)
    config = dataclasses.replace(config, **overrides)
    config.validate()
    result = Driver(spec, curve, config, seed).run()
    series = {k: np.asarray(v).tolist() for k, v in result.series.items()}
    return {"metrics": {**result.metrics, "scaler": label, "seed": seed}, "series": series}


def evaluate(args: argparse.Namespace) -> int:
    labels = [x.strip() for x in (args.scalers or "").split(",")]
    if not args.scalers or not all(labels) or len(set(labels)) != len(labels):
        raise UserError(f"--scalers: give distinct comma-separated scalers, got {args.scalers!r}")
    parsed = [parse_scaler(x) for x in labels]
    placements = [x.strip() for x in (args.policies or "k8s-default").split(",")]
    if len(placements) != 1:
        raise UserError("with --scalers, --policies takes one placement policy (the replicas' placement)")
    args.policy = placements[0]
    check_scaled_arguments(args)
    seeds = [args.seed + i for i in range(args.seeds)]
    for name, overrides in parsed:  # bad settings fail before any run
        _, _, config = scaled_inputs(args, name, seeds[0])
        dataclasses.replace(config, **overrides).validate()
    out = make_output_dir(args.out)
    tasks = [(args, name, overrides, seed, label)
             for (name, overrides), label in zip(parsed, labels, strict=True) for seed in seeds]
    t0 = time.perf_counter()
    runs = _run_all(tasks, args.jobs, not args.quiet)
    by = {(r["metrics"]["scaler"], r["metrics"]["seed"]): r for r in runs}
    summary = {lab: {k: mean_ci([_num(by[(lab, s)]["metrics"].get(k)) for s in seeds]) for k in SCALER_KEYS}
               for lab in labels}
    base = labels[0]
    ratios = {lab: {k: mean_ci([ratio_or_none(by[(lab, s)]["metrics"].get(k), by[(base, s)]["metrics"].get(k))
                                for s in seeds]) for k in RATIO_KEYS}
              for lab in labels[1:]}
    meta = {"workload": args.scenario or args.load_trace, "seeds": seeds, "scalers": labels,
            "placement_policy": args.policy, "node_autoscaler": args.node_autoscaler, "nodes": args.nodes,
            "duration": args.duration, "baseline": base, "wall_s": time.perf_counter() - t0}
    results = {"meta": meta, "scalers": summary, f"ratio_vs_{base}": ratios, "runs": [r["metrics"] for r in runs]}
    (out / "results.json").write_text(json.dumps(to_jsonable(results), indent=2) + "\n")
    warning = null_warning([r["metrics"] for r in runs])
    if warning:
        print(warning, file=sys.stderr)
    _plot_replicas(out / "replicas.png", labels, [by[(lab, seeds[0])]["series"] for lab in labels], seeds[0])
    _plot_cost(out / "cost_violation.png", labels, summary)
    table = _table(summary, labels)
    lines = [f"# drlsched evaluation: {meta['workload']} (replica scalers)", "",
             f"{len(seeds)} paired seed(s) ({', '.join(map(str, seeds))}); node autoscaler {args.node_autoscaler}; "
             "means ± 95% CI half-widths.", "", table, "", f"Paired ratio to `{base}` (mean ± 95% CI):", "",
             "| Scaler | replica-hours | violation minutes | SLA violation |", "|---|---|---|---|"]
    for lab, r in ratios.items():
        lines.append(f"| {lab} | " + " | ".join(ci_cell(r[k], ".3f", ".3f") for k in RATIO_KEYS) + " |")
    lines += ["", "Metric definitions: docs/autoscaling.md \"Metrics\".", "",
              f"![replicas](replicas.png)  (seed {seeds[0]})", "", "![cost_violation](cost_violation.png)"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print(table)
    print(f"\n{len(runs)} runs in {meta['wall_s']:.1f} s; results: {out / 'results.json'}, report: "
          f"{out / 'report.md'}")
    return 0


def _run_all(tasks: list[tuple[argparse.Namespace, str, dict[str, Any], int, str]], jobs: int,
             show: bool) -> list[dict[str, Any]]:
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc="evaluate", unit="run", file=sys.stderr)
    try:
        if jobs > 1:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                runs = []
                for r in pool.map(_run, tasks):
                    runs.append(r)
                    if bar is not None:
                        bar.update(1)
                return runs
        runs = []
        for t in tasks:
            runs.append(_run(t))
            if bar is not None:
                bar.update(1)
        return runs
    finally:
        if bar is not None:
            bar.close()


def _num(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]



_COLUMNS = (("sla_violation_rate", "SLA violation"), ("violation_minutes", "violation min"),
            ("slowdown_p99_burst", "P99 slowdown (burst)"), ("replica_hours", "replica-hours"),
            ("node_hours", "node-hours"), ("overprovision_ratio", "overprovision"),
            ("scale_actions", "scale actions"), ("time_to_scale_p50_s", "time to scale P50 (s)"))



def _table(summary: dict[str, dict[str, dict[str, float | None]]], labels: list[str]) -> str:
    rows = ["| Scaler | " + " | ".join(t for _, t in _COLUMNS) + " |", "|---|" + "---|" * len(_COLUMNS)]
    for lab in labels:
        rows.append(f"| {lab} | " + " | ".join(ci_cell(summary[lab][k], ".4g", ".2g") for k, _ in _COLUMNS) + " |")
    return "\n".join(rows)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_replicas(path: Path, labels: list[str], series: list[dict[str, list[float]]], seed: int) -> None:
    """Ready replicas of each scaler over time, with the replicas the load needed and the load itself."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    hours = np.asarray(series[0]["minute"]) / 60.0
    ax.plot(hours, series[0]["needed"], color="black", linestyle="--", linewidth=1, label="needed by the load")
    for lab, s in zip(labels, series, strict=True):
        ax.plot(np.asarray(s["minute"]) / 60.0, s["ready"], linewidth=1, label=f"{lab} (ready)")
    ax.set_xlabel("hour")
    ax.set_ylabel("replicas")
    load = ax.twinx()
    load.fill_between(hours, series[0]["rate_rps"], color="grey", alpha=0.15, linewidth=0)
    load.set_ylabel("requests per second (shaded)")
    ax.set_zorder(load.get_zorder() + 1)
    ax.patch.set_visible(False)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(f"replicas against load, seed {seed}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_cost(path: Path, labels: list[str], summary: dict[str, dict[str, dict[str, float | None]]]) -> None:
    """SLA violation against replica-hours, one point per scaler with its 95% CIs."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for lab in labels:
        cost, bad = summary[lab]["replica_hours"], summary[lab]["sla_violation_rate"]
        if cost["mean"] is None or bad["mean"] is None:
            continue
        ax.errorbar(cost["mean"], 100.0 * bad["mean"], xerr=cost["ci95"], yerr=100.0 * (bad["ci95"] or 0.0),
                    fmt="o", capsize=3, label=lab)
    ax.set_xlabel("replica-hours")
    ax.set_ylabel("requests violating the SLA (%)")
    ax.set_title("violation against cost")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
