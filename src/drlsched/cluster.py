"""Cluster state as numpy arrays: one row per node, so a pod is checked and scored against all nodes at once.

Requests (what the scheduler reserves) and usage (what pods actually consume) are kept apart: feasibility and
kube-scheduler scoring look at requests; contention, utilisation and load-aware scorers look at usage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drlsched.workload import GPU_MILLI, NodeSpec, PodSpec, QoS

# kube-scheduler counts a pod without a cpu/memory request as 100m / 200Mi when scoring (NonZeroRequested).
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY_MIB = 200
NO_MODEL = 1 << 62


@dataclass(frozen=True, slots=True)
class PodRequest:
    """A pod's demand in array terms, computed once per pod (and per GPU-count option for elastic pods)."""

    cpu: int
    mem: int
    gpus: int
    gpu_milli: int
    model_mask: int  # bit set of allowed GPU models; 0 = any
    toleration_mask: int
    nz_cpu: int
    nz_mem: int
    batch: bool = False  # a BE pod on reclaimed resources: cpu/mem are kubernetes.io/batch-cpu/-memory

    def row(self) -> tuple[int, int, int, int, int, int, int]:
        """The request as a row of `Cluster.fits_any`'s matrix (a parked pod's queueing-hint row)."""
        return (self.cpu, self.mem, self.gpus, self.gpu_milli, self.model_mask, self.toleration_mask,
                int(self.batch))


REQUEST_ROW = 7  # columns of PodRequest.row()


