"""Issue 25, the simulation side: Kubernetes' HPA at its defaults against tuned `overprovision` and `predictive`
scalers, one service on up to `--nodes` nodes of 8 cores with the Cluster Autoscaler (HPA + CA, the issue's
reactive baseline), on the `flash-sale` load and on WorldCup'98 group-stage days.

Every window is two days: the first is history (the Holt-Winters forecast learns a season; nothing is measured),
the second is measured. The burst of a flash-sale comes at the same hour on both days (a few minutes late).
- Tuning (validation only): flash-sale seeds `--val-seeds` and WorldCup days `--val-days`. hpa's target is chosen
  from `--targets`, overprovision's placeholder fraction (at hpa's chosen target) from `--fractions`, predictive's
  target and lead time from the grid; each picks the fewest replica-hours with SLA violation <= 1% summed over the
  validation windows, else the least violation.
- Reported (paired, same windows for every scaler): flash-sale seeds `--seeds`, WorldCup days `--days`, every
  day of the group stage; the knockout stage is held out and not present in the trace.
- Speed: a 24-hour flash-sale at `--nodes` nodes with the Cluster Autoscaler, wall seconds (target <= 60 s).

Prints JSON (and writes it to --out): per scaler and load, metrics as mean ± 95% CI (Student t over windows), the
paired ratio of each scaler's replica-hours to hpa's (defaults and tuned), the chosen parameters and the check of
the issue's target (predictive: violation <= 1% at <= 1.1x hpa's replica-hours).
Usage: nice python bench/simulator/autoscale_compare.py [--jobs 2] [--out bench/results/autoscale_compare.json]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from drlsched.autoscale.driver import Driver, DriverConfig
from drlsched.autoscale.flash_sale import flash_sale
from drlsched.autoscale.load import LoadCurve, detect_bursts, read_load_trace
from drlsched.autoscale.services import ServiceSpec
from drlsched.evaluate import mean_ci
from drlsched.machine import machine_info

TRACE = (Path(__file__).resolve().parents[2] / "../shared/traces/load/worldcup98"
         / "requests_per_minute_1998-04-30_to_06-26.csv")
TRACE_START = datetime(1998, 4, 30, 21, 30)
DAY = 86_400.0
KEYS = ("sla_violation_rate", "violation_minutes", "slowdown_p99_burst", "replica_hours", "node_hours",
        "overprovision_ratio", "scale_actions", "time_to_scale_p50_s")


def window(kind: str, key: str | int, nodes: int) -> LoadCurve:
    peak = 0.5 * 8 * nodes * 0.8 * 1000 / 10.0  # half the cluster's replica slots at the HPA's 80% target
    if kind == "flash-sale":
        return flash_sale(int(key), days=2, step_s=15.0, peak=peak)
    day = datetime.fromisoformat(str(key))
    start = (day - TRACE_START).total_seconds() - DAY  # the day before is history
    curve = _trace().window(start, start + 2 * DAY).scaled(peak)
    return LoadCurve(curve.rate, curve.step_s, 0.0, detect_bursts(curve))


_CACHE: dict[str, LoadCurve] = {}


def _trace() -> LoadCurve:
    if "wc" not in _CACHE:
        _CACHE["wc"] = read_load_trace(TRACE.resolve())
    return _CACHE["wc"]


def run_one(job: tuple[str, str | int, int, float, dict[str, Any]]) -> dict[str, Any]:
    kind, key, nodes, step, params = job
    cfg = DriverConfig(node_autoscaler="cluster-autoscaler", nodes=nodes, measure_from_s=DAY, step_s=step, **params)
    seed = int(key) if kind == "flash-sale" else int(str(key).replace("-", ""))
    m = Driver(ServiceSpec(max_replicas=8 * nodes), window(kind, key, nodes), cfg, seed).run().metrics
    return {"kind": kind, "key": key, "params": params, **{k: m[k] for k in KEYS}}


def write_result(out: dict[str, Any], path: str) -> None:
    """Prints the bench's JSON and writes it to `path` (the issue 25 benches share this)."""
    text = json.dumps(out, indent=2, default=str)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text + "\n")
    print(text)


def label(params: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(params.items()))


