"""alibaba-gpu-v2020 (PAI): percent units, GPU fractions, sensor usage, machine spec."""

from __future__ import annotations

import shutil

import pytest
from trace_helpers import FIXTURES, by_uid, load

from drlsched.errors import UserError

TRACE = FIXTURES / "alibaba-gpu-v2020"


def test_units_and_gpu_fractions() -> None:
    workload = load(TRACE, "alibaba-gpu-v2020")
    pods = by_uid(workload)
    shared = pods["w1"]
    assert (shared.cpu_m, shared.mem_mib) == (6000, 30000)  # 600% of a core; 29.296875 GB
    assert (shared.gpus, shared.gpu_milli) == (1, 500)  # 50% of one GPU
    assert shared.arrival_s == 0.0 and shared.work_s == 380.0  # job_a submitted first
    assert shared.gpu_models == ()  # gpu_type is what it ran on, not a constraint
    assert (pods["w4"].gpus, pods["w4"].gpu_milli) == (8, 1000)
    assert (pods["w3"].gpus, pods["w3"].gpu_milli) == (0, 0)  # empty plan_gpu: CPU only
    assert (pods["w6"].gpus, pods["w6"].gpu_milli) == (2, 1000)  # 150% rounded up, counted
    assert workload.info["gpu_rounded_up"] == 1
    assert pods["w5"].work_s is None and pods["w5"].arrival_s == 300.0
    assert workload.info["instances_without_task_or_job"] == 1


def test_sensor_usage() -> None:
    pods = by_uid(load(TRACE, "alibaba-gpu-v2020"))
    assert pods["w1"].usage_cpu == pytest.approx(0.5)
    assert pods["w1"].usage_mem == pytest.approx(0.5)
    assert pods["w1"].usage_gpu == pytest.approx(0.5)
    assert pods["w4"].usage_gpu == pytest.approx(0.5)
    assert pods["w2"].usage_gpu == 0.5 and pods["w2"].usage_cpu == 0.6  # no sensor row: defaults


def test_machine_spec() -> None:
    nodes = {node.name: node for node in load(TRACE, "alibaba-gpu-v2020").nodes}
    assert (nodes["mach1"].cpu_m, nodes["mach1"].mem_mib, nodes["mach1"].gpus) == (96_000, 512 * 1024, 2)
    assert nodes["mach1"].gpu_model == "T4" and nodes["mach2"].gpu_model == ""
    assert nodes["mach3"].gpus == 8


def test_header_file_must_match(tmp_path) -> None:
    trace = tmp_path / "pai"
    shutil.copytree(TRACE, trace)
    (trace / "pai_task_table.header").write_text("job_name,task_name,plan_cpu\n")
    with pytest.raises(UserError, match=r"pai_task_table\.header: columns"):
        load(trace, "alibaba-gpu-v2020")


def test_tasks_without_instances_expand(tmp_path) -> None:
    trace = tmp_path / "pai"
    shutil.copytree(TRACE, trace)
    (trace / "pai_instance_table.csv").unlink()
    pods = list(load(trace, "alibaba-gpu-v2020").iter_pods())
    assert len(pods) == 2 + 1 + 1 + 1 + 1
    assert pods[0].uid == "job_a/worker/0" and pods[0].work_s == 490.0
