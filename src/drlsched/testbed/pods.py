"""Pods on the testbed: bulk creation and phase counts (manifests: `drlsched.k8s.objects.pod_manifest`)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kubernetes


def create_pods(api: kubernetes.client.ApiClient, namespace: str, manifests: list[dict[str, Any]]) -> None:
    core = kubernetes.client.CoreV1Api(api)
    create_concurrently(lambda m, **kw: core.create_namespaced_pod(namespace, m, **kw), manifests)


def create_concurrently(create: Callable[..., Any], manifests: list[dict[str, Any]]) -> None:
    """POSTs from 8 threads, skipping the client's slow response models. Each thread reads its response whole:
    a connection released with its response unread goes back to the pool broken ("Request-sent")."""

    def post(manifest: dict[str, Any]) -> None:
        response = create(manifest, _preload_content=False)
        response.read()
        response.release_conn()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(post, manifests))


def list_pods(api: kubernetes.client.ApiClient, namespace: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Pods as plain JSON dicts (the client's model classes are slow to build for thousands of pods)."""
    core = kubernetes.client.CoreV1Api(api)
    response = core.list_namespaced_pod(namespace, _preload_content=False, **kwargs)
    return list(json.loads(response.data)["items"])


def phases(pods: list[dict[str, Any]]) -> Counter[str]:
    return Counter(p.get("status", {}).get("phase", "") for p in pods)


def wait_for_phase(
    api: kubernetes.client.ApiClient, namespace: str, phase: str, count: int, timeout_s: float
) -> list[dict[str, Any]]:
    """Waits until `count` pods of the namespace are in `phase`; returns all its pods then."""
    deadline = time.monotonic() + timeout_s
    while True:
        pods = list_pods(api, namespace)
        seen = phases(pods)
        if seen[phase] >= count:
            return pods
        if time.monotonic() > deadline:
            raise TimeoutError(f"{seen[phase]} of {count} pods {phase} after {timeout_s:.0f} s: {dict(seen)}")
        time.sleep(1.0)
