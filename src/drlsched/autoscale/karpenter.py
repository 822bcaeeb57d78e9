"""Karpenter's provisioning and consolidation decisions for one NodePool, with time passed in (sigs.k8s.io/karpenter
v1.15.0: `pkg/operator/options` batch durations, `pkg/controllers/provisioning`, `pkg/controllers/disruption`
`controller.go`, `consolidation.go`, `emptiness.go`, `{multi,single}nodeconsolidation.go`; NodePool defaults from
its CRD).

- **Provisioning.** A new pending pod opens a batch window (or extends it); the window closes once no new pod has
  come for `batch_idle_s` (1 s) or it has been open `batch_max_s` (10 s). Then the pending pods that fit no
  existing or in-flight node's room are packed largest first onto new NodeClaims, each keeping the pool's
  templates that still fit all its pods; each claim launches its cheapest. The pool's CPU limit caps the total.
- **Disruption**, polled every 10 s, one command at a time, methods in upstream's order: emptiness (empty
  nodes), then multi-node consolidation (the largest prefix of the candidates, cheapest to disrupt first, whose
  pods fit elsewhere with at most one new, cheaper node), then single-node consolidation (the first candidate
  that can be deleted or replaced by a cheaper node). A candidate is a ready node of the pool whose pods last
  changed at least `consolidate_after_s` ago (NodePool default 0 s) and whose pods are all movable; `WhenEmpty`
  pools only lose empty nodes. A command waits 15 s (`commandValidationDelay`) and runs only if still valid; at
  most ⌈10%⌉ of the pool's nodes (the default budget) are disrupted at once. A replacement is launched first and
  its candidates removed once it is ready.
Karpenter's scheduling simulation is richer (topology, affinities, daemonsets, offerings); here pods have only
resources and a GPU model, as everywhere in drlsched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

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

WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmpty", "WhenEmptyOrUnderutilized"
DISRUPTION_POLL_S = 10.0  # controller.go pollingPeriod
COMMAND_VALIDATION_S = 15.0  # consolidation.go commandValidationDelay


@dataclass(frozen=True)
class KarpenterConfig:
    batch_idle_s: float = 1.0  # --batch-idle-duration
    batch_max_s: float = 10.0  # --batch-max-duration
    consolidation_policy: str = WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after_s: float = 0.0
    budget_nodes: float = 0.10  # spec.disruption.budgets[0].nodes "10%"
    limit_cpu_m: int | None = None  # spec.limits.cpu
    poll_s: float = DISRUPTION_POLL_S
    validation_s: float = COMMAND_VALIDATION_S

    def slowed(self, factor: float) -> KarpenterConfig:
        """Every period × factor: Karpenter on a real clock under a workload clock `factor` times faster (a
        replay's speed-up)."""
        return replace(self, batch_idle_s=self.batch_idle_s * factor, batch_max_s=self.batch_max_s * factor,
                       consolidate_after_s=self.consolidate_after_s * factor, poll_s=self.poll_s * factor,
                       validation_s=self.validation_s * factor)

    def validate(self) -> None:
        if self.consolidation_policy not in (WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED):
            raise UserError(f"unknown consolidation policy {self.consolidation_policy!r}")
        if not (0 < self.batch_idle_s <= self.batch_max_s):
            raise UserError("karpenter: batch idle duration must be positive and at most the max duration")
        if not (self.poll_s > 0 and self.validation_s >= 0 and self.consolidate_after_s >= 0):
            raise UserError("karpenter: the disruption poll must be positive, the command validation delay and "
                            "consolidateAfter not negative")


@dataclass(frozen=True)
class _Command:
    candidates: tuple[str, ...]
    replacement: NodeTemplate | None
    reason: str
    at_s: float


@dataclass
class Karpenter:
    pool: NodeGroup  # its templates are the pool's instance types; max_size is not used (limits are CPU)
    config: KarpenterConfig = KarpenterConfig()
    batch_open_s: float | None = None
    batch_last_s: float = 0.0
    seen_pending: set[str] = field(default_factory=set)
    next_poll_s: float = 0.0
    command: _Command | None = None
    replacing: dict[str, tuple[str, ...]] = field(default_factory=dict)  # replacement node -> nodes it replaces
    last_pod_change: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)
    created: int = 0
    _pending: Sequence[PodRequest] = ()  # the last step's pending pods, for the consolidation simulation

    def __post_init__(self) -> None:
        self.config.validate()
        if not self.pool.templates:
            raise UserError(f"NodePool {self.pool.name} has no instance types")

    def next_wakeup_s(self) -> float:
        """When `step` next has something to do (batch close, disruption poll, command validation)."""
        times = [self.next_poll_s]
        if self.batch_open_s is not None:
            times.append(min(self.batch_last_s + self.config.batch_idle_s, self.batch_open_s + self.config.batch_max_s))
        if self.command is not None:
            times.append(self.command.at_s + self.config.validation_s)
        return min(times)

    def step(self, now_s: float, pending: Sequence[PodRequest], nodes: Sequence[NodeView]) -> list[Action]:
        """Called at least whenever pending pods change and at `next_wakeup_s()`: pending pods and every node
        (in-flight ones with ready=False)."""
        self._track_pod_changes(now_s, nodes)
        self._pending = pending
        actions: list[Action] = self._finish_replacements(nodes)
        actions += self._provision(now_s, pending, nodes)
        if now_s >= self.next_poll_s:
            self.next_poll_s = now_s + self.config.poll_s
            actions += self._disrupt(now_s, nodes)
        elif self.command is not None and now_s >= self.command.at_s + self.config.validation_s:
            actions += self._disrupt(now_s, nodes)
        return actions

    # --- provisioning ------------------------------------------------------------------------------------

    def _provision(self, now_s: float, pending: Sequence[PodRequest], nodes: Sequence[NodeView]) -> list[Action]:
        cfg = self.config
        names = {p.name for p in pending}
        if names - self.seen_pending:
            if self.batch_open_s is None:
                self.batch_open_s = now_s
            self.batch_last_s = now_s
        self.seen_pending = names
        if self.batch_open_s is None:
            return []
        if now_s - self.batch_last_s < cfg.batch_idle_s and now_s - self.batch_open_s < cfg.batch_max_s:
            return []
        self.batch_open_s = None
        room = Room.of([n for n in nodes if n.name not in self._leaving()])
        left = [p for p in by_size(pending) if room.place(p) < 0]
        claims = self._pack(left, self._cpu_left(nodes))
        return [self._launch(t, f"{len(pods)} pending pods") for t, pods in claims]

    def _pack(self, pods: Sequence[PodRequest], cpu_left: float) -> list[tuple[NodeTemplate, list[PodRequest]]]:
        """Largest first onto new claims, each keeping the templates that fit all its pods; a claim launches its
        cheapest template."""
        claims: list[tuple[list[NodeTemplate], list[PodRequest]]] = []
        for pod in pods:
            for options, members in claims:
                still = [t for t in options if template_fits(t, [*members, pod])]
                if still:
                    options[:] = still
                    members.append(pod)
                    break
            else:
                options = [t for t in self.pool.templates if template_fits(t, [pod])]
                if options:
                    claims.append((options, [pod]))
        out = []
        for options, members in claims:
            cheapest = min(options, key=lambda t: (t.price, t.name))
            if cheapest.cpu_m > cpu_left:
                continue
            cpu_left -= cheapest.cpu_m
            out.append((cheapest, members))
        return out

    def _cpu_left(self, nodes: Sequence[NodeView]) -> float:
        if self.config.limit_cpu_m is None:
            return math.inf
        return self.config.limit_cpu_m - sum(n.cpu_m for n in nodes if n.group == self.pool.name)

    def _launch(self, template: NodeTemplate, reason: str) -> Provision:
        name = f"{self.pool.name}-{self.created:05d}"
        self.created += 1
        return Provision(self.pool.name, template, (name,), reason)

    # --- disruption --------------------------------------------------------------------------------------

    def _disrupt(self, now_s: float, nodes: Sequence[NodeView]) -> list[Action]:
        if self.command is not None:
            if now_s < self.command.at_s + self.config.validation_s:
                return []
            command, self.command = self.command, None
            again = self._compute(now_s, nodes, restrict=command.candidates)
            if again is None or (again.candidates, again.replacement, again.reason) != (
                    command.candidates, command.replacement, command.reason):
                return []  # no longer valid (an empty node got a pod, pods no longer fit): abandoned
            return self._execute(command)
        self.command = self._compute(now_s, nodes)
        return []

    def _execute(self, command: _Command) -> list[Action]:
        if command.replacement is None:
            return [Remove(n, command.reason) for n in command.candidates]
        launch = self._launch(command.replacement, f"replaces {', '.join(command.candidates)}")
        self.replacing[launch.names[0]] = command.candidates
        return [launch]

    def _finish_replacements(self, nodes: Sequence[NodeView]) -> list[Action]:
        ready = {n.name for n in nodes if n.ready}
        done = [r for r in self.replacing if r in ready]
        return [Remove(old, f"replaced by {r}") for r in done for old in self.replacing.pop(r)]

    def _leaving(self) -> set[str]:
        return {n for olds in self.replacing.values() for n in olds}

    def _candidates(self, now_s: float, nodes: Sequence[NodeView]) -> list[NodeView]:
        leaving = self._leaving()
        out = []
        for n in nodes:
            if n.group != self.pool.name or not n.ready or n.name in leaving or n.name in self.replacing:
                continue
            changed = self.last_pod_change.get(n.name, (n.created_s, frozenset()))[0]
            if now_s - changed < self.config.consolidate_after_s:
                continue
            if all(p.movable for p in n.pods):
                out.append(n)
        # Cheapest to disrupt first: fewest pods (upstream weighs pods by priority and remaining lifetime), then
        # the least requested CPU.
        return sorted(out, key=lambda n: (len(n.pods), n.requested[0], n.name))

    def _budget(self, nodes: Sequence[NodeView]) -> int:
        pool = [n for n in nodes if n.group == self.pool.name]
        return max(0, math.ceil(self.config.budget_nodes * len(pool)) - len(self._leaving()))

    def _compute(self, now_s: float, nodes: Sequence[NodeView], restrict: tuple[str, ...] | None = None
                 ) -> _Command | None:
        """The next command (emptiness, then multi-node, then single-node consolidation); with `restrict`, the
        same command for those nodes if it is still valid."""
        budget = self._budget(nodes)
        if budget == 0:
            return None
        candidates = self._candidates(now_s, nodes)
        underutilized = self.config.consolidation_policy == WHEN_EMPTY_OR_UNDERUTILIZED
        if restrict is not None:
            chosen = [c for c in candidates if c.name in restrict]
            if len(chosen) != len(restrict):
                return None
            if not any(c.pods for c in chosen):
                return _Command(restrict, None, "empty", now_s)
            return self._consolidate(now_s, nodes, chosen) if underutilized else None
        empty = [c for c in candidates if not c.pods][:budget]
        if empty:
            return _Command(tuple(c.name for c in empty), None, "empty", now_s)
        if not underutilized:
            return None
        busy = candidates
        lo, hi, best = 2, min(len(busy), budget, 100), None
        while lo <= hi:  # multi-node: binary search on the prefix length
            mid = (lo + hi) // 2
            got = self._consolidate(now_s, nodes, busy[:mid])
            if got is not None:
                best, lo = got, mid + 1
            else:
                hi = mid - 1
        if best is not None:
            return best
        for c in busy:  # single-node
            got = self._consolidate(now_s, nodes, [c])
            if got is not None:
                return got
        return None

    def _consolidate(self, now_s: float, nodes: Sequence[NodeView], candidates: Sequence[NodeView]) -> _Command | None:
        """Delete the candidates if their pods fit on the other nodes, or replace them by one cheaper node.
        Upstream's simulation (disruption/helpers.go `SimulateScheduling`) schedules the pending pods too, with the
        candidates' pods, initialized nodes first; a candidate's pod that would land on a node not yet initialized
        voids the command, and so does needing more than one new node (pending pods' included)."""
        if not candidates:
            return None
        names = {c.name for c in candidates}
        others = [n for n in nodes if n.name not in names and n.name not in self._leaving()]
        ready, launching = Room.of([n for n in others if n.ready]), Room.of([n for n in others if not n.ready])
        new = [p for p in by_size(self._pending) if ready.place(p) < 0 and launching.place(p) < 0]
        for p in by_size([p for c in candidates for p in c.pods]):
            if ready.place(p) >= 0:
                continue
            if launching.place(p) >= 0:
                return None  # "would schedule against uninitialized nodeclaim"
            new.append(p)
        reason = "underutilized" if len(candidates) == 1 else "underutilized (multi-node)"
        if not new:
            return _Command(tuple(sorted(names)), None, reason, now_s)
        price = sum(self._price(c) for c in candidates)
        fits = [t for t in self.pool.templates if template_fits(t, new) and t.price < price]
        if not fits:
            return None
        return _Command(tuple(sorted(names)), min(fits, key=lambda t: (t.price, t.name)), reason, now_s)

    def _price(self, node: NodeView) -> float:
        by_name = {t.name: t for t in self.pool.templates}
        t = by_name.get(node.template)
        return t.price if t is not None else math.inf

    def _track_pod_changes(self, now_s: float, nodes: Sequence[NodeView]) -> None:
        for n in nodes:
            pods = frozenset(p.name for p in n.pods)
            seen = self.last_pod_change.get(n.name)
            if seen is None or seen[1] != pods:
                self.last_pod_change[n.name] = (now_s if seen is not None else n.created_s, pods)
        alive = {n.name for n in nodes}
        self.last_pod_change = {k: v for k, v in self.last_pod_change.items() if k in alive}
