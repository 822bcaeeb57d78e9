"""The controller foundation without a cluster: the Manager's pass schedule (exact periods, back-off, leader-only
loops), readiness, the event recorder, two Managers electing over one in-memory Lease, and `drlsched reclaim`'s
one-line errors for bad kubeconfigs, an unreachable apiserver and bad options."""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from drlsched.cli import main
from drlsched.k8s import events, leader
from drlsched.k8s.client import NotLeading
from drlsched.k8s.controller import ControllerOptions, Manager, add_controller_arguments, controller_options
from drlsched.k8s.events import EventRecorder, involved
from drlsched.k8s.leader import LeaseConfig

from .fake_lease import FakeLeases


class FakeTime:
    """A clock and a stop event whose waits advance it; stops once `end` is reached."""

    def __init__(self, end: float) -> None:
        self.t, self.end = 0.0, end

    def __call__(self) -> float:
        return self.t

    def is_set(self) -> bool:
        return self.t >= self.end

    def wait(self, timeout: float | None = None) -> bool:
        self.t += timeout or 0.0
        return self.is_set()


def _manager(clock: FakeTime, leader_elect: bool = False) -> Manager:
    api = type("Api", (), {})()
    return Manager("test", api, ControllerOptions(leader_elect=leader_elect), clock=clock)


def test_passes_run_on_their_own_exact_periods_not_rounded_to_the_metrics_interval() -> None:
    clock = FakeTime(end=61.0)
    manager = _manager(clock)
    metrics: list[float] = []
    passes: list[float] = []
    manager.add("metrics", 10.0, lambda leading: metrics.append(clock.t), leader_only=False)
    manager.add("reconcile", 15.0, lambda leading: passes.append(clock.t))
    manager.run(clock)  # type: ignore[arg-type]
    # The case: --period 15 with --metrics-interval 10 ran a pass every 20 s before.
    assert [round(t, 2) for t in passes] == [0.0, 15.0, 30.0, 45.0, 60.0]
    assert [round(t, 2) for t in metrics] == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]


def test_a_pass_that_overruns_skips_the_missed_slots_instead_of_bursting() -> None:
    clock = FakeTime(end=40.0)
    manager = _manager(clock)
    passes: list[float] = []

    def slow(leading: bool) -> None:
        passes.append(clock.t)
        clock.t += 12.0 if len(passes) == 1 else 0.0

    manager.add("reconcile", 5.0, slow)
    manager.run(clock)  # type: ignore[arg-type]
    assert [round(t, 2) for t in passes] == [0.0, 15.0, 20.0, 25.0, 30.0, 35.0]


def test_a_failing_pass_backs_off_doubling_with_one_warning_each(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeTime(end=40.0)
    manager = _manager(clock)
    tries: list[float] = []

    def down(leading: bool) -> None:
        tries.append(clock.t)
        raise ConnectionRefusedError("connection refused")

    manager.add("reconcile", 1.0, down)
    with caplog.at_level("WARNING", logger="drlsched.k8s"):
        manager.run(clock)  # type: ignore[arg-type]
    # Waits 1, 2, 4, 8, 16 s (capped at 30): 6 tries in 40 s instead of 40, one line each.
    assert [round(t) for t in tries] == [0, 1, 3, 7, 15, 31]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == len(tries) and all("reconcile pass failed: ConnectionRefusedError" in m for m in lines)
    assert manager.passes.get(loop="reconcile", outcome="error") == len(tries)


def test_leader_only_loops_wait_while_standing_by_and_reconcile_is_told_whether_it_leads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "request", FakeLeases())
    clock = FakeTime(end=5.0)
    manager = _manager(clock, leader_elect=True)
    assert manager.elector is not None
    monkeypatch.setattr(manager.elector, "is_leader", lambda: False)
    monkeypatch.setattr(manager.elector, "start", lambda: None)
    seen: list[bool] = []
    writes: list[bool] = []
    manager.add("observe", 1.0, seen.append, leader_only=False)
    manager.add("write", 1.0, writes.append)
    manager.run(clock)  # type: ignore[arg-type]
    assert seen and not any(seen) and writes == []
    assert manager.passes.get(loop="write", outcome="standby") == len(seen)


def test_a_replica_that_starts_leading_runs_its_loops_at_once_then_every_period_from_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "request", FakeLeases())
    clock = FakeTime(end=40.0)
    manager = _manager(clock, leader_elect=True)
    assert manager.elector is not None
    monkeypatch.setattr(manager.elector, "is_leader", lambda: clock.t >= 7.0)  # takes the lease over at 7 s
    monkeypatch.setattr(manager.elector, "start", lambda: None)
    monkeypatch.setattr(manager.elector, "stop", lambda release: None)
    passes: list[tuple[float, bool]] = []
    manager.add("reconcile", 15.0, lambda leading: passes.append((round(clock.t, 2), leading)), leader_only=False)
    manager.run(clock)  # type: ignore[arg-type]
    # Not at 15 s (up to a period after the takeover, the standby's schedule): at 7 s, then 22 and 37.
    assert passes == [(0.0, False), (7.0, True), (22.0, True), (37.0, True)]


def test_readiness_follows_the_last_election_round() -> None:
    manager = _manager(FakeTime(0.0), leader_elect=True)
    assert manager.elector is not None and not manager.ready()
    manager.elector.reached = True  # a round read the Lease: leading or standing by
    assert manager.ready()
    manager.elector.reached = False
    assert not manager.ready()


