"""GPU fragmentation as defined by FGD (Weng et al., ATC'23), vectorised over nodes and task shapes.

For a node and a typical task shape m: if the node can host m (GPU model allowed, enough GPUs with at least
m's share free, enough CPU left), the fragmented GPU amount is the free share of the GPUs that cannot hold m's
share; otherwise every idle GPU share on the node is fragmented for m. A node's fragmentation is the
frequency-weighted sum over the shapes; the cluster's is the sum over nodes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from drlsched.cluster import Cluster
    from drlsched.metrics import Accumulator

MAX_TYPICAL_SHAPES = 64
PAPER_COVERAGE = 0.95  # the FGD simulator's podPopularityThreshold (95%)


@dataclass(frozen=True, slots=True)
class TypicalPods:
    """The workload's distribution of GPU pod shapes (FGD's 'target workload'): K shapes with frequencies."""

    cpu: np.ndarray  # int64[K]
    gpus: np.ndarray  # int64[K]
    gpu_milli: np.ndarray  # int64[K]
    model_mask: np.ndarray  # int64[K]; 0 = any model
    freq: np.ndarray  # float64[K], sums to 1
    # The FGD simulator's own target workload (`fgd-paper`): the most common shapes of all pods, CPU-only ones
    # included, until they cover PAPER_COVERAGE of the pods, each weighted by its count / all pods. Its CPU-only
    # shapes are summed into `cpu_freq`: for them the simulator counts every idle GPU share as fragmented.
    paper: TypicalPods | None = None
    cpu_freq: float = 0.0


def node_fragmentation(gpu_free: np.ndarray, cpu_left: np.ndarray, model_bit: np.ndarray,
                       typical: TypicalPods) -> np.ndarray:
    """Expected fragmented milli-GPU of each node row.

    gpu_free: int64[R, G] free milli per GPU slot (0 for slots the node lacks); cpu_left: int64[R];
    model_bit: int64[R] the node's GPU-model bit. Returns float64[R].
    """
    idle = gpu_free.sum(axis=1)
    milli = typical.gpu_milli
    enough = gpu_free[:, :, None] >= milli[None, None, :]  # [R, G, K]
    fits_gpu = np.count_nonzero(enough, axis=1) >= typical.gpus[None, :]
    access = (typical.model_mask[None, :] == 0) | ((model_bit[:, None] & typical.model_mask[None, :]) != 0)
    hostable = fits_gpu & access & (cpu_left[:, None] >= typical.cpu[None, :])
    partial = np.einsum("rg,rgk->rk", gpu_free, ~enough)  # free share of GPUs too small for the shape
    frag = np.where(hostable, partial, idle[:, None])
    return frag @ typical.freq


def fragmentation_ratio(gpu_free: np.ndarray, cpu_left: np.ndarray, model_bit: np.ndarray,
                        typical: TypicalPods | None) -> float:
    """Share of the cluster's idle GPU capacity that is fragmented for the typical shapes (0..1)."""
    idle = float(gpu_free.sum())
    if typical is None or idle <= 0:
        return 0.0
    return float(node_fragmentation(gpu_free, cpu_left, model_bit, typical).sum()) / idle


MIN_SHAPE_CHANGE = 0.01  # total variation distance below which a refreshed shape distribution is not published


def _as_dict(t: TypicalPods) -> dict[tuple[int, int, int, int], float]:
    keys = zip(t.cpu.tolist(), t.gpus.tolist(), t.gpu_milli.tolist(), t.model_mask.tolist(), strict=True)
    return dict(zip(keys, t.freq.tolist(), strict=True))


def shape_distance(a: TypicalPods, b: TypicalPods) -> float:
    """Total variation distance between two typical-shape distributions (0 = the same, 1 = disjoint)."""
    pa, pb = _as_dict(a), _as_dict(b)
    return 0.5 * sum(abs(pa.get(k, 0.0) - pb.get(k, 0.0)) for k in pa.keys() | pb.keys())


