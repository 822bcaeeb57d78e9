"""Cluster state from Kubernetes API objects: Node and Pod JSON → NodeSpec / PodSpec → the simulator's Cluster.

The same `Cluster` the simulator uses, so every policy serves the simulator, the extender and the second
scheduler unchanged. `ClusterState` is a watch-fed cache: node changes rebuild the arrays (rare), pod changes
allocate or release one pod in place (every scheduling cycle).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from drlsched.cluster import Cluster, PodRequest
from drlsched.k8s import quantity
from drlsched.testbed.nodes import GPU_MODEL_LABEL, GPU_RESOURCE, RACK_LABEL
from drlsched.workload import NodeSpec, PodSpec

# GPU feature discovery's label, for real clusters that lack drlsched's own.
GFD_MODEL_LABEL = "nvidia.com/gpu.product"
JOB_LABEL = "drlsched.io/job"
# A pod's task in its job and the tasks whose output it reads (comma-separated): where the parents' finished pods
# ran is where its shuffle input lives (`PodContext.data_nodes`).
TASK_ANNOTATION = "drlsched.io/task"
PARENTS_ANNOTATION = "drlsched.io/parents"
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
MAX_FINISHED = 200_000  # finished pods remembered for data locality (oldest forgotten first)
TERMINAL_PHASES = ("Succeeded", "Failed")
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
MAX_GPUS = 256  # per node or pod: the Cluster keeps one column per GPU slot
log = logging.getLogger("drlsched.k8s")


class ObjectError(ValueError):
    """An API object that lacks or mistypes a field drlsched needs."""


def job_label_value(job_id: str) -> str:
    """`job_id` as a valid label value (63 characters of [-A-Za-z0-9_.]); other ids become a stable digest."""
    if _LABEL_VALUE.fullmatch(job_id):
        return job_id
    return "job-" + hashlib.sha256(job_id.encode()).hexdigest()[:32]


def _dict(obj: Any, where: str) -> dict[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ObjectError(f"{where} must be an object")
    return obj


def _list(obj: Any, where: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise ObjectError(f"{where} must be a list")
    return obj


def _name(obj: dict[str, Any], what: str) -> str:
    name = _dict(obj.get("metadata"), f"{what}.metadata").get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError(f"{what}.metadata.name must be a non-empty string")
    return name


def node_spec(node: dict[str, Any]) -> NodeSpec:
    """A Node's allocatable resources, GPU model, rack and blocking taints."""
    if not isinstance(node, dict):
        raise ObjectError("node must be an object")
    name = _name(node, "node")
    meta = _dict(node.get("metadata"), "node.metadata")
    labels = _dict(meta.get("labels"), "node.metadata.labels")
    alloc = _dict(_dict(node.get("status"), "node.status").get("allocatable"), "node.status.allocatable")
    spec = _dict(node.get("spec"), "node.spec")
    taints = tuple(
        sorted(
            str(_dict(t, "node.spec.taints[]").get("key", ""))
            for t in _list(spec.get("taints"), "node.spec.taints")
            if _dict(t, "node.spec.taints[]").get("effect") in _BLOCKING_EFFECTS
        )
    )
    try:
        gpus = quantity.count(alloc.get(GPU_RESOURCE, 0), MAX_GPUS)
        return NodeSpec(
            name=name,
            cpu_m=quantity.milli_cpu(alloc.get("cpu", 0), up=False),
            mem_mib=quantity.mebibytes(alloc.get("memory", 0), up=False),
            gpus=gpus,
            gpu_model=str(labels.get(GPU_MODEL_LABEL) or labels.get(GFD_MODEL_LABEL) or ("GPU" if gpus else "")),
            rack=str(labels.get(RACK_LABEL, "rack-0")),
            taints=taints,
            max_pods=quantity.count(alloc.get("pods", 110)),
        )
    except quantity.QuantityError as err:
        raise ObjectError(f"node {name}: {err}") from None


def _requests(container: Any, where: str) -> dict[str, Any]:
    resources = _dict(_dict(container, where).get("resources"), f"{where}.resources")
    # The apiserver defaults missing requests to the limits; objects in extender requests are already defaulted,
    # but objects built by hand may carry limits only (as GPUs must).
    limits = _dict(resources.get("limits"), f"{where}.resources.limits")
    return {**limits, **_dict(resources.get("requests"), f"{where}.resources.requests")}


