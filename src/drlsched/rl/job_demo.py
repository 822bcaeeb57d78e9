"""The demo's comparison (scripts/demo): a trained job policy against `fifo` and the best tuned job heuristic on
held-out `tpch` seeds (mean, P50 and P99 JCT with paired ratios), the seed's table on `spark-tpcds` with tasks
(default `fifo` + `k8s-default` against drlsched), and a JCT CDF plot. Writes DIR/results.json, DIR/report.md and
DIR/jct_cdf.png; prints both tables.

The heuristics and placements are the ones chosen on validation seeds by the benches (never on the seeds run
here, which start at 0): `weighted-fair:-2` on tpch (bench/results/job_policy_lever.json), `fifo` + `data-local`
on spark-tpcds (bench/results/spark_tpcds_table.json), and for the learned policy there its guard with `fifo` as
the fallback on `k8s-default` (bench/results/spark_tpcds_table_learned.json: spark-tpcds arrives far faster than
the training range, so the guard delegates most decisions).
Usage: python -m drlsched.rl.job_demo --policy DIR/policy.pt --out DIR [--seeds 5] [--spark-seeds 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from drlsched.cli_args import positive_float, positive_int
from drlsched.errors import UserError
from drlsched.evaluate import mean_ci, ratio_or_none
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.workload import JobSource, run_jobs_full

HEURISTIC = "weighted-fair:-2"
TPCH_KEYS = (("mean JCT (s)", "jct_mean_s"), ("P50 JCT (s)", "jct_p50_s"), ("P99 JCT (s)", "jct_p99_s"))
SPARK_ROWS = (("P99 JCT (s)", "jct_p99_s"), ("CPU utilisation", "cluster_util"),
              ("cross-node traffic (GB)", "cross_node_traffic_gb"))
Tick = Callable[[], None]


def _summarise(runs: dict[str, list[dict[str, Any]]], keys: tuple[tuple[str, str], ...],
               bases: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Per column: mean ± 95% CI of each key over the seeds, and the paired per-seed ratio to each base column."""
    out: dict[str, dict[str, Any]] = {}
    for name, ms in runs.items():
        col: dict[str, Any] = {k: mean_ci([m[k] for m in ms]) for _, k in keys}
        for label, base in bases.items():
            col[f"ratio_to_{label}"] = {k: mean_ci([ratio_or_none(m[k], b[k]) for m, b in zip(ms, runs[base],
                                                                                            strict=True)])
                                        for _, k in keys}
        out[name] = col
    return out


def compare_tpch(policy: str, source: JobSource, seeds: list[int], tick: Tick
                 ) -> tuple[dict[str, dict[str, Any]], dict[str, list[float]]]:
    """fifo, the tuned heuristic and `policy` on the same seeds: the summary and every finished job's JCT."""
    names = {"fifo": "fifo", HEURISTIC: HEURISTIC, "learned": policy}
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    jcts: dict[str, list[float]] = {n: [] for n in names}
    for seed in seeds:
        for name, spec in names.items():
            m, jct = run_jobs_full(source, spec, seed)
            runs[name].append(m)
            jcts[name].extend(jct)
            tick()
    return _summarise(runs, TPCH_KEYS, {"fifo": "fifo", "heuristic": HEURISTIC}), jcts


def seed_table(policy: str, source: JobSource, seeds: list[int], tick: Tick) -> dict[str, dict[str, Any]]:
    """The seed's table: default, the tuned heuristic and drlsched on spark-tpcds, with ratios to the default."""
    columns = {"default (fifo + k8s-default)": ("fifo", "k8s-default"),
               "tuned heuristic (fifo + data-local)": ("fifo", "data-local"),
               "drlsched (learned, guarded -> fifo; k8s-default)": (f"{policy}:fallback=fifo", "k8s-default")}
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in columns}
    for seed in seeds:
        for name, (job, placement) in columns.items():
            runs[name].append(run_jobs_full(source, job, seed, placement)[0])
            tick()
    return _summarise(runs, SPARK_ROWS, {"default": "default (fifo + k8s-default)"})


def _cell(stat: dict[str, Any], ratio: dict[str, Any] | None = None, digits: int | None = None) -> str:
    if stat["mean"] is None:
        return "n/a"
    if digits is None:
        digits = 3 if abs(stat["mean"]) < 10 else 0
    text = f"{stat['mean']:.{digits}f} ± {stat['ci95']:.{digits}f}"
    if ratio is not None and ratio["mean"] is not None:
        text += f" (×{ratio['mean']:.3f} ± {ratio['ci95']:.3f})"
    return text


