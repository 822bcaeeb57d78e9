"""deploy/reclaim-controller.yaml: two replicas running a command drlsched accepts, probes on the port it serves,
and RBAC covering every call the controller makes: a pass that patches, evicts and records events, run under
leader election against a fake apiserver that records each call, each call mapped to (API group, resource, verb)
and looked up in the manifest's rules (no cluster needed)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes
import pytest
import yaml

from drlsched.cli import build_parser
from drlsched.k8s import leader, reclaim_controller
from drlsched.k8s.controller import ControllerOptions, Manager
from drlsched.k8s.leader import LeaseConfig, micro_time
from drlsched.k8s.metrics_pipeline import MetricsApiCollector
from drlsched.k8s.objects import pod_manifest
from drlsched.k8s.reclaim_controller import COMPONENT, ReclaimController
from drlsched.reclaim import ReclaimConfig

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "reclaim-controller.yaml"
NAMESPACE = "kube-system"


def _objects() -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(MANIFEST.read_text()) if o]


def _kind(kind: str) -> list[dict[str, Any]]:
    return [o for o in _objects() if o["kind"] == kind]


def test_two_replicas_run_a_command_drlsched_accepts_with_probes_on_its_health_port() -> None:
    (deployment,) = _kind("Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = container["command"]
    assert command[:2] == ["drlsched", "reclaim"]
    args = build_parser().parse_args(command[1:])
    assert args.leader_elect is True and args.kubeconfig is None  # the service account, elected
    assert args.health_host == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path and ports[get["port"]] == args.health_port
    (account,) = _kind("ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert deployment["metadata"]["namespace"] == account["metadata"]["namespace"] == NAMESPACE
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"  # the lease identity


class RecordingApi:
    """A fake apiserver for one controller: nodes, pods, a Lease, and every write accepted; records each call."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.nodes, self.pods = nodes, pods
        self.lease: dict[str, Any] | None = None
        self.calls: list[tuple[str, str]] = []

    def __call__(self, api: object, method: str, path: str, body: Any = None, content_type: str = "",
                 gated: bool = True) -> bytes:
        del api, content_type, gated
        self.calls.append((method, path))
        if "/leases" in path:
            if method == "GET":
                if self.lease is None:
                    raise kubernetes.client.ApiException(status=404, reason="Not Found")
                return json.dumps(self.lease).encode()
            self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(len(self.calls))}}
            return json.dumps(self.lease).encode()
        if method == "GET":
            return json.dumps({"items": self.nodes if path.startswith("/api/v1/nodes") else self.pods}).encode()
        return b"{}"

    def list_metrics(self, resource: str) -> dict[str, Any]:
        """What the controller's metrics.k8s.io list returns: a memory burst on node big."""
        self.calls.append(("GET", f"/apis/metrics.k8s.io/v1beta1/{resource}"))
        stamp = micro_time(time.time() - 1).split(".")[0] + "Z"
        if resource == "nodes":
            return {"items": [{"metadata": {"name": "big"}, "timestamp": stamp,
                               "usage": {"cpu": "9550m", "memory": "400Gi"}}]}
        return {"items": [{"metadata": {"name": p["metadata"]["name"], "namespace": "default"}, "timestamp": stamp,
                           "containers": [{"name": "c", "usage": {"cpu": "500m", "memory": mem}}]}
                          for p, mem in zip(self.pods, ("340Gi", "10Gi", "20Gi", "30Gi"), strict=True)]}


def _pod(name: str, memory: str, batch: bool) -> dict[str, Any]:
    pod = pod_manifest(name, "1", memory, duration=None, batch=batch)
    pod["metadata"].update(namespace="default", uid=f"uid-{name}")
    pod["spec"]["nodeName"] = "big"
    pod["status"] = {"phase": "Running", "startTime": "2027-01-15T08:00:00Z"}
    return pod


def _permission(method: str, path: str) -> tuple[str, str, str]:
    """(API group, resource[/subresource], verb) of a call by path, as the apiserver's authorizer sees it."""
    parts = urlsplit(path).path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    verb = {"GET": "get" if named else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete"}[method]
    return group, resource, verb


def _allowed(group: str, resource: str, verb: str, lease_namespace: str) -> bool:
    rules = [r for role in _kind("ClusterRole") for r in role["rules"]]
    rules += [r for role in _kind("Role") if role["metadata"]["namespace"] == lease_namespace for r in role["rules"]]
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


def test_the_rbac_covers_every_call_of_an_elected_pass_that_patches_evicts_and_records_events(
        monkeypatch: pytest.MonkeyPatch) -> None:
    resources = {"cpu": "96", "memory": "512Gi", "pods": "110"}
    node = {"metadata": {"name": "big", "uid": "uid-big"}, "status": {"capacity": dict(resources),
                                                                       "allocatable": dict(resources)}}
    fake = RecordingApi([node], [_pod("ls", "340Gi", False)] + [_pod(f"be-{g}", f"{g}Gi", True)
                                                                for g in (10, 20, 30)])
    monkeypatch.setattr(reclaim_controller, "request", fake)
    monkeypatch.setattr(leader, "request", fake)
    api = kubernetes.client.ApiClient(kubernetes.client.Configuration())
    manager = Manager(COMPONENT, api, ControllerOptions(lease=LeaseConfig("drlsched-reclaim", NAMESPACE)))
    controller = ReclaimController(api, ReclaimConfig(model="koordinator"), stale_after_s=60.0,
                                   collect=MetricsApiCollector(fake.list_metrics).collect,
                                   event_namespace=NAMESPACE)
    manager.add("reconcile", 60.0, lambda leading: controller.step())
    manager.run_once()
    assert controller.events.drain(timeout_s=30.0)
    calls = {_permission(method, path) for method, path in fake.calls}
    # The pass did all the controller does: read usage, nodes and pods, patch, evict, record, hold the lease.
    assert calls >= {("", "nodes/status", "patch"), ("", "pods/eviction", "create"), ("", "events", "create"),
                     ("metrics.k8s.io", "nodes", "list"), ("metrics.k8s.io", "pods", "list"),
                     ("coordination.k8s.io", "leases", "create"), ("coordination.k8s.io", "leases", "update")}
    missing = sorted(c for c in calls if not _allowed(*c, lease_namespace=NAMESPACE))
    assert not missing, missing
