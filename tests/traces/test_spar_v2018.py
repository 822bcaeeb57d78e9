"""alibaba-v2018-spar: the job-by-job join of tasks and instances, and the tasks-only expansion."""

from __future__ import annotations

import pytest
from trace_helpers import FIXTURES, by_uid, load

TRACE = FIXTURES / "alibaba-v2018-spar"
SCALE = {"machine_memory_mib": 100_000}


def test_instances_joined_to_tasks() -> None:
    workload = load(TRACE, "alibaba-v2018-spar", **SCALE)
    pods = by_uid(workload)
    assert list(pods) == ["ins_1", "ins_2", "ins_3", "ins_4", "ins_5", "ins_6", "ins_7"]
    first = pods["ins_1"]
    assert (first.job_id, first.task, first.cpu_m, first.mem_mib, first.work_s) == ("j_10", "M1", 1000, 500, 9)
    assert first.usage_cpu == pytest.approx(0.8) and first.usage_mem == pytest.approx(0.5)
    assert pods["ins_3"].parents == ("M1",)
    assert pods["ins_4"].parents == () and pods["ins_4"].usage_mem == 0.7  # mem_avg 101: invalid, default
    assert pods["ins_6"].parents == ("M1",)  # J3_1_7: task 7 does not exist
    assert pods["ins_7"].arrival_s == 12.0
    info = workload.info
    assert info["invalid_request"] == 1  # j_13's plan_mem -1
    assert info["jobs_without_instances"] == 1  # j_13
    assert info["instances_missing"] == 2  # j_14 lists 3 instances, 1 present (a truncated file)
    assert info["missing_parent_tasks"] == 1
    assert len(workload.nodes) == 4034 and workload.nodes[0].mem_mib == 100_000


def test_tasks_only_expands_instances() -> None:
    workload = load(TRACE / "sample_tasks.csv", "alibaba-v2018-spar", **SCALE)
    pods = list(workload.iter_pods())
    assert len(pods) == 2 + 1 + 1 + 1 + 1 + 3  # inst_num summed, j_13 invalid
    assert [pod.uid for pod in pods[:2]] == ["j_10/M1/0", "j_10/M1/1"]
    assert all(pod.work_s == 10 for pod in pods[:2])
    assert pods[0].usage_cpu == 0.6  # no usage in a task file
    assert workload.info["pods_without_usage"] == len(pods)


def test_instances_of_an_unknown_job_are_bad_rows(tmp_path) -> None:
    (tmp_path / "sample_tasks.csv").write_text((TRACE / "sample_tasks.csv").read_text())
    lines = (TRACE / "sample_instances.csv").read_text().splitlines()
    lines.insert(3, "0,j_77,M1,ins_9,9,80.0,0.25")
    (tmp_path / "sample_instances.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(Exception, match=r"sample_instances.csv:4: column 2 \(job\)"):
        list(load(tmp_path, "alibaba-v2018-spar").iter_pods())
