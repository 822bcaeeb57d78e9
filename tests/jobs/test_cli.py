"""`simulate` and `evaluate` on job workloads: the keys, the report, the refusals."""

from __future__ import annotations

import json
from pathlib import Path

from drlsched.cli import main
from drlsched.jobs.metrics import JOB_METRIC_KEYS


def test_simulate_tpch_json(capsys) -> None:
    rc = main(["simulate", "--scenario", "tpch", "--policy", "k8s-default", "--job-policy", "weighted-fair:-1",
               "--nodes", "2", "--batch", "4", "--json", "-"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert all(k in data for k in JOB_METRIC_KEYS)
    assert data["jobs_finished"] == 4


def test_evaluate_spark_profiles_report(tmp_path: Path) -> None:
    rc = main(["evaluate", "--trace", "src/drlsched/jobs/data/tpch", "--trace-format", "spark-profiles",
               "--policies", "k8s-default", "--job-policies", "fifo,fair", "--nodes", "2", "--batch", "4",
               "--seeds", "2", "--jobs", "1", "--out", str(tmp_path)])
    assert rc == 0
    report = (tmp_path / "report.md").read_text()
    assert "mean JCT" in report and "executor starts" in report
    assert "ratio_vs_fifo" in json.loads((tmp_path / "results.json").read_text())


def test_bad_job_policy_exits_2(capsys) -> None:
    assert main(["simulate", "--scenario", "tpch", "--policy", "k8s-default", "--job-policy", "weighted-fair:a"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "weighted-fair:a" in err


def test_bad_profile_dir_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["simulate", "--trace", str(tmp_path), "--trace-format", "spark-profiles", "--policy",
                 "k8s-default"]) == 2
    assert "queries.yaml" in capsys.readouterr().err
