"""alibaba-v2018 batch_task rows as jobs: one job per job_name, one stage per task, tasks = instance_num."""

from __future__ import annotations

from pathlib import Path

import pytest

from drlsched.errors import UserError
from drlsched.jobs.alibaba import load_jobs
from drlsched.jobs.workload import JobSource, run_jobs_full

# task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem
ROWS = """M1,4,j_1,1,Terminated,100,130,100,0.5
R2_1,2,j_1,1,Terminated,130,150,200,1.0
M1,1,j_2,1,Terminated,160,170,50,0.25
task_x,3,j_3,1,Terminated,0,0,100,0.5
"""


def _trace(tmp_path: Path, rows: str) -> str:
    (tmp_path / "batch_task.csv").write_text(rows)
    return str(tmp_path)


def test_jobs_stages_and_dag(tmp_path: Path) -> None:
    arrivals, dropped = load_jobs(_trace(tmp_path, ROWS))
    assert [a.spec.name for a in arrivals] == ["j_1", "j_2"]
    assert [a.arrival_s for a in arrivals] == [0.0, 60.0]
    m1, r2 = arrivals[0].spec.stages
    assert (m1.tasks, m1.cpu_s, m1.io_s, m1.parents) == (4, 30.0, 0.0, ())
    assert (r2.tasks, r2.cpu_s, r2.parents) == (2, 20.0, (0,))
    assert arrivals[0].spec.executor_cpu_m == 2000
    assert dict(dropped) == {"tasks_dropped": 1, "jobs_dropped": 1}


def test_measured_durations_alone(tmp_path: Path) -> None:
    source = JobSource(alibaba=_trace(tmp_path, ROWS), nodes=25)
    metrics, jct = run_jobs_full(source, "fifo", 0)
    assert metrics["jobs"] == 2
    assert len(jct) == 2
    # j_1 alone: its M1 wave (30 s) then R2_1 (20 s), plus executor start-up; never faster than the DAG
    assert min(jct) >= 10.0 and max(jct) >= 50.0


def test_bad_row_names_file_and_line(tmp_path: Path) -> None:
    path = _trace(tmp_path, ROWS + "M1,2,j_9,1,Terminated,200,150,100,0.5\n")
    with pytest.raises(UserError, match=r"batch_task\.csv:5: .*before its start"):
        load_jobs(path)


def test_skip_bad_rows(tmp_path: Path) -> None:
    path = _trace(tmp_path, ROWS + "M1,2,j_9,1,Terminated,200,150,100,0.5\n")
    arrivals, _ = load_jobs(path, skip_bad_rows=True)
    assert [a.spec.name for a in arrivals] == ["j_1", "j_2"]


def test_job_engine_only_with_a_job_policy(tmp_path: Path) -> None:
    from drlsched.cli import build_parser
    from drlsched.jobs.cli import is_job_workload

    trace = ["--trace", _trace(tmp_path, ROWS), "--trace-format", "alibaba-v2018"]
    parser = build_parser()
    assert not is_job_workload(parser.parse_args(["simulate", *trace, "--policy", "k8s-default"]))
    assert is_job_workload(parser.parse_args(["simulate", *trace, "--job-policy", "fifo"]))
    out = ["--policies", "k8s-default", "--out", str(tmp_path / "o")]
    assert is_job_workload(parser.parse_args(["evaluate", *trace, *out, "--job-policies", "fifo,fair"]))


def test_cyclic_job_dropped(tmp_path: Path) -> None:
    rows = "M1_2,2,j_1,1,T,100,130,100,0.5\nM2_1,2,j_1,1,T,100,130,100,0.5\nM1,1,j_2,1,T,110,120,100,0.5\n"
    arrivals, dropped = load_jobs(_trace(tmp_path, rows))
    assert [a.spec.name for a in arrivals] == ["j_2"]
    assert dict(dropped) == {"cyclic_jobs": 1}
