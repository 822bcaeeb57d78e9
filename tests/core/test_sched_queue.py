"""The shared scheduling queue (kube-scheduler's PriorityQueue) and NodeResourcesFit's queueing hint."""

from __future__ import annotations

import numpy as np
import pytest

from drlsched.cluster import Cluster
from drlsched.policies import make_policy
from drlsched.scenarios import make_scenario
from drlsched.sched.queue import MAX_UNSCHEDULABLE_S, SchedulingQueue
from drlsched.simulator import SimConfig, Simulator
from drlsched.workload import NodeSpec, PodSpec

from .queue_checks import run_checking_parked_pods


def _drain(q: SchedulingQueue[str], t: float) -> list[str]:
    out = []
    while (entry := q.pop(t)) is not None:
        out.append(entry.pod)
        q.done(entry)
    return out


def test_active_pods_go_by_priority_then_by_when_they_entered() -> None:
    q: SchedulingQueue[str] = SchedulingQueue()
    q.add("late-high", 5, 2.0)
    q.add("early-low", 0, 0.0)
    q.add("early-high", 5, 1.0)
    q.add("later-low", 0, 3.0)
    assert _drain(q, 10.0) == ["early-high", "late-high", "early-low", "later-low"]
    assert len(q) == 0


def test_a_parked_pod_waits_for_an_event_its_hint_accepts_then_backs_off_behind_active_pods() -> None:
    q: SchedulingQueue[str] = SchedulingQueue(hint_width=1)
    big = q.pop(0.0) if q.add("big", 0, 0.0) else None
    assert big is not None and q.park(big, 0.0, (8,))
    assert q.pop(0.5) is None and q.parked == 1 and len(q) == 1
    assert q.wake(0.5, lambda rows: rows[:, 0] <= 4) == 0  # room for 4 only: the hint says skip
    assert q.parked == 1
    q.add("fresh", 0, 0.6)
    assert q.wake(0.6, lambda rows: rows[:, 0] <= 8) == 1
    # "big" failed once: its 1 s backoff runs to 1.0, so at 0.7 it is tried only behind "fresh".
    assert _drain(q, 0.7) == ["fresh", "big"]


def test_an_expired_backoff_orders_by_priority_and_queue_time_again() -> None:
    q: SchedulingQueue[str] = SchedulingQueue()
    a = q.pop(0.0) if q.add("a", 0, 0.0) else None
    assert a is not None and q.park(a, 0.0)
    q.wake(0.5)
    q.add("b", 0, 0.8)
    assert _drain(q, 2.0) == ["a", "b"]  # a's backoff ended at 1.0 and it entered the queue at 0.0


def test_parked_pods_are_flushed_after_five_minutes_without_an_event() -> None:
    q: SchedulingQueue[str] = SchedulingQueue(hint_width=1)
    entry = q.pop(0.0) if q.add("p", 0, 0.0) else None
    assert entry is not None and q.park(entry, 10.0, (1,))
    assert q.next_change() == pytest.approx(10.0 + MAX_UNSCHEDULABLE_S)
    assert q.flush(10.0 + MAX_UNSCHEDULABLE_S - 1) == 0
    assert q.flush(10.0 + MAX_UNSCHEDULABLE_S) == 1
    assert _drain(q, 10.0 + MAX_UNSCHEDULABLE_S) == ["p"]


def test_a_failed_bind_waits_out_its_backoff_and_doubles_it() -> None:
    q: SchedulingQueue[str] = SchedulingQueue()
    q.add("b", 0, 0.0)
    for attempt, backoff in enumerate((1.0, 2.0, 4.0), start=1):
        t = q.next_change() if attempt > 1 else 0.0
        entry = q.pop(t)
        assert entry is not None and entry.attempts == attempt - 1
        q.requeue_error(entry, t)
        assert q.pop(t + backoff - 0.01) is None
        assert q.next_change() == pytest.approx(t + backoff)


def test_an_event_while_a_pod_is_tried_sends_it_back_and_a_removed_pod_never_returns() -> None:
    q: SchedulingQueue[str] = SchedulingQueue()
    q.add("p", 0, 0.0)
    q.add("gone", 0, 0.0)
    p = q.pop(0.0)
    assert p is not None and p.pod == "p"
    q.wake(0.1)  # room freed while p was being decided
    assert q.park(p, 0.2) and q.parked == 0
    gone = q.pop(5.0)
    assert gone is not None and gone.pod == "gone"
    q.remove(gone)
    assert not q.park(gone, 5.0) and len(q) == 1
    q.remove(p)
    assert len(q) == 0 and q.pop(100.0) is None


def test_fits_any_is_feasible_restricted_to_the_given_nodes() -> None:
    rng = np.random.default_rng(4)
    nodes = [NodeSpec(f"n{i}", int(rng.choice([4000, 8000])), 16384, gpus=int(rng.choice([0, 2, 8])),
                      gpu_model=str(rng.choice(["A", "B"])), taints=("t",) if i % 5 == 0 else ())
             for i in range(12)]
    c = Cluster(nodes)
    for _ in range(60):  # a random state of allocations
        spec = PodSpec("x", "j", 0.0, int(rng.integers(100, 3000)), int(rng.integers(100, 4000)),
                       gpus=int(rng.integers(0, 3)), gpu_milli=int(rng.choice([300, 1000])))
        r = c.request(spec)
        ok = np.flatnonzero(c.feasible(r))
        if ok.size:
            node = int(rng.choice(ok))
            c.allocate(node, r, c.pick_gpus(node, r))
    for _ in range(300):
        spec = PodSpec("y", "j", 0.0, int(rng.integers(0, 6000)), int(rng.integers(0, 9000)),
                       gpus=int(rng.integers(0, 4)), gpu_milli=int(rng.choice([250, 700, 1000])),
                       gpu_models=tuple(rng.choice(["A", "B", "C"], size=int(rng.integers(0, 2)))),
                       tolerations=("t",) if rng.random() < 0.3 else ())
        r = c.request(spec)
        subset = rng.choice(c.size, size=int(rng.integers(1, 5)), replace=False)
        rows = np.array([r.row()], dtype=np.int64)
        assert c.fits_any(rows, subset)[0] == bool(c.feasible(r)[subset].any())


