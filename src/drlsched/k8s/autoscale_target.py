"""What `drlsched autoscale` reads about its target: the `--target` reference, the workload's scale subresource,
an HPA that targets it, its pods and their metrics.k8s.io samples, as the simulator's autoscaler objects
(`drlsched.autoscale.replicas.Pod`, `PodMetric`) take them. Times are seconds since the epoch."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import kubernetes

from drlsched.autoscale.replicas import PENDING, Pod, PodMetric
from drlsched.errors import UserError
from drlsched.k8s import quantity
from drlsched.k8s.client import request
from drlsched.k8s.objects import rfc3339_seconds

# Workloads with a scale subresource (apps/v1), by the names `--target` accepts for them.
SCALABLE = {"deployment": "deployments", "deployments": "deployments", "statefulset": "statefulsets",
            "statefulsets": "statefulsets", "replicaset": "replicasets", "replicasets": "replicasets"}
# Workloads without one: named in --target, they are refused with an Event on the object (it exists).
NOT_SCALABLE = {"daemonset": ("apps/v1", "DaemonSet", "daemonsets"), "pod": ("v1", "Pod", "pods"),
                "job": ("batch/v1", "Job", "jobs"), "cronjob": ("batch/v1", "CronJob", "cronjobs"),
                "service": ("v1", "Service", "services")}
KINDS = {"deployments": "Deployment", "statefulsets": "StatefulSet", "replicasets": "ReplicaSet"}
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


class TargetRefused(Exception):
    """The target is missing or not a scalable workload: an Event on it, and the controller exits."""

    def __init__(self, message: str, ref: dict[str, str]) -> None:
        super().__init__(message)
        self.ref = ref


@dataclass(frozen=True)
class Target:
    namespace: str
    resource: str  # deployments, statefulsets, replicasets; or a NOT_SCALABLE key
    name: str

    @property
    def scalable(self) -> bool:
        return self.resource in KINDS

    @property
    def kind(self) -> str:
        return KINDS.get(self.resource) or NOT_SCALABLE[self.resource][1]

    @property
    def api_version(self) -> str:
        return "apps/v1" if self.scalable else NOT_SCALABLE[self.resource][0]

    @property
    def path(self) -> str:
        version = self.api_version
        base = f"/api/{version}" if version == "v1" else f"/apis/{version}"
        plural = self.resource if self.scalable else NOT_SCALABLE[self.resource][2]
        return f"{base}/namespaces/{self.namespace}/{plural}/{self.name}"

    def ref(self, uid: str = "") -> dict[str, str]:
        """The Event's involvedObject."""
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name,
                "uid": uid}

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind.lower()}/{self.name}"


def parse_target(text: str) -> Target:
    """`NAMESPACE/DEPLOYMENT` or `NAMESPACE/KIND/NAME` (UserError: one line, exit 2)."""
    parts = text.split("/")
    if len(parts) == 2:
        parts = [parts[0], "deployment", parts[1]]
    if len(parts) != 3 or not all(_DNS.match(p) for p in (parts[0], parts[2])):
        raise UserError(f"--target must be NAMESPACE/DEPLOYMENT or NAMESPACE/KIND/NAME, not {text!r}")
    kind = parts[1].lower()
    if kind not in SCALABLE and kind not in NOT_SCALABLE:
        raise UserError(f"--target {text!r}: unknown kind {parts[1]!r} (a Deployment, StatefulSet or ReplicaSet)")
    return Target(parts[0], SCALABLE.get(kind, kind), parts[2])


def get_json(api: kubernetes.client.ApiClient, path: str) -> dict[str, Any]:
    return json.loads(request(api, "GET", path))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Workload:
    uid: str
    request_m: int  # one replica's CPU request (all containers)


def resolve(api: kubernetes.client.ApiClient, target: Target) -> Workload:
    """The target, checked: it exists, has a scale subresource and pods that request CPU (else TargetRefused)."""
    if not target.scalable:
        try:
            obj = get_json(api, target.path)
        except kubernetes.client.ApiException as err:
            if err.status not in (403, 404):  # unreadable (the manifest's RBAC grants no such kind) or absent
                raise
            raise TargetRefused(f"--target {target}: a {target.kind} is not a scalable workload (no scale "
                                f"subresource); target its Deployment, StatefulSet or ReplicaSet",
                                target.ref()) from None
        raise TargetRefused(f"--target {target}: a {target.kind} is not a scalable workload (no scale "
                            f"subresource); target its Deployment, StatefulSet or ReplicaSet",
                            target.ref(obj["metadata"].get("uid", "")))
    try:
        obj = get_json(api, target.path)
    except kubernetes.client.ApiException as err:
        if err.status != 404:
            raise
        raise TargetRefused(f"--target {target}: no such {target.kind}", target.ref()) from None
    uid = obj["metadata"].get("uid", "")
    containers = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    requests = [((c.get("resources") or {}).get("requests") or {}).get("cpu") for c in containers]
    if not requests or any(r is None for r in requests):
        raise TargetRefused(f"--target {target}: its pod template requests no CPU for some container, so no "
                            f"replica count can be sized from utilisation", target.ref(uid))
    return Workload(uid, sum(quantity.milli_cpu(r) for r in requests))


