"""Issue 25, the learned scaler against the tuned non-learned ones, on the windows and protocol of
`bench/simulator/autoscale_compare.py` (one service on up to 100 nodes with the Cluster Autoscaler, two-day windows
whose first day is history and not measured, step 5 s).

Scalers: HPA at its defaults, the tuned HPA (60%), overprovision (0.5 at 60%) and predictive (60%, 300 s) — the
settings autoscale_compare chose on validation windows only — and every `--policies NAME=PATH` of `drlsched
train-scaler` (trained on flash-sale seeds 1000 and up only, so every window here is unseen). Reported windows:
flash-sale seeds `--seeds` and WorldCup'98 group-stage days `--days` (never used in training; the knockout stage is
held out and not in the trace). Prints JSON (and writes it to --out): per load and scaler, mean ± 95% CI of each
metric; for each learned scaler the paired ratios of violation minutes and replica-hours to the best tuned
non-learned scaler (the fewest replica-hours at violation <= 1%, else the least violation) and the issue's check
(>= 20% fewer violation minutes at no more replica-hours, or >= 10% fewer replica-hours at no more violation
minutes).
Usage: nice python bench/learning/scaler_compare.py --policies eco=DIR/policy.pt,batch=DIR2/policy.pt
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulator"))

from autoscale_compare import KEYS, run_one, write_result

from drlsched.evaluate import mean_ci
from drlsched.machine import machine_info

TUNED = {"hpa-default": {"scaler": "hpa", "target_utilization": 80},
         "hpa": {"scaler": "hpa", "target_utilization": 60},
         "overprovision": {"scaler": "overprovision", "target_utilization": 60, "overprovision_fraction": 0.5},
         "predictive": {"scaler": "predictive", "target_utilization": 60, "lead_s": 300.0}}


def best_tuned(per: dict[str, Any]) -> str:
    run = [n for n in ("hpa", "overprovision", "predictive") if n in per]
    ok = [n for n in run if per[n]["sla_violation_rate"]["mean"] <= 0.01]
    if ok:
        return min(ok, key=lambda n: per[n]["replica_hours"]["mean"])
    return min(run, key=lambda n: per[n]["sla_violation_rate"]["mean"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policies", required=True, help="NAME=PATH,... of train-scaler policies")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--days", default="1998-06-18,1998-06-21,1998-06-24")
    ap.add_argument("--step", type=float, default=5.0)
    ap.add_argument("--tuned", default=",".join(TUNED),
                    help="the tuned scalers to run (default all; e.g. predictive alone for validation picks)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="bench/results/scaler_compare.json")
    a = ap.parse_args()
    learned = dict(x.split("=", 1) for x in a.policies.split(",") if x)
    names = [n for n in a.tuned.split(",") if n]
    if unknown := sorted(set(names) - set(TUNED)):
        ap.error(f"--tuned: unknown {', '.join(unknown)} (of {', '.join(TUNED)})")
    tuned = {n: TUNED[n] for n in names}
    if not set(tuned) & {"hpa", "overprovision", "predictive"}:
        ap.error("--tuned: name at least one of hpa, overprovision, predictive")
    scalers = {**tuned, **{n: {"scaler": f"ppo:{Path(p).resolve()}"} for n, p in learned.items()}}
    split = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    windows = [("flash-sale", int(s)) for s in split(a.seeds)] + [("worldcup98", d) for d in split(a.days)]
    t0 = time.perf_counter()
    jobs = [(kind, key, a.nodes, a.step, params) for kind, key in windows for params in scalers.values()]
    with ProcessPoolExecutor(a.jobs) as pool:
        rows = list(pool.map(run_one, jobs))
    results: dict[str, Any] = {}
    for kind in ("flash-sale", "worldcup98"):
        by = {name: [r for r in rows if r["kind"] == kind and r["params"] == p] for name, p in scalers.items()}
        if not any(by.values()):
            continue
        per = {name: {k: mean_ci([float(r[k]) for r in rs if r[k] is not None]) for k in KEYS}
               for name, rs in by.items()}
        best = best_tuned(per)
        for name in learned:
            pairs = list(zip(by[name], by[best], strict=True))
            vm = [r["violation_minutes"] - b["violation_minutes"] for r, b in pairs]
            rh = [r["replica_hours"] / b["replica_hours"] for r, b in pairs]
            total_vm = sum(r["violation_minutes"] for r, _ in pairs), sum(b["violation_minutes"] for _, b in pairs)
            rh_ratio = mean_ci(rh)
            fewer_vm = total_vm[1] > 0 and total_vm[0] <= 0.8 * total_vm[1]
            per[name]["vs_best_tuned"] = {
                "best_tuned": best, "violation_minutes_diff": mean_ci(vm),
                "violation_minutes_total": {"learned": total_vm[0], "best_tuned": total_vm[1]},
                "replica_hours_ratio": rh_ratio,
                "target_met": bool((fewer_vm and rh_ratio["mean"] <= 1.0)
                                   or (rh_ratio["mean"] <= 0.9 and total_vm[0] <= total_vm[1]))}
        results[kind] = per
    out = {"bench": "scaler_compare", "nodes": a.nodes, "node_autoscaler": "cluster-autoscaler", "step_s": a.step,
           "windows": [list(w) for w in windows], "policies": learned, "tuned": tuned, "results": results,
           "wall_s": round(time.perf_counter() - t0, 1), "machine": machine_info()}
    write_result(out, a.out)


if __name__ == "__main__":
    main()
