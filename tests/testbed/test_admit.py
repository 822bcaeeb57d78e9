"""`drlsched admit` on the real control plane (Kubernetes v1.36: pod scheduling gates are GA): gated pods wait as
`SchedulingGated`, the controller removes the gate job by job, and the real kube-scheduler places what it
releases. Jobs are released in the policy's order; the pool and the per-job limits hold under a burst of
arrivals; a controller killed mid-run and restarted releases nothing twice and strands nothing (the audit log
counts every release); after a kube-apiserver restart the job state is rebuilt from the gates.

Pods run on kwok for `RUN` and then succeed, freeing their executor; a sampler lists the pods every 0.2 s and
keeps the most that were ever released and alive at once, per job and in all."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from polling import until

import drlsched
from drlsched.jobs.policies import make_job_policy
from drlsched.k8s.admission import ADMITTED_ANNOTATION, GATE
from drlsched.k8s.admit_controller import AdmitController
from drlsched.k8s.objects import JOB_LABEL, TERMINAL_PHASES, pod_manifest
from drlsched.testbed import controlplane
from drlsched.testbed.audit import AUDIT_LOG, read_writes
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, down, up
from drlsched.testbed.replicas import Replica, lease

RUN = "3s"
_TIMEOUT_S = 240.0


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.Testbed]:
    build()
    state_dir = tmp_path_factory.mktemp("admit-testbed")
    running = up(Options(state_dir=state_dir, nodes=3, scheduler="default", audit_log=True))
    try:
        yield running
    finally:
        down(state_dir)


@pytest.fixture(scope="module")
def core(bed: controlplane.Testbed) -> Iterator[kubernetes.client.CoreV1Api]:
    api = bed.api_client()
    yield kubernetes.client.CoreV1Api(api)
    api.close()


def _namespace(core: kubernetes.client.CoreV1Api) -> str:
    name = f"adm-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def _gated(name: str, job: str | None, run: str | None = RUN) -> dict[str, Any]:
    pod = pod_manifest(name, cpu="100m", memory="128Mi", duration=run, labels={JOB_LABEL: job} if job else {})
    pod["spec"]["schedulingGates"] = [{"name": GATE}]
    return pod


def _pods(core: kubernetes.client.CoreV1Api, namespace: str) -> dict[str, dict[str, Any]]:
    items = json.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    return {p["metadata"]["name"]: p for p in items}


def _gated_now(pod: dict[str, Any]) -> bool:
    return any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])


def _live_released(pod: dict[str, Any]) -> bool:
    return not _gated_now(pod) and pod.get("status", {}).get("phase") not in TERMINAL_PHASES


class Sampler:
    """Lists the namespace's pods every 0.2 s: the most released-and-alive pods ever seen, per job and in all."""

    def __init__(self, core: kubernetes.client.CoreV1Api, namespace: str) -> None:
        self.core, self.namespace = core, namespace
        self.peak: Counter[str] = Counter()
        self.peak_total = 0
        self.samples: list[tuple[float, Counter[str], int]] = []  # (time, live released per job, active jobs)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                pods = _pods(self.core, self.namespace).values()
            except Exception:  # the apiserver restarting
                continue
            live = Counter(p["metadata"]["labels"][JOB_LABEL] for p in pods if _live_released(p))
            active = {p["metadata"]["labels"][JOB_LABEL] for p in pods if _live_released(p) or _gated_now(p)}
            self.samples.append((time.monotonic(), live, len(active)))
            for job, n in live.items():
                self.peak[job] = max(self.peak[job], n)
            self.peak_total = max(self.peak_total, sum(live.values()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


class Loop:
    """The controller in-process: one step every `period_s` on its own thread."""

    def __init__(self, controller: AdmitController, period_s: float = 0.3) -> None:
        self.controller = controller
        self.released: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period_s,), daemon=True)
        self._thread.start()

    def _run(self, period_s: float) -> None:
        while not self._stop.wait(period_s):
            self.released += self.controller.step().released

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _all_done(core: kubernetes.client.CoreV1Api, namespace: str, names: list[str]) -> Callable[[], bool]:
    def check() -> bool:
        pods = _pods(core, namespace)
        return all(pods[n].get("status", {}).get("phase") == "Succeeded" for n in names)
    return check


