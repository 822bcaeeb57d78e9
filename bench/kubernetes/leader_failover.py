"""Two `drlsched reclaim` replicas on the testbed, the second started --stagger-s after the first, then run together
for --together-s: which replica wrote what (the apiserver's audit log, per replica's User-Agent), then the
leader's SIGKILL and the time until the standby holds the lease and repairs a tampered node. Prints JSON.

The defaults are issue 27's "Numbers to reach": 6 nodes with metrics-server, replicas started 6 minutes apart,
5 minutes together, the issue's reproduction settings (`--period 15 --metrics-interval 10 --stale-after 45`).
Something changes all along so that the leader has writes to make: every --churn-s one node's LS pod alternates
its CPU usage between 8 and 24 cores (new batch-cpu on that node), and halfway through the time together one
node's LS pod bursts to 400 GiB of memory with two BE pods bound there (evictions and their Events), back to
40 GiB a minute later.

`conflicting_writes` counts writes (Lease writes aside: every candidate reads and tries the Lease by design) by
a replica while the other held the lease; `takeover_s` is from the SIGKILL to the standby holding the lease
(polled every 0.1 s), `repaired_after_kill_s` to the tampered capacity written back by the standby.
Progress lines go to stderr. About 12 minutes at the defaults.
Usage: nice -n 10 python bench/kubernetes/leader_failover.py [--nodes 6] [--stagger-s 360] [--together-s 300]
  > bench/results/leader_failover.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import kubernetes

from drlsched.k8s.objects import BATCH_CPU_RESOURCE, pod_manifest
from drlsched.machine import machine_info
from drlsched.testbed.audit import Write, read_writes
from drlsched.testbed.build import build
from drlsched.testbed.build import build_versions as versions
from drlsched.testbed.controlplane import Options, down, up
from drlsched.testbed.kwok_config import CPU_USAGE_ANNOTATION, MEMORY_USAGE_ANNOTATION
from drlsched.testbed.replicas import Replica, lease

LEASE = "drlsched-reclaim"
AGENT = "drlsched-reclaim/"
T0 = time.monotonic()


def progress(message: str) -> None:
    print(f"[{time.monotonic() - T0:6.0f} s] {message}", file=sys.stderr, flush=True)


def _at(write: Write) -> float:
    return dt.datetime.fromisoformat(write.at.replace("Z", "+00:00")).timestamp()


def _node_names(core: kubernetes.client.CoreV1Api) -> list[str]:
    return sorted(n["metadata"]["name"] for n in json.loads(core.list_node(_preload_content=False).data)["items"])


def _annotate(core: kubernetes.client.CoreV1Api, pod: str, key: str, value: str) -> None:
    core.patch_namespaced_pod(pod, "services", {"metadata": {"annotations": {key: value}}})


def _capacity(core: kubernetes.client.CoreV1Api, node: str) -> str | None:
    status = json.loads(core.read_node(node, _preload_content=False).data)["status"]
    return (status.get("capacity") or {}).get(BATCH_CPU_RESOURCE)


def _sleep_churning(core: kubernetes.client.CoreV1Api, nodes: list[str], seconds: float, churn_s: float,
                    state: dict[str, int]) -> None:
    """Waits `seconds`, alternating one node's LS CPU usage every `churn_s`."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, max(0.0, state["next"] - time.monotonic())))
        if time.monotonic() >= state["next"]:
            i = state["i"]
            node = nodes[i % len(nodes)]
            _annotate(core, f"ls-{node}", CPU_USAGE_ANNOTATION, "24" if (i // len(nodes)) % 2 == 0 else "8")
            state["i"] += 1
            state["next"] += churn_s


def _phase_counts(writes: list[Write], start: float, end: float) -> dict[str, int]:
    return dict(Counter(w.user_agent for w in writes if w.user_agent.startswith(AGENT) and 200 <= w.code < 300
                        and w.resource != "leases" and start <= _at(w) < end))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=6)
    parser.add_argument("--stagger-s", type=float, default=360.0, help="the second replica starts this much later")
    parser.add_argument("--together-s", type=float, default=300.0, help="both run this long before the SIGKILL")
    parser.add_argument("--churn-s", type=float, default=60.0, help="one node's LS CPU usage changes this often")
    parser.add_argument("--period", type=float, default=15.0)
    parser.add_argument("--metrics-interval", type=float, default=10.0)
    parser.add_argument("--stale-after", type=float, default=45.0)
    args = parser.parse_args()
    for name in ("stagger_s", "together_s", "churn_s", "period", "metrics_interval", "stale_after"):
        if not getattr(args, name) > 0 or args.nodes < 1:
            parser.error(f"--{name.replace('_', '-')} and --nodes must be positive")
    build()
    with tempfile.TemporaryDirectory(prefix="drlsched-failover-") as tmp:
        progress(f"testbed up: {args.nodes} nodes, metrics-server, audit log")
        bed = up(Options(state_dir=Path(tmp) / "state", nodes=args.nodes, metrics_server=True, audit_log=True))
        try:
            result = _run(bed, args, Path(tmp))
        finally:
            down(bed.state_dir)
    print(json.dumps({"benchmark": "leader_failover", "options": vars(args), **result, **versions(),
                      "machine": machine_info()}, indent=2))


def _run(bed: Any, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    api = bed.api_client()
    core = kubernetes.client.CoreV1Api(api)
    nodes = _node_names(core)
    core.create_namespace({"metadata": {"name": "services"}})
    core.create_namespace({"metadata": {"name": "batch"}})
    for node in nodes:  # nearly all requested, 8 cores / 40 GiB used: what the controller lends is the rest
        ls = pod_manifest(f"ls-{node}", cpu="90", memory="480Gi", duration=None,
                          annotations={CPU_USAGE_ANNOTATION: "8", MEMORY_USAGE_ANNOTATION: "40Gi"})
        ls["spec"]["nodeName"] = node
        core.create_namespaced_pod("services", ls)
    argv = ["reclaim", "--kubeconfig", str(bed.kubeconfig), "--model", "koordinator", "--period", str(args.period),
            "--metrics-interval", str(args.metrics_interval), "--stale-after", str(args.stale_after)]
    churn = {"i": 0, "next": time.monotonic() + args.churn_s}
    a_started = time.time()
    a = Replica("a", argv, log_dir)
    b: Replica | None = None
    try:
        first = a.identity()
        progress(f"replica a started ({first}); b starts in {args.stagger_s:.0f} s")
        _sleep_churning(core, nodes, args.stagger_s, args.churn_s, churn)
        b = Replica("b", argv, log_dir)
        second = b.identity()
        together = time.time()
        progress(f"replica b started ({second}); {args.together_s:.0f} s together")
        hot = nodes[-1]
        half = args.together_s / 2
        _sleep_churning(core, nodes, max(0.0, half - 60.0), args.churn_s, churn)
        for gib in (16, 24):  # two BE pods on the node about to burst
            pod = pod_manifest(f"be-{gib}", cpu="1", memory=f"{gib}Gi", duration=None, batch=True,
                               annotations={CPU_USAGE_ANNOTATION: "500m", MEMORY_USAGE_ANNOTATION: f"{gib}Gi"})
            pod["spec"]["nodeName"] = hot
            core.create_namespaced_pod("batch", pod)
        _sleep_churning(core, nodes, min(60.0, half), args.churn_s, churn)
        progress(f"memory burst on {hot}")
        _annotate(core, f"ls-{hot}", MEMORY_USAGE_ANNOTATION, "400Gi")
        _sleep_churning(core, nodes, min(60.0, half), args.churn_s, churn)
        _annotate(core, f"ls-{hot}", MEMORY_USAGE_ANNOTATION, "40Gi")
        _sleep_churning(core, nodes, max(0.0, half - 60.0), args.churn_s, churn)
        holder_before = (lease(api, LEASE) or {}).get("holderIdentity")
        progress(f"SIGKILL the leader ({holder_before})")
        leader, standby = (a, b) if holder_before == first else (b, a)
        standby_id = standby.identity()
        killed = leader.kill()
        # Tampered while nobody leads: the standby must repair it once it holds the lease.
        core.patch_node_status(nodes[0], {"status": {"capacity": {BATCH_CPU_RESOURCE: "1"}}})
        takeover = repaired = None
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline and (takeover is None or repaired is None):
            spec = lease(api, LEASE) or {}
            if takeover is None and spec.get("holderIdentity") == standby_id:
                takeover = time.time() - killed
                progress(f"standby holds the lease after {takeover:.1f} s")
            if repaired is None and _capacity(core, nodes[0]) not in ("1", None):
                repaired = time.time() - killed
                progress(f"tampered capacity repaired after {repaired:.1f} s")
            time.sleep(0.1)
        spec = lease(api, LEASE) or {}
        standby_exit = standby.terminate()
        released = (lease(api, LEASE) or {}).get("holderIdentity") == ""
        time.sleep(1.0)  # the audit log's last lines
        writes = read_writes(bed.state_dir)
    finally:
        a.close()
        if b is not None:
            b.close()
        api.close()
    agents = {first: f"{AGENT}{first}", second: f"{AGENT}{second}"}
    ok = [w for w in writes if w.user_agent.startswith(AGENT) and 200 <= w.code < 300]
    by_resource: dict[str, dict[str, int]] = {
        name: dict(Counter(w.resource for w in ok if w.user_agent == agent)) for name, agent in agents.items()}
    leader_id = first if holder_before == first else second
    before_kill = [w for w in ok if w.resource != "leases" and _at(w) < killed]
    # While `leader_id` held the lease (from a's start to the kill), any write by the other conflicts.
    conflicting = sum(1 for w in before_kill if w.user_agent == agents[standby_id])
    return {
        "replicas": {"a": first, "b": second, "leader_before_kill": leader_id},
        "writes_by_leader_before_kill": sum(1 for w in before_kill if w.user_agent == agents[leader_id]),
        "writes_by_non_leader_before_kill": conflicting,
        "conflicting_writes": conflicting,
        "writes_leader_alone": _phase_counts(writes, a_started, together),
        "writes_together": _phase_counts(writes, together, killed),
        "writes_after_kill": _phase_counts(writes, killed, time.time() + 1),
        "writes_by_resource": by_resource,
        "refused_writes": dict(Counter(f"{w.user_agent} {w.resource} {w.code}" for w in writes
                                       if w.user_agent.startswith(AGENT) and not 200 <= w.code < 300)),
        "takeover_s": None if takeover is None else round(takeover, 2),
        "repaired_after_kill_s": None if repaired is None else round(repaired, 2),
        "lease_transitions": spec.get("leaseTransitions"),
        "lease_released_on_sigterm": released,
        "standby_exit_code_on_sigterm": standby_exit,
    }


if __name__ == "__main__":
    main()
