"""The comparison table (the seed article's shape) and plots of an evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from drlsched.metrics import ANOMALY_KEYS, ANOMALY_PARTS, COLOCATION_KEYS, SERIES_KEYS

BASELINE = "k8s-default"
# (metric key, column title, format of the mean, scale for display)
TABLE_COLUMNS = [
    ("jct_p99_s", "P99 JCT (s)", "{:.1f}", 1.0),
    ("cpu_util", "CPU util (%)", "{:.1f}", 100.0),
    ("cross_node_traffic_gb", "Cross-node traffic (GB)", "{:.2f}", 1.0),
    ("sla_violation_rate", "SLA violation (%)", "{:.2f}", 100.0),
    ("migrations", "Migrations", "{:.0f}", 1.0),
    ("gpu_fragmentation", "GPU frag. (%)", "{:.1f}", 100.0),
    ("anomaly_rate", "Anomaly rate (%)", "{:.2f}", 100.0),
]
NA = "n/a"  # a metric whose sample was empty in every run (null in JSON): missing, not zero


def _mean(entry: dict, key: str, fmt: str, scale: float = 1.0) -> str:
    """The formatted mean of one metric of a policy's summary, "n/a" when it has no value."""
    stat = entry.get(key)
    if not stat or not stat["n"]:
        return NA
    return fmt.format(stat["mean"] * scale)


def _cell(entry: dict, key: str, fmt: str, scale: float, base: dict | None) -> str:
    stat = entry.get(key)
    if not stat or not stat["n"]:
        return NA
    text = fmt.format(stat["mean"] * scale)
    if stat["n"] > 1:
        text += " ± " + fmt.format(stat["ci95"] * scale)
    if base is not None and entry is not base and key in base:
        ref = base[key]["mean"]
        if ref:
            text += f" ({(stat['mean'] / ref - 1) * 100:+.0f}%)"
        elif ref is not None and stat["mean"] == 0:
            text += " (=)"
    return text


