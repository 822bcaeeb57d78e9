"""Shadow and A/B rollout of a candidate policy next to the live one.

- **Shadow** (`--shadow POLICY`): the candidate decides every pod too, on the same state, without acting.
  Agreement (same node) is counted and exported; a candidate that can estimate its value (a
  `predicted_value(ctx)` method, as a learned policy's critic) has that exported as well.
- **A/B** (`--ab POLICY --ab-fraction F`): a stable hash of the pod's UID (or of its namespace, so whole
  namespaces stay in one arm) sends a fraction F of pods to the candidate. Every binding is annotated with
  the arm and the policy, which is what `drlsched ab-report` reads back.
- **Promotion and rollback** are explicit: `drlsched ab-report --apply FILE` writes the decision to a rollout
  state file, logged; a scheduler started with `--rollout-state FILE` reads it before each batch: `rollback`
  sends every pod to the live policy, `promote` every pod to the candidate.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from drlsched.k8s import prom
from drlsched.k8s.placement import Choice, Placer
from drlsched.k8s.state import ClusterState
from drlsched.workload import PodSpec

log = logging.getLogger("drlsched.k8s")
ARM_ANNOTATION = "drlsched.io/arm"
POLICY_ANNOTATION = "drlsched.io/policy"
CONTROL, CANDIDATE = "control", "candidate"
DECISIONS = ("rollback", "promote")


def in_candidate_arm(key: str, fraction: float) -> bool:
    """Stable across restarts and replicas (unlike Python's salted hash()): the first 8 bytes of SHA-256."""
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return digest < fraction * 2**64


@dataclass(frozen=True, slots=True)
class Routed:
    arm: str  # "control" or "candidate"
    policy: str
    placer: Placer


class Rollout:
    def __init__(
        self,
        live: Placer,
        live_name: str,
        registry: prom.Registry,
        shadow: tuple[Placer, str] | None = None,
        candidate: tuple[Placer, str] | None = None,
        fraction: float = 0.0,
        key: str = "uid",
        state_file: Path | None = None,
    ) -> None:
        self.live = Routed(CONTROL, live_name, live)
        self.shadow = shadow
        self.candidate = Routed(CANDIDATE, candidate[1], candidate[0]) if candidate else None
        self.fraction = fraction
        self.key = key
        self.state_file = state_file
        self.decision = ""
        self._mtime = 0.0
        self.shadow_decisions = registry.add(
            prom.Counter("drlsched_shadow_decisions_total", "Shadow decisions, by agreement with the live one."))
        self.shadow_value = registry.add(
            prom.Gauge("drlsched_shadow_predicted_value", "The shadow policy's value estimate, last pod."))
        self.routed = registry.add(prom.Counter("drlsched_ab_decisions_total", "Pods placed, by A/B arm."))
        self.rollout_state = registry.add(prom.Gauge("drlsched_rollout_state", "1 for the applied decision."))

    def route(self, pod: PodSpec, namespace: str) -> Routed:
        self._refresh()
        if self.candidate is None or self.decision == "rollback":
            routed = self.live
        elif self.decision == "promote":
            routed = self.candidate
        else:
            key = namespace if self.key == "namespace" else pod.uid
            routed = self.candidate if in_candidate_arm(key, self.fraction) else self.live
        self.routed.inc(arm=routed.arm)
        return routed

    def observe_shadow(
        self, state: ClusterState, pod: PodSpec, live: Choice, names: list[str] | None = None
    ) -> None:
        """The shadow's choice for the pod on the state the live policy saw (call before assuming), among
        `names` (the extender's candidates) or every node."""
        if self.shadow is None:
            return
        placer, _ = self.shadow
        choice = placer.choose(state, pod, names)
        self.shadow_decisions.inc(agree=str(choice.node == live.node).lower())
        value = placer.last_value
        if value is not None:
            self.shadow_value.set(value)

    def agreement(self) -> float | None:
        agree, disagree = self.shadow_decisions.get(agree="true"), self.shadow_decisions.get(agree="false")
        return agree / (agree + disagree) if agree + disagree else None

    def _refresh(self) -> None:
        if self.state_file is None:
            return
        try:
            mtime = os.stat(self.state_file).st_mtime
        except FileNotFoundError:
            return
        if mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            decision = str(json.loads(self.state_file.read_text()).get("decision", ""))
        except (OSError, ValueError, AttributeError) as err:
            log.warning("ignoring rollout state %s: %s", self.state_file, err)
            return
        if decision in DECISIONS and decision != self.decision:
            log.info("rollout state %s: %s (candidate %s)", self.state_file, decision,
                     self.candidate.policy if self.candidate else "none")
            self.decision = decision
            for d in DECISIONS:
                self.rollout_state.set(1 if d == decision else 0, decision=d)
