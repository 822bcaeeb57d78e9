"""deploy/admit-controller.yaml: two replicas running a command drlsched accepts, probes on its health port, the
policy file mounted where the command reads it, and RBAC covering every call of an elected pass that releases,
holds and warns (each call mapped to its API group, resource and verb); no permission to delete or evict a pod.
And a standby replica, whose client the Manager gates on the Lease, releases nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from drlsched.cli import build_parser
from drlsched.jobs.policies import make_job_policy
from drlsched.k8s import admit_controller, leader
from drlsched.k8s.admit_controller import COMPONENT, AdmitController
from drlsched.k8s.client import NotLeading, gate_writes, may_write
from drlsched.k8s.controller import ControllerOptions, Manager
from drlsched.k8s.leader import LeaseConfig

from .fake_pods import FakePods, gated_pod
from .test_deploy_reclaim import _permission

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "admit-controller.yaml"
NAMESPACE = "kube-system"


def _kind(kind: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(MANIFEST.read_text()) if o and o["kind"] == kind]


def _allowed(group: str, resource: str, verb: str) -> bool:
    rules = [r for role in _kind("ClusterRole") for r in role["rules"]]
    rules += [r for role in _kind("Role") if role["metadata"]["namespace"] == NAMESPACE for r in role["rules"]]
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


def test_two_replicas_run_a_command_drlsched_accepts_with_the_policy_file_mounted() -> None:
    (deployment,) = _kind("Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][:2] == ["drlsched", "admit"]
    args = build_parser().parse_args(container["command"][1:])
    assert args.leader_elect is True and args.kubeconfig is None and args.health_host == "0.0.0.0"
    make_job_policy(args.job_policy)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"]["path"] == path and ports[container[probe]["httpGet"]["port"]] == \
            args.health_port
    (mount,) = container["volumeMounts"]
    (volume,) = pod["volumes"]
    (config,) = _kind("ConfigMap")
    assert volume["configMap"]["name"] == config["metadata"]["name"] and mount["name"] == volume["name"]
    assert args.policy_file == Path(mount["mountPath"]) / next(iter(config["data"]))
    (account,) = _kind("ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"]


def test_the_rbac_covers_every_call_of_an_elected_pass_and_grants_no_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePods([gated_pod(f"a-{i}", "a") for i in range(3)] + [gated_pod("stray", None)])
    monkeypatch.setattr(admit_controller, "request", fake)
    monkeypatch.setattr(leader, "request", fake)
    api = kubernetes.client.ApiClient(kubernetes.client.Configuration())
    manager = Manager(COMPONENT, api, ControllerOptions(lease=LeaseConfig("drlsched-admit", NAMESPACE)))
    # DRF and no pool given: the pass reads the nodes too.
    controller = AdmitController(api, make_job_policy("drf"), executors=None)
    manager.add("reconcile", 2.0, lambda leading: controller.step())
    manager.run_once()
    assert controller.events.drain(timeout_s=30.0)
    calls = {_permission(method, path) for method, path in fake.calls}
    assert calls >= {("", "pods", "list"), ("", "pods", "patch"), ("", "nodes", "list"), ("", "events", "create"),
                     ("coordination.k8s.io", "leases", "create")}
    missing = sorted(c for c in calls if not _allowed(*c))
    assert not missing, missing
    for verb in ("delete", "deletecollection"):
        assert not _allowed("", "pods", verb)
    assert not _allowed("", "pods/eviction", "create")
    assert len(fake.released) == 3 and "default/stray" in fake.gated()


def test_a_standby_replica_releases_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePods([gated_pod("a-0", "a")])

    def gated(api: object, method: str, path: str, body: Any = None, content_type: str = "",
              gated: bool = True) -> bytes:
        if method != "GET" and not may_write(api):  # client.request's gate
            raise NotLeading(f"{method} {path} refused")
        return fake(api, method, path, body, content_type, gated)

    monkeypatch.setattr(admit_controller, "request", gated)
    api = kubernetes.client.ApiClient(kubernetes.client.Configuration())
    gate_writes(api, lambda: False)
    controller = AdmitController(api, make_job_policy("fifo"), executors=4)
    assert controller.reconcile(False) is None
    with pytest.raises(NotLeading):
        controller.step()  # even a pass run by mistake cannot write
    assert fake.released == [] and all(method == "GET" for method, _ in fake.calls)