class Cluster:
    """Allocatable capacity, reserved requests, GPU shares and measured usage of every node."""

    def __init__(self, nodes: list[NodeSpec], reclaim: bool = False) -> None:
        self.specs = nodes
        # With reclaim, BE pods request batch resources (Koordinator's kubernetes.io/batch-cpu, batch-memory):
        # they fit against the node's batch allocatable minus the BE pods already bound, not against requests.
        self.reclaim = reclaim
        self.names = [n.name for n in nodes]
        n = len(nodes)
        self.size = n
        self.gpu_models = sorted({s.gpu_model for s in nodes if s.gpus})
        self.model_bit = {m: 1 << i for i, m in enumerate(self.gpu_models)}
        taint_keys = sorted({t for s in nodes for t in s.taints})
        self.taint_bit = {t: 1 << i for i, t in enumerate(taint_keys)}
        racks = sorted({s.rack for s in nodes})
        self.rack_names = racks
        rack_index = {r: i for i, r in enumerate(racks)}

        self.cap_cpu = np.array([s.cpu_m for s in nodes], dtype=np.int64)
        self.cap_mem = np.array([s.mem_mib for s in nodes], dtype=np.int64)
        self.max_pods = np.array([s.max_pods for s in nodes], dtype=np.int64)
        self.gpu_count = np.array([s.gpus for s in nodes], dtype=np.int64)
        self.node_model_bit = np.array([self.model_bit.get(s.gpu_model, 0) if s.gpus else 0 for s in nodes],
                                       dtype=np.int64)
        self.taints = np.array([sum(self.taint_bit[t] for t in s.taints) for s in nodes], dtype=np.int64)
        self.rack = np.array([rack_index[s.rack] for s in nodes], dtype=np.int64)
        gmax = max(1, int(self.gpu_count.max(initial=0)))
        self.gpu_exists = np.arange(gmax)[None, :] < self.gpu_count[:, None]
        self.cap_gpu_milli = self.gpu_count * GPU_MILLI
        self.total_cpu = int(self.cap_cpu.sum())
        self.total_mem = int(self.cap_mem.sum())
        self.total_gpu_milli = int(self.cap_gpu_milli.sum())
        self.reset()

    def reset(self) -> None:
        n = self.size
        self.req_cpu = np.zeros(n, dtype=np.int64)
        self.req_mem = np.zeros(n, dtype=np.int64)
        self.nz_cpu = np.zeros(n, dtype=np.int64)
        self.nz_mem = np.zeros(n, dtype=np.int64)
        self.pods = np.zeros(n, dtype=np.int64)
        self.gpu_free = np.where(self.gpu_exists, GPU_MILLI, 0).astype(np.int64)
        self.full_free_gpus = self.gpu_count.copy()  # GPUs with nothing on them
        self.max_gpu_free = np.where(self.gpu_count > 0, GPU_MILLI, 0).astype(np.int64)
        self.used_gpu_milli = np.zeros(n, dtype=np.int64)
        # GPU pods on each node by kind (FGD simulator's "GPU affinity", for gpu-clustering): column 0 counts
        # GPU-share pods, column k pods of k whole GPUs.
        self.gpu_kind_pods = np.zeros((n, self.gpu_exists.shape[1] + 1), dtype=np.int64)
        self.starting_cpu = np.zeros(n, dtype=np.int64)  # requests of pods bound but still starting
        # Measured usage, summed over the node's running pods (refreshed by the simulator's usage ticks).
        self.use_cpu = np.zeros(n, dtype=np.float64)
        self.use_mem = np.zeros(n, dtype=np.float64)
        self.use_gpu = np.zeros(n, dtype=np.float64)
        # Batch allocatable (set by the reclaim model) and the batch requests of the BE pods bound.
        self.batch_cpu = np.zeros(n, dtype=np.int64)
        self.batch_mem = np.zeros(n, dtype=np.int64)
        self.be_cpu = np.zeros(n, dtype=np.int64)
        self.be_mem = np.zeros(n, dtype=np.int64)

    # --- requests -----------------------------------------------------------------------------------------

    def request(self, pod: PodSpec, gpus: int | None = None) -> PodRequest:
        count = pod.gpus if gpus is None else gpus
        milli = (pod.gpu_milli or GPU_MILLI) if count else 0
        if count > 1:
            milli = GPU_MILLI
        mask = 0
        for m in pod.gpu_models:
            mask |= self.model_bit.get(m, 0)
        if pod.gpu_models and mask == 0:
            mask = NO_MODEL  # constrained to models the cluster lacks: a bit no node has
        tol = 0
        for t in pod.tolerations:
            tol |= self.taint_bit.get(t, 0)
        return PodRequest(cpu=pod.cpu_m, mem=pod.mem_mib, gpus=count, gpu_milli=milli, model_mask=mask,
                          toleration_mask=tol, nz_cpu=pod.cpu_m or DEFAULT_MILLI_CPU,
                          nz_mem=pod.mem_mib or DEFAULT_MEMORY_MIB, batch=self.reclaim and pod.qos == QoS.BE)

    def feasible(self, r: PodRequest) -> np.ndarray:
        """NodeResourcesFit on requests, plus GPU count/share, GPU model and NoSchedule taints: bool[N]."""
        if r.batch:
            ok = (self.batch_cpu - self.be_cpu >= r.cpu) & (self.batch_mem - self.be_mem >= r.mem)
        else:
            ok = (self.cap_cpu - self.req_cpu >= r.cpu) & (self.cap_mem - self.req_mem >= r.mem)
        ok &= self.pods < self.max_pods
        if r.gpus:
            if r.gpu_milli >= GPU_MILLI:
                ok &= self.full_free_gpus >= r.gpus
            else:
                ok &= self.max_gpu_free >= r.gpu_milli
            if r.model_mask:
                ok &= (self.node_model_bit & r.model_mask) != 0
        if self.taint_bit:
            ok &= (self.taints & ~r.toleration_mask) == 0
        return ok

    def fits_any(self, rows: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """bool[k]: whether each request row (`PodRequest.row`, int64[k, 7]) fits at least one of `nodes` now, by
        the same rules as `feasible` (NodeResourcesFit's queueing hint for a node whose room grew)."""
        free_cpu, free_mem = self.cap_cpu[nodes] - self.req_cpu[nodes], self.cap_mem[nodes] - self.req_mem[nodes]
        if not self.reclaim:
            return self._fits_any(rows, nodes, free_cpu, free_mem)
        be_cpu, be_mem = self.batch_cpu[nodes] - self.be_cpu[nodes], self.batch_mem[nodes] - self.be_mem[nodes]
        batch = rows[:, 6] != 0
        if self.taint_bit or rows[:, 2].any():
            b = batch[:, None]
            return self._fits_any(rows, nodes, np.where(b, be_cpu, free_cpu), np.where(b, be_mem, free_mem))
        # Parked BE pods are many when batch room is scarce, and CPU/memory-only rows are checked against the
        # nodes' Pareto frontier of free room instead of every node: O(k log nodes), not O(k × nodes).
        room = (self.pods < self.max_pods)[nodes]
        out = np.empty(rows.shape[0], dtype=bool)
        for sel, cpu, mem in ((~batch, free_cpu, free_mem), (batch, be_cpu, be_mem)):
            if sel.any():
                out[sel] = fits_cpu_mem(rows[sel, 0], rows[sel, 1], cpu[room], mem[room])
        return out

    def _fits_any(self, rows: np.ndarray, nodes: np.ndarray, free_cpu: np.ndarray, free_mem: np.ndarray
                  ) -> np.ndarray:
        cpu, mem, gpus, milli, model, tol = (rows[:, i, None] for i in range(REQUEST_ROW - 1))
        ok = (cpu <= free_cpu) & (mem <= free_mem)
        ok &= (self.pods < self.max_pods)[nodes]
        whole = np.where(milli >= GPU_MILLI, self.full_free_gpus[nodes] >= gpus, self.max_gpu_free[nodes] >= milli)
        model_ok = (model == 0) | ((self.node_model_bit[nodes] & model) != 0)
        ok &= (gpus == 0) | (whole & model_ok)
        if self.taint_bit:
            ok &= (self.taints[nodes] & ~tol) == 0
        return ok.any(axis=1)

    def _empty_fit(self, r: PodRequest) -> dict[str, np.ndarray]:
        """Per constraint, the nodes that could take the pod if they were empty (named in kube-scheduler's words)."""
        masks = {"Insufficient cpu": self.cap_cpu >= r.cpu, "Insufficient memory": self.cap_mem >= r.mem}
        if r.gpus:
            gpu_ok = self.gpu_count >= r.gpus
            if r.model_mask:
                gpu_ok &= (self.node_model_bit & r.model_mask) != 0
            masks["Insufficient nvidia.com/gpu"] = gpu_ok
        if self.taint_bit:
            masks["untolerated taint"] = (self.taints & ~r.toleration_mask) == 0
        return masks

    def fits_when_empty(self, r: PodRequest) -> bool:
        """Whether any node could take the pod at all (a pod that fails this can never be scheduled)."""
        masks = iter(self._empty_fit(r).values())
        ok = next(masks).copy()
        for m in masks:
            ok &= m
        return bool(ok.any())

    def infeasible_reason(self, r: PodRequest) -> str:
        """Why no node fits even when empty, in kube-scheduler's words (for unschedulable reports)."""
        reasons = [name for name, mask in self._empty_fit(r).items() if not mask.any()]
        return ", ".join(reasons) or "no node satisfies all constraints at once"

    # --- GPU choice ---------------------------------------------------------------------------------------

    def pick_gpus(self, node: int, r: PodRequest) -> tuple[int, ...]:
        """Default device choice: whole GPUs from the lowest free indices; a share on the best-fitting GPU."""
        if not r.gpus:
            return ()
        free = self.gpu_free[node]
        if r.gpu_milli >= GPU_MILLI:
            idx = np.flatnonzero(free == GPU_MILLI)[: r.gpus]
            return tuple(int(i) for i in idx)
        fits = np.flatnonzero(free >= r.gpu_milli)
        return (int(fits[np.argmin(free[fits])]),)

    # --- bookkeeping --------------------------------------------------------------------------------------

    def allocate(self, node: int, r: PodRequest, gpu_ids: tuple[int, ...]) -> None:
        self._add(node, r, gpu_ids, 1)

    def release(self, node: int, r: PodRequest, gpu_ids: tuple[int, ...]) -> None:
        self._add(node, r, gpu_ids, -1)

    def _add(self, node: int, r: PodRequest, gpu_ids: tuple[int, ...], sign: int) -> None:
        if r.batch:
            self.be_cpu[node] += sign * r.cpu
            self.be_mem[node] += sign * r.mem
        else:
            self.req_cpu[node] += sign * r.cpu
            self.req_mem[node] += sign * r.mem
        self.nz_cpu[node] += sign * r.nz_cpu
        self.nz_mem[node] += sign * r.nz_mem
        self.pods[node] += sign
        if gpu_ids:
            row = self.gpu_free[node]
            for g in gpu_ids:
                row[g] -= sign * r.gpu_milli
            self.used_gpu_milli[node] += sign * r.gpu_milli * len(gpu_ids)
            self.gpu_kind_pods[node, gpu_kind(r.gpus, r.gpu_milli)] += sign
            exists = self.gpu_exists[node]
            self.full_free_gpus[node] = int(np.count_nonzero((row == GPU_MILLI) & exists))
            self.max_gpu_free[node] = int(row.max())

    def check_invariants(self) -> None:
        """No node over-allocated on requests; GPU shares within [0, 1000]. Raises AssertionError."""
        assert np.all(self.req_cpu <= self.cap_cpu), "CPU over-allocated"
        assert np.all(self.req_mem <= self.cap_mem), "memory over-allocated"
        assert np.all(self.req_cpu >= 0) and np.all(self.req_mem >= 0), "negative requests"
        assert np.all(self.pods <= self.max_pods), "too many pods"
        assert np.all((self.gpu_free >= 0) & (self.gpu_free <= GPU_MILLI)), "GPU share out of range"


def gpu_kind(gpus: int, milli: int) -> int:
    """A GPU request's kind: 0 for a share of one GPU, k for k whole GPUs (a column of `gpu_kind_pods`)."""
    return 0 if milli < GPU_MILLI else gpus


def fits_cpu_mem(cpu: np.ndarray, mem: np.ndarray, free_cpu: np.ndarray, free_mem: np.ndarray) -> np.ndarray:
    """bool[k]: whether some node has free_cpu >= cpu[i] and free_mem >= mem[i]. Only the nodes no other node beats
    on both count (the Pareto frontier); sorted by CPU ascending their memory descends, so the first frontier node
    with enough CPU has the most memory among those that do."""
    if free_cpu.size <= 8:  # most wake-ups free one node: the frontier would cost more than the check
        return ((cpu[:, None] <= free_cpu) & (mem[:, None] <= free_mem)).any(axis=1)
    order = np.lexsort((-free_mem, -free_cpu))  # CPU descending, then memory descending
    c, m = free_cpu[order], free_mem[order]
    best_before = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], m[:-1]])) if m.size else m
    front = m > best_before
    fc, fm = c[front][::-1], m[front][::-1]
    i = np.searchsorted(fc, cpu, side="left")
    ok = i < fc.size
    ok[ok] = fm[i[ok]] >= mem[ok]
    return ok
