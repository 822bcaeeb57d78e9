"""The flash-sale replayed on the testbed under each scaler, against the simulator on the same window.

One testbed (nodes of the simulator's template, metrics-server, the real kube-controller-manager with the HPA
sync divided by the speed-up) and, per scaler, a fresh namespace: `drlsched.autoscale.replay.replay_scaler` on
the second day's sale of the flash-sale seed, then the simulator on the same window twice: under the replay's
conditions (metrics-server's 10 s resolution × speed-up, KWOK's start-up) and at its defaults (15 s metrics,
image pull and warm-up). Prints JSON (also written to --out): per scaler each metric real / simulated with the
relative difference, the ready-replica curves' mean absolute relative difference over the window's minutes, and
whether violation minutes and the curve are within 15%.

With `--node-autoscaler karpenter` the nodes are Karpenter's: one NodePool of the simulator's template with
`--nodes` as its size limit and the simulator's provisioning delay / speed-up as the KWOK node class's
registration delay; the service runs only on the pool's nodes (one static node stays empty of it), which start
from none, and `node_hours` counts the pool's NodeClaims.

Usage: python bench/kubernetes/replay_scaler.py [--scalers hpa,predictive,ppo:PATH] [--seed 0] [--nodes 6]
       [--speedup 5] [--node-autoscaler none|karpenter] [--out bench/results/replay_scaler.json]
       [--resimulate EARLIER.json]
A `ppo:` policy's training settings are read from the train.json beside it and recorded.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import kubernetes
import numpy as np

from drlsched.autoscale.cli_replay import plan_from_args
from drlsched.autoscale.driver import LEARNED_PREFIX
from drlsched.autoscale.replay import Plan, compare, replay_scaler, simulate_window
from drlsched.cli import build_parser
from drlsched.evaluate import to_jsonable
from drlsched.machine import machine_info
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import down, up
from drlsched.testbed.scaler_bed import scaler_bed

ROOT = Path(__file__).resolve().parents[2]
BOUND = 0.15
KEYS = ("violation_minutes", "sla_violation_rate", "replica_hours", "node_hours", "overprovision_ratio",
        "time_to_scale_p50_s", "slowdown_p99_burst", "scale_actions")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scalers", default="hpa,predictive")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nodes", type=int, default=6)
    ap.add_argument("--speedup", type=float, default=5.0)
    ap.add_argument("--node-autoscaler", choices=("none", "karpenter"), default="none")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "replay_scaler.json")
    ap.add_argument("--resimulate", type=Path, metavar="FILE",
                    help="no cluster: recompute the simulated columns of this earlier result (its replays kept)")
    a = ap.parse_args()
    if a.resimulate:
        return _resimulate(a.resimulate, a.out)
    plans = {s: _plan(s, a.seed, a.nodes, a.speedup, a.node_autoscaler) for s in a.scalers.split(",")}
    first = next(iter(plans.values()))
    build()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="replay-scaler-") as tmp:
        bed = up(scaler_bed(Path(tmp), first))
        state = bed.state_dir
        api = bed.api_client()
        try:
            for scaler, plan in plans.items():
                ns = f"replay-{uuid.uuid4().hex[:6]}"
                kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
                t0 = time.monotonic()
                real, series = replay_scaler(api, plan, ns)
                wall = time.monotonic() - t0
                row = _row(scaler, plan, real, series, wall)
                results[scaler] = row
                print(json.dumps({scaler: {k: row[k] for k in ("violation_minutes_within_15pct",
                                                               "ready_curve_mard", "wall_s")}}), flush=True)
        finally:
            api.close()
            down(state)
    out = {"scenario": "flash-sale", "seed": a.seed, "nodes": a.nodes, "speedup": a.speedup,
           "node_autoscaler": a.node_autoscaler, "node_provision_s": first.config.node_provision_s,
           "window_s": [first.window.start_s, first.end_s], "hpa_period_s": first.hpa_period_s,
           "metrics_resolution_workload_s": 10 * a.speedup, "machine": machine_info(), "scalers": results}
    _write(out, a.out)


def _plan(scaler: str, seed: int, nodes: int, speedup: float, node_autoscaler: str = "none") -> Plan:
    argv = ["replay", "--scenario", "flash-sale", "--scaler", scaler, "--nodes", str(nodes), "--seed", str(seed),
            "--speedup", f"{speedup:g}", "--node-autoscaler", node_autoscaler, "--kubeconfig", "-", "--json", "-"]
    return plan_from_args(build_parser().parse_args(argv))


def _resimulate(path: Path, out: Path) -> None:
    data = json.loads(path.read_text())
    for scaler, old in data["scalers"].items():
        plan = _plan(scaler, data["seed"], data["nodes"], data["speedup"], data.get("node_autoscaler", "none"))
        series = {"ready": np.asarray(old["ready_real"]), "replicas": np.asarray(old["replicas_real"])}
        data["scalers"][scaler] = _row(scaler, plan, old["real"], series, old["wall_s"])
    _write(data, out)


def _write(data: dict[str, Any], out: Path) -> None:
    text = json.dumps(to_jsonable(data), indent=2)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    print(text)


def _row(scaler: str, plan: Plan, real: dict[str, Any], series: dict[str, Any], wall: float) -> dict[str, Any]:
    """One scaler's comparison: the replay against the simulator under its conditions and at its defaults."""
    sim, default = simulate_window(plan), simulate_window(plan, as_replayed=False)
    vs_sim, vs_default = compare(real, series, sim), compare(real, series, default)
    row: dict[str, Any] = {
        "wall_s": round(wall, 1),
        "metrics": {k: vs_sim.get(k) for k in KEYS},
        "ready_curve_mard": vs_sim["ready_curve_mard"],
        "violation_minutes_within_15pct": _within(vs_sim["violation_minutes"]),
        "ready_curve_within_15pct": vs_sim["ready_curve_mard"] <= BOUND,
        "vs_sim_defaults": {"metrics": {k: vs_default.get(k) for k in KEYS},
                            "ready_curve_mard": vs_default["ready_curve_mard"]},
        "ready_real": series["ready"], "ready_sim": sim.series["ready"],
        "ready_sim_defaults": default.series["ready"], "needed": sim.series["needed"],
        "replicas_real": series["replicas"], "replicas_sim": sim.series["replicas"],
        "nodes_real": series.get("nodes"), "nodes_sim": sim.series["nodes"],
        "real": real, "sim": sim.metrics}
    if scaler.startswith(LEARNED_PREFIX):
        facts = Path(scaler[len(LEARNED_PREFIX):]).with_name("train.json")
        row["checkpoint"] = json.loads(facts.read_text()) if facts.is_file() else None
    return row


def _within(row: dict[str, object] | None) -> bool | None:
    if row is None:
        return None
    real, sim = float(row["real"]), float(row["sim"])  # type: ignore[arg-type]
    return abs(real - sim) <= BOUND * max(abs(sim), 1.0)


if __name__ == "__main__":
    main()
