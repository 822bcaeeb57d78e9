"""The demo's comparison (drlsched.rl.job_demo) on a short window with the committed job policy, and the training
bar's objective; a bad checkpoint is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drlsched.rl.job_cli import TrainBar
from drlsched.rl.job_demo import HEURISTIC, main

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "bench" / "results" / "job_policy" / "policy.pt"


def test_the_demo_writes_both_tables_and_the_cdf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--policy", str(POLICY), "--out", str(tmp_path), "--seeds", "2", "--spark-seeds", "2",
                 "--duration", "3600", "--spark-duration", "300"]) == 0
    printed = capsys.readouterr().out
    results = json.loads((tmp_path / "results.json").read_text())
    tpch, spark = results["tpch"]["columns"], results["spark_tpcds"]["columns"]
    assert list(tpch) == ["fifo", HEURISTIC, "learned"]
    for col in tpch.values():
        assert col["jct_mean_s"]["n"] == 2 and col["jct_mean_s"]["mean"] > 0
        assert col["ratio_to_heuristic"]["jct_p99_s"]["n"] == 2
    assert tpch["fifo"]["ratio_to_fifo"]["jct_mean_s"] == {"mean": 1.0, "ci95": 0.0, "n": 2}
    assert tpch["learned"]["jct_mean_s"]["mean"] != tpch["fifo"]["jct_mean_s"]["mean"]
    assert len(spark) == 3
    for col in spark.values():
        assert 0 < col["cluster_util"]["mean"] <= 1 and col["cross_node_traffic_gb"]["n"] == 2
    report = (tmp_path / "report.md").read_text()
    for row in ("| mean JCT (s) |", "| P99 JCT (s), × weighted-fair:-2 (paired) |", "| cross-node traffic (GB) |"):
        assert row in report and row in printed
    assert (tmp_path / "jct_cdf.png").read_bytes()[:4] == b"\x89PNG"


def test_a_checkpoint_that_is_not_a_job_policy_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    bad = tmp_path / "policy.pt"
    bad.write_text("not a checkpoint")
    assert main(["--policy", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "o" / "results.json").exists()


def test_the_training_bar_shows_the_best_validation_jct_as_it_improves(capsys: pytest.CaptureFixture[str]) -> None:
    bar = TrainBar(updates=3, minutes=5)
    bar.show({"phase": 0.0, "epoch": 0.0, "imitation_loss": 0.9})
    assert "imitation epoch 1" in bar.bar.postfix
    bar.show({"phase": 1.0, "update": 0.0, "validation_jct_mean_s": 800.0})
    bar.show({"phase": 1.0, "update": 1.0, "train_jct_mean_s": 900.0})
    assert "best validation JCT 800 s" in bar.bar.postfix and "rollouts 900 s" in bar.bar.postfix
    bar.show({"phase": 1.0, "update": 2.0, "train_jct_mean_s": 850.0, "validation_jct_mean_s": 760.0})
    bar.show({"phase": 1.0, "update": 3.0, "train_jct_mean_s": 870.0, "validation_jct_mean_s": 790.0})
    assert "best validation JCT 760 s" in bar.bar.postfix and bar.bar.n == 3
    bar.close()
