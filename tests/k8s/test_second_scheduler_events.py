"""The second scheduler's `Scheduled` events and `pods_total{outcome="bound"}` stay exact when bind answers are
lost (timeouts, 5xx, a 409 for our own earlier bind) and across a restart. The apiserver is a fake `request`
(no cluster needed): it records the writes, and each test scripts what the binds return."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from drlsched.k8s import events, second_scheduler
from drlsched.k8s.objects import pod_manifest
from drlsched.k8s.second_scheduler import SecondScheduler
from drlsched.policies import make_policy

NAME = "drl-scheduler"


class FakeApi:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.binds: list[str] = []
        self.on_bind: Callable[[str], bytes] = lambda node: b"{}"
        self.pods: dict[str, dict[str, Any]] = {}  # name -> what GET returns
        self.listed_pods: list[dict[str, Any]] = []
        self.listed_events: list[dict[str, Any]] = []
        self.event_tries: list[str] = []  # the name of every event POST, answered or not
        self.on_event: Callable[[dict[str, Any]], None] = self.events.append  # a test may make it raise

    def __call__(self, api: Any, method: str, path: str, body: Any = None, content_type: str = "") -> bytes:
        if method == "POST" and path.endswith("/binding"):
            self.binds.append(body["target"]["name"])
            return self.on_bind(body["target"]["name"])
        if method == "POST" and path.endswith("/events"):
            name = body["metadata"]["name"]
            self.event_tries.append(name)
            if any(e["metadata"]["name"] == name for e in self.events):
                raise kubernetes.client.ApiException(status=409, reason="AlreadyExists")
            self.on_event(body)
            return b"{}"
        if method == "GET" and path.startswith("/api/v1/pods?"):
            return json.dumps({"items": self.listed_pods}).encode()
        if method == "GET" and path.startswith("/api/v1/events?"):
            return json.dumps({"items": self.listed_events}).encode()
        if method == "GET":
            return json.dumps(self.pods[path.rsplit("/", 1)[1]]).encode()
        return b"{}"

    def scheduled(self) -> list[str]:
        return [e["message"] for e in self.events if e["reason"] == "Scheduled"]


def _pod(name: str, node: str = "") -> dict[str, Any]:
    m = pod_manifest(name, duration=None)
    m["metadata"].update(uid=f"uid-{name}", namespace="default")
    m["spec"]["schedulerName"] = NAME
    if node:
        m["spec"]["nodeName"] = node
    m["status"] = {"phase": "Pending" if not node else "Running"}
    return m


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    api = FakeApi()
    monkeypatch.setattr(second_scheduler, "request", api)
    return api


@pytest.fixture
def scheduler(fake: FakeApi) -> Iterator[SecondScheduler]:
    """Queue driven by hand (loop and watches not started); API writes go to `fake`."""
    s = SecondScheduler(kubernetes.client.ApiClient(), make_policy("first-fit"), NAME)
    for event in s.informer.synced.values():
        event.set()
    yield s
    s._pool.shutdown(wait=True)


def _bind_once(s: SecondScheduler, name: str, node: str) -> None:
    """Takes the pod off the queue and binds it to `node`, as the decision loop would."""
    s._on_pod("ADDED", _pod(name))
    with s._cond:
        entry = s._take(time.monotonic())
    assert entry is not None
    s._bind(entry.pod.spec.uid, entry.pod, node, {})


def _settle(s: SecondScheduler) -> None:
    assert s._pool.drain(time.monotonic() + 60)


@pytest.fixture(autouse=True)
def _quick_event_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "RETRY_S", 0.01)
    monkeypatch.setattr(events, "RETRY_MAX_S", 0.02)


def test_a_plain_bind_gets_one_event(scheduler: SecondScheduler, fake: FakeApi) -> None:
    _bind_once(scheduler, "a", "n1")
    scheduler._on_pod("MODIFIED", _pod("a", node="n1"))  # the watch confirms: nothing more to report
    _settle(scheduler)
    assert fake.scheduled() == ["Successfully assigned default/a to n1"]
    assert scheduler.outcomes.get(outcome="bound") == 1


@pytest.mark.parametrize("lost", [TimeoutError("read timed out"),
                                  kubernetes.client.ApiException(status=504, reason="Gateway Timeout")])
def test_a_bind_whose_answer_was_lost_is_reported_when_the_watch_shows_it_bound(
    scheduler: SecondScheduler, fake: FakeApi, lost: Exception,
) -> None:
    def fail(node: str) -> bytes:
        raise lost

    fake.on_bind = fail
    _bind_once(scheduler, "a", "n1")  # it did bind; the answer never came
    assert fake.scheduled() == [] and scheduler.outcomes.get(outcome="bind_error") == 1
    scheduler._on_pod("MODIFIED", _pod("a", node="n1"))
    scheduler._on_pod("MODIFIED", _pod("a", node="n1"))  # a second event for it reports nothing more
    _settle(scheduler)
    assert fake.scheduled() == ["Successfully assigned default/a to n1"]
    assert scheduler.outcomes.get(outcome="bound") == 1
    assert scheduler.pending() == 0  # bound: no longer queued


def test_a_retry_that_meets_our_own_earlier_bind_reports_the_node_it_is_on(
    scheduler: SecondScheduler, fake: FakeApi,
) -> None:
    answers = iter([TimeoutError("read timed out"), kubernetes.client.ApiException(status=409, reason="Conflict")])

    def bind(node: str) -> bytes:
        raise next(answers)

    fake.on_bind = bind
    fake.pods["a"] = _pod("a", node="n1")  # where the first, unanswered bind put it
    _bind_once(scheduler, "a", "n1")
    with scheduler._cond:
        retry = scheduler._take(time.monotonic() + 60.0)  # once its backoff is over
    assert retry is not None
    scheduler._bind(retry.pod.spec.uid, retry.pod, "n2", {})  # the retry chose another node: 409
    scheduler._on_pod("MODIFIED", _pod("a", node="n1"))  # the watch catches up afterwards
    _settle(scheduler)
    assert fake.binds == ["n1", "n2"]
    assert fake.scheduled() == ["Successfully assigned default/a to n1"]
    assert scheduler.outcomes.get(outcome="bound") == 1 and scheduler.outcomes.get(outcome="conflict") == 1


def test_a_bind_refused_outright_is_not_reported_when_someone_else_binds(
    scheduler: SecondScheduler, fake: FakeApi,
) -> None:
    def forbidden(node: str) -> bytes:
        raise kubernetes.client.ApiException(status=403, reason="Forbidden")

    fake.on_bind = forbidden
    _bind_once(scheduler, "a", "n1")  # definitely not bound by this call
    scheduler._on_pod("MODIFIED", _pod("a", node="n1"))
    _settle(scheduler)
    assert fake.scheduled() == [] and scheduler.outcomes.get(outcome="bound") == 0


def test_a_restart_writes_the_events_a_previous_instance_did_not(scheduler: SecondScheduler, fake: FakeApi) -> None:
    scheduler._started_at = second_scheduler._now()
    before = "2000-01-01T00:00:00Z"  # bound before the events' one-hour TTL: left alone
    recent = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600))
    future = "9999-01-01T00:00:00Z"
    for name, at in (("old", before), ("reported", recent), ("missed", recent), ("mine", future)):
        pod = _pod(name, node="n1")
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at}]
        fake.listed_pods.append(pod)
    fake.listed_pods.append(_pod("pending"))
    fake.listed_events.append({"involvedObject": {"uid": "uid-reported"}, "reason": "Scheduled"})
    scheduler._reconcile()
    assert fake.scheduled() == ["Successfully assigned default/missed to n1 (recorded after a scheduler restart)"]
    assert scheduler.outcomes.get(outcome="bound") == 1


def test_an_event_posted_while_the_apiserver_is_down_is_retried_until_it_lands(
    scheduler: SecondScheduler, fake: FakeApi,
) -> None:
    outages = iter([ConnectionRefusedError("down"), kubernetes.client.ApiException(status=503, reason="Unavailable")])

    def flaky(body: dict[str, Any]) -> None:
        err = next(outages, None)
        if err is not None:
            raise err
        fake.events.append(body)

    fake.on_event = flaky
    _bind_once(scheduler, "a", "n1")
    _settle(scheduler)
    assert fake.scheduled() == ["Successfully assigned default/a to n1"]
    assert len(fake.event_tries) == 3 and len(set(fake.event_tries)) == 1  # one name for every try


def test_an_event_whose_answer_was_lost_is_not_recorded_twice(scheduler: SecondScheduler, fake: FakeApi) -> None:
    def lost(body: dict[str, Any]) -> None:
        fake.events.append(body)  # it landed; the answer never came
        if len(fake.events) == 1:
            raise TimeoutError("read timed out")

    fake.on_event = lost
    _bind_once(scheduler, "a", "n1")
    _settle(scheduler)
    assert fake.scheduled() == ["Successfully assigned default/a to n1"]
    assert len(fake.event_tries) == 2  # the retry met a 409 and took it as done


def test_an_event_refused_outright_or_failing_every_try_is_given_up(scheduler: SecondScheduler, fake: FakeApi) -> None:
    def forbidden(body: dict[str, Any]) -> None:
        raise kubernetes.client.ApiException(status=403, reason="Forbidden")

    fake.on_event = forbidden
    _bind_once(scheduler, "a", "n1")
    _settle(scheduler)
    assert fake.scheduled() == [] and len(fake.event_tries) == 1

    def down(body: dict[str, Any]) -> None:
        raise ConnectionRefusedError("down")

    fake.on_event = down
    _bind_once(scheduler, "b", "n1")
    _settle(scheduler)
    assert fake.scheduled() == [] and len(fake.event_tries) == 1 + events.TRIES
    assert scheduler.outcomes.get(outcome="bound") == 2  # the binds themselves succeeded