def pod_spec(pod: dict[str, Any]) -> PodSpec:
    """A Pod's effective request (containers summed, init containers' max, overhead), GPU and model needs."""
    if not isinstance(pod, dict):
        raise ObjectError("pod must be an object")
    name = _name(pod, "pod")
    meta = _dict(pod.get("metadata"), "pod.metadata")
    spec = _dict(pod.get("spec"), "pod.spec")
    labels = _dict(meta.get("labels"), "pod.metadata.labels")
    annotations = _dict(meta.get("annotations"), "pod.metadata.annotations")
    totals = {"cpu": 0.0, "memory": 0.0, GPU_RESOURCE: 0.0}
    init_max = dict(totals)
    try:
        for c in _list(spec.get("containers"), "pod.spec.containers"):
            req = _requests(c, "pod.spec.containers[]")
            for key in totals:
                totals[key] += quantity.parse(req.get(key, 0))
        for c in _list(spec.get("initContainers"), "pod.spec.initContainers"):
            req = _requests(c, "pod.spec.initContainers[]")
            for key in init_max:
                init_max[key] = max(init_max[key], quantity.parse(req.get(key, 0)))
        overhead = _dict(spec.get("overhead"), "pod.spec.overhead")
        effective = {k: max(totals[k], init_max[k]) + quantity.parse(overhead.get(k, 0)) for k in totals}
        cpu_m = quantity.milli_cpu(effective["cpu"])
        mem_mib = quantity.mebibytes(effective["memory"])
        gpus = quantity.count(effective[GPU_RESOURCE], MAX_GPUS)
        if gpus != effective[GPU_RESOURCE]:
            # The apiserver refuses fractional extended resources; GPU shares need a device plugin's own
            # resource name, which drlsched does not read. Rounding down would make a GPU pod a CPU pod.
            raise quantity.QuantityError(f"{GPU_RESOURCE} request {effective[GPU_RESOURCE]:g} is not a whole "
                                         f"number of GPUs")
    except quantity.QuantityError as err:
        raise ObjectError(f"pod {name}: {err}") from None
    selector = _dict(spec.get("nodeSelector"), "pod.spec.nodeSelector")
    model = selector.get(GPU_MODEL_LABEL) or selector.get(GFD_MODEL_LABEL)
    models = (str(model),) if model else _affinity_models(spec)
    tolerations = tuple(
        str(t.get("key", ""))
        for t in (_dict(t, "pod.spec.tolerations[]") for t in _list(spec.get("tolerations"), "pod.spec.tolerations"))
        if t.get("effect") in (None, "", *_BLOCKING_EFFECTS)
    )
    priority = spec.get("priority", 0)
    uid = meta.get("uid")
    namespace = meta.get("namespace", "default")
    return PodSpec(
        uid=str(uid) if uid else f"{namespace}/{name}",
        job_id=str(labels.get(JOB_LABEL) or name),
        task=str(annotations.get(TASK_ANNOTATION) or ""),
        parents=tuple(p for p in (x.strip() for x in str(annotations.get(PARENTS_ANNOTATION) or "").split(",")) if p),
        arrival_s=0.0,
        cpu_m=cpu_m,
        mem_mib=mem_mib,
        gpus=gpus,
        gpu_milli=1000 if gpus else 0,
        gpu_models=models,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        tolerations=tolerations,
    )


def _affinity_models(spec: dict[str, Any]) -> tuple[str, ...]:
    """GPU models a pod accepts through required node affinity: `In` on the model label in its only term (more
    terms are alternatives, which the Cluster's one model set per pod cannot express: then no constraint)."""
    affinity = _dict(_dict(spec.get("affinity"), "pod.spec.affinity").get("nodeAffinity"), "nodeAffinity")
    required = _dict(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), "nodeAffinity.required")
    terms = _list(required.get("nodeSelectorTerms"), "nodeSelectorTerms")
    if len(terms) != 1:
        return ()
    for expr in _list(_dict(terms[0], "nodeSelectorTerms[]").get("matchExpressions"), "matchExpressions"):
        expr = _dict(expr, "matchExpressions[]")
        if expr.get("key") in (GPU_MODEL_LABEL, GFD_MODEL_LABEL) and expr.get("operator") == "In":
            return tuple(str(v) for v in _list(expr.get("values"), "matchExpressions[].values"))
    return ()


def build_cluster(nodes: list[NodeSpec]) -> tuple[Cluster, dict[str, int]]:
    """A Cluster over nodes sorted by name (a stable order: first-fit means the lowest name) and its index."""
    ordered = sorted(nodes, key=lambda n: n.name)
    return Cluster(ordered), {n.name: i for i, n in enumerate(ordered)}


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
        cordoned = bool(_dict(node.get("spec"), "node.spec").get("unschedulable"))
        # A node with no cpu or memory can host nothing (and scorers divide by capacity); a cordoned one takes
        # no new pods. Both are left out of the Cluster.
        if spec.cpu_m == 0 or spec.mem_mib == 0 or cordoned:
            self.delete_node(spec.name)
            return
        labels = {str(k): str(v) for k, v in _dict(node["metadata"].get("labels"), "node.metadata.labels").items()}
        with self.lock:
            self._labels[spec.name] = labels
            if self._nodes.get(spec.name) != spec:
                self._nodes[spec.name] = spec
                self._cluster = None

    def delete_node(self, name: str) -> None:
        with self.lock:
            self._labels.pop(name, None)
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
        node = _dict(pod.get("spec"), "pod.spec").get("nodeName")
        phase = _dict(pod.get("status"), "pod.status").get("phase")
        deleting = _dict(pod.get("metadata"), "pod.metadata").get("deletionTimestamp")
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