@dataclass(frozen=True)
class Scale:
    replicas: int  # spec.replicas
    selector: str  # status.selector (a label selector string)


def read_scale(api: kubernetes.client.ApiClient, target: Target) -> Scale:
    scale = get_json(api, f"{target.path}/scale")
    return Scale(int((scale.get("spec") or {}).get("replicas") or 0), (scale.get("status") or {}).get("selector", ""))


def write_scale(api: kubernetes.client.ApiClient, target: Target, replicas: int) -> None:
    request(api, "PATCH", f"{target.path}/scale", {"spec": {"replicas": replicas}},
            content_type="application/merge-patch+json")


def annotate(api: kubernetes.client.ApiClient, target: Target, key: str, value: str) -> None:
    """Set one annotation on the workload (its metadata only: no rollout)."""
    request(api, "PATCH", target.path, {"metadata": {"annotations": {key: value}}},
            content_type="application/merge-patch+json")


def find_hpa(api: kubernetes.client.ApiClient, target: Target) -> dict[str, Any] | None:
    """The autoscaling/v2 HPA whose scaleTargetRef is the target (the first by name if several: the HPA
    controller itself refuses to act on a target two HPAs share)."""
    items = get_json(api, f"/apis/autoscaling/v2/namespaces/{target.namespace}/horizontalpodautoscalers")["items"]
    mine = [h for h in items if (h["spec"].get("scaleTargetRef") or {}).get("kind") == target.kind
            and h["spec"]["scaleTargetRef"].get("name") == target.name]
    return min(mine, key=lambda h: h["metadata"]["name"]) if mine else None


def hpa_cpu_target(hpa: dict[str, Any]) -> int | None:
    """The HPA's CPU averageUtilization target (None: it scales on something else)."""
    for metric in hpa["spec"].get("metrics") or []:
        resource = metric.get("resource") or {}
        target = resource.get("target") or {}
        if metric.get("type") == "Resource" and resource.get("name") == "cpu" and target.get("type") == "Utilization":
            return int(target["averageUtilization"])
    return None


def _time(text: str | None) -> float | None:
    return rfc3339_seconds(text) if text else None


def pod_view(pod: dict[str, Any]) -> Pod:
    """A pod as the HPA's replica calculator sees it."""
    status = pod.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    requests = [((c.get("resources") or {}).get("requests") or {}).get("cpu")
                for c in (pod.get("spec") or {}).get("containers") or []]
    return Pod(pod["metadata"]["name"],
               None if not requests or None in requests else sum(quantity.milli_cpu(r) for r in requests),
               phase=status.get("phase") or PENDING,
               ready=None if ready is None else ready.get("status") == "True",
               ready_since_s=(_time(ready.get("lastTransitionTime")) or 0.0) if ready else 0.0,
               start_s=_time(status.get("startTime")),
               deleting=bool(pod["metadata"].get("deletionTimestamp")))


def list_pods(api: kubernetes.client.ApiClient, namespace: str, selector: str) -> list[Pod]:
    items = get_json(api, f"/api/v1/namespaces/{namespace}/pods?labelSelector={quote(selector)}")["items"]
    return [pod_view(p) for p in items]


def go_duration_s(text: str) -> float:
    """A Go duration string (metav1.Duration: "10s", "1m0.5s") in seconds."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def pod_metrics(api: kubernetes.client.ApiClient, namespace: str, selector: str) -> dict[str, PodMetric]:
    """metrics.k8s.io PodMetrics of the selector's pods: CPU in millicores (rounded up, as the HPA reads them)."""
    path = f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods?labelSelector={quote(selector)}"
    out = {}
    for item in get_json(api, path)["items"]:
        try:
            usage_m = sum(quantity.milli_cpu(c["usage"]["cpu"]) for c in item.get("containers") or [])
            out[item["metadata"]["name"]] = PodMetric(usage_m, rfc3339_seconds(item["timestamp"]),
                                                      go_duration_s(item.get("window") or "0s"))
        except (KeyError, ValueError, TypeError):
            continue  # a malformed sample is no sample: the pod counts as missing
    return out