def table_markdown(summary: dict[str, dict], policies: list[str], baseline: str = BASELINE) -> str:
    base = summary.get(baseline)
    head = "| Policy | " + " | ".join(title for _, title, _, _ in TABLE_COLUMNS) + " |"
    rule = "|---|" + "---|" * len(TABLE_COLUMNS)
    rows = [head, rule]
    for p in policies:
        cells = [_cell(summary[p], k, f, s, base) for k, _, f, s in TABLE_COLUMNS]
        rows.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def ratio_markdown(ratios: dict[str, dict]) -> str:
    """Paired ratios to the baseline (same seeds), the fair way to read small differences."""
    head = "| Policy | " + " | ".join(title for _, title, _, _ in TABLE_COLUMNS) + " |"
    rows = [head, "|---|" + "---|" * len(TABLE_COLUMNS)]
    for p, entry in ratios.items():
        cells = []
        for key, _, _, _ in TABLE_COLUMNS:
            stat = entry.get(key)
            cells.append(f"{stat['mean']:.3f} ± {stat['ci95']:.3f}" if stat and stat["n"] else NA)
        rows.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def write_report(out: Path, summary: dict[str, dict], policies: list[str], meta: dict[str, object],
                 plots: list[str], ratios: dict[str, dict] | None = None, baseline: str = BASELINE) -> Path:
    lines = [
        f"# drlsched evaluation: {meta['workload']}",
        "",
        f"{meta['seeds']} paired seed(s) ({meta['seed_list']}); every policy replays the same workloads. "
        "Values are means ± the half-width of the 95% confidence interval (Student t); in parentheses the "
        f"change relative to `{baseline}`; n/a where a metric's sample was empty in every run (no finished job, no "
        "LS pod, ...).",
        "",
        table_markdown(summary, policies, baseline),
        "",
        "Other metrics (means): ",
        "",
        "| Policy | P50 JCT (s) | pending p99 (s) | mem util (%) | GPU util (%) | CPU alloc (%) | GPU alloc (%) "
        "| unalloc. GPUs | frag. GPUs | scheduled | unschedulable | makespan (s) | placements/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in policies:
        e = summary[p]
        cells = [_mean(e, "jct_p50_s", "{:.1f}"), _mean(e, "pending_p99_s", "{:.2f}"),
                 _mean(e, "mem_util", "{:.1f}", 100), _mean(e, "gpu_util", "{:.1f}", 100),
                 _mean(e, "cpu_alloc", "{:.1f}", 100), _mean(e, "gpu_alloc", "{:.1f}", 100),
                 _mean(e, "gpu_unallocated", "{:.1f}"), _mean(e, "gpu_fragmented", "{:.1f}"),
                 _mean(e, "pods_scheduled", "{:.0f}"), _mean(e, "pods_unschedulable", "{:.0f}"),
                 _mean(e, "makespan_s", "{:.0f}"), _mean(e, "placements_per_s", "{:.0f}")]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    anomalous = [p for p in policies if all(k in summary[p] for k in ANOMALY_KEYS)]
    if anomalous:
        lines += ["", "Scheduling anomalies (pods, means; a pod with several counts once in the rate; "
                  "docs/simulator.md):", "",
                  "| Policy | anomaly rate (%) | " + " | ".join(ANOMALY_PARTS) + " |",
                  "|---|---|" + "---|" * len(ANOMALY_PARTS)]
        for p in anomalous:
            e = summary[p]
            cells = [_mean(e, "anomaly_rate", "{:.2f}", 100), *(_mean(e, k, "{:.1f}") for k in ANOMALY_KEYS)]
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
    coloc = [p for p in policies if all(k in summary[p] for k in COLOCATION_KEYS)]
    if coloc:
        lines += ["", "Colocation (means; docs/simulator.md):", "",
                  "| Policy | evictions | BE pending p99 (s) | CPU on reclaimed (%) | LS slowdown p50 | "
                  "LS slowdown p99 |", "|---|---|---|---|---|---|"]
        for p in coloc:
            e = summary[p]
            cells = [_mean(e, "evictions", "{:.1f}"), _mean(e, "be_pending_p99_s", "{:.1f}"),
                     _mean(e, "cpu_util_reclaimed", "{:.1f}", 100), _mean(e, "ls_slowdown_p50", "{:.2f}"),
                     _mean(e, "ls_slowdown_p99", "{:.2f}")]
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
    if ratios:
        lines += ["", f"Paired ratio to `{baseline}` (policy / baseline on the same seed; mean ± 95% CI; n/a where "
                  "the baseline is 0):", "", ratio_markdown(ratios)]
    lines += ["", "Metric definitions: docs/simulator.md.", ""]
    lines += [f"![{name}]({name})" for name in plots]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_plots(out: Path, runs: list[dict], policies: list[str]) -> list[str]:
    """utilisation.png (cluster CPU utilisation over time, first seed) and jct_cdf.png (all seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    first_seed = min(r["metrics"]["seed"] for r in runs)
    fig, ax = plt.subplots(figsize=(8, 4))
    col = SERIES_KEYS.index("cpu_util")
    for p in policies:
        run = next((r for r in runs if r["metrics"]["policy"] == p and r["metrics"]["seed"] == first_seed), None)
        if run and run["series"]:
            s = np.asarray(run["series"])
            ax.plot(s[:, 0], 100 * s[:, col], label=p, linewidth=1)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("CPU utilisation (%)")
    ax.set_title(f"Cluster CPU utilisation (seed {first_seed})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "utilisation.png", dpi=110)
    plt.close(fig)
    names.append("utilisation.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    for p in policies:
        jct = np.sort(np.concatenate([np.asarray(r["jct"], dtype=float) for r in runs
                                      if r["metrics"]["policy"] == p] or [np.zeros(0)]))
        if jct.size:
            ax.plot(jct, np.arange(1, jct.size + 1) / jct.size, label=p, linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("CDF")
    ax.set_title("Job completion time, all seeds")
    if ax.get_lines():  # no job finished in any run (a tiny trace window): an empty plot, no legend
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "jct_cdf.png", dpi=110)
    plt.close(fig)
    names.append("jct_cdf.png")
    names.append(_util_vs_sla(out, runs, policies, plt))
    return names


def _util_vs_sla(out: Path, runs: list[dict], policies: list[str], plt: Any) -> str:
    """util_vs_sla.png: each policy (or policy@reclaim model) a point, CPU utilisation against the share of LS pods
    violating their SLA, with 95% CIs over seeds: the operating points an operator chooses between."""
    from drlsched.evaluate import mean_ci

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for p in policies:
        mine = [r["metrics"] for r in runs if r["metrics"]["policy"] == p]
        util = mean_ci([100 * float(m["cpu_util"]) for m in mine])
        sla = mean_ci([None if m["sla_violation_rate"] is None else 100 * float(m["sla_violation_rate"])
                       for m in mine])
        if sla["mean"] is None:  # no LS pod in any run: no point to draw
            continue
        ax.errorbar(sla["mean"], util["mean"], xerr=sla["ci95"], yerr=util["ci95"], fmt="o", capsize=3, label=p)
    ax.axvline(5.0, color="grey", linestyle=":", linewidth=1)  # the article's bound: < 5% SLA-violating pods
    ax.set_xlabel("LS pods violating their SLA (%)")
    ax.set_ylabel("CPU utilisation (%)")
    ax.set_title("Utilisation vs SLA (mean ± 95% CI over seeds)")
    if ax.get_legend_handles_labels()[0]:  # no policy had an LS pod: nothing to label
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "util_vs_sla.png", dpi=110)
    plt.close(fig)
    return "util_vs_sla.png"
