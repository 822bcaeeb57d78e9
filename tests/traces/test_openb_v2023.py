"""alibaba-gpu-v2023 (openb): GPU sharing, model constraints, QoS, lifetimes, nodes."""

from __future__ import annotations

from trace_helpers import FIXTURES, by_uid, load

from drlsched.workload import QoS

TRACE = FIXTURES / "alibaba-gpu-v2023"


def test_pods() -> None:
    workload = load(TRACE, "alibaba-gpu-v2023")
    pods = by_uid(workload)
    shared = pods["openb-pod-0001"]
    assert (shared.cpu_m, shared.mem_mib, shared.gpus, shared.gpu_milli) == (6000, 12288, 1, 460)
    assert shared.qos == QoS.LS and shared.service and shared.arrival_s == 427061
    assert shared.work_s == 12902960 - 427061
    batch = pods["openb-pod-0002"]
    assert batch.qos == QoS.BE and not batch.service and batch.work_s == 590  # deletion - scheduled
    assert pods["openb-pod-0003"].gpu_models == ("V100M16", "V100M32")
    assert pods["openb-pod-0003"].qos == QoS.BURSTABLE
    pending = pods["openb-pod-0004"]
    assert pending.gpu_models == () and pending.mem_mib == 0  # `nan` spec = no constraint
    assert pending.qos == QoS.LS and pending.work_s == 100000  # Guaranteed; deletion - creation
    assert pods["openb-pod-0005"].work_s is None
    assert workload.info["pending_in_trace"] == 1 and workload.info["unknown_duration"] == 1
    assert workload.info["pods_without_usage"] == 6


def test_nodes() -> None:
    nodes = load(TRACE, "alibaba-gpu-v2023").nodes
    assert [(n.name, n.gpus, n.gpu_model) for n in nodes] == [
        ("openb-node-0000", 0, ""), ("openb-node-0001", 8, "G2"), ("openb-node-0002", 8, "V100M32"),
        ("openb-node-0003", 2, "T4")]
    assert nodes[3].cpu_m == 104_000 and nodes[3].mem_mib == 524_288


def test_pod_list_alone_gets_assumed_nodes() -> None:
    workload = load(TRACE / "openb_pod_list_default.csv", "alibaba-gpu-v2023", nodes=3)
    assert len(workload.nodes) == 3 and "nodes_assumed" in workload.info
