"""alibaba-gpu-v2023 (openb): GPU sharing, model constraints, QoS, lifetimes, nodes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from trace_helpers import FIXTURES, by_uid, load

from drlsched.errors import UserError
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


def _variant(tmp_path: Path, name: str, rows: list[str]) -> Path:
    """A trace directory holding one synthetic pod list (the fixture's node list beside it)."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / f"{name}.csv").write_text("\n".join(rows) + "\n")
    shutil.copy(TRACE / "openb_node_list_all_node.csv", directory)
    return directory


FIVE = "name,cpu_milli,memory_mib,num_gpu,gpu_milli"


def test_five_column_form_is_a_population(tmp_path: Path) -> None:
    # The multigpu* lists: no spec, QoS, phase or times.
    trace = _variant(tmp_path, "openb_pod_list_multigpu20", [
        FIVE, "openb-pod-0000,12000,16384,8,1000", "openb-pod-0001,6000,12288,1,460", "openb-pod-0002,8000,30000,0,0"])
    workload = load(trace, "alibaba-gpu-v2023")
    pods = list(workload.iter_pods())
    assert [(p.uid, p.gpus, p.gpu_milli, p.arrival_s, p.work_s) for p in pods] == [
        ("openb-pod-0000", 8, 1000, 0.0, None), ("openb-pod-0001", 1, 460, 0.0, None),
        ("openb-pod-0002", 0, 0, 0.0, None)]
    assert all(p.gpu_models == () and not p.service for p in pods)
    assert workload.info["pods_without_times"] == 3 and len(workload.nodes) == 4


def test_five_column_form_checks_requests(tmp_path: Path) -> None:
    trace = _variant(tmp_path, "openb_pod_list_multigpu30", [FIVE, "openb-pod-0000,12000,16384,2,460",
                                                                 "openb-pod-0001,12000,16384,2,1000"])
    with pytest.raises(UserError, match=r"openb_pod_list_multigpu30.csv:2: column 5 \(gpu_milli\)"):
        load(trace, "alibaba-gpu-v2023")
    assert load(trace, "alibaba-gpu-v2023", skip_bad_rows=True).info["bad_rows"] == 1


def test_five_column_form_in_any_column_order(tmp_path: Path) -> None:
    trace = _variant(tmp_path, "openb_pod_list_multigpu40", [
        "num_gpu,gpu_milli,name,cpu_milli,memory_mib", "1,250,openb-pod-0007,4000,8192"])
    pod = next(iter(load(trace, "alibaba-gpu-v2023").iter_pods()))
    assert (pod.uid, pod.cpu_m, pod.mem_mib, pod.gpus, pod.gpu_milli) == ("openb-pod-0007", 4000, 8192, 1, 250)


def test_full_form_with_a_missing_time_column_is_refused(tmp_path: Path) -> None:
    # A header naming some of the full form's columns is the full form: the missing ones are named.
    trace = _variant(tmp_path, "openb_pod_list_gpuspec10", [
        FIVE + ",gpu_spec,qos", "openb-pod-0000,12000,16384,1,1000,T4,LS"])
    with pytest.raises(UserError, match=r"header lacks column.*pod_phase, creation_time"):
        load(trace, "alibaba-gpu-v2023")


@pytest.mark.parametrize("name", ["openb_pod_list_gpushare40", "openb_pod_list_cpu050", "openb_pod_list_gpuspec33"])
def test_full_form_variants(tmp_path: Path, name: str) -> None:
    full = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
            "scheduled_time")
    trace = _variant(tmp_path, name, [full, "openb-pod-0000,12000,16384,0,0,,LS,Running,5,100,5",
                                      "openb-pod-0001,12000,16384,1,300,G2|T4,BE,Running,20,110,30"])
    pod = by_uid(load(trace, "alibaba-gpu-v2023"))["openb-pod-0001"]
    assert (pod.gpu_milli, pod.gpu_models, pod.arrival_s, pod.work_s) == (300, ("G2", "T4"), 15.0, 80.0)
