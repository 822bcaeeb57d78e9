"""Fragmentation Gradient Descent (Weng et al., ATC'23): place each pod on the node (and GPU) where the
cluster's expected GPU fragmentation grows least, for the workload's typical pod shapes.

The growth of a node's fragmentation depends only on the node's state and on the pod's (cpu, GPU count, share),
and a workload has few distinct such requests (91 in openb's 8,152 pods). So the score of a request is kept per
node and recomputed only for the nodes whose state changed since it was last asked (one bind changes one node):
a placement costs a comparison of the cluster against a snapshot and a few rows of arithmetic.
"""

from __future__ import annotations

import numpy as np

from drlsched.cluster import Cluster, PodRequest
from drlsched.fragmentation import TypicalPods, node_fragmentation
from drlsched.policies.base import Decision, PodContext, Policy
from drlsched.workload import GPU_MILLI

MAX_SCORE = 100
MAX_CACHED_REQUESTS = 256  # bounds the memory: 256 x nodes x 24 bytes (30 MB at 5,000 nodes)
MIN_DISTINCT_ROWS = 64  # below this many stale rows, finding the distinct states costs more than it saves


def paper_score(delta: np.ndarray, typical: TypicalPods, milli_total: int) -> np.ndarray:
    """The FGD simulator's integer node score, int(100 · sigmoid((F_before − F_after) / 1000)), from the growth of
    the GPU shapes' fragmentation; its CPU-only shapes count every idle GPU share as fragmented, so for them the
    pod's milli-GPU comes off F: a shift shared by every node, which still moves the integer steps."""
    x = (typical.cpu_freq * milli_total - delta) / 1000.0
    return np.floor(MAX_SCORE / (1.0 + np.exp(-x))).astype(np.int64)