def pick(rows: list[dict[str, Any]], grid: list[dict[str, Any]]) -> dict[str, Any]:
    """The fewest replica-hours with violation <= 1% over the validation windows, else the least violation."""
    def total(p: dict[str, Any], k: str) -> float:
        rs = [r for r in rows if r["params"] == p]
        return float(np.mean([r[k] for r in rs]))
    ok = [p for p in grid if total(p, "sla_violation_rate") <= 0.01]
    if ok:
        return min(ok, key=lambda p: total(p, "replica_hours"))
    return min(grid, key=lambda p: total(p, "sla_violation_rate"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--val-seeds", default="100")
    ap.add_argument("--days", default="1998-06-18,1998-06-21,1998-06-24")
    ap.add_argument("--val-days", default="1998-06-12")
    ap.add_argument("--targets", default="70,60")
    ap.add_argument("--fractions", default="0.25,0.5")
    ap.add_argument("--pred-targets", default="70,60")
    ap.add_argument("--leads", default="300,600")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--step", type=float, default=5.0,
                    help="the driver's step for the comparison (default 5 s: CA's 10 s scans and the HPA's 15 s syncs "
                         "are multiples; readiness is quantised to it); the speed run uses the default 1 s")
    ap.add_argument("--out", default="bench/results/autoscale_compare.json")
    a = ap.parse_args()
    split = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    val = [("flash-sale", int(s)) for s in split(a.val_seeds)] + [("worldcup98", d) for d in split(a.val_days)]
    test = [("flash-sale", int(s)) for s in split(a.seeds)] + [("worldcup98", d) for d in split(a.days)]
    t0 = time.perf_counter()
    pool = ProcessPoolExecutor(a.jobs)

    def runs(windows: list[tuple[str, Any]], grid: list[dict[str, Any]]) -> list[dict[str, Any]]:
        jobs = [(k, key, a.nodes, a.step, p) for k, key in windows for p in grid]
        out = list(pool.map(run_one, jobs))
        print(json.dumps({"done": len(jobs), "wall_s": round(time.perf_counter() - t0, 1)}), flush=True)
        return out

    hpa_grid = [{"scaler": "hpa", "target_utilization": int(t)} for t in split(a.targets)]
    val_rows = runs(val, hpa_grid)
    hpa_best = pick(val_rows, hpa_grid)
    over_grid = [{"scaler": "overprovision", "target_utilization": hpa_best["target_utilization"],
                  "overprovision_fraction": float(f)} for f in split(a.fractions)]
    pred_grid = [{"scaler": "predictive", "target_utilization": int(t), "lead_s": float(lead)}
                 for t in split(a.pred_targets) for lead in split(a.leads)]
    val_rows += runs(val, over_grid + pred_grid)
    chosen = {"hpa-default": {"scaler": "hpa", "target_utilization": 80}, "hpa": hpa_best,
              "overprovision": pick(val_rows, over_grid), "predictive": pick(val_rows, pred_grid)}
    test_rows = runs(test, list(chosen.values()))

    # Speed: a 24-hour flash-sale at --nodes nodes with node scaling (the Cluster Autoscaler).
    w0 = time.perf_counter()
    Driver(ServiceSpec(max_replicas=8 * a.nodes), flash_sale(0, 1, 15.0, 0.5 * 8 * a.nodes * 0.8 * 100),
           DriverConfig(node_autoscaler="cluster-autoscaler", nodes=a.nodes), 0).run()
    speed = time.perf_counter() - w0
    pool.shutdown()

    results: dict[str, Any] = {}
    for kind in ("flash-sale", "worldcup98"):
        per: dict[str, Any] = {}
        base = {name: [r for r in test_rows if r["kind"] == kind and r["params"] == p] for name, p in chosen.items()}
        for name, rows in base.items():
            entry = {k: mean_ci([float(r[k]) for r in rows if r[k] is not None]) for k in KEYS}
            for ref in ("hpa-default", "hpa"):
                ratios = [r["replica_hours"] / b["replica_hours"] for r, b in zip(rows, base[ref], strict=True)]
                entry[f"replica_hours_ratio_vs_{ref}"] = mean_ci(ratios)
            entry["windows"] = [r["key"] for r in rows]
            per[name] = entry
        pred = per["predictive"]
        per["target_predictive"] = {
            ref: {"violation_le_1pct": pred["sla_violation_rate"]["mean"] <= 0.01,
                  "replica_hours_le_1.1x": pred[f"replica_hours_ratio_vs_{ref}"]["mean"] <= 1.1}
            for ref in ("hpa-default", "hpa")}
        results[kind] = per
    out = {"bench": "autoscale_compare", "nodes": a.nodes, "node_autoscaler": "cluster-autoscaler",
           "validation": {"flash_sale_seeds": split(a.val_seeds), "worldcup_days": split(a.val_days)},
           "test": {"flash_sale_seeds": split(a.seeds), "worldcup_days": split(a.days)},
           "chosen": {k: label(v) for k, v in chosen.items()},
           "validation_runs": [{**r, "params": label(r["params"])} for r in val_rows],
           "step_s": a.step, "results": results, "speed_24h_flash_sale_s": round(speed, 2), "speed_target_s": 60,
           "wall_s": round(time.perf_counter() - t0, 1), "machine": machine_info()}
    write_result(out, a.out)


if __name__ == "__main__":
    main()
