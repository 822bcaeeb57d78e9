"""The testbed's optional controllers: the real kube-controller-manager (Deployments, ReplicaSets, the HPA controller,
garbage collection, namespace deletion, pod GC) and Karpenter with its KWOK provider as the node autoscaler.

kube-controller-manager runs only the controllers listed in `CONTROLLERS`: the node lifecycle controller would mark
every KWOK node NotReady (kwok sends no heartbeats here), and the ServiceAccount token and CSR signers need keys
the testbed does not make. It runs with its own credentials (`--use-service-account-credentials=false`) as a
member of system:masters, since the per-controller service accounts it would otherwise use have no tokens.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from drlsched.autoscale.node_groups import NodeGroup
from drlsched.testbed import karpenter, processes
from drlsched.testbed.launch import api_client, launch
from drlsched.testbed.processes import LOOPBACK

if TYPE_CHECKING:
    from drlsched.testbed.controlplane import Testbed

CONTROLLERS = ("deployment", "replicaset", "horizontalpodautoscaling", "garbagecollector", "namespace", "podgc")
HPA_SYNC_PERIOD_S = 15.0  # upstream's --horizontal-pod-autoscaler-sync-period


def start_controller_manager(testbed: Testbed, binary: Path, hpa_sync_period_s: float = HPA_SYNC_PERIOD_S) -> None:
    d = testbed.state_dir
    kubeconfig = d / "kube-controller-manager.kubeconfig"
    port = testbed.ports["controller-manager"]
    args = [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={port}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        "--leader-elect=false",
        f"--controllers={','.join(CONTROLLERS)}",
        "--use-service-account-credentials=false",
        f"--horizontal-pod-autoscaler-sync-period={hpa_sync_period_s:g}s",
    ]
    insecure = ssl._create_unverified_context()  # it serves an in-memory self-signed certificate
    launch(testbed, "kube-controller-manager", binary, args,
           lambda: processes.http_ok(f"https://{LOOPBACK}:{port}/healthz", insecure), 60.0)


def start_karpenter(testbed: Testbed, binary: Path, crds: Sequence[Path], pools: Sequence[NodeGroup],
                    node_provision_s: float = 0.0, consolidate_after_s: float = 0.0) -> None:
    """Installs the CRDs, node class and NodePools, then starts Karpenter (leader election off; its metrics and
    health ports are the testbed's)."""
    d = testbed.state_dir
    with api_client(testbed) as api:
        karpenter.install(api, crds, pools, node_provision_s, consolidate_after_s)
    types = karpenter.write_instance_types(d / "instance-types.json", pools)
    health = testbed.ports["karpenter-health"]
    args = [
        "--disable-leader-election",
        f"--metrics-port={testbed.ports['karpenter-metrics']}",
        f"--health-probe-port={health}",
        f"--instance-types-file-path={types}",
        "--log-level=info",
    ]
    launch(testbed, "karpenter", binary, args,
           lambda: processes.http_ok(f"http://{LOOPBACK}:{health}/readyz"), 120.0,
           env={"KUBECONFIG": str(d / "karpenter.kubeconfig"), "SYSTEM_NAMESPACE": "kube-system"})
