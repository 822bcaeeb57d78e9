"""`drlsched admit` without a cluster: the job state rebuilt from gates, each job policy's order and limits on the
releases, the pool, pods that cannot be attributed, metadata a policy needs, restarts that rebuild the same state,
the release patch's precondition, and one-line errors for bad options and policy files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drlsched.cli import main
from drlsched.jobs.policies import make_job_policy
from drlsched.k8s import admit_controller
from drlsched.k8s.admission import ADMITTED_ANNOTATION, GATE, executor_slots, load_policy_file, snapshot
from drlsched.k8s.admit_controller import AdmitController
from drlsched.k8s.objects import JOB_LABEL

from .fake_pods import FakePods, gated_pod, node


def _at(second: int) -> str:
    return f"2027-01-15T08:00:{second:02d}Z"


def _job(name: str, pods: int, second: int, **kw: Any) -> list[dict[str, Any]]:
    return [gated_pod(f"{name}-{i}", name, _at(second), **kw) for i in range(pods)]


def _controller(monkeypatch: pytest.MonkeyPatch, fake: FakePods, policy: str = "fifo", executors: int | None = 4,
                policy_file: Path | None = None) -> AdmitController:
    monkeypatch.setattr(admit_controller, "request", fake)
    return AdmitController(None, make_job_policy(policy), executors, policy_file)  # type: ignore[arg-type]


def _step(controller: AdmitController) -> admit_controller.PassResult:
    result = controller.step()
    assert controller.events.drain(10.0)
    return result


def test_the_state_is_rebuilt_from_gates_labels_and_phases() -> None:
    released = gated_pod("a-2", "a", _at(1), gates=())
    done = gated_pod("a-3", "a", _at(0), gates=())
    done["status"]["phase"] = "Succeeded"
    leaving = gated_pod("b-1", "b", _at(2))
    leaving["metadata"]["deletionTimestamp"] = _at(9)
    other_ns = gated_pod("a-0", "a", _at(5), namespace="other")
    snap = snapshot([*_job("a", 2, 3), released, done, leaving, gated_pod("b-0", "b", _at(2)), other_ns,
                     gated_pod("x", None), gated_pod("y", "")])
    assert [(j.key, [r.name for r in j.gated], j.released, j.arrival_s % 60) for j in snap.jobs] == [
        ("default/a", ["a-0", "a-1"], 1, 0.0),  # dated by its finished pod
        ("default/b", ["b-0"], 0, 2.0),
        ("other/a", ["a-0"], 0, 5.0)]  # the same label in another namespace is another job
    assert snap.released == 1
    assert [(r.name, why.split()[0]) for r, why in snap.unattributed] == [("x", "no"), ("y", "malformed")]


def test_fifo_releases_jobs_in_arrival_order_up_to_the_pool_and_no_further(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePods([*_job("late", 3, 30), *_job("early", 3, 10)])
    controller = _controller(monkeypatch, fake, executors=4)
    result = _step(controller)
    assert result.released == ["default/early-0", "default/early-1", "default/early-2", "default/late-0"]
    assert fake.gated() == {"default/late-1", "default/late-2"}
    assert "no free executor" in result.held["default/late-1"]
    # A second pass with nothing finished releases nothing.
    assert _step(controller).released == []
    fake.finish("default/early-0")
    assert _step(controller).released == ["default/late-1"]
    assert fake.released == ["default/early-0", "default/early-1", "default/early-2", "default/late-0",
                             "default/late-1"]
    patched = fake.pods["default/early-0"]
    assert ADMITTED_ANNOTATION in patched["metadata"]["annotations"] and "schedulingGates" not in patched["spec"]
    assert ("Normal", "Admitted") in fake.reasons("early-0")
    assert ("Normal", "AdmissionHeld") in fake.reasons("late-2")
    assert controller.releases.get(outcome="released") == 5


def test_fair_limits_each_job_and_a_lowered_limit_only_stops_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePods(_job("a", 6, 10))
    controller = _controller(monkeypatch, fake, "fair", executors=6)
    assert len(_step(controller).released) == 6  # alone: the whole pool
    for pod in _job("b", 6, 20) + _job("c", 6, 30):
        fake.add(pod)
    result = _step(controller)
    # Limit ceil(6/3) = 2 each, but a holds 6 and the pool is full: nothing more, and nothing of a is touched.
    assert result.released == [] and result.limits == {"default/a": 2.0, "default/b": 2.0, "default/c": 2.0}
    assert not any(method == "DELETE" or "eviction" in path for method, path in fake.calls)
    for i in range(6):
        fake.finish(f"default/a-{i}")
    # Two jobs left: 3 each.
    assert sorted(_step(controller).released) == [f"default/{j}-{i}" for j in "bc" for i in range(3)]
    for pod in _job("d", 3, 40):
        fake.add(pod)
    assert _step(controller).released == []  # limit 2 now, b and c keep their 3
    fake.finish("default/b-0")
    result = _step(controller)
    assert result.released == ["default/d-0"]  # b is at its limit of 2: the freed executor goes to d
    assert "limit 2" in result.held["default/b-3"]
    assert {k: p["status"]["phase"] for k, p in fake.pods.items() if k.startswith("default/c-")} == {
        f"default/c-{i}": "Pending" for i in range(6)}  # nothing is taken back from c (3 above its limit)


# sjf-cp: shortest critical path first; srpt-oracle: least remaining work first; weighted-fair:-1: limits ∝ 1/work
# (small ⌈4·0.97⌉ = 4, big and slow 1 each), taken in arrival order.
@pytest.mark.parametrize("policy, expected", [("sjf-cp", {"slow": 4}), ("srpt-oracle", {"small": 4}),
                                              ("weighted-fair:-1", {"big": 1, "small": 3})])
def test_policies_that_need_metadata_take_it_from_the_policy_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, policy: str, expected: dict[str, int]) -> None:
    spec = tmp_path / "jobs.yaml"
    spec.write_text("jobs:\n  big: {remaining_work_s: 9000, critical_path_s: 10}\n"
                    "  default/small: {remaining_work_s: 100, critical_path_s: 900}\n"
                    "  slow: {remaining_work_s: 5000, critical_path_s: 1}\n")
    fake = FakePods([*_job("big", 4, 1), *_job("small", 4, 2), *_job("slow", 4, 3), *_job("unknown", 4, 0)])
    controller = _controller(monkeypatch, fake, policy, executors=4, policy_file=spec)
    result = _step(controller)
    released = [k.split("/")[1].rsplit("-", 1)[0] for k in result.released]
    assert {job: released.count(job) for job in set(released)} == expected
    # A job the file does not describe is held with a Warning, never ordered by guess.
    assert not any(k.startswith("default/unknown") for k in result.released)
    assert "needs its" in result.held["default/unknown-0"]
    assert ("Warning", "JobMetadataMissing") in fake.reasons("unknown-0")


def test_a_learned_job_policy_is_served_with_the_policy_files_metadata(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from drlsched.rl.job_net import JobNet, JobNetSpec
    from drlsched.rl.job_policy import save_job_policy

    torch.manual_seed(0)
    ckpt = tmp_path / "policy.pt"
    save_job_policy(ckpt, JobNet(JobNetSpec()), {})
    spec = tmp_path / "jobs.yaml"
    spec.write_text("jobs:\n  big: {remaining_work_s: 9000}\n  small: {remaining_work_s: 100}\n")
    fake = FakePods([*_job("big", 4, 1), *_job("small", 4, 2), *_job("unknown", 4, 0)])
    # Its meta records no training range: served unguarded (the guard has tests of its own).
    result = _step(_controller(monkeypatch, fake, f"ppo:{ckpt}:fallback=none", executors=4, policy_file=spec))
    assert 1 <= len(result.released) <= 4
    assert not any(k.startswith("default/unknown") for k in result.released)
    assert main(["admit", "--job-policy", f"ppo:{ckpt}:fallback=none", "--once"]) == 2
    assert "needs each job's remaining_work_s" in capsys.readouterr().err


def test_drf_fills_by_dominant_share(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePods([*_job("cpu", 4, 1, cpu="4", memory="1Gi"), *_job("mem", 4, 2, cpu="1", memory="8Gi")],
                    [node("n0", "16", "64Gi")])
    result = _step(_controller(monkeypatch, fake, "drf", executors=6))
    released = [k.split("/")[1].split("-")[0] for k in result.released]
    # Dominant shares: 4/16 CPU per cpu-job executor, 8/64 memory per mem-job one: equal at 2 and 4.
    assert released.count("cpu") == 2 and released.count("mem") == 4


def test_pods_without_a_valid_job_label_stay_gated_with_one_warning_each_and_are_counted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePods([gated_pod("nolabel", None), gated_pod("empty", ""), *_job("a", 1, 1)])
    controller = _controller(monkeypatch, fake)
    for _ in range(3):
        result = _step(controller)
    assert fake.released == ["default/a-0"]
    assert fake.gated() == {"default/nolabel", "default/empty"}
    assert set(result.unattributed) == {"default/nolabel", "default/empty"}
    assert fake.reasons("nolabel") == [("Warning", "JobUnknown")] == fake.reasons("empty")
    assert controller.unattributed_total.get() == 2
    assert controller.pods.get(state="unattributed") == 2


def test_other_gates_are_kept_and_only_ours_is_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePods([gated_pod("a-0", "a", gates=("example.com/quota", GATE)),
                     gated_pod("a-1", "a", gates=("example.com/quota",))])
    _step(_controller(monkeypatch, fake))
    assert fake.pods["default/a-0"]["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    # Not gated by us: it is the job's (it will hold an executor once its own gate goes), not ours to touch.
    assert fake.pods["default/a-1"]["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]


def test_a_restarted_controller_rebuilds_the_state_and_releases_nothing_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePods([*_job("a", 3, 1), *_job("b", 3, 2)])
    _step(_controller(monkeypatch, fake, executors=4))
    fresh = _controller(monkeypatch, fake, executors=4)  # a new process: nothing in memory
    assert _step(fresh).released == []
    assert len(fake.released) == len(set(fake.released)) == 4


def test_a_pod_changed_since_the_list_is_skipped_by_the_precondition(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePods(_job("a", 1, 1))
    controller = _controller(monkeypatch, fake)
    listing = fake.__call__

    def racing(api: object, method: str, path: str, body: Any = None, content_type: str = "",
               gated: bool = True) -> bytes:
        if method == "PATCH":  # another writer added a gate of its own after our list
            fake.pods["default/a-0"]["spec"]["schedulingGates"].append({"name": "example.com/late"})
        return listing(api, method, path, body, content_type, gated)

    monkeypatch.setattr(admit_controller, "request", racing)
    assert _step(controller).released == []
    assert controller.releases.get(outcome="conflict") == 1
    assert fake.released == []


def test_without_executors_the_pool_is_what_the_nodes_fit_beside_pods_of_no_job() -> None:
    service = gated_pod("svc", None, cpu="3", memory="1Gi", gates=())
    service["spec"]["nodeName"] = "n0"
    cordoned = node("n2")
    cordoned["spec"] = {"unschedulable": True}
    assert executor_slots([node("n0", "8", "64Gi"), node("n1", "8", "4Gi"), cordoned], [service], 2000, 2048) == 2 + 2


def test_the_pool_defaults_to_the_nodes_and_the_policy_file_can_set_it(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    fake = FakePods(_job("a", 10, 1, cpu="2", memory="2Gi"), [node("n0", "8", "32Gi")])
    assert _step(_controller(monkeypatch, fake, executors=None)).executors == 4
    spec = tmp_path / "p.json"
    spec.write_text('{"executors": 7}')
    assert _step(_controller(monkeypatch, fake, executors=None, policy_file=spec)).executors == 7


@pytest.mark.parametrize("text, words", [
    ("[1, 2]", "must be a mapping"),
    ("executors: 0", "executors must be a whole number"),
    ("jobs: {a: {remaining_work_s: -1}}", "job 'a' remaining_work_s must be a non-negative number"),
    ("jobs: {a: {remaining_work_s: .nan}}", "non-negative number"),
    ("jobs: {a: {work: 1}}", "unknown key 'work'"),
    ("jobs: {'a/b/c': {}}", "is not JOB or NAMESPACE/JOB"),
    ("jobs: {a: 3}", "must map"),
    ("extra: 1", "unknown key 'extra'"),
    ("a: [", "not valid YAML"),
])
def test_a_bad_policy_file_is_one_line_naming_the_file_and_entry(tmp_path: Path, text: str, words: str) -> None:
    from drlsched.errors import UserError

    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match="policy file") as err:
        load_policy_file(path)
    assert words in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("argv, words", [
    (["--job-policy", "lifo"], "unknown job policy 'lifo'"),
    (["--job-policy", "weighted-fair:x"], "must be a number"),
    (["--job-policy", "srpt-oracle"], "needs each job's remaining_work_s"),
    (["--job-policy", "fifo", "--executors", "0"], "must be at least 1"),
    (["--job-policy", "fifo", "--period", "-1"], "positive"),
    (["--job-policy", "fifo", "--policy-file", "/nonexistent/p.yaml"], "cannot read policy file"),
    (["--job-policy", "fifo", "--kubeconfig", "/nonexistent/k"], "does not exist"),
    (["--job-policy", "fifo", "--leader-elect-retry-period", "0"], "positive"),
])
def test_bad_options_are_one_line_exit_2(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        code = main(["admit", *argv])
        raise SystemExit(code)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and "Traceback" not in err


def test_the_job_label_is_the_one_the_replay_and_placement_use() -> None:
    assert JOB_LABEL == "drlsched.io/job" and GATE == "drlsched.io/admission"


@pytest.mark.parametrize("kind, words", [("malformed", "not valid YAML"), ("unreachable", "cannot reach"),
                                         ("missing-server", "has no server URL")])
@pytest.mark.parametrize("elect", ["--leader-elect=true", "--leader-elect=false"])
def test_a_bad_kubeconfig_or_an_unreachable_apiserver_with_once_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, words: str, elect: str) -> None:
    from .test_controller import _bad_kubeconfig, _one_line_exit_2

    path = _bad_kubeconfig(tmp_path, kind)
    line = _one_line_exit_2(["admit", "--kubeconfig", str(path), "--job-policy", "fifo", "--once", elect], capsys)
    assert words in line
