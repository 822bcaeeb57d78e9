"""A service's load on KWOK pods: each ready replica of a workload reports its share of the service's CPU,
rate(t) × cost per request / ready replicas, through kwok's usage annotation (drlsched.testbed.kwok_config), so
that metrics-server, and the HPA reading it, see usage that follows the load curve.

A pod that is not ready gets no traffic and reports the 1m floor. Only pods whose value changes are patched.
"""

from __future__ import annotations

import json
import math
from typing import Any

import kubernetes
import urllib3

from drlsched.autoscale.load import LoadCurve
from drlsched.k8s.objects import CPU_USAGE_ANNOTATION


def replica_usage_m(rate: float, cpu_per_rps_m: float, ready: int) -> int:
    """A ready replica's CPU in millicores (at least 1m, kwok's default)."""
    return max(1, math.ceil(rate * cpu_per_rps_m / ready)) if ready else 1


class ServiceLoad:
    """Drives the usage of the pods a label selector picks in one namespace."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, selector: str, curve: LoadCurve,
                 cpu_per_rps_m: float) -> None:
        self.core = kubernetes.client.CoreV1Api(api)
        self.namespace, self.selector, self.curve, self.cost = namespace, selector, curve, cpu_per_rps_m

    def step(self, t_s: float) -> dict[str, int]:
        """Sets every pod's usage for the load at curve time `t_s`; returns the usage set per pod (millicores)."""
        response = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector,
                                                 _preload_content=False)
        pods = [p for p in json.loads(response.data)["items"] if not p["metadata"].get("deletionTimestamp")]
        ready = [p for p in pods if pod_ready(p)]
        share = replica_usage_m(float(self.curve.at(t_s)), self.cost, len(ready))
        names = {p["metadata"]["name"] for p in ready}
        out = {}
        for pod in pods:
            name = pod["metadata"]["name"]
            value = share if name in names else 1
            out[name] = value
            if (pod["metadata"].get("annotations") or {}).get(CPU_USAGE_ANNOTATION) != f"{value}m":
                self._patch(name, f"{value}m")
        return out

    def _patch(self, name: str, value: str) -> None:
        try:
            self.core.patch_namespaced_pod(name, self.namespace, {"metadata": {"annotations": {
                CPU_USAGE_ANNOTATION: value}}})
        except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError):
            pass  # deleted meanwhile: it serves nothing any more


def pod_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
