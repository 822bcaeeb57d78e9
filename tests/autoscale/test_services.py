"""The service model: load over ready replicas, the simulator's LS slowdown and SLA, readiness delays."""

import numpy as np
import pytest

from drlsched.autoscale.services import LS_SLOWDOWN_TARGET, SATURATED_SLOWDOWN, ServiceSpec, Startup, serve
from drlsched.errors import UserError
from drlsched.reclaim import ls_slowdown


def test_no_ready_replica_violates_every_request() -> None:
    served = serve(ServiceSpec(), 100.0, np.zeros(0, dtype=np.int64), np.array([8000.0]), np.zeros(1))
    assert served.violating_share == 1.0
    assert SATURATED_SLOWDOWN == pytest.approx(20.0)


def test_slowdown_is_the_simulators_and_follows_the_share() -> None:
    spec = ServiceSpec()  # 1000m request, limit 2000m, 10m per request/s
    # Two replicas alone on big nodes: each may use its limit; 160 rps -> 800m each -> rho 0.4.
    served = serve(spec, 160.0, np.array([0, 1]), np.array([8000.0, 8000.0]), np.array([1, 1]))
    assert served.slowdown == pytest.approx(ls_slowdown(np.array([0.4, 0.4])))
    assert served.usage_m == pytest.approx([800.0, 800.0])
    assert served.violating_share == 0.0
    # Eight replicas packing an 8-core node share it by requests: 1000m each; at 80% of request rho is 0.8,
    # past the 4x target (rho 0.75).
    eight = serve(spec, 8 * 80.0, np.zeros(8, dtype=np.int64), np.array([8000.0]), np.array([8]))
    assert eight.usage_m == pytest.approx([800.0] * 8)
    assert eight.slowdown == pytest.approx([5.0] * 8)
    assert LS_SLOWDOWN_TARGET == 4.0 and eight.violating_share == 1.0
    # Saturated: usage is capped at what the replica can use (what metrics-server reports).
    hot = serve(spec, 8 * 300.0, np.zeros(8, dtype=np.int64), np.array([8000.0]), np.array([8]))
    assert hot.usage_m == pytest.approx([1000.0] * 8)


def test_needed_replicas_at_the_hpa_target() -> None:
    assert ServiceSpec().replicas_for(np.array([0.0, 80.0, 81.0, 800.0])).tolist() == [0.0, 1.0, 2.0, 10.0]


def test_startup_pulls_only_without_the_image() -> None:
    s = Startup()
    rng = np.random.default_rng(0)
    cached = [s.draw(rng, True) for _ in range(2000)]
    cold = [s.draw(rng, False) for _ in range(2000)]
    start_cached = np.array([c[0] for c in cached])
    assert start_cached.max() < 5.0  # the pod-startup SLO: p99 <= 5 s without image pull
    assert np.median([c[0] for c in cold]) > 8.0
    warm = np.array([c[1] - c[0] for c in cached])
    assert warm.min() >= 10.0 and warm.max() <= 30.0


@pytest.mark.parametrize("kw", [{"min_replicas": 0}, {"min_replicas": 5, "max_replicas": 2}, {"limit_ratio": 0.5}])
def test_bad_service(kw: dict) -> None:
    with pytest.raises(UserError):
        ServiceSpec(**kw).validate()
