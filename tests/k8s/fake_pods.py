"""An in-memory apiserver for the admission controller: pods and nodes listed, JSON patches applied to pods as the
real one applies them (`test` fails with 422, a missing path too), events and Leases accepted; every call
recorded."""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes

from drlsched.k8s.admission import GATE
from drlsched.k8s.objects import JOB_LABEL, pod_manifest


def gated_pod(name: str, job: str | None, created: str = "2027-01-15T08:00:00Z", cpu: str = "1",
              memory: str = "1Gi", namespace: str = "default", gates: tuple[str, ...] = (GATE,)) -> dict[str, Any]:
    pod = pod_manifest(name, cpu, memory, duration=None, labels={} if job is None else {JOB_LABEL: job})
    pod["metadata"].update(namespace=namespace, uid=f"uid-{namespace}-{name}", creationTimestamp=created)
    del pod["metadata"]["annotations"]  # as the apiserver serves a pod without any
    pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    pod["status"] = {"phase": "Pending"}
    return pod


def node(name: str, cpu: str = "8", memory: str = "32Gi") -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {"metadata": {"name": name, "uid": f"uid-{name}"},
            "status": {"capacity": dict(resources), "allocatable": dict(resources)}}


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.strip("/").split("/")]


def apply_json_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for op in ops:
        *parents, last = _pointer(op["path"])
        target: Any = out
        for key in parents:
            if not isinstance(target, dict) or key not in target:
                raise kubernetes.client.ApiException(status=422, reason="Unprocessable Entity")
            target = target[key]
        if op["op"] == "test":
            if target.get(last) != op["value"]:
                raise kubernetes.client.ApiException(status=422, reason="Unprocessable Entity")
        elif op["op"] in ("add", "replace"):
            if op["op"] == "replace" and last not in target:
                raise kubernetes.client.ApiException(status=422, reason="Unprocessable Entity")
            target[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            if last not in target:
                raise kubernetes.client.ApiException(status=422, reason="Unprocessable Entity")
            del target[last]
        else:
            raise AssertionError(f"unexpected op {op}")
    return out


class FakePods:
    def __init__(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None) -> None:
        self.pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
        self.nodes = nodes or [node("n0")]
        self.lease: dict[str, Any] | None = None
        self.calls: list[tuple[str, str]] = []
        self.events: list[dict[str, Any]] = []
        self.released: list[str] = []  # namespace/name, each time a patch removed our gate

    def add(self, pod: dict[str, Any]) -> None:
        self.pods[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"] = pod

    def finish(self, key: str) -> None:
        self.pods[key]["status"]["phase"] = "Succeeded"

    def gated(self) -> set[str]:
        return {k for k, p in self.pods.items() if GATE in [g["name"] for g in p["spec"].get("schedulingGates", [])]}

    def __call__(self, api: object, method: str, path: str, body: Any = None, content_type: str = "",
                 gated: bool = True) -> bytes:
        del api, gated
        self.calls.append((method, path))
        parts = path.strip("/").split("/")
        if "leases" in parts:
            if method == "GET":
                if self.lease is None:
                    raise kubernetes.client.ApiException(status=404, reason="Not Found")
                return json.dumps(self.lease).encode()
            self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(len(self.calls))}}
            return json.dumps(self.lease).encode()
        if method == "GET" and parts[-1] == "nodes":
            return json.dumps({"items": self.nodes}).encode()
        if method == "GET" and parts[-1] == "pods":
            items = [p for p in self.pods.values()
                     if len(parts) == 3 or p["metadata"]["namespace"] == parts[3]]
            return json.dumps({"items": copy.deepcopy(items)}).encode()
        if method == "POST" and parts[-1] == "events":
            self.events.append(body)
            return b"{}"
        if method == "PATCH" and parts[-2] == "pods":
            assert content_type == "application/json-patch+json"
            key = f"{parts[3]}/{parts[-1]}"
            if key not in self.pods:
                raise kubernetes.client.ApiException(status=404, reason="Not Found")
            before = GATE in [g["name"] for g in self.pods[key]["spec"].get("schedulingGates", [])]
            self.pods[key] = apply_json_patch(self.pods[key], body)
            if before and key not in self.gated():
                self.released.append(key)
            return json.dumps(self.pods[key]).encode()
        raise AssertionError(f"unexpected {method} {path}")

    def reasons(self, pod: str) -> list[tuple[str, str]]:
        return [(e["type"], e["reason"]) for e in self.events if e["involvedObject"]["name"] == pod]