def _release_patches(bed: controlplane.Testbed) -> Counter[str]:
    """Gate removals per pod that the apiserver applied, or may have, from its audit log: 2xx answers, and
    requests whose client vanished mid-answer (a SIGKILLed controller: stage Panic, code 500, yet applied).
    Refusals (4xx: the precondition failed, the pod was gone) changed nothing and are left out."""
    applied: Counter[str] = Counter()
    for line in (bed.state_dir / AUDIT_LOG).read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        ref = event.get("objectRef") or {}
        code = int((event.get("responseStatus") or {}).get("code") or 0)
        if (str(event.get("userAgent", "")).startswith("drlsched-admit") and event.get("verb") == "patch"
                and ref.get("resource") == "pods" and not ref.get("subresource")
                and event.get("stage") in ("ResponseComplete", "Panic") and not 400 <= code < 500):
            applied[str(ref.get("name"))] += 1
    return applied


def test_gated_pods_wait_schedulinggated_and_kube_scheduler_places_what_is_released(
        bed: controlplane.Testbed, core: kubernetes.client.CoreV1Api) -> None:
    namespace = _namespace(core)
    core.create_namespaced_pod(namespace, _gated("g-0", "g", run=None))
    core.create_namespaced_pod(namespace, _gated("stray", None, run=None))
    # v1.36 keeps a gated pod out of the scheduling queue and says so in its PodScheduled condition.
    def scheduling_gated() -> dict[str, Any] | None:
        pod = _pods(core, namespace)["g-0"]
        conditions = pod.get("status", {}).get("conditions") or []
        return pod if any(c.get("reason") == "SchedulingGated" for c in conditions) else None

    pod = until(scheduling_gated, "the gated pod to show SchedulingGated", timeout_s=60)
    assert not pod["spec"].get("nodeName")
    controller = AdmitController(bed.api_client(), make_job_policy("fifo"), executors=4)
    result = controller.step()
    assert result.released == [f"{namespace}/g-0"] and f"{namespace}/stray" in result.unattributed
    bound = until(lambda: (p := _pods(core, namespace)["g-0"])["spec"].get("nodeName") and p,
                  "kube-scheduler to bind the released pod", timeout_s=60)
    assert bound["metadata"]["annotations"][ADMITTED_ANNOTATION]
    assert _gated_now(_pods(core, namespace)["stray"])
    assert controller.events.drain(30)
    events = json.loads(core.list_namespaced_event(namespace, _preload_content=False).data)["items"]
    reasons = {(e["involvedObject"]["name"], e["type"], e["reason"]) for e in events}
    assert {("g-0", "Normal", "Admitted"), ("stray", "Warning", "JobUnknown")} <= reasons


@pytest.mark.parametrize("policy, order", [("fifo", ["first", "second", "third"]),
                                           ("srpt-oracle", ["third", "second", "first"])])
def test_jobs_are_released_in_the_policys_order(bed: controlplane.Testbed, core: kubernetes.client.CoreV1Api,
                                                tmp_path: Path, policy: str, order: list[str]) -> None:
    namespace = _namespace(core)
    spec = tmp_path / "jobs.yaml"
    spec.write_text("jobs: {first: {remaining_work_s: 900}, second: {remaining_work_s: 300}, "
                    "third: {remaining_work_s: 100}}\n")
    names = []
    for job in ("first", "second", "third"):  # creation timestamps have a resolution of one second
        for i in range(3):
            core.create_namespaced_pod(namespace, _gated(f"{job}-{i}", job))
            names.append(f"{job}-{i}")
        time.sleep(1.1)
    # Two executors: a job's pods go in two waves, and the next job starts only on what the previous leaves.
    controller = AdmitController(bed.api_client(), make_job_policy(policy), executors=2, policy_file=spec,
                                 namespace=namespace)
    sampler = Sampler(core, namespace)
    loop = Loop(controller)
    try:
        until(_all_done(core, namespace, names), "every job to run to completion", timeout_s=_TIMEOUT_S)
    finally:
        loop.stop()
        sampler.stop()
    jobs = [key.split("/")[1].rsplit("-", 1)[0] for key in loop.released]
    assert [j for k, j in enumerate(jobs) if j not in jobs[:k]] == order
    assert sorted(loop.released) == sorted(f"{namespace}/{n}" for n in names)
    assert sampler.peak_total <= 2


