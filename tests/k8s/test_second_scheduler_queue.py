"""The second scheduler's queue follows kube-scheduler's: an unschedulable pod waits for capacity to free, not for
a timer, and a pod still backing off is tried behind the pods that are not (no cluster needed)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import kubernetes
import pytest

from drlsched.k8s.objects import pod_manifest
from drlsched.k8s.second_scheduler import SecondScheduler
from drlsched.policies import make_policy
from drlsched.sched.queue import MAX_UNSCHEDULABLE_S

NAME = "drl-scheduler"


def _pod(name: str, node: str = "", phase: str = "Pending") -> dict:
    m = pod_manifest(name, duration=None)
    m["metadata"].update(uid=f"uid-{name}", namespace="default")
    m["spec"]["schedulerName"] = NAME
    if node:
        m["spec"]["nodeName"] = node
    m["status"] = {"phase": phase}
    return m


@pytest.fixture
def queue() -> Iterator[SecondScheduler]:
    """A scheduler whose loop and watches are not started: the test drives its queue by hand."""
    s = SecondScheduler(kubernetes.client.ApiClient(), make_policy("k8s-default"), NAME)
    for event in s.informer.synced.values():
        event.set()
    yield s
    s._pool.shutdown(wait=True)


def _take(s: SecondScheduler) -> dict:
    """The pods the loop may decide now, in the order it would: name -> queue entry."""
    out = {}
    with s._cond:
        while (entry := s._take(time.monotonic())) is not None:
            out[entry.pod.name] = entry
    return out


def test_an_unschedulable_pod_waits_for_capacity_to_free_then_queues_behind_fresh_pods(
    queue: SecondScheduler,
) -> None:
    queue._on_pod("ADDED", _pod("old"))
    assert list(_take(queue)) == ["old"]
    queue._requeue("uid-old", queue._binding["uid-old"].pod, park=True)
    assert queue._queue.parked == 1 and queue.pending() == 1
    # Not retried before capacity frees, or at the latest after kube-scheduler's 5 minutes.
    assert queue._queue.next_change() >= time.monotonic() + MAX_UNSCHEDULABLE_S - 5

    queue._on_pod("ADDED", _pod("new"))
    assert list(_take(queue)) == ["new"]  # the parked pod is not retried while nothing has freed

    queue._on_pod("MODIFIED", _pod("finished", node="n1", phase="Succeeded"))  # a bound pod ended
    queue._on_pod("ADDED", _pod("newer"))
    # Both are due; "old" is still within its 1 s backoff, so it comes after the pod that is not backing off.
    assert list(_take(queue)) == ["newer", "old"]


def test_capacity_freed_while_a_pod_is_decided_requeues_it_at_once(queue: SecondScheduler) -> None:
    queue._on_pod("ADDED", _pod("p"))
    p = _take(queue)["p"]
    queue._on_pod("DELETED", _pod("gone", node="n1", phase="Running"))  # frees room during the decision
    queue._requeue("uid-p", p.pod, park=True)
    assert queue._queue.parked == 0 and list(_take(queue)) == ["p"]


def test_a_failed_bind_is_retried_after_its_backoff(queue: SecondScheduler) -> None:
    queue._on_pod("ADDED", _pod("b"))
    b = _take(queue)["b"]
    queue._requeue("uid-b", b.pod)
    assert _take(queue) == {} and queue.pending() == 1
    assert queue._queue.next_change() == pytest.approx(time.monotonic() + 1.0, abs=0.5)


def test_a_pod_deleted_while_it_is_decided_is_not_requeued(queue: SecondScheduler) -> None:
    queue._on_pod("ADDED", _pod("d"))
    d = _take(queue)["d"]
    queue._on_pod("DELETED", _pod("d"))
    queue._requeue("uid-d", d.pod, park=True)
    assert queue.pending() == 0 and "uid-d" not in queue._queued


def test_a_pod_that_fits_nowhere_is_not_shown_to_the_policy() -> None:
    from drlsched.k8s.objects import pod_spec
    from drlsched.k8s.placement import Placer
    from drlsched.k8s.state import ClusterState
    from drlsched.policies.base import Policy
    from drlsched.testbed.nodes import node_manifests

    class Watching(Policy):
        name = "watching"
        seen = 0

        def select(self, ctx):  # type: ignore[no-untyped-def]
            Watching.seen += 1
            return None

    state = ClusterState()
    for n in node_manifests(3, 0, "uniform"):
        state.set_node(n)
    placer = Placer(Watching())
    huge = pod_spec({**_pod("huge"), "spec": {**_pod("huge")["spec"], "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "10000", "memory": "1Gi"}}}]}})
    choice = placer.choose(state, huge)
    assert choice.node is None and "Insufficient cpu" in choice.reason and Watching.seen == 0
    placer.choose(state, pod_spec(_pod("small")))
    assert Watching.seen == 1


def test_readyz_answers_503_until_ready_while_healthz_is_ok() -> None:
    import threading
    import urllib.error
    import urllib.request

    from drlsched.k8s import prom

    ready = threading.Event()
    server = prom.MetricsServer(("127.0.0.1", 0), prom.Registry(), ready=ready.is_set)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert urllib.request.urlopen(f"{base}/healthz").status == 200
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{base}/readyz")
        assert err.value.code == 503
        ready.set()
        assert urllib.request.urlopen(f"{base}/readyz").status == 200
    finally:
        server.shutdown()
