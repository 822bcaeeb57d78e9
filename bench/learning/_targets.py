"""What bench/learning/rl_targets.py, rl_targets_placement.py and rl_real_usage.py share: the targets of issue 15,
paired statistics over runs, and a training run's cost against its target."""

from __future__ import annotations

import json
from pathlib import Path

from drlsched.evaluate import mean_ci

SLA_BOUND = {"ecommerce": 0.02, "batch": 0.05}
UTIL_TARGET = {"ecommerce": 1.15, "batch": 1.25}
TRAIN_MINUTES, PEAK_MIB = 30.0, 2048.0


def paired(runs: list[dict], a: str, b: str, key: str) -> dict[str, float]:
    """mean ± 95% CI over seeds of a / b (seeds where b is 0 left out)."""
    va = {r["seed"]: float(r[key]) for r in runs if r["policy"] == a}
    vb = {r["seed"]: float(r[key]) for r in runs if r["policy"] == b}
    return mean_ci([va[s] / vb[s] for s in sorted(va) if vb.get(s)])


def diff(runs: list[dict], a: str, b: str, key: str) -> dict[str, float]:
    va = {r["seed"]: float(r[key]) for r in runs if r["policy"] == a}
    vb = {r["seed"]: float(r[key]) for r in runs if r["policy"] == b}
    return mean_ci([va[s] - vb[s] for s in sorted(va)])


def train_cost(policy: str) -> dict[str, object]:
    info = Path(policy).parent / "train.json"
    if not info.is_file():
        return {"measured": None, "note": f"no {info}"}
    t = json.loads(info.read_text())
    minutes, mib = t["wall_s"] / 60, t["peak_rss_mib"]
    return {"minutes": round(minutes, 2), "peak_rss_mib": mib,
            "target": f"<= {TRAIN_MINUTES:g} min, <= {PEAK_MIB:g} MiB",
            "met": minutes <= TRAIN_MINUTES and mib <= PEAK_MIB, "steps": t["steps"]}