class ShapeCounter:
    """Counts arriving GPU pod shapes; the FGD target workload is the most common shapes, renormalised.

    Every `refresh_every` GPU pods the distribution is rebuilt, and published (a new `current`) only when it
    moved by more than `min_change` (total variation) from the published one: a new `current` makes every
    consumer recompute its per-node state (FGD's score cache, the fragmentation tracker), and once a workload's
    mix has settled, 64 more pods move it by far less than that."""

    def __init__(self, refresh_every: int = 64, min_change: float = MIN_SHAPE_CHANGE) -> None:
        self.counts: Counter[tuple[int, int, int, int]] = Counter()
        self.cpu_counts: Counter[int] = Counter()  # CPU-only pods by CPU request (for `TypicalPods.paper`)
        self.refresh_every, self.min_change = refresh_every, min_change
        self.since = 0
        self.current: TypicalPods | None = None

    def add(self, cpu: int, gpus: int, gpu_milli: int, model_mask: int) -> None:
        if not gpus:
            self.cpu_counts[cpu] += 1
            return
        self.counts[(cpu, gpus, gpu_milli, model_mask)] += 1
        self.since += 1
        if self.current is None or self.since >= self.refresh_every:
            fresh = self._build()
            if self.current is None or shape_distance(fresh, self.current) > self.min_change:
                self.current = fresh
            self.since = 0

    def settle(self) -> None:
        """Rebuilds the typical shapes from every count so far (a target workload known up front)."""
        self.current = self._build() if self.counts else None
        self.since = 0

    def _build(self) -> TypicalPods:
        top = self.counts.most_common(MAX_TYPICAL_SHAPES)
        arr = np.array([k for k, _ in top], dtype=np.int64)
        freq = np.array([c for _, c in top], dtype=np.float64)
        return TypicalPods(cpu=arr[:, 0], gpus=arr[:, 1], gpu_milli=arr[:, 2], model_mask=arr[:, 3],
                           freq=freq / freq.sum(), paper=self._paper())

    def _paper(self) -> TypicalPods:
        """The FGD simulator's `GetTypicalPods`: shapes by decreasing count (CPU-only pods too) until they cover 95%
        of all pods, frequency = count / all pods (not renormalised)."""
        shapes = [(c, k) for k, c in self.counts.items()] + [(c, (cpu, 0, 0, 0)) for cpu, c in self.cpu_counts.items()]
        shapes.sort(key=lambda ck: -ck[0])
        total = float(sum(c for c, _ in shapes))
        kept, covered = [], 0.0
        for count, key in shapes:
            if covered >= PAPER_COVERAGE * total:
                break
            kept.append((count, key))
            covered += count
        gpu = [(c, k) for c, k in kept if k[1]]
        arr = np.array([k for _, k in gpu], dtype=np.int64).reshape(-1, 4)
        return TypicalPods(cpu=arr[:, 0], gpus=arr[:, 1], gpu_milli=arr[:, 2], model_mask=arr[:, 3],
                           freq=np.array([c for c, _ in gpu], dtype=np.float64) / total,
                           cpu_freq=sum(c for c, k in kept if not k[1]) / total)


class FragmentationTracker:
    """The cluster's fragmentation (milli-GPU, and its share of idle GPU capacity) kept current node by node, for an
    exact time integral: a bind or a release changes one node's term (`touch` it), and a new typical-shape set
    recomputes them all."""

    def __init__(self, cluster: Cluster, shapes: ShapeCounter) -> None:
        self.cluster, self.shapes = cluster, shapes
        self.per_node = np.zeros(cluster.size)
        self.typical: TypicalPods | None = None
        self.dirty: set[int] = set()
        self.last = 0.0
        self.last_milli = 0.0

    def touch(self, node: int) -> None:
        self.dirty.add(node)

    def ratio(self) -> float:
        """Share of the idle GPU capacity that is fragmented (0..1; 0 before any GPU pod)."""
        self._update()
        return self.last

    def fragmented_milli(self) -> float:
        """Fragmented milli-GPU of the cluster (0 before any GPU pod)."""
        self._update()
        return self.last_milli

    def integrate(self, acc: Accumulator, dt: float) -> None:
        """Adds dt of the current state to the run's fragmentation integrals (from the first GPU pod on)."""
        if self.shapes.current is None:
            return
        self._update()
        acc.frag_s += self.last * dt
        acc.frag_milli_s += self.last_milli * dt
        acc.frag_time += dt

    def _update(self) -> None:
        c, typical = self.cluster, self.shapes.current
        if typical is None:
            self.last = self.last_milli = 0.0
            return
        if typical is not self.typical:
            self.typical = typical
            self.per_node[:] = node_fragmentation(c.gpu_free, c.cap_cpu - c.req_cpu, c.node_model_bit, typical)
        elif self.dirty:
            rows = np.fromiter(self.dirty, dtype=np.int64, count=len(self.dirty))
            self.per_node[rows] = node_fragmentation(c.gpu_free[rows], c.cap_cpu[rows] - c.req_cpu[rows],
                                                     c.node_model_bit[rows], typical)
        else:
            return
        self.dirty.clear()
        idle = float(c.gpu_free.sum())
        self.last_milli = float(self.per_node.sum())
        self.last = self.last_milli / idle if idle > 0 else 0.0
