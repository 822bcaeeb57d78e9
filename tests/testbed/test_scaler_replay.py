"""`replay --scaler` on the testbed: a compressed flash-sale (the second day's sale of seed 0, 15 minutes from 5
minutes before it opens, × 7.5) under the real HPA, and under the real HPA with drlsched's predictive controller
raising its minReplicas. The recorded curve is whole and follows the simulator's; drlsched has the sale's
replicas ready before its peak, the real HPA alone only after.

One testbed for the module: 6 nodes of the simulator's template (8 cores, 32 GiB), metrics-server, the real
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
from drlsched.testbed.scaler_bed import scaler_bed

NODES, SPEEDUP = 6, 7.5


def _plan(scaler: str) -> Plan:
    args = build_parser().parse_args(["replay", "--scenario", "flash-sale", "--scaler", scaler, "--nodes",
                                      str(NODES), "--speedup", str(SPEEDUP), "--duration", "900",
                                      "--kubeconfig", "k", "--json", "-"])
    return plan_from_args(args, lead_in_s=300.0)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kubernetes.client.ApiClient]:
    yield from own_bed(tmp_path_factory, "scaler-replay-testbed", lambda d: scaler_bed(d, _plan("hpa")))


def _enough_at(plan: Plan, ready: np.ndarray) -> float | None:
    """Seconds into the window when the ready replicas first reach 80% of what the sale's top rate needs."""
    top = float(plan.spec.replicas_for(plan.window.peak))
    hits = np.flatnonzero(ready >= 0.8 * top)
    return float(hits[0] * 60.0) if hits.size else None


def test_drlsched_has_the_sale_ready_before_its_peak_and_the_real_hpa_does_not(
        api: kubernetes.client.ApiClient) -> None:
    runs = {}
    for scaler in ("hpa", "predictive"):
        ns = f"sr-{scaler}-{uuid.uuid4().hex[:6]}"
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
        plan = _plan(scaler)
        real, series = replay_scaler(api, plan, ns)
        sim = simulate_window(plan)
        runs[scaler] = (plan, real, series, compare(real, series, sim))
    plan = runs["hpa"][0]
    t = plan.window.start_s + np.arange(0.0, plan.window.duration_s, plan.window.step_s)
    rate = plan.window.at(t)
    peak_s = float(t[np.argmax(rate >= 0.95 * rate.max())] - plan.window.start_s)
    report = {s: {"enough_at_s": _enough_at(p, np.asarray(ser["ready"])), "ready": np.asarray(ser["ready"]).tolist(),
                  "violation_minutes": r["violation_minutes"], "mard": c["ready_curve_mard"],
                  "sample_gap_p99_s": r["sample_gap_p99_s"]} for s, (p, r, ser, c) in runs.items()}
    print(json.dumps({"peak_s": peak_s, **report}))
    for scaler, (_, real, series, cmp) in runs.items():
        # The recorded curve: a sample every few workload seconds through the window, ready never above the count.
        assert real["samples"] >= 0.8 * plan.window.duration_s / SPEEDUP / 0.5, scaler
        assert real["sample_gap_p99_s"] < 15.0, scaler
        assert len(series["ready"]) >= 15 and all(np.asarray(series["ready"]) <= np.asarray(series["replicas"]))
        assert cmp["ready_curve_mard"] < 0.5, (scaler, report)  # follows the simulator's (loosely: see the bench)
    ahead, late = report["predictive"]["enough_at_s"], report["hpa"]["enough_at_s"]
    assert ahead is not None and ahead <= peak_s, report
    assert late is None or late > ahead, report
    assert runs["predictive"][1]["violation_minutes"] < runs["hpa"][1]["violation_minutes"], report


def test_a_karpenter_replay_on_a_cluster_without_karpenter_is_one_clear_error(
        api: kubernetes.client.ApiClient) -> None:
    from drlsched.autoscale.driver import DEFAULT_TEMPLATE
    from drlsched.autoscale.replay import karpenter_pool
    from drlsched.errors import UserError

    with pytest.raises(UserError, match="serves no Karpenter NodePools"):
        karpenter_pool(api, DEFAULT_TEMPLATE)
