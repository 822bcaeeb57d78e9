"""`evaluate`'s plots on job workloads: the JCT CDF per entry and the job metrics as bars with their 95% CIs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def jct_cdf(path: Path, jcts: dict[str, list[list[float]]]) -> None:
    """One CDF per entry over the finished jobs of all its seeds."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, runs in jcts.items():
        jct = np.sort(np.concatenate([np.asarray(r, dtype=float) for r in runs])) if runs else np.zeros(0)
        if jct.size:
            ax.plot(jct, np.arange(1, jct.size + 1) / jct.size, label=name, linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("CDF")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def metric_bars(path: Path, summary: dict[str, dict[str, dict[str, float | None]]], names: list[str],
                columns: tuple[tuple[str, str], ...]) -> None:
    """One panel per metric, one bar per entry (mean over seeds, 95% CI whisker; a missing mean has no bar)."""
    plt = _pyplot()
    cols = 4
    rows = math.ceil(len(columns) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows + 0.6), squeeze=False)
    x = np.arange(len(names))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (key, title) in zip(axes.flat, columns, strict=False):
        means = [summary[n][key]["mean"] for n in names]
        cis = [summary[n][key]["ci95"] for n in names]
        ax.bar(x, [m if m is not None else 0.0 for m in means], yerr=[c if c is not None else 0.0 for c in cis],
               color=[colours[i % len(colours)] for i in range(len(names))], capsize=3)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(x)
        ax.set_xticklabels([""] * len(names))
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(columns):]:
        ax.set_visible(False)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[i % len(colours)]) for i in range(len(names))]
    fig.legend(handles, names, loc="lower center", ncol=min(len(names), 4), fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
