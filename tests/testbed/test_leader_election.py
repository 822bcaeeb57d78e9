"""Two `drlsched reclaim` replicas on the real control plane (audit log on): one leads on a Lease and writes, the
other stands by and writes nothing (counted by the apiserver's audit log, per replica's User-Agent); the standby
takes over after the leader's SIGKILL and repairs what was tampered with meanwhile; SIGTERM releases the lease.
No timings asserted (a loaded machine); bench/kubernetes/leader_failover.py measures them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from polling import until

from drlsched.k8s.objects import BATCH_CPU_RESOURCE
from drlsched.testbed import controlplane
from drlsched.testbed.audit import read_writes, writes_by_agent
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, down, up
from drlsched.testbed.replicas import Replica, lease

LEASE = "drlsched-reclaim"
_TIMEOUT_S = 300.0


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.Testbed]:
    build()
    state_dir = tmp_path_factory.mktemp("leader-testbed")
    running = up(Options(state_dir=state_dir, nodes=3, metrics_server=True, audit_log=True))
    try:
        yield running
    finally:
        down(state_dir)


def _argv(bed: controlplane.Testbed) -> list[str]:
    return ["reclaim", "--kubeconfig", str(bed.kubeconfig), "--model", "koordinator", "--period", "5",
            "--metrics-interval", "5", "--stale-after", "60", "--log-level", "DEBUG"]


def _writes(bed: controlplane.Testbed, identity: str) -> int:
    return writes_by_agent(read_writes(bed.state_dir), f"drlsched-reclaim/{identity}")[f"drlsched-reclaim/{identity}"]


def _batch_cpu(core: kubernetes.client.CoreV1Api, node: str, key: str) -> str | None:
    status = json.loads(core.read_node(node, _preload_content=False).data)["status"]
    return status.get(key, {}).get(BATCH_CPU_RESOURCE)


def test_one_replica_leads_the_standby_writes_nothing_and_takes_over_after_a_sigkill(
        bed: controlplane.Testbed, tmp_path: Path) -> None:
    api = bed.api_client()
    core = kubernetes.client.CoreV1Api(api)
    node = "kwok-cpu-00000"
    a = Replica("a", _argv(bed), tmp_path)
    b: Replica | None = None
    try:
        first = a.identity()
        until(lambda: (lease(api, LEASE) or {}).get("holderIdentity") == first, "a to hold the lease",
              timeout_s=_TIMEOUT_S)
        until(lambda: _batch_cpu(core, node, "allocatable"), "a to lend batch resources", timeout_s=_TIMEOUT_S)
        b = Replica("b", _argv(bed), tmp_path)
        second = b.identity()
        # b stands by: a tampered capacity stays repaired by a alone, several passes over.
        for round_ in range(3):
            core.patch_node_status(node, {"status": {"capacity": {BATCH_CPU_RESOURCE: "1"}}})
            until(lambda: _batch_cpu(core, node, "capacity") not in ("1", None), f"a to repair capacity ({round_})",
                  timeout_s=_TIMEOUT_S)
        assert (lease(api, LEASE) or {}).get("holderIdentity") == first
        assert _writes(bed, first) > 0
        assert _writes(bed, second) == 0, [w for w in read_writes(bed.state_dir) if second in w.user_agent]
        assert b.proc.poll() is None
        a.kill()
        spec = until(lambda: (s := lease(api, LEASE) or {}).get("holderIdentity") == second and s,
                     "b to take the lease over", timeout_s=_TIMEOUT_S)
        assert spec["leaseTransitions"] == 1
        core.patch_node_status(node, {"status": {"capacity": {BATCH_CPU_RESOURCE: "1"}}})
        until(lambda: _batch_cpu(core, node, "capacity") not in ("1", None), "b to repair capacity",
              timeout_s=_TIMEOUT_S)
        assert _writes(bed, second) > 0
        assert b.terminate() == 0
        assert (lease(api, LEASE) or {}).get("holderIdentity") == ""  # released on SIGTERM
    finally:
        a.close()
        if b is not None:
            b.close()
        api.close()
