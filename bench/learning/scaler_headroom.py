"""Issue 25, before training: how much the learned scaler's action space can gain over the tuned `predictive`
scaler, and whether that gain needs the state. Runs fixed rules through the same decision loop the learned scaler
uses (`Driver.decisions`, one multiplier of `scaler_obs.MULTIPLIERS` per 15 s sync on the held max(need, forecast)
base) on validation flash-sale windows only (seeds `--seeds`, 100 and up; the protocol of
`bench/simulator/autoscale_compare.py`: 100 nodes with the Cluster Autoscaler, two-day windows measured on the
second day, step 5 s):
- `const:M`: multiplier M at every sync;
- `ramp:LO:HI`: HI while the window shows the load rising (log need up by more than `--rise` in one of the last
  `--recent` syncs) or the forecast above `--ahead` × the need, else LO.
Prints JSON (and writes --out): per rule, violation minutes and replica-hours per window, their sums, and the
paired replica-hours ratio to predictive (60%, 300 s).
Usage: nice python bench/learning/scaler_headroom.py [--seeds 100,101,102]
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulator"))

from autoscale_compare import DAY, run_one, window, write_result

from drlsched.autoscale.driver import Driver, DriverConfig
from drlsched.autoscale.scaler_obs import MULTIPLIERS
from drlsched.autoscale.services import ServiceSpec
from drlsched.evaluate import mean_ci
from drlsched.machine import machine_info

PREDICTIVE = {"scaler": "predictive", "target_utilization": 60, "lead_s": 300.0}
RULES = ("const:1.25", "const:1.4", "const:1.5", "const:1.6", "ramp:1.4:1.6", "ramp:1.4:1.8", "ramp:1.4:2.0")


def run_rule(job: tuple[str, int, float, int, float]) -> dict[str, Any]:
    rule, seed, rise, recent, ahead = job
    kind, *levels = rule.split(":")
    lo, hi = MULTIPLIERS.index(float(levels[0])), MULTIPLIERS.index(float(levels[-1]))
    cfg = DriverConfig(node_autoscaler="cluster-autoscaler", nodes=100, measure_from_s=DAY, step_s=5.0)
    loop = Driver(ServiceSpec(max_replicas=800), window("flash-sale", seed, 100), cfg, seed).decisions()
    w = next(loop)
    try:
        while True:
            high = kind == "ramp" and bool((w[-recent:, 5] > rise).any() or w[-1, 3] > ahead)
            w = loop.send(hi if high else lo)
    except StopIteration as stop:
        m = stop.value.metrics
    return {"rule": rule, "seed": seed, "violation_minutes": m["violation_minutes"],
            "replica_hours": m["replica_hours"], "sla_violation_rate": m["sla_violation_rate"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="100,101,102", help="validation flash-sale seeds (100 and up)")
    ap.add_argument("--rules", default=",".join(RULES))
    ap.add_argument("--rise", type=float, default=0.03, help="a rise of log need in one sync that counts as a ramp")
    ap.add_argument("--recent", type=int, default=12, help="syncs a ramp is remembered")
    ap.add_argument("--ahead", type=float, default=1.1, help="forecast over need that counts as load ahead")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="bench/results/scaler_headroom.json")
    a = ap.parse_args()
    seeds = [int(x) for x in a.seeds.split(",") if x]
    if any(s < 100 for s in seeds):
        sys.exit("scaler_headroom: validation seeds only (100 and up); 0-99 are the evaluation windows")
    rules = [r for r in a.rules.split(",") if r]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(a.jobs) as pool:
        base = list(pool.map(run_one, [("flash-sale", s, 100, 5.0, PREDICTIVE) for s in seeds]))
        rows = list(pool.map(run_rule, [(r, s, a.rise, a.recent, a.ahead) for r in rules for s in seeds]))
    results: dict[str, Any] = {"predictive": {"violation_minutes": [b["violation_minutes"] for b in base],
                                              "replica_hours": [b["replica_hours"] for b in base]}}
    for rule in rules:
        rs = [r for r in rows if r["rule"] == rule]
        results[rule] = {"violation_minutes": [r["violation_minutes"] for r in rs],
                         "replica_hours": [round(r["replica_hours"], 1) for r in rs],
                         "violation_minutes_total": int(np.sum([r["violation_minutes"] for r in rs])),
                         "replica_hours_ratio": mean_ci([r["replica_hours"] / b["replica_hours"]
                                                         for r, b in zip(rs, base, strict=True)])}
    results["predictive"]["violation_minutes_total"] = int(np.sum(results["predictive"]["violation_minutes"]))
    out = {"bench": "scaler_headroom", "seeds": seeds, "rise": a.rise, "recent": a.recent, "ahead": a.ahead,
           "results": results, "wall_s": round(time.perf_counter() - t0, 1), "machine": machine_info()}
    write_result(out, a.out)


if __name__ == "__main__":
    main()