def test_the_limits_hold_under_a_burst_of_arrivals(bed: controlplane.Testbed,
                                                   core: kubernetes.client.CoreV1Api) -> None:
    namespace = _namespace(core)
    controller = AdmitController(bed.api_client(), make_job_policy("fair"), executors=8, namespace=namespace)
    sampler = Sampler(core, namespace)
    loop = Loop(controller, period_s=0.2)
    jobs, per_job = ("a", "b", "c", "d"), 10
    names = [f"{j}-{i}" for j in jobs for i in range(per_job)]
    try:
        with ThreadPoolExecutor(8) as pool:  # 40 pods of 4 jobs at once, while the controller runs
            list(pool.map(lambda n: core.create_namespaced_pod(namespace, _gated(n, n.split("-")[0])), names))
        arrived = time.monotonic()
        until(_all_done(core, namespace, names), "every pod to run to completion", timeout_s=_TIMEOUT_S)
    finally:
        loop.stop()
        sampler.stop()
    assert sampler.peak_total <= 8  # never more executors released than the pool
    # Once all four jobs are in and what was released before has finished, fair's limit holds per job:
    # ⌈8 / jobs still active⌉, 2 while all four are (kwok ends a pod RUN after it starts; 10 s covers that, the
    # bind and a pass). A job finishing only raises the others' limit, never lowers it.
    settled = [(live, active) for t, live, active in sampler.samples if t > arrived + 10.0 and active]
    assert settled and any(active == 4 for _, active in settled)
    over = [(dict(live), active) for live, active in settled if max(live.values(), default=0) > math.ceil(8 / active)]
    assert not over, over[:3]
    assert sorted(loop.released) == sorted(f"{namespace}/{n}" for n in names)  # nothing stranded, once each


def _replica(bed: controlplane.Testbed, namespace: str, name: str, tmp_path: Path) -> Replica:
    return Replica(name, ["admit", "--kubeconfig", str(bed.kubeconfig), "--job-policy", "fifo", "--executors", "3",
                          "--namespace", namespace, "--period", "0.5", "--leader-elect=false"], tmp_path)


def test_a_controller_killed_mid_run_and_restarted_releases_nothing_twice_and_strands_nothing(
        bed: controlplane.Testbed, core: kubernetes.client.CoreV1Api, tmp_path: Path) -> None:
    namespace = _namespace(core)
    names = [f"k{j}-{i}" for j in range(2) for i in range(8)]
    for n in names:
        core.create_namespaced_pod(namespace, _gated(n, n.split("-")[0]))
    sampler = Sampler(core, namespace)
    first = _replica(bed, namespace, "first", tmp_path)
    try:
        until(lambda: sum(not _gated_now(p) for p in _pods(core, namespace).values()) >= 5,
              "the first controller to release five pods", timeout_s=_TIMEOUT_S, period_s=0.2)
        first.kill()  # SIGKILL mid-run: whatever it was doing is cut off
        released_before = sum(not _gated_now(p) for p in _pods(core, namespace).values())
        assert released_before < len(names)
        second = _replica(bed, namespace, "second", tmp_path)
        try:
            until(_all_done(core, namespace, names), "every pod to complete after the restart", timeout_s=_TIMEOUT_S)
        finally:
            second.terminate()
    finally:
        first.close()
        sampler.stop()
    patches = _release_patches(bed)
    assert {n: patches[n] for n in names} == dict.fromkeys(names, 1)  # each pod released once, none stranded
    assert sampler.peak_total <= 3


