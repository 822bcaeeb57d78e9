"""Job workloads: statistics over no finished job are null, never 0.0 (issue 22 item 5); placement is optional there."""

from drlsched.jobs.metrics import JobAccumulator
from drlsched.metrics import null_warning


def test_a_run_where_no_job_finished_reports_null_statistics_and_warns() -> None:
    acc = JobAccumulator()
    acc.arrived(0.0)
    acc.unfinished = 2
    out = acc.summary(executors=8)
    for key in ("jct_mean_s", "jct_p50_s", "jct_p99_s", "jct_mean_small_s", "jct_mean_medium_s",
                "jct_mean_large_s", "makespan_s"):
        assert out[key] is None, key
    assert out["jobs_finished"] == 0 and out["jobs_unfinished"] == 2
    warning = null_warning([out])
    assert warning is not None and "jct_mean_s" in warning and "no job finished" in warning


def test_finished_jobs_give_numbers() -> None:
    acc = JobAccumulator()
    acc.arrived(0.0)
    for i, jct in enumerate((10.0, 20.0, 30.0)):
        acc.finished(0.0, jct, work=float(i + 1))
    out = acc.summary(executors=8)
    assert out["jct_mean_s"] == 20.0
    assert (out["jct_mean_small_s"], out["jct_mean_medium_s"], out["jct_mean_large_s"]) == (10.0, 20.0, 30.0)


def test_job_workloads_need_no_placement_policy(tmp_path) -> None:
    import json

    from drlsched.cli import main

    assert main(["evaluate", "--scenario", "tpch", "--job-policies", "fifo,fair", "--seeds", "1", "--duration", "1800",
                 "--out", str(tmp_path)]) == 0
    meta = json.loads((tmp_path / "results.json").read_text())["meta"]
    assert meta["placement_policies"] == "k8s-default"


def test_pod_workloads_still_need_policies(tmp_path, capsys) -> None:
    from drlsched.cli import main

    assert main(["evaluate", "--scenario", "batch", "--seeds", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["drlsched: error: --policies is required"]