def test_the_simulators_hint_never_leaves_a_pod_parked_that_fits_somewhere() -> None:
    """After every pass, each pod parked by the fit hint really fits no node: the hint skips only retries that
    would fail, so no placement is lost to it (a saturated cluster, so many pods wait)."""
    w = make_scenario("batch", nodes=4, duration=120, load=3.0, seed=2)
    sim = Simulator(w, make_policy("k8s-default"), 2, SimConfig(series=False))
    m, most_parked = run_checking_parked_pods(sim)
    assert most_parked > 20 and m["pods_unschedulable"] == 0 and sim.queue.failed_attempts > 0


def test_the_array_backoff_is_the_scalar_one() -> None:
    from drlsched.kube_scoring import pod_backoff_array, pod_backoff_s

    attempts = np.arange(-1, 70)
    for initial, cap in ((1.0, 10.0), (0.5, 3.0), (1.0, 0.0)):
        expected = [pod_backoff_s(int(a), initial, cap) for a in attempts]
        assert pod_backoff_array(attempts.astype(float), initial, cap).tolist() == expected


def test_pods_a_hint_rejects_fail_in_place_as_an_upstream_retry_would() -> None:
    q: SchedulingQueue[str] = SchedulingQueue(hint_width=1)
    for name in ("a", "b"):
        q.add(name, 0, 0.0)
    entries = {e.pod: e for e in (q.pop(0.0), q.pop(0.0)) if e is not None}
    q.park(entries["a"], 0.0, (8,))
    q.park(entries["b"], 0.0, (2,))
    assert q.failed_attempts == 2
    assert q.wake(5.0, lambda rows: rows[:, 0] <= 4) == 1  # room for 4: "b" is tried, "a" fails at once
    assert q.failed_attempts == 3
    b = q.pop(5.0)
    assert b is not None and b.pod == "b" and b.attempts == 1
    a = q.parked_entries()
    assert [(e.pod, hinted) for e, hinted in a] == [("a", True)]
    q.remove(a[0][0])  # written back from the parked store
    assert a[0][0].attempts == 2 and a[0][0].queue_t == 5.0 and a[0][0].backoff_t == 5.0 + 2.0


def _random_queue_trace(seed: int, lazy: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[object], int]:
    """A random run of the queue (adds, pops that park, place or fail to bind, wakes with a size hint, removals,
    flushes, two priorities) and everything it decides: each pop's pod, attempts, queue time and backoff end, the
    failed attempts, and at the end every parked pod's bookkeeping; also the most pods in the lazy group at once."""
    from drlsched.sched import queue as queue_module

    monkeypatch.setattr(queue_module._Parked, "lazy", lazy)
    rng = np.random.default_rng(seed)
    q: SchedulingQueue[int] = SchedulingQueue(hint_width=1)
    size: dict[int, int] = {}
    trace: list[object] = []
    t, pods, grouped = 0.0, 0, 0
    for _ in range(400):
        t += float(rng.choice([0.0, 0.05, 0.5, 3.0, 12.0], p=[0.3, 0.3, 0.2, 0.15, 0.05]))
        for _ in range(int(rng.integers(0, 4))):
            size[pods] = int(rng.integers(1, 9))
            q.add(pods, int(rng.choice([0, 0, 0, 5])), t)
            pods += 1
        if q.parked and rng.random() < 0.6:
            room = int(rng.integers(0, 9))
            q.wake(t, lambda rows, room=room: rows[:, 0] <= room)
            grouped = max(grouped, q._parked.g_live)
        q.flush(t)
        room = int(rng.integers(0, 12))
        while (entry := q.pop(t)) is not None:
            trace.append((entry.pod, entry.attempts, entry.queue_t, entry.backoff_t, t))
            if size[entry.pod] <= room:
                room -= size[entry.pod]
                q.done(entry)
            elif rng.random() < 0.05:
                q.requeue_error(entry, t)
            else:
                q.park(entry, t, (size[entry.pod],))
        if q.parked and rng.random() < 0.05:
            q.remove(q.parked_entries()[int(rng.integers(0, q.parked))][0])
    trace.append(q.failed_attempts)
    for entry, _ in q.parked_entries():
        q.remove(entry)
        trace.append((entry.pod, entry.attempts, entry.queue_t, entry.backoff_t))
    return trace, grouped


@pytest.mark.parametrize("seed", range(6))
def test_the_lazy_group_decides_exactly_as_writing_every_failure(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parked pods at the backoff cap keep their bookkeeping lazily (the group): same pops, in the same order, with
    the same attempts, queue times and backoffs as when every failure is written per pod."""
    eager, none = _random_queue_trace(seed, False, monkeypatch)
    lazy, grouped = _random_queue_trace(seed, True, monkeypatch)
    assert none == 0 and grouped > 5 and len(eager) > 300  # the group did form: the lazy path ran
    assert lazy == eager