def tpch_table(summary: dict[str, dict[str, Any]]) -> str:
    names = list(summary)
    rows = ["| tpch, held-out seeds | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, key in TPCH_KEYS:
        rows.append(f"| {label} | " + " | ".join(_cell(summary[n][key]) for n in names) + " |")
    for base in ("fifo", "heuristic"):
        for label, key in TPCH_KEYS:
            rows.append(f"| {label}, × {base if base == 'fifo' else HEURISTIC} (paired) | "
                        + " | ".join(_cell(summary[n][f"ratio_to_{base}"][key], digits=3) for n in names) + " |")
    return "\n".join(rows)


def spark_table(table: dict[str, dict[str, Any]]) -> str:
    names = list(table)
    rows = ["| spark-tpcds (× default, paired) | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, key in SPARK_ROWS:
        rows.append(f"| {label} | " + " | ".join(_cell(table[n][key], table[n]["ratio_to_default"][key])
                                                for n in names) + " |")
    return "\n".join(rows)


def cdf_plot(jcts: dict[str, list[float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, values in jcts.items():
        xs = np.sort(np.asarray(values))
        ax.step(xs, np.arange(1, xs.size + 1) / max(xs.size, 1), where="post", label=f"{name} ({xs.size} jobs)")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("tpch, held-out seeds: JCT CDF")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    ap = argparse.ArgumentParser(prog="python -m drlsched.rl.job_demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", required=True, metavar="PATH", help="a train-jobs checkpoint (DIR/policy.pt)")
    ap.add_argument("--out", required=True, metavar="DIR")
    ap.add_argument("--seeds", type=positive_int, default=5, help="held-out tpch seeds 0.. (default 5)")
    ap.add_argument("--spark-seeds", type=positive_int, default=3, help="held-out spark-tpcds seeds 0.. (default 3)")
    ap.add_argument("--nodes", type=positive_int, default=25, help="tpch cluster (default 25, as trained)")
    ap.add_argument("--load", type=positive_float, default=0.85, help="tpch offered load (default 0.85)")
    ap.add_argument("--duration", type=positive_float, default=21600.0, help="tpch arrival window, s")
    ap.add_argument("--spark-duration", type=positive_float, default=1800.0, help="spark-tpcds window, s")
    args = ap.parse_args(argv)
    # The guard's every switch is a warning (drlsched.jobs); here they would bury the bar and the tables.
    logging.getLogger("drlsched.jobs").setLevel(logging.ERROR)
    policy = f"ppo:{args.policy}"
    out = Path(args.out)
    try:
        make_job_policy(policy)  # a missing or wrong checkpoint fails here, before any run
        out.mkdir(parents=True, exist_ok=True)
        tpch = JobSource(nodes=args.nodes, duration_s=args.duration, load=args.load)
        spark = JobSource(scenario="spark-tpcds", nodes=20, duration_s=args.spark_duration, load=1.0)
        with tqdm(total=3 * (args.seeds + args.spark_seeds), desc="comparing", unit="run", file=sys.stderr) as bar:
            summary, jcts = compare_tpch(policy, tpch, list(range(args.seeds)), lambda: bar.update(1))
            table = seed_table(policy, spark, list(range(args.spark_seeds)), lambda: bar.update(1))
        cdf_plot(jcts, out / "jct_cdf.png")
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: cannot write to {out}: {err.strerror}", file=sys.stderr)
        return 2
    results = {"policy": args.policy, "tpch": {"nodes": args.nodes, "load": args.load, "duration_s": args.duration,
                                               "seeds": list(range(args.seeds)), "columns": summary},
               "spark_tpcds": {"nodes": 20, "load": 1.0, "duration_s": args.spark_duration,
                               "seeds": list(range(args.spark_seeds)), "columns": table}}
    text = (f"## Which job runs next: tpch, {args.nodes} nodes, load {args.load:g}, held-out seeds 0-{args.seeds - 1}"
            f"\n\n{tpch_table(summary)}\n\n## The seed's table: spark-tpcds with tasks, 20 nodes, held-out seeds "
            f"0-{args.spark_seeds - 1}\n\n{spark_table(table)}\n")
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "report.md").write_text(f"# drlsched demo: the learned job scheduler\n\n{text}\n![JCT CDF](jct_cdf.png)\n")
    print(text)
    print(f"results: {out / 'results.json'}, report: {out / 'report.md'}, plot: {out / 'jct_cdf.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