def fgd_delta(free: np.ndarray, cpu_left: np.ndarray, model_bit: np.ndarray, cpu: int, gpus: int, milli: int,
              typical: TypicalPods, paper: bool = False, before: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Fragmentation growth (milli-GPU) of placing a (cpu, gpus, milli) request on each node row, and the GPU a
    share goes to (-1 for whole GPUs or none: the lowest free ones are taken).

    free: int64[R, G] free milli per GPU slot; cpu_left: int64[R]; model_bit: int64[R]. A share is tried on
    every GPU that can hold it and the node keeps its best GPU (the lowest index among equals; with `paper`, the
    best by the simulator's integer score, `paper_score`). The rows must be feasible for the request. `before`:
    the rows' fragmentation now, when the caller has it (it does not depend on the request).
    """
    if before is None:
        before = node_fragmentation(free, cpu_left, model_bit, typical)
    cpu_after = cpu_left - cpu
    rows = np.arange(free.shape[0])
    if gpus == 1 and milli < GPU_MILLI:
        after = _share_after(free, cpu_after, model_bit, milli, typical)
        if paper:
            score = np.where(np.isfinite(after), paper_score(np.nan_to_num(after - before[:, None], posinf=0.0),
                                                             typical, milli), -1)
            choice = np.argmax(score, axis=1)
        else:
            choice = np.argmin(after, axis=1)
        return after[rows, choice] - before, choice
    trial = free
    if gpus:
        full = free == GPU_MILLI
        trial = np.where(full & (np.cumsum(full, axis=1) <= gpus), 0, free)
    after = node_fragmentation(trial, cpu_after, model_bit, typical)
    return after - before, np.full(free.shape[0], -1)


def _share_after(free: np.ndarray, cpu_after: np.ndarray, model_bit: np.ndarray, milli: int,
                 typical: TypicalPods) -> np.ndarray:
    """float64[R, G]: each node's fragmentation with the share on GPU g (inf where g cannot hold it).

    Only GPU g changes, so each shape's count of GPUs able to hold it and the free share of the others are the
    node's totals corrected by g's term: one [R, G, K] pass instead of a whole node measure per GPU.
    """
    m_k = typical.gpu_milli[None, None, :]
    enough = free[:, :, None] >= m_k  # [R, G, K]
    count = np.count_nonzero(enough, axis=1)  # [R, K]
    partial = np.einsum("rg,rgk->rk", free, ~enough)  # free share of the GPUs too small for each shape
    trial = free - milli
    enough_after = trial[:, :, None] >= m_k
    count_after = count[:, None, :] - enough + enough_after
    partial_after = (partial[:, None, :] - np.where(enough, 0, free[:, :, None])
                     + np.where(enough_after, 0, trial[:, :, None]))
    access = (typical.model_mask[None, :] == 0) | ((model_bit[:, None] & typical.model_mask[None, :]) != 0)
    host = access & (cpu_after[:, None] >= typical.cpu[None, :])  # [R, K]
    hostable = (count_after >= typical.gpus[None, None, :]) & host[:, None, :]
    idle_after = (free.sum(axis=1) - milli)[:, None, None]
    after = np.where(hostable, partial_after, idle_after) @ typical.freq
    return np.where(free >= milli, after, np.inf)


class _Scores:
    """Per request, each node's FGD score as of the node's last change; stale rows are recomputed when asked."""

    def __init__(self, cluster: Cluster, paper: bool = False) -> None:
        self.cluster, self.paper = cluster, paper
        self.typical: TypicalPods | None = None
        self.free = cluster.gpu_free.copy()
        self.cpu_left = cluster.cap_cpu - cluster.req_cpu
        self.version = np.zeros(cluster.size, dtype=np.int64)
        self.by_request: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        # Each node's fragmentation now (for the typical set), shared by every request's delta; -1: not current.
        self.before = np.zeros(cluster.size)
        self.before_seen = np.full(cluster.size, -1, dtype=np.int64)

    def _sync(self, typical: TypicalPods) -> None:
        c = self.cluster
        if typical is not self.typical or len(self.by_request) > MAX_CACHED_REQUESTS:
            self.typical = typical
            self.by_request.clear()
            self.before_seen[:] = -1
        cpu_left = c.cap_cpu - c.req_cpu
        changed = (c.gpu_free != self.free).any(axis=1) | (cpu_left != self.cpu_left)
        if changed.any():
            rows = np.flatnonzero(changed)
            self.version[rows] += 1
            self.free[rows] = c.gpu_free[rows]
            self.cpu_left[rows] = cpu_left[rows]

    def get(self, r: PodRequest, nodes: np.ndarray, typical: TypicalPods) -> tuple[np.ndarray, np.ndarray]:
        """(delta, GPU choice) for `nodes`, which must be feasible for `r`."""
        self._sync(typical)
        key = (r.cpu, r.gpus, r.gpu_milli)
        entry = self.by_request.get(key)
        if entry is None:
            n = self.cluster.size
            entry = self.by_request[key] = (np.zeros(n), np.full(n, -1), np.full(n, -1, dtype=np.int64))
        delta, choice, seen = entry
        stale = nodes[seen[nodes] != self.version[nodes]]
        if stale.size:
            rows, back = self._distinct(stale, r.cpu, typical)
            d, ch = fgd_delta(self.free[rows], self.cpu_left[rows], self.cluster.node_model_bit[rows], r.cpu,
                              r.gpus, r.gpu_milli, typical, self.paper, self._before(rows, typical))
            delta[stale], choice[stale] = (d, ch) if back is None else (d[back], ch[back])
            seen[stale] = self.version[stale]
        return delta[nodes], choice[nodes]

    def _before(self, rows: np.ndarray, typical: TypicalPods) -> np.ndarray:
        """The rows' fragmentation now, recomputed only where a node changed since (or the typical set did)."""
        old = rows[self.before_seen[rows] != self.version[rows]]
        if old.size:
            self.before[old] = node_fragmentation(self.free[old], self.cpu_left[old],
                                                  self.cluster.node_model_bit[old], typical)
            self.before_seen[old] = self.version[old]
        return self.before[rows]

    def _distinct(self, stale: np.ndarray, cpu: int, typical: TypicalPods) -> tuple[np.ndarray, np.ndarray | None]:
        """Nodes of `stale` in distinct states for the score, and each stale node's index among them (None: all
        distinct or too few to be worth it). FGD's score reads a node's CPU only through `cpu_left >= shape's
        CPU` before and after the pod, so the state is the free milli per GPU, the GPU model and those two
        counts: after a new typical-shape set, when every node is rescored, openb's 1,213 GPU nodes are
        190-830 distinct states in a fill."""
        if stale.size < MIN_DISTINCT_ROWS:
            return stale, None
        thresholds = np.unique(typical.cpu)
        left = self.cpu_left[stale]
        key = np.column_stack((self.free[stale], self.cluster.node_model_bit[stale],
                               np.searchsorted(thresholds, left, side="right"),
                               np.searchsorted(thresholds, left - cpu, side="right")))
        first, back = distinct_rows(key)
        if first.size == stale.size:
            return stale, None
        return stale[first], back


def distinct_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, back) for the rows of int64[R, C] `key`: the index of one row per distinct value, and each row's
    index into `first` (key[first][back] == key). Rows are grouped by a 64-bit hash (a wrapping dot product with
    fixed odd multipliers: a 1-D unique instead of np.unique(axis=0)'s sort of structured rows, 5-10x slower,
    which was most of FGD's cost in `simulate`, where every new typical-shape set rescores every node) and the
    grouping is checked exactly; on a collision np.unique(axis=0) decides."""
    if key.shape[1] <= _HASH_MULT.size:
        _, first, back = np.unique(key @ _HASH_MULT[: key.shape[1]], return_index=True, return_inverse=True)
        back = back.reshape(-1)
        if np.array_equal(key[first][back], key):
            return first, back
    _, first, back = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return first, back.reshape(-1)


_HASH_MULT = np.random.default_rng(26).integers(1, 2**62, size=32, dtype=np.int64) | 1


class FGD(Policy):
    name = "fgd"

    def reset(self, cluster: Cluster, rng: np.random.Generator) -> None:
        super().reset(cluster, rng)
        self.scores = _Scores(cluster)

    def select(self, ctx: PodContext) -> Decision | None:
        c = self.cluster
        for option in ctx.options:
            nodes = np.flatnonzero(option.feasible)
            if nodes.size == 0:
                continue
            if ctx.typical is None or c.total_gpu_milli == 0:
                return Decision(int(nodes[self.rng.integers(nodes.size)]), option.gpus)
            delta, choice = self.scores.get(option.request, nodes, ctx.typical)
            best = self.best(option.request, nodes, delta, choice, ctx.typical)
            i = int(np.searchsorted(nodes, self.break_tie(nodes[best])))
            ids = (int(choice[i]),) if choice[i] >= 0 else None
            return Decision(int(nodes[i]), option.gpus, ids)
        return None

    def best(self, request: PodRequest, nodes: np.ndarray, delta: np.ndarray, choice: np.ndarray,
             typical: TypicalPods) -> np.ndarray:
        """Indices into `nodes` of the equally best candidates (ties broken by the caller): least growth."""
        return np.flatnonzero(delta <= delta.min() + 1e-9)


class FGDPaper(FGD):
    """FGD exactly as the paper's simulator scores it: its target workload (`TypicalPods.paper`: CPU-only pods
    included, 95% coverage, count / all pods) and its integer score int(100 · sigmoid(−growth / 1000)), the highest
    score winning (ties: `Policy.tie_break`). The integer steps (≈ 40 milli-GPU of growth each near 0) make
    many nodes tie, so this is `fgd` with coarse scores and random choices among near-equals."""

    name = "fgd-paper"

    def reset(self, cluster: Cluster, rng: np.random.Generator) -> None:
        super().reset(cluster, rng)
        self.scores = _Scores(cluster, paper=True)

    def select(self, ctx: PodContext) -> Decision | None:
        c = self.cluster
        for option in ctx.options:
            nodes = np.flatnonzero(option.feasible)
            if nodes.size == 0:
                continue
            typical = None if ctx.typical is None else ctx.typical.paper or ctx.typical
            r = option.request
            if typical is None or c.total_gpu_milli == 0 or (r.cpu == 0 and r.mem == 0 and not r.gpus):
                return Decision(self.break_tie(nodes), option.gpus)  # every node scores the same
            delta, choice = self.scores.get(r, nodes, typical)
            score = paper_score(delta, typical, r.gpus * r.gpu_milli)
            best = np.flatnonzero(score == score.max())
            i = int(np.searchsorted(nodes, self.break_tie(nodes[best])))
            ids = (int(choice[i]),) if choice[i] >= 0 else None
            return Decision(int(nodes[i]), option.gpus, ids)
        return None
