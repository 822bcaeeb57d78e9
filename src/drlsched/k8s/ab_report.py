"""`drlsched ab-report`: the A/B arms compared from the pods themselves, with 95% confidence intervals, and the
rollback rule.

Per arm (the `drlsched.io/arm` annotation the scheduler's binding put on each pod):
- **SLA violation rate**: a pod violates when it waited longer than `--sla-seconds` to be scheduled, or ran
  past its `drlsched.io/deadline-seconds` annotation (JCT > deadline);
- **JCT**: completion minus creation, for finished pods;
- **utilisation**: the CPU request share of the nodes the arm placed pods on (all their live pods counted),
  i.e. how tightly the arm packs.

Rule: the candidate is *worse* when its SLA-violation rate or its mean JCT is higher than control's with 95%
confidence (the interval of the difference lies above 0); then the decision is `rollback`. It is `promote`
only when asked for (`--promote`) and the candidate is better with 95% confidence and not worse; otherwise
`keep`. Each arm needs at least MIN_PODS pods for any decision but `keep`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import kubernetes

from drlsched.k8s import quantity
from drlsched.k8s.client import request
from drlsched.k8s.objects import TERMINAL_PHASES, rfc3339_seconds
from drlsched.k8s.rollout import ARM_ANNOTATION, CANDIDATE, CONTROL, POLICY_ANNOTATION

log = logging.getLogger("drlsched.k8s")
DEADLINE_ANNOTATION = "drlsched.io/deadline-seconds"
MIN_PODS = 20
Z95 = 1.959964


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class Arm:
    arm: str
    policies: list[str]
    pods: int
    sla_violation: Estimate | None  # None for an arm without pods: no sample, not a 0% rate
    jct_s: Estimate | None
    node_cpu_utilisation: Estimate | None


@dataclass(frozen=True)
class Report:
    arms: dict[str, Arm]
    sla_violation_diff: Estimate | None  # candidate - control
    jct_diff_s: Estimate | None
    decision: str  # rollback | keep | promote-eligible
    reason: str


def fetch_pods(api: kubernetes.client.ApiClient, namespace: str | None) -> dict[str, list[dict[str, Any]]]:
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    return {
        "pods": json.loads(request(api, "GET", path))["items"],
        "all_pods": json.loads(request(api, "GET", "/api/v1/pods"))["items"],
        "nodes": json.loads(request(api, "GET", "/api/v1/nodes"))["items"],
    }


def _time(text: str | None) -> float | None:
    return rfc3339_seconds(text) if text else None


def _mean(values: list[float]) -> Estimate | None:
    n = len(values)
    if n == 0:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = Z95 * sd / math.sqrt(n)
    return Estimate(mean, mean - half, mean + half, n)


def _rate(hits: int, n: int) -> Estimate | None:
    """Wilson score interval (sound for small n and rates near 0 or 1); None without a sample (missing, not 0)."""
    if n == 0:
        return None
    p = hits / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half), n)


def _diff(a: Estimate | None, b: Estimate | None) -> Estimate | None:
    """b - a, with the half-widths combined in quadrature (Welch / Wald)."""
    if a is None or b is None or a.n == 0 or b.n == 0:
        return None
    half = math.hypot((a.high - a.low) / 2, (b.high - b.low) / 2)
    d = b.value - a.value
    return Estimate(d, d - half, d + half, min(a.n, b.n))


def compare(data: dict[str, list[dict[str, Any]]], sla_seconds: float, now: float | None = None) -> Report:
    now = time.time() if now is None else now
    alloc = {n["metadata"]["name"]: quantity.milli_cpu(n["status"].get("allocatable", {}).get("cpu", 0))
             for n in data["nodes"]}
    requested: dict[str, int] = {}
    for p in data["all_pods"]:
        node = p["spec"].get("nodeName")
        if node and p.get("status", {}).get("phase") not in TERMINAL_PHASES:
            for c in p["spec"].get("containers", []):
                cpu = (c.get("resources", {}).get("requests") or {}).get("cpu", 0)
                requested[node] = requested.get(node, 0) + quantity.milli_cpu(cpu)
    by_arm: dict[str, list[dict[str, Any]]] = {CONTROL: [], CANDIDATE: []}
    for p in data["pods"]:
        arm = (p["metadata"].get("annotations") or {}).get(ARM_ANNOTATION)
        if arm in by_arm:
            by_arm[arm].append(p)
    arms = {name: _arm(name, pods, sla_seconds, now, alloc, requested) for name, pods in by_arm.items()}
    control, candidate = arms[CONTROL], arms[CANDIDATE]
    sla_diff = _diff(control.sla_violation, candidate.sla_violation)
    jct_diff = _diff(control.jct_s, candidate.jct_s)
    decision, reason = _rule(control, candidate, sla_diff, jct_diff)
    return Report(arms, sla_diff, jct_diff, decision, reason)


def _arm(name: str, pods: list[dict[str, Any]], sla_seconds: float, now: float, alloc: dict[str, int],
         requested: dict[str, int]) -> Arm:
    violations, jcts = 0, []
    for p in pods:
        created = _time(p["metadata"].get("creationTimestamp")) or now
        scheduled = next((_time(c.get("lastTransitionTime")) for c in p.get("status", {}).get("conditions", [])
                          if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
        finished = max((_time(s.get("state", {}).get("terminated", {}).get("finishedAt")) or 0.0
                        for s in p.get("status", {}).get("containerStatuses", [])), default=0.0)
        jct = finished - created if finished else None
        if jct is not None:
            jcts.append(jct)
        deadline = (p["metadata"].get("annotations") or {}).get(DEADLINE_ANNOTATION)
        late = False
        if deadline is not None:
            try:
                late = (jct if jct is not None else now - created) > float(deadline)
            except ValueError:
                pass
        if late or (scheduled is not None and scheduled - created > sla_seconds):
            violations += 1
    nodes = {p["spec"].get("nodeName") for p in pods} - {None}
    shares = [requested.get(n, 0) / alloc[n] for n in nodes if alloc.get(n)]
    policies = sorted({(p["metadata"].get("annotations") or {}).get(POLICY_ANNOTATION, "") for p in pods})
    return Arm(name, policies, len(pods), _rate(violations, len(pods)), _mean(jcts), _mean(shares))


def _rule(control: Arm, candidate: Arm, sla: Estimate | None, jct: Estimate | None) -> tuple[str, str]:
    if control.pods < MIN_PODS or candidate.pods < MIN_PODS:
        return "keep", f"too few pods for a decision (control {control.pods}, candidate {candidate.pods}; " \
                       f"need {MIN_PODS} each)"
    worse = [name for name, d in (("SLA-violation rate", sla), ("mean JCT", jct)) if d is not None and d.low > 0]
    if worse:
        return "rollback", f"candidate worse with 95% confidence on {' and '.join(worse)}"
    better = [name for name, d in (("SLA-violation rate", sla), ("mean JCT", jct)) if d is not None and d.high < 0]
    if better:
        return "promote-eligible", f"candidate better with 95% confidence on {' and '.join(better)}"
    return "keep", "no difference at 95% confidence"


def render(report: Report) -> str:
    def fmt(e: Estimate | None, scale: float = 1.0, unit: str = "") -> str:
        if e is None:
            return "n/a"
        return f"{e.value * scale:.3g}{unit} [{e.low * scale:.3g}, {e.high * scale:.3g}] (n={e.n})"

    lines = [f"{'arm':10} {'pods':>6}  {'SLA violation':32} {'JCT':34} node CPU utilisation"]
    for arm in report.arms.values():
        lines.append(f"{arm.arm:10} {arm.pods:>6}  {fmt(arm.sla_violation, 100, '%'):32} "
                     f"{fmt(arm.jct_s, 1, ' s'):34} {fmt(arm.node_cpu_utilisation, 100, '%')}")
    lines.append(f"candidate - control: SLA violation {fmt(report.sla_violation_diff, 100, ' pp')}, "
                 f"JCT {fmt(report.jct_diff_s, 1, ' s')}")
    lines.append(f"decision: {report.decision} ({report.reason})")
    return "\n".join(lines)


def apply_decision(report: Report, state_file: Path, promote: bool) -> str:
    """Writes `rollback` or (with `promote`) `promote` to the rollout state file the schedulers follow; logs it.
    Returns the action taken ("none" when the decision is to keep the split)."""
    action = {"rollback": "rollback", "promote-eligible": "promote" if promote else "none"}.get(report.decision,
                                                                                                 "none")
    if action == "none":
        log.info("rollout unchanged: %s", report.reason)
        return action
    candidate = report.arms[CANDIDATE].policies
    record = {"decision": action, "reason": report.reason, "candidate": candidate, "time": time.time(),
              "report": asdict(report)}
    tmp = state_file.with_name(f".{state_file.name}.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(state_file)
    logging.getLogger("drlsched.k8s").warning("rollout: %s of candidate %s (%s), written to %s", action,
                                               ", ".join(candidate), report.reason, state_file)
    return action
