"""alibaba-v2018 (raw tables): units, DAG parents, invalid values, services, machines."""

from __future__ import annotations

import pytest
from trace_helpers import FIXTURES, by_uid, load

from drlsched.workload import QoS

TRACE = FIXTURES / "alibaba-v2018"
SCALE = {"machine_memory_mib": 100_000}  # 100 normalised units = 100,000 MiB: round numbers


def test_units_arrival_and_dag_parents() -> None:
    workload = load(TRACE, "alibaba-v2018", **SCALE)
    pods = by_uid(workload)
    first = pods["j_1/M1/ins_1"]
    assert (first.cpu_m, first.mem_mib) == (1000, 500)  # plan_cpu 100 = 1 core; plan_mem 0.5 of 100,000 MiB
    assert first.arrival_s == 100.0  # j_1 arrives at its earliest task start; service c_1 is there from 0
    assert first.work_s == 40.0
    assert first.usage_cpu == pytest.approx(0.8)
    assert first.usage_mem == pytest.approx(0.8)
    assert first.usage_cv == pytest.approx((120 / 80 - 1) / 2)
    assert pods["j_1/R3_1_2/ins_4"].parents == ("M1", "M2")
    assert pods["j_1/J4_3/ins_5"].parents == ("R3_1_2",)
    assert pods["j_1/J4_3/ins_5"].work_s == 40.0  # instance start 0 = out of window: its task's run time
    assert pods["j_1/M1/ins_1"].parents == ()
    non_dag = pods["j_2/task_Nzg3ODAwNDgzMTAwNTc2NjQ2Mw==/ins_6"]
    assert non_dag.parents == () and non_dag.arrival_s == 50.0
    assert pods["j_3/M2_9/ins_9"].parents == ()  # task 9 does not exist: dropped and counted
    assert workload.info["missing_parent_tasks"] == 1


def test_retries_invalid_values_and_missing_usage() -> None:
    workload = load(TRACE, "alibaba-v2018", **SCALE)
    pods = by_uid(workload)
    assert {"j_1/M1/ins_2#1", "j_1/M1/ins_2#2"} <= pods.keys()
    retry = pods["j_1/M1/ins_2#2"]
    assert retry.usage_mem == 0.7  # mem_avg -1 is invalid: the default, counted
    assert retry.usage_cpu == pytest.approx(0.95)
    assert pods["j_1/M2/ins_3"].usage_cpu == 0.6  # no usage at all: defaults
    assert pods["j_6/M1/ins_12"].work_s is None  # end_time 0: still running after the window
    info = workload.info
    assert info["invalid_request"] == 2 + 1  # plan_mem -1 (j_4), empty plan_cpu (j_7), container mem 101
    assert info["out_of_window"] == 1  # j_5 only has a start time of 0
    assert info["instances_without_task"] == 1
    assert info["invalid_usage"] == 2
    assert not any(uid.startswith(("j_4/", "j_5/", "j_7/", "j_99/")) for uid in pods)


def test_services_from_container_tables() -> None:
    pods = by_uid(load(TRACE, "alibaba-v2018", **SCALE))
    service = pods["c_1"]
    assert service.service and service.qos == QoS.LS and service.job_id == "app_1"
    assert (service.cpu_m, service.mem_mib) == (8000, 3000)  # the latest row's request
    assert service.arrival_s == 0.0 and service.work_s is None
    assert service.usage_cpu == pytest.approx(0.3)  # mean of 20% and 40%; the -1 sample is skipped
    assert service.usage_cv == pytest.approx(10 / 30)
    assert pods["c_2"].usage_cpu == 0.6  # no usage rows: defaults
    assert "c_3" not in pods  # mem_size 101 is invalid


def test_machines() -> None:
    nodes = {node.name: node for node in load(TRACE, "alibaba-v2018", **SCALE).nodes}
    assert set(nodes) == {"m_1", "m_2", "m_4"}  # m_3 has an invalid memory size
    assert (nodes["m_1"].cpu_m, nodes["m_1"].mem_mib, nodes["m_1"].rack) == (96_000, 100_000, "fd-219")
    assert nodes["m_2"].mem_mib == 50_000  # latest row
    assert nodes["m_4"].cpu_m == 64_000


def test_pods_in_arrival_order() -> None:
    arrivals = [pod.arrival_s for pod in load(TRACE, "alibaba-v2018").iter_pods()]
    assert arrivals == sorted(arrivals) and len(arrivals) == 13
