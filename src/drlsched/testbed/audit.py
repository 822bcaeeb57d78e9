"""The apiserver's audit log on the testbed (`Options(audit_log=True)`): one JSON line per write request
(create, update, patch, delete) at level Metadata, and the counts of those writes per client.

drlsched's controllers send `User-Agent: <component>/<identity>` (their leader-election identity), so two
replicas sharing one kubeconfig are still told apart: `writes()` counts, by user agent, every write the
apiserver *completed*, the evidence that only the leader wrote."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

AUDIT_LOG = "audit.log"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")

_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "verbs": list(WRITE_VERBS)},
        {"level": "None"},
    ],
}


def audit_args(state_dir: Path) -> list[str]:
    """kube-apiserver flags for a JSON audit log of writes in `state_dir` (the policy file is written here)."""
    policy = state_dir / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(_POLICY))
    return [f"--audit-policy-file={policy}", f"--audit-log-path={state_dir / AUDIT_LOG}", "--audit-log-format=json",
            "--audit-log-mode=blocking", "--audit-log-maxsize=0"]


@dataclass(frozen=True)
class Write:
    user_agent: str
    verb: str
    resource: str  # e.g. nodes/status, pods/eviction, events, leases
    name: str
    code: int
    at: str  # stageTimestamp (RFC 3339, microseconds)


def read_writes(state_dir: Path) -> list[Write]:
    """Every completed write in the testbed's audit log, in order."""
    path = state_dir / AUDIT_LOG
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line being written
        if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
            continue
        ref = event.get("objectRef") or {}
        resource = str(ref.get("resource") or "")
        if ref.get("subresource"):
            resource += f"/{ref['subresource']}"
        out.append(Write(str(event.get("userAgent") or ""), str(event["verb"]), resource, str(ref.get("name") or ""),
                         int((event.get("responseStatus") or {}).get("code") or 0), str(event.get("stageTimestamp"))))
    return out


def writes_by_agent(writes: list[Write], prefix: str = "", exclude: tuple[str, ...] = ("leases",)) -> Counter[str]:
    """Successful writes (2xx) per user agent starting with `prefix`, leaving out resources in `exclude` (by
    default the Lease, which every candidate writes by design)."""
    return Counter(w.user_agent for w in writes
                   if w.user_agent.startswith(prefix) and 200 <= w.code < 300 and w.resource not in exclude)
