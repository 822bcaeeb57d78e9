"""List-then-watch of nodes and pods into a ClusterState (a minimal informer), surviving apiserver restarts.

Each kind runs in its own thread: list (raw JSON, no client models: they are slow for thousands of objects),
replace the state, then watch from the list's resourceVersion. Any failure (connection refused while the
apiserver restarts, 410 Gone for an expired resourceVersion, a dropped stream) re-lists after a capped
backoff, so the state converges to the apiserver's truth whatever was missed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes.watch.watch import iter_resp_lines

from drlsched.k8s.client import call_raw
from drlsched.k8s.objects import ObjectError
from drlsched.k8s.state import ClusterState

log = logging.getLogger("drlsched.k8s")
WATCH_TIMEOUT_S = 60  # the server ends each watch after this; a fresh one resumes from the last version
_READ_TIMEOUT_S = WATCH_TIMEOUT_S + 30


class Informer:
    """Keeps `state` current. `on_pod(kind, obj)` also sees every pod event ("ADDED"/"MODIFIED"/"DELETED", and
    "RELISTED" with the whole list's objects one by one), e.g. for the second scheduler's queue; `on_node` every
    node event after a list."""

    def __init__(
        self,
        api: kubernetes.client.ApiClient,
        state: ClusterState,
        on_pod: Callable[[str, dict[str, Any]], None] | None = None,
        on_relist: Callable[[], None] | None = None,
        on_node: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.core = kubernetes.client.CoreV1Api(api)
        self.state = state
        self.on_pod = on_pod
        self.on_relist = on_relist
        self.on_node = on_node
        self.stopping = threading.Event()
        self.synced = {"nodes": threading.Event(), "pods": threading.Event()}
        self.relists = 0
        self._threads = [
            threading.Thread(target=self._run, args=("nodes",), name="watch-nodes", daemon=True),
            threading.Thread(target=self._run, args=("pods",), name="watch-pods", daemon=True),
        ]

    def start(self) -> Informer:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def wait_synced(self, timeout_s: float) -> bool:
        return all(event.wait(timeout_s) for event in self.synced.values())

    def is_synced(self) -> bool:
        return all(event.is_set() for event in self.synced.values())

    def _run(self, kind: str) -> None:
        backoff = 0.2
        while not self.stopping.is_set():
            try:
                version = self._list(kind)
                self.synced[kind].set()
                backoff = 0.2
                while not self.stopping.is_set():
                    version = self._watch(kind, version)
            except Exception as err:  # any failure means: start over from a fresh list
                if self.stopping.is_set():
                    return
                log.warning("%s watch failed (%s); re-listing in %.1f s", kind, _short(err), backoff)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _list(self, kind: str) -> str:
        lister = self.core.list_node if kind == "nodes" else self.core.list_pod_for_all_namespaces
        data = json.loads(call_raw(lister))
        items = data.get("items") or []
        if kind == "nodes":
            self.state.replace_nodes(items)
        else:
            self.state.replace_pods(items)
            if self.on_relist is not None:
                self.on_relist()
            if self.on_pod is not None:
                for pod in items:
                    self.on_pod("RELISTED", pod)
        self.relists += 1
        return str(data["metadata"]["resourceVersion"])

    def _watch(self, kind: str, version: str) -> str:
        lister = self.core.list_node if kind == "nodes" else self.core.list_pod_for_all_namespaces
        response = lister(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_TIMEOUT_S,
            _preload_content=False,
            _request_timeout=(5, _READ_TIMEOUT_S),
        )
        try:
            for line in iter_resp_lines(response):
                if self.stopping.is_set():
                    break
                event = json.loads(line)
                kind_of_event, obj = event.get("type"), event.get("object") or {}
                if kind_of_event == "ERROR":
                    raise RuntimeError(f"watch error: {obj.get('code')} {obj.get('message', '')[:200]}")
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if kind_of_event == "BOOKMARK":
                    continue
                self._apply(kind, kind_of_event, obj)
        finally:
            response.release_conn()
        return version

    def _apply(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        try:
            if kind == "nodes":
                if event == "DELETED":
                    self.state.delete_node(obj["metadata"]["name"])
                else:
                    self.state.set_node(obj)
                if self.on_node is not None:
                    self.on_node(event, obj)
                return
            if event == "DELETED":
                uid = obj["metadata"].get("uid") or f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
                self.state.pod_deleted(uid)
            else:
                self.state.set_pod(obj)
        except (ObjectError, KeyError) as err:
            log.warning("ignoring a %s event with an unusable object: %s", kind, err)
            return
        if self.on_pod is not None and kind == "pods":
            self.on_pod(event, obj)


def _short(err: Exception) -> str:
    if isinstance(err, kubernetes.client.ApiException):
        return f"{err.status} {err.reason}"
    return f"{type(err).__name__}: {str(err)[:200]}"
