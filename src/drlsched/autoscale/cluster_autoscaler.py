"""Cluster Autoscaler's decisions, with time passed in (kubernetes/autoscaler `cluster-autoscaler/FAQ.md`, "How does
scale-up work?", "How does scale-down work?" and the parameter table; defaults are CA's).

Every `scan_interval_s` (10 s):
- **Scale-up.** Pending pods (unschedulable for at least `new_pod_scale_up_delay_s`) that fit the free room of
  ready or still-provisioning nodes (first fit, largest first) are left to the scheduler. For the rest, each node
  group with room to grow estimates the nodes of its template they need (the `binpacking` estimator: first-fit
  decreasing onto empty template nodes); the expander (`random` by default, seeded; `least-waste`, `most-pods`,
  `price`) picks one group, which grows by that many nodes within its max size and `max_nodes_total`. One group
  per scan, as CA does without `--balance-similar-node-groups`.
- **Scale-down.** A ready node of a group above its min size is unneeded while its requests are below
  `scale_down_utilization_threshold` (0.5) of its allocatable (max of CPU and memory; GPUs on a GPU node) and all its
  pods are movable and fit on other nodes (placements are memorised, so two candidates cannot count on the same
  room). A node unneeded for `scale_down_unneeded_s` (10 min) is removed, empty ones up to
  `max_empty_bulk_delete` (10) per scan and at most one non-empty one (its pods are evicted), unless scale-down is in
  cooldown: within `scale_down_delay_after_add_s` (10 min) of a scale-up or `scale_down_delay_after_delete_s` (one
  scan) of a removal. Unneeded times are tracked through cooldowns.
- A node still not ready `max_node_provision_s` (15 min) after it was requested is no longer counted and removed.
The node provisioning delay is the cloud's, not CA's: `DEFAULT_NODE_PROVISION_S` (210 s) is the middle of the FAQ's
"on GCE it usually takes 3 to 4 minutes from CA request to when pods can be scheduled on newly created nodes".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from drlsched.autoscale.node_groups import (
    Action,
    NodeGroup,
    NodeTemplate,
    NodeView,
    PodRequest,
    Provision,
    Remove,
    Room,
    by_size,
    template_fits,
)
from drlsched.errors import UserError

DEFAULT_NODE_PROVISION_S = 210.0
EXPANDERS = ("random", "least-waste", "most-pods", "price")


@dataclass(frozen=True)
class CAConfig:
    scan_interval_s: float = 10.0
    scale_down_enabled: bool = True
    scale_down_unneeded_s: float = 600.0
    scale_down_delay_after_add_s: float = 600.0
    scale_down_delay_after_delete_s: float | None = None  # None: the scan interval
    scale_down_utilization_threshold: float = 0.5
    scale_down_non_empty_candidates: int = 30
    max_empty_bulk_delete: int = 10
    max_scale_down_parallelism: int = 10
    max_node_provision_s: float = 900.0
    new_pod_scale_up_delay_s: float = 0.0
    max_nodes_total: int = 0  # 0: no limit
    expander: str = "random"

    def validate(self) -> None:
        if self.expander not in EXPANDERS:
            raise UserError(f"unknown expander {self.expander!r}; choose one of {', '.join(EXPANDERS)}")
        if not (self.scan_interval_s > 0 and 0 <= self.scale_down_utilization_threshold <= 1):
            raise UserError("cluster-autoscaler: the scan interval must be positive, the threshold in [0, 1]")


@dataclass(frozen=True)
class _Option:
    group: NodeGroup
    nodes: int
    pods: int
    waste: tuple[float, float]  # idle CPU and memory share of the new nodes


@dataclass
class ClusterAutoscaler:
    groups: Sequence[NodeGroup]
    config: CAConfig = CAConfig()
    seed: int = 0
    next_scan_s: float = 0.0
    last_scale_up_s: float = -np.inf
    last_delete_s: float = -np.inf
    unneeded_since: dict[str, float] = field(default_factory=dict)
    created: int = 0
    rng: np.random.Generator = field(init=False)
    # The last scan's cluster (nodes, readiness, pods) and its unneeded nodes: most scans see the same cluster.
    _memo: tuple[tuple[object, ...], list[str]] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.config.validate()
        for g in self.groups:
            if len(g.templates) != 1:
                raise UserError(f"a Cluster Autoscaler node group has one template; {g.name} has {len(g.templates)}")
        self.rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0xCA]))

    def due(self, now_s: float) -> bool:
        return now_s >= self.next_scan_s

    def step(self, now_s: float, pending: Sequence[PodRequest], nodes: Sequence[NodeView]) -> list[Action]:
        """One scan: the pods the scheduler could not place and every node (provisioning ones with ready=False)."""
        cfg = self.config
        self.next_scan_s = now_s + cfg.scan_interval_s
        stale = [n for n in nodes if not n.ready and n.group is not None
                 and now_s - n.created_s >= cfg.max_node_provision_s]
        actions: list[Action] = [Remove(n.name, "not ready within max-node-provision-time") for n in stale]
        live = [n for n in nodes if n not in stale]
        up = self._scale_up(now_s, pending, live)
        if up is not None:
            actions.append(up)
            self.last_scale_up_s = now_s
        if cfg.scale_down_enabled:
            actions += self._scale_down(now_s, live, scaled_up=up is not None)
        return actions

    # --- scale-up ----------------------------------------------------------------------------------------

    def _scale_up(self, now_s: float, pending: Sequence[PodRequest], nodes: Sequence[NodeView]) -> Provision | None:
        cfg = self.config
        waiting = [p for p in by_size(pending) if now_s - p.since_s >= cfg.new_pod_scale_up_delay_s]
        room = Room.of(nodes)
        left = [p for p in waiting if room.place(p) < 0]
        if not left:
            return None
        sizes = _group_sizes(self.groups, nodes)
        headroom = cfg.max_nodes_total - len(nodes) if cfg.max_nodes_total else np.iinfo(np.int64).max
        options = []
        for g in self.groups:
            can_add = min(g.max_size - sizes[g.name], headroom)
            if can_add > 0:
                option = _estimate(g, left, can_add)
                if option is not None:
                    options.append(option)
        if not options:
            return None
        best = self._expand(options)
        names = tuple(f"{best.group.name}-{self.created + i:05d}" for i in range(best.nodes))
        self.created += best.nodes
        return Provision(best.group.name, best.group.templates[0], names, f"{best.pods} unschedulable pods")

    def _expand(self, options: list[_Option]) -> _Option:
        kind = self.config.expander
        if kind == "least-waste":
            return min(options, key=lambda o: o.waste)
        if kind == "most-pods":
            return max(options, key=lambda o: o.pods)
        if kind == "price":
            return min(options, key=lambda o: o.nodes * o.group.templates[0].price / o.pods)
        return options[int(self.rng.integers(len(options)))]

    # --- scale-down --------------------------------------------------------------------------------------

    def _scale_down(self, now_s: float, nodes: Sequence[NodeView], scaled_up: bool) -> list[Action]:
        cfg = self.config
        state = tuple((n.name, n.ready, n.group, n.cpu_m, n.mem_mib, tuple(p.name for p in n.pods)) for n in nodes)
        if self._memo is None or self._memo[0] != state:
            self._memo = (state, self._unneeded(nodes))
        unneeded = self._memo[1]
        self.unneeded_since = {n: self.unneeded_since.get(n, now_s) for n in unneeded}
        delete_delay = cfg.scan_interval_s if cfg.scale_down_delay_after_delete_s is None \
            else cfg.scale_down_delay_after_delete_s
        if (scaled_up or now_s - self.last_scale_up_s < cfg.scale_down_delay_after_add_s
                or now_s - self.last_delete_s < delete_delay):
            return []
        by_name = {n.name: n for n in nodes}
        sizes = _group_sizes(self.groups, nodes)
        minimum = {g.name: g.min_size for g in self.groups}
        empty: list[str] = []
        drain: list[str] = []
        for name in unneeded:
            node = by_name[name]
            if now_s - self.unneeded_since[name] < cfg.scale_down_unneeded_s or node.group is None:
                continue
            if sizes[node.group] <= minimum[node.group]:
                continue
            if not node.pods and len(empty) < cfg.max_empty_bulk_delete:
                empty.append(name)
                sizes[node.group] -= 1
            elif node.pods and not drain:
                drain.append(name)
                sizes[node.group] -= 1
        chosen = (empty + drain)[: cfg.max_scale_down_parallelism]
        if chosen:
            self.last_delete_s = now_s
            for name in chosen:
                del self.unneeded_since[name]
        return [Remove(n, "empty and unneeded" if not by_name[n].pods else "underutilized and its pods fit elsewhere")
                for n in chosen]

    def _unneeded(self, nodes: Sequence[NodeView]) -> list[str]:
        """Nodes below the threshold whose pods fit elsewhere, in node order, placements memorised."""
        cfg = self.config
        managed = {g.name for g in self.groups}
        ready = [n for n in nodes if n.ready]
        room = Room.of(ready)
        out: list[str] = []
        non_empty = 0
        removed = np.zeros(len(ready), dtype=bool)
        for i, node in enumerate(ready):
            if node.group not in managed or node.utilization() >= cfg.scale_down_utilization_threshold:
                continue
            if node.pods:
                if non_empty >= cfg.scale_down_non_empty_candidates or not all(p.movable for p in node.pods):
                    continue
                non_empty += 1
                trial = Room(room.cpu.copy(), room.mem.copy(), room.gpus.copy(), room.pods.copy(), room.model)
                mask = ~removed
                mask[i] = False
                if any(trial.place(p, mask) < 0 for p in by_size(node.pods)):
                    continue
                room = trial
            removed[i] = True
            out.append(node.name)
        return out


def _group_sizes(groups: Sequence[NodeGroup], nodes: Sequence[NodeView]) -> dict[str, int]:
    sizes = {g.name: 0 for g in groups}
    for n in nodes:
        if n.group in sizes:
            sizes[n.group] += 1
    return sizes


def _estimate(group: NodeGroup, pods: Sequence[PodRequest], limit: int) -> _Option | None:
    """The binpacking estimator: first-fit decreasing of the pods that fit the template onto up to `limit` new
    nodes."""
    t: NodeTemplate = group.templates[0]
    fitting = [p for p in pods if template_fits(t, [p])]
    if not fitting:
        return None
    bins: list[list[PodRequest]] = []
    placed = 0
    for pod in fitting:  # already largest first
        for b in bins:
            if template_fits(t, [*b, pod]):
                b.append(pod)
                placed += 1
                break
        else:
            if len(bins) < limit:
                bins.append([pod])
                placed += 1
    cpu = sum(p.cpu_m for b in bins for p in b)
    mem = sum(p.mem_mib for b in bins for p in b)
    waste = (1 - cpu / (len(bins) * t.cpu_m), 1 - mem / (len(bins) * t.mem_mib))
    return _Option(group, len(bins), placed, waste)
