"""Cluster state from Kubernetes API objects: Node and Pod JSON → NodeSpec / PodSpec (`drlsched.k8s.objects`) → the
simulator's Cluster.

The same `Cluster` the simulator uses, so every policy serves the simulator, the extender and the second
scheduler unchanged. `ClusterState` is a watch-fed cache: node changes rebuild the arrays (rare), pod changes
allocate or release one pod in place (every scheduling cycle).

BE pods (those requesting `kubernetes.io/batch-cpu`/`batch-memory`) fit against each node's batch allocatable, as
the reclaim controller last set it (`drlsched reclaim`), minus the BE pods bound there: the Cluster's reclaim
mode. A change of batch allocatable alone updates the arrays in place (it changes every reclaim period).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from drlsched.cluster import Cluster, PodRequest
from drlsched.k8s.objects import TERMINAL_PHASES, ObjectError, as_dict, batch_allocatable, node_spec, pod_spec
from drlsched.workload import NodeSpec, PodSpec

MAX_FINISHED = 200_000  # finished pods remembered for data locality (oldest forgotten first)
log = logging.getLogger("drlsched.k8s")


def build_cluster(nodes: list[NodeSpec]) -> tuple[Cluster, dict[str, int]]:
    """A Cluster over nodes sorted by name (a stable order: first-fit means the lowest name) and its index. BE
    pods fit on batch resources (0 until `set_batch`)."""
    ordered = sorted(nodes, key=lambda n: n.name)
    return Cluster(ordered, reclaim=True), {n.name: i for i, n in enumerate(ordered)}


@dataclass(slots=True)
class _Bound:
    node: str
    spec: PodSpec
    confirmed: bool  # seen bound in the API (not only assumed by our own scheduler)
    placed: tuple[int, PodRequest, tuple[int, ...]] | None = None  # node index, request, GPU ids once allocated


class ClusterState:
    """Nodes and the pods bound to them, as a Cluster kept current by watch events (thread-safe via `lock`).

    Pods are "assumed" when a scheduler binds them (`assume`) so the next decision sees them before the watch
    event arrives; the event for the same node is then a no-op.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._nodes: dict[str, NodeSpec] = {}
        self._labels: dict[str, dict[str, str]] = {}  # for nodeSelector (the second scheduler's own filter)
        self._batch: dict[str, tuple[int, int]] = {}  # node -> batch allocatable (millicores, MiB)
        self._expiring: dict[str, float] = {}  # uid -> monotonic deadline of an unconfirmed assumption
        self._pods: dict[str, _Bound] = {}
        self._waiting: set[str] = set()  # uids the watch shows unbound and not finished
        self._jobs: dict[str, Counter[str]] = {}  # job -> node -> its pods holding resources there
        self._finished: OrderedDict[str, tuple[str, str, str]] = OrderedDict()  # uid -> (job, task, node)
        self._finished_by_task: dict[tuple[str, str], dict[str, str]] = {}  # (job, task) -> uid -> node
        self._cluster: Cluster | None = None
        self.index: dict[str, int] = {}
        self.generation = 0  # bumped on every rebuild: policies must be reset on a new Cluster
        self._last_names: tuple[int, list[str], np.ndarray] | None = None

    # --- events -------------------------------------------------------------------------------------------

    def set_node(self, node: dict[str, Any]) -> None:
        spec = node_spec(node)
        cordoned = bool(as_dict(node.get("spec"), "node.spec").get("unschedulable"))
        # A node with no cpu or memory can host nothing (and scorers divide by capacity); a cordoned one takes
        # no new pods. Both are left out of the Cluster.
        if spec.cpu_m == 0 or spec.mem_mib == 0 or cordoned:
            self.delete_node(spec.name)
            return
        labels = {str(k): str(v) for k, v in as_dict(node["metadata"].get("labels"), "node.metadata.labels").items()}
        batch = batch_allocatable(node)
        with self.lock:
            self._labels[spec.name] = labels
            self._batch[spec.name] = batch
            if self._nodes.get(spec.name) != spec:
                self._nodes[spec.name] = spec
                self._cluster = None
            elif self._cluster is not None:
                i = self.index[spec.name]
                self._cluster.batch_cpu[i], self._cluster.batch_mem[i] = batch

    def delete_node(self, name: str) -> None:
        with self.lock:
            self._labels.pop(name, None)
            self._batch.pop(name, None)
            if self._nodes.pop(name, None) is not None:
                self._cluster = None

    def matching(self, selector: dict[str, str]) -> list[str] | None:
        """Names of the nodes whose labels match a pod's nodeSelector (None for an empty selector: all)."""
        if not selector:
            return None
        with self.lock:
            return [n for n, labels in self._labels.items() if all(labels.get(k) == v for k, v in selector.items())]

    def set_pod(self, pod: dict[str, Any]) -> None:
        """A pod seen by a watch: bound and not finished pods hold resources; others hold none."""
        spec = pod_spec(pod)
        node = as_dict(pod.get("spec"), "pod.spec").get("nodeName")
        phase = as_dict(pod.get("status"), "pod.status").get("phase")
        deleting = as_dict(pod.get("metadata"), "pod.metadata").get("deletionTimestamp")
        with self.lock:
            if node or phase in TERMINAL_PHASES or deleting:
                self._waiting.discard(spec.uid)
            else:
                self._waiting.add(spec.uid)
            if phase == "Succeeded" and node:
                self._remember_finished(spec, str(node))
            if phase in TERMINAL_PHASES or deleting:
                self.delete_pod(spec.uid)
            elif node:
                self._hold(spec, str(node), confirmed=True)
            elif (held := self._pods.get(spec.uid)) is not None and held.confirmed:
                self.delete_pod(spec.uid)
            # else: unbound, or assumed by us with the bind still on its way: the watch has not caught up

    def assume(self, spec: PodSpec, node: str, ttl_s: float | None = None) -> None:
        """Our scheduler chose `node`: count the pod there until the API confirms it, `delete_pod` forgets it,
        or (with `ttl_s`, for the extender, which never learns whether kube-scheduler bound the pod) the time
        runs out unconfirmed."""
        with self.lock:
            if ttl_s is not None:
                self._expiring[spec.uid] = time.monotonic() + ttl_s
            self._hold(spec, node, confirmed=False)

    def waiting(self, uid: str) -> bool:
        """Whether the watch shows this pod pending (unbound, not finished)."""
        with self.lock:
            return uid in self._waiting

    def expire_assumed(self) -> None:
        """Forgets timed assumptions that no watch event confirmed."""
        with self.lock:
            now = time.monotonic()
            for uid, deadline in list(self._expiring.items()):
                held = self._pods.get(uid)
                if held is None or held.confirmed:
                    del self._expiring[uid]
                elif deadline < now:
                    del self._expiring[uid]
                    self.delete_pod(uid)

    def _hold(self, spec: PodSpec, node: str, confirmed: bool) -> None:
        held = self._pods.get(spec.uid)
        if held is not None and held.node == node:
            held.confirmed = held.confirmed or confirmed
            return
        if held is not None:
            self._release(held)
            self._count_job(held, -1)
        bound = _Bound(node, spec, confirmed)
        self._pods[spec.uid] = bound
        self._count_job(bound, +1)
        if self._cluster is not None:
            self._allocate(bound)

    def pod_deleted(self, uid: str) -> None:
        """The watch saw the pod go."""
        with self.lock:
            self._waiting.discard(uid)
            self.delete_pod(uid)

    def delete_pod(self, uid: str) -> None:
        """Stops counting the pod's resources (it ended, went, or an assumption about it was wrong)."""
        with self.lock:
            held = self._pods.pop(uid, None)
            if held is not None:
                self._release(held)
                self._count_job(held, -1)

    def replace_nodes(self, nodes: list[dict[str, Any]]) -> None:
        """The result of a fresh list: nodes not in it are gone (used when a watch has to start over)."""
        with self.lock:
            self._nodes = {}
            self._labels = {}
            self._batch = {}
            self._cluster = None
            for node in nodes:
                _skip_unusable(self.set_node, node)

    def replace_pods(self, pods: list[dict[str, Any]]) -> None:
        """Like replace_nodes; our own assumptions stay (their binds are in flight, and resolve them)."""
        with self.lock:
            self._waiting.clear()
            for uid, held in list(self._pods.items()):
                if held.confirmed:
                    self._release(held)
                    self._count_job(held, -1)
                    del self._pods[uid]
            for pod in pods:
                _skip_unusable(self.set_pod, pod)

    def counts(self) -> tuple[int, int]:
        """Nodes and pods holding resources."""
        with self.lock:
            return len(self._nodes), len(self._pods)

    # --- reads --------------------------------------------------------------------------------------------

    def cluster(self) -> Cluster:
        """The current Cluster (rebuilt after node changes; hold `lock` while using it)."""
        with self.lock:
            if self._cluster is None:
                self._cluster, self.index = build_cluster(list(self._nodes.values()))
                for name, i in self.index.items():
                    self._cluster.batch_cpu[i], self._cluster.batch_mem[i] = self._batch.get(name, (0, 0))
                self.generation += 1
                for bound in self._pods.values():
                    bound.placed = None
                    self._allocate(bound)
            return self._cluster

    def node_names(self) -> list[str]:
        with self.lock:
            return sorted(self._nodes)

    def pod_node(self, uid: str) -> str | None:
        with self.lock:
            held = self._pods.get(uid)
            return held.node if held else None

    def indices(self, names: list[str]) -> np.ndarray:
        """int64[len(names)]: each name's row in the current Cluster, -1 if unknown. kube-scheduler sends the
        same list again and again, so the last answer is kept (a list comparison is far cheaper than lookups)."""
        self.cluster()  # rebuilds the index if the nodes changed
        if self._last_names is not None and self._last_names[0] == self.generation and self._last_names[1] == names:
            return self._last_names[2]
        index = self.index
        rows = np.fromiter((index.get(n, -1) for n in names), dtype=np.int64, count=len(names))
        self._last_names = (self.generation, names, rows)
        return rows

    def job_nodes(self, job: str) -> dict[int, int]:
        """Row in the current Cluster -> pods of `job` holding resources there (`PodContext.job_nodes`)."""
        with self.lock:
            self.cluster()
            return {self.index[n]: k for n, k in self._jobs.get(job, {}).items() if n in self.index}

    def data_nodes(self, job: str, parents: tuple[str, ...]) -> dict[int, int]:
        """Row -> finished pods of the parent tasks there (`PodContext.data_nodes`)."""
        with self.lock:
            self.cluster()
            out: Counter[int] = Counter()
            for task in parents:
                for node in self._finished_by_task.get((job, task), {}).values():
                    if (i := self.index.get(node)) is not None:
                        out[i] += 1
            return dict(out)

    def mask(self, names: list[str]) -> np.ndarray:
        """bool[N]: the named nodes of the current Cluster (unknown names are left out)."""
        rows = self.indices(names)
        mask = np.zeros(self.cluster().size, dtype=bool)
        mask[rows[rows >= 0]] = True
        return mask

    # --- bookkeeping --------------------------------------------------------------------------------------

    def _allocate(self, bound: _Bound) -> None:
        assert self._cluster is not None
        i = self.index.get(bound.node)
        if i is None:
            return  # bound to a node we have not seen (yet): counted once the node arrives and forces a rebuild
        r = self._cluster.request(bound.spec)
        gpu_ids = self._cluster.pick_gpus(i, r)
        self._cluster.allocate(i, r, gpu_ids)
        bound.placed = (i, r, gpu_ids)

    def _count_job(self, bound: _Bound, delta: int) -> None:
        nodes = self._jobs.setdefault(bound.spec.job_id, Counter())
        nodes[bound.node] += delta
        if nodes[bound.node] <= 0:
            del nodes[bound.node]
            if not nodes:
                del self._jobs[bound.spec.job_id]

    def _remember_finished(self, spec: PodSpec, node: str) -> None:
        if spec.uid in self._finished:
            return
        self._finished[spec.uid] = (spec.job_id, spec.task, node)
        self._finished_by_task.setdefault((spec.job_id, spec.task), {})[spec.uid] = node
        while len(self._finished) > MAX_FINISHED:
            uid, (job, task, _) = self._finished.popitem(last=False)
            by_task = self._finished_by_task[(job, task)]
            del by_task[uid]
            if not by_task:
                del self._finished_by_task[(job, task)]

    def _release(self, bound: _Bound) -> None:
        if self._cluster is not None and bound.placed is not None:
            self._cluster.release(*bound.placed)
        bound.placed = None


def _skip_unusable(apply: Callable[[dict[str, Any]], None], obj: dict[str, Any]) -> None:
    """One bad object in a list is logged and left out rather than failing the whole list."""
    try:
        apply(obj)
    except ObjectError as err:
        log.warning("ignoring an unusable object: %s", err)