def test_the_options_parse_leader_elect_false_and_refuse_bad_timings() -> None:
    parser = argparse.ArgumentParser()
    add_controller_arguments(parser, "drlsched-x")
    default = controller_options(parser.parse_args([]))
    assert default.leader_elect and default.lease.name == "drlsched-x"
    assert (default.lease.lease_duration_s, default.lease.renew_deadline_s, default.lease.retry_period_s) == (
        15.0, 10.0, 2.0)
    assert not controller_options(parser.parse_args(["--leader-elect=false"])).leader_elect
    assert controller_options(parser.parse_args(["--leader-elect"])).leader_elect


def test_two_managers_elect_one_leader_and_the_standby_takes_over_when_it_dies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    leases = FakeLeases()
    monkeypatch.setattr(leader, "request", leases)
    fast = LeaseConfig("drlsched-test", lease_duration_s=1.5, renew_deadline_s=1.0, retry_period_s=0.2)
    writes: dict[str, int] = {"a": 0, "b": 0}
    stops = {"a": threading.Event(), "b": threading.Event()}
    managers = {}
    for name in ("a", "b"):
        m = Manager(name, type("Api", (), {})(), ControllerOptions(lease=LeaseConfig(**{**fast.__dict__,  # type: ignore[arg-type]
                                                                                     "identity": name})))
        m.add("write", 0.05, lambda leading, name=name: writes.__setitem__(name, writes[name] + 1))
        managers[name] = m
    threads = {n: threading.Thread(target=managers[n].run, args=(stops[n],), daemon=True) for n in managers}
    threads["a"].start()
    _wait(lambda: leases.leases and leases.holder() == "a", "a to lead")
    threads["b"].start()
    _wait(lambda: managers["b"].elector and managers["b"].elector.reached, "b to stand by")
    time.sleep(0.5)
    assert writes["b"] == 0 and writes["a"] > 0
    # a "crashes": its elector stops renewing without releasing the lease, its loop stops.
    a_elector = managers["a"].elector
    assert a_elector is not None
    monkeypatch.setattr(a_elector, "release", lambda: None)
    stops["a"].set()
    threads["a"].join(10)
    _wait(lambda: leases.holder() == "b", "b to take over")
    _wait(lambda: writes["b"] > 0, "b to write")
    stops["b"].set()
    threads["b"].join(10)
    assert leases.holder() == ""  # released on a clean stop
    assert [h for m, h in leases.writes if h not in ("a", "b", "")] == []


def _wait(check: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_the_event_recorder_retries_like_client_go_and_gives_up_on_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "RETRY_S", 0.001)
    monkeypatch.setattr(events, "RETRY_MAX_S", 0.002)
    posted: list[dict[str, Any]] = []
    answers: list[BaseException | None] = [ConnectionRefusedError(), kubernetes.client.ApiException(status=503),
                                           None]

    def post(path: str, body: dict[str, Any]) -> None:
        posted.append(body)
        answer = answers.pop(0) if answers else None
        if answer is not None:
            raise answer

    recorder = EventRecorder(None, "drlsched-test", post=post)
    recorder.submit(involved("Node", "n1", "uid-1"), "default", "Warning", "Why", "because")
    assert recorder.drain(10)
    assert len(posted) == 3 and len({b["metadata"]["name"] for b in posted}) == 1  # one name for every try
    assert posted[0]["source"] == {"component": "drlsched-test"}
    assert recorder.outcomes.get(outcome="recorded") == 1
    posted.clear()
    answers[:] = [NotLeading("standby")]
    assert not recorder.record(involved("Node", "n1"), "default", "Normal", "Why", "because")
    assert len(posted) == 1  # a standby does not retry


# --- the CLI's one-line errors ------------------------------------------------------------------------------

_KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
}


def _bad_kubeconfig(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "kubeconfig"
    if kind == "malformed":
        path.write_text("x: [\n\t{")
    elif kind == "list":
        path.write_text("- a\n- b\n")
    elif kind == "bytes":
        path.write_bytes(bytes(range(256)))
    elif kind == "directory":
        path.mkdir()
    elif kind == "missing-server":
        config = yaml.safe_load(yaml.safe_dump(_KUBECONFIG))
        del config["clusters"][0]["cluster"]["server"]
        path.write_text(yaml.safe_dump(config))
    elif kind == "unreachable":
        path.write_text(yaml.safe_dump(_KUBECONFIG))
    return path


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own checks
        code = exc.code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("drlsched") and ": error: " in lines[0]
    return lines[0]


@pytest.mark.parametrize("kind, words", [
    ("malformed", "not valid YAML at line 2"), ("list", "not a YAML mapping"), ("bytes", "not text"),
    ("directory", "is not a file"), ("missing-server", "has no server URL"), ("unreachable", "cannot reach"),
])
@pytest.mark.parametrize("elect", ["--leader-elect=true", "--leader-elect=false"])
def test_every_bad_kubeconfig_and_an_unreachable_apiserver_with_once_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, words: str, elect: str) -> None:
    path = _bad_kubeconfig(tmp_path, kind)
    line = _one_line_exit_2(["reclaim", "--kubeconfig", str(path), "--model", "koordinator", "--once", elect],
                            capsys)
    assert words in line


@pytest.mark.parametrize("argv", [
    ["reclaim", "--model", "nope"],
    ["reclaim", "--model", "koordinator", "--leader-elect=maybe"],
    ["reclaim", "--model", "koordinator", "--leader-elect-renew-deadline", "20"],
    ["reclaim", "--model", "koordinator", "--health-port", "70000"],
    ["reclaim", "--model", "koordinator", "--no-such-option"],
    ["simulate", "--no-such-option"],
    [],
])
def test_bad_options_are_one_line_not_the_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    line = _one_line_exit_2(argv, capsys)
    assert "usage:" not in line
