"""The comparison table (the seed article's shape) and plots of an evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from drlsched.metrics import COLOCATION_KEYS, SERIES_KEYS

BASELINE = "k8s-default"
# (metric key, column title, format of the mean, scale for display)
TABLE_COLUMNS = [
    ("jct_p99_s", "P99 JCT (s)", "{:.1f}", 1.0),
    ("cpu_util", "CPU util (%)", "{:.1f}", 100.0),
    ("cross_node_traffic_gb", "Cross-node traffic (GB)", "{:.2f}", 1.0),
    ("sla_violation_rate", "SLA violation (%)", "{:.2f}", 100.0),
    ("migrations", "Migrations", "{:.0f}", 1.0),
    ("gpu_fragmentation", "GPU frag. (%)", "{:.1f}", 100.0),
]


def _cell(entry: dict, key: str, fmt: str, scale: float, base: dict | None) -> str:
    stat = entry[key]
    text = fmt.format(stat["mean"] * scale)
    if stat["n"] > 1:
        text += " ± " + fmt.format(stat["ci95"] * scale)
    if base is not None and entry is not base:
        ref = base[key]["mean"]
        if ref:
            text += f" ({(stat['mean'] / ref - 1) * 100:+.0f}%)"
        elif stat["mean"] == 0:
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
            stat = entry[key]
            cells.append(f"{stat['mean']:.3f} ± {stat['ci95']:.3f}" if stat["n"] else "n/a")
        rows.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def write_report(out: Path, summary: dict[str, dict], policies: list[str], meta: dict[str, object],
                 plots: list[str], ratios: dict[str, dict] | None = None, baseline: str = BASELINE) -> Path:
    lines = [
        f"# drlsched evaluation: {meta['workload']}",
        "",
        f"{meta['seeds']} paired seed(s) ({meta['seed_list']}); every policy replays the same workloads. "
        "Values are means ± the half-width of the 95% confidence interval (Student t); in parentheses the "
        f"change relative to `{baseline}`.",
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
        lines.append(
            f"| {p} | {e['jct_p50_s']['mean']:.1f} | {e['pending_p99_s']['mean']:.2f} | "
            f"{100 * e['mem_util']['mean']:.1f} | {100 * e['gpu_util']['mean']:.1f} | "
            f"{100 * e['cpu_alloc']['mean']:.1f} | {100 * e['gpu_alloc']['mean']:.1f} | "
            f"{e['gpu_unallocated']['mean']:.1f} | {e['gpu_fragmented']['mean']:.1f} | "
            f"{e['pods_scheduled']['mean']:.0f} | {e['pods_unschedulable']['mean']:.0f} | "
            f"{e['makespan_s']['mean']:.0f} | {e['placements_per_s']['mean']:.0f} |")
    coloc = [p for p in policies if all(k in summary[p] for k in COLOCATION_KEYS)]
    if coloc:
        lines += ["", "Colocation (means; docs/simulator.md):", "",
                  "| Policy | evictions | BE pending p99 (s) | CPU on reclaimed (%) | LS slowdown p50 | "
                  "LS slowdown p99 |", "|---|---|---|---|---|---|"]
        for p in coloc:
            e = summary[p]
            lines.append(f"| {p} | {e['evictions']['mean']:.1f} | {e['be_pending_p99_s']['mean']:.1f} | "
                         f"{100 * e['cpu_util_reclaimed']['mean']:.1f} | {e['ls_slowdown_p50']['mean']:.2f} | "
                         f"{e['ls_slowdown_p99']['mean']:.2f} |")
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
        sla = mean_ci([100 * float(m["sla_violation_rate"]) for m in mine])
        ax.errorbar(sla["mean"], util["mean"], xerr=sla["ci95"], yerr=util["ci95"], fmt="o", capsize=3, label=p)
    ax.axvline(5.0, color="grey", linestyle=":", linewidth=1)  # the article's bound: < 5% SLA-violating pods
    ax.set_xlabel("LS pods violating their SLA (%)")
    ax.set_ylabel("CPU utilisation (%)")
    ax.set_title("Utilisation vs SLA (mean ± 95% CI over seeds)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "util_vs_sla.png", dpi=110)
    plt.close(fig)
    return "util_vs_sla.png"