def test_after_an_apiserver_restart_the_job_state_is_rebuilt_from_the_gates(
        bed: controlplane.Testbed, core: kubernetes.client.CoreV1Api, tmp_path: Path) -> None:
    namespace = _namespace(core)
    names = [f"r-{i}" for i in range(12)]
    for n in names:
        core.create_namespaced_pod(namespace, _gated(n, "r"))
    replica = _replica(bed, namespace, "survivor", tmp_path)
    try:
        until(lambda: sum(not _gated_now(p) for p in _pods(core, namespace).values()) >= 3,
              "the controller to release its first pods", timeout_s=_TIMEOUT_S, period_s=0.2)
        assert any(_gated_now(p) for p in _pods(core, namespace).values())  # state left to rebuild
        controlplane.restart_apiserver(bed, audit_log=True)  # the controller's passes fail, back off, resume
        sampler = Sampler(core, namespace)
        try:
            until(_all_done(core, namespace, names), "every pod to complete after the apiserver restart",
                  timeout_s=_TIMEOUT_S)
        finally:
            sampler.stop()
        assert replica.proc.poll() is None  # it rode the outage out
    finally:
        replica.terminate()
        replica.close()
    patches = _release_patches(bed)
    assert {n: patches[n] for n in names} == dict.fromkeys(names, 1)
    assert sampler.peak_total <= 3
    assert "pass failed" in replica.log()  # it did see the apiserver go


def test_once_prints_the_pass_as_json(bed: controlplane.Testbed, core: kubernetes.client.CoreV1Api,
                                      tmp_path: Path) -> None:
    namespace = _namespace(core)
    for i in range(3):
        core.create_namespaced_pod(namespace, _gated(f"o-{i}", "o", run=None))
    core.create_namespaced_pod(namespace, _gated("stray", None, run=None))
    done = subprocess.run([sys.executable, "-m", "drlsched.cli", "admit", "--kubeconfig", str(bed.kubeconfig),
                           "--job-policy", "fair", "--executors", "2", "--namespace", namespace, "--once"],
                          capture_output=True, text=True, timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["released"] == [f"{namespace}/o-0", f"{namespace}/o-1"]
    assert result["limits"] == {f"{namespace}/o": 2.0} and result["executors"] == 2
    assert "holds 2 of its limit 2" in result["held"][f"{namespace}/o-2"]
    assert f"{namespace}/stray" in result["unattributed"]
    assert sum(not _gated_now(p) for p in _pods(core, namespace).values()) == 2


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(drlsched.__file__).parents[1]), env.get("PYTHONPATH", "")])
    return env


def test_two_elected_replicas_never_both_release(bed: controlplane.Testbed, core: kubernetes.client.CoreV1Api,
                                                 tmp_path: Path) -> None:
    namespace = _namespace(core)
    names = [f"e-{i}" for i in range(10)]
    for n in names:
        core.create_namespaced_pod(namespace, _gated(n, "e"))
    argv = ["admit", "--kubeconfig", str(bed.kubeconfig), "--job-policy", "fifo", "--executors", "3",
            "--namespace", namespace, "--period", "0.5", "--leader-elect-resource-name", f"admit-{namespace}"]
    replicas = [Replica(name, argv, tmp_path) for name in ("one", "two")]
    try:
        identities = {r.identity(): r for r in replicas}
        until(_all_done(core, namespace, names), "every pod to complete under two replicas", timeout_s=_TIMEOUT_S)
        client = bed.api_client()
        holder = str((lease(client, f"admit-{namespace}") or {}).get("holderIdentity"))
        client.close()
    finally:
        for r in replicas:
            r.terminate()
            r.close()
    assert holder in identities
    agents = Counter(w.user_agent for w in read_writes(bed.state_dir)
                     if w.resource == "pods" and w.verb == "patch" and w.name in names and 200 <= w.code < 300)
    assert agents == Counter({f"drlsched-admit/{holder}": len(names)})  # the leader released all, once each
