"""`replay --scaler predictive --node-autoscaler karpenter` on the testbed: the first 15 minutes of the second day's
sale of flash-sale seed 0 (from 5 minutes before it opens), × 7.5, with the nodes Karpenter's. The service's pods run
only on the NodePool's nodes, which start from what the first replicas need; drlsched's forecast raises the count
before the sale, the real Karpenter launches nodes for it, and the replicas are ready before the sale's peak. The
recorded curves follow the simulator's Karpenter on the same window.

One testbed for the module: one static node (kept free of the service), a NodePool of the simulator's template
(8 cores, 32 GiB, at most 6 nodes, registering after the simulator's 210 s / 7.5), metrics-server and the real
kube-controller-manager with an HPA sync of 15 s / 7.5 = 2 s.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import kubernetes
import numpy as np
import pytest
from beds import own_bed

from drlsched.autoscale.cli_replay import plan_from_args
from drlsched.autoscale.replay import Plan, compare, replay_scaler, simulate_window
from drlsched.cli import build_parser
from drlsched.testbed.scaler_bed import POOL, scaler_bed

NODES, SPEEDUP, DURATION_S = 6, 7.5, 900


def _plan() -> Plan:
    args = build_parser().parse_args(["replay", "--scenario", "flash-sale", "--scaler", "predictive", "--nodes",
                                      str(NODES), "--speedup", str(SPEEDUP), "--duration", str(DURATION_S),
                                      "--node-autoscaler", "karpenter", "--kubeconfig", "k", "--json", "-"])
    return plan_from_args(args, lead_in_s=300.0)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kubernetes.client.ApiClient]:
    yield from own_bed(tmp_path_factory, "karpenter-replay-testbed", lambda d: scaler_bed(d, _plan()))


def test_karpenter_launches_the_sales_nodes_and_drlsched_has_the_replicas_ready_before_the_peak(
        api: kubernetes.client.ApiClient) -> None:
    plan = _plan()
    ns = f"srk-{uuid.uuid4().hex[:6]}"
    kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
    real, series = replay_scaler(api, plan, ns)
    sim = simulate_window(plan)
    cmp = compare(real, series, sim)
    nodes, ready, replicas = (np.asarray(series[k]) for k in ("nodes", "ready", "replicas"))
    t = plan.window.start_s + np.arange(0.0, plan.window.duration_s, plan.window.step_s)
    rate = plan.window.at(t)
    peak_s = float(t[np.argmax(rate >= 0.95 * rate.max())] - plan.window.start_s)
    top = float(plan.spec.replicas_for(rate.max()))
    enough = np.flatnonzero(ready >= 0.8 * top)
    report = {"nodes": nodes.tolist(), "nodes_sim": np.asarray(sim.series["nodes"]).tolist(),
              "ready": ready.tolist(), "ready_sim": np.asarray(sim.series["ready"]).tolist(), "peak_s": peak_s,
              "node_hours": cmp["node_hours"], "mard": cmp["ready_curve_mard"]}
    print(json.dumps(report, default=float))
    assert real["node_pool"] == POOL
    # Karpenter started the pool from what the first replicas need and launched nodes for the sale, within its limit.
    assert nodes[0] == sim.series["nodes"][0] == 1 and nodes.max() >= 3 and nodes.max() <= NODES, report
    assert np.all(ready <= replicas) and len(ready) >= 15
    assert enough.size and enough[0] * 60.0 <= peak_s, report  # ready before the peak, on Karpenter's new nodes
    # The curves follow the simulator's Karpenter on the same window (loosely: see the bench for the numbers).
    assert cmp["ready_curve_mard"] < 0.5, report
    assert abs(cmp["node_hours"]["rel_diff"]) < 0.35, report
