"""Leader election on a Lease without a cluster (an in-memory Lease API, clocks driven by the test): who leads,
when a standby takes over, losing the lease, races, release, and the write gate a standby runs behind."""

from __future__ import annotations

import json

import pytest

from drlsched.k8s import client, leader
from drlsched.k8s.client import NotLeading, gate_writes
from drlsched.k8s.leader import LeaderElector, LeaseConfig

from .fake_lease import FakeLeases

CFG = LeaseConfig("drlsched-reclaim", "default")  # client-go's defaults: 15 s lease, 10 s deadline, 2 s retry


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def leases(monkeypatch: pytest.MonkeyPatch) -> FakeLeases:
    fake = FakeLeases()
    monkeypatch.setattr(leader, "request", fake)
    return fake


def _elector(name: str, clock: Clock) -> LeaderElector:
    cfg = LeaseConfig(CFG.name, CFG.namespace, identity=name)
    return LeaderElector(None, cfg, clock=clock, wall=lambda: 1_800_000_000.0 + clock.t)  # type: ignore[arg-type]


def test_client_go_defaults_and_invalid_timings_are_refused() -> None:
    assert (CFG.lease_duration_s, CFG.renew_deadline_s, CFG.retry_period_s) == (15.0, 10.0, 2.0)
    for duration, deadline, retry in ((10, 10, 2), (15, 0, 2), (15, 10, 0), (15, 2, 2)):
        with pytest.raises(ValueError):
            LeaseConfig("x", lease_duration_s=duration, renew_deadline_s=deadline, retry_period_s=retry)


def test_the_first_candidate_creates_the_lease_and_leads_the_second_stands_by(leases: FakeLeases) -> None:
    clock = Clock()
    a, b = _elector("a", clock), _elector("b", clock)
    assert a.try_acquire_or_renew() and a.is_leader()
    assert not b.try_acquire_or_renew() and not b.is_leader() and b.holder == "a"
    lease = next(iter(leases.leases.values()))
    assert lease["apiVersion"] == "coordination.k8s.io/v1" and lease["kind"] == "Lease"
    assert lease["spec"]["leaseDurationSeconds"] == 15 and lease["spec"]["leaseTransitions"] == 0
    assert lease["spec"]["renewTime"].endswith("Z") and "." in lease["spec"]["renewTime"]  # MicroTime
    # The leader renews every round; the standby keeps waiting however long that goes on.
    for _ in range(20):
        clock.t += 2.0
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert leases.holder() == "a" and a.is_leader() and not b.is_leader()


def test_a_standby_takes_over_one_lease_duration_after_the_last_renewal_it_saw(leases: FakeLeases) -> None:
    clock = Clock()
    a, b = _elector("a", clock), _elector("b", clock)
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    seen = clock.t
    # a dies (no more renewals): b waits out 15 s from when it saw the record last change, by its own clock.
    while clock.t < seen + 14.0:
        clock.t += 2.0
        if clock.t < seen + 15.0:
            assert not b.try_acquire_or_renew(), clock.t - seen
    clock.t = seen + 15.0
    assert b.try_acquire_or_renew() and b.is_leader()
    spec = next(iter(leases.leases.values()))["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    # a, back, cannot renew a lease that is no longer its own.
    assert not a.try_acquire_or_renew()


def test_a_leader_that_cannot_renew_stops_leading_after_the_renew_deadline_and_its_writes_are_refused(
        leases: FakeLeases) -> None:
    clock = Clock()
    a = _elector("a", clock)
    api = type("Api", (), {})()  # never reached: the gate refuses before any HTTP
    gate_writes(api, a.is_leader)
    a.try_acquire_or_renew()
    leases.down = True
    clock.t += 9.9
    assert a.is_leader()
    clock.t += 0.2
    assert not a.is_leader()
    with pytest.raises(NotLeading):
        client.request(api, "PATCH", "/api/v1/nodes/n/status", {})
    with pytest.raises(NotLeading):
        client.request(api, "POST", "/api/v1/namespaces/default/events", {})
    # 10 s of not leading is 5 s before a standby, which waits 15 s, may start.
    assert CFG.lease_duration_s - CFG.renew_deadline_s == 5.0


def test_two_candidates_racing_for_an_expired_lease_one_wins(leases: FakeLeases,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    a, b, c = _elector("a", clock), _elector("b", clock), _elector("c", clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    c.try_acquire_or_renew()
    clock.t += 15.0
    # Both read the same expired record; the apiserver takes the first PUT, refuses the second's stale version.
    stale = json.loads(leases(None, "GET", b.path))
    assert b.try_acquire_or_renew()
    original = leases.__call__

    def replay_stale(api: object, method: str, path: str, body: object = None, content_type: str = "",
                     gated: bool = True) -> bytes:
        if method == "GET":
            return json.dumps(stale).encode()
        return original(api, method, path, body, content_type, gated)

    monkeypatch.setattr(leader, "request", replay_stale)
    assert not c.try_acquire_or_renew() and not c.is_leader()
    assert leases.holder() == "b"


def test_a_released_lease_is_taken_at_the_next_round(leases: FakeLeases) -> None:
    clock = Clock()
    a, b = _elector("a", clock), _elector("b", clock)
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert not a.is_leader() and leases.holder() == ""
    clock.t += 2.0
    assert b.try_acquire_or_renew() and b.is_leader()


def test_the_gate_lets_reads_through_and_writes_only_while_leading(leases: FakeLeases) -> None:
    clock = Clock()
    a, b = _elector("a", clock), _elector("b", clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    calls: list[str] = []

    class Api:
        def param_serialize(self, method: str, path: str, **_: object) -> tuple[str, str, dict[str, str], None, None]:
            calls.append(f"{method} {path}")
            return method, path, {}, None, None

        def call_api(self, *_: object, **__: object) -> object:
            return type("R", (), {"status": 200, "reason": "OK", "read": lambda self: b"{}"})()

    standby, active = Api(), Api()
    gate_writes(standby, b.is_leader)
    gate_writes(active, a.is_leader)
    client.request(standby, "GET", "/api/v1/nodes")
    with pytest.raises(NotLeading):
        client.request(standby, "PATCH", "/api/v1/nodes/n/status", {})
    client.request(active, "PATCH", "/api/v1/nodes/n/status", {})
    assert calls == ["GET /api/v1/nodes", "PATCH /api/v1/nodes/n/status"]
