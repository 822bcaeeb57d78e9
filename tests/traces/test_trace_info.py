"""`drlsched trace-info`: text and JSON summaries, through the real command line."""

from __future__ import annotations

import json

import pytest
from trace_helpers import FIXTURES

from drlsched.cli import main


def test_text_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace-info", str(FIXTURES / "alibaba-gpu-v2023"), "--trace-format", "alibaba-gpu-v2023"]) == 0
    out = capsys.readouterr().out
    assert "6 in 6 jobs; 5 with GPUs (2 sharing one)" in out
    assert "4 (328 cores, 18 GPUs)" in out
    assert "bad rows    0" in out
    assert "cpu (m)" in out and "duration (s)" in out


def test_json_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace-info", str(FIXTURES / "alibaba-v2018"), "--trace-format", "alibaba-v2018",
                 "--machine-memory-mib", "100000", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pods"] == 13 and summary["jobs"] == 6 and summary["nodes"] == 3
    assert summary["span_s"] == [0.0, 600.0]
    assert summary["pods_with_parents"] == 2 and summary["service_pods"] == 2
    assert summary["percentiles"]["cpu_m"]["p50"] == 1000
    assert summary["percentiles"]["gpu_milli"] is None
    assert summary["info"]["missing_parent_tasks"] == 1


def test_window_and_bad_rows_reported(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    pods = tmp_path / "openb_pod_list_default.csv"
    pods.write_text((FIXTURES / "alibaba-gpu-v2023" / "openb_pod_list_default.csv").read_text() + "junk\n")
    assert main(["trace-info", str(pods), "--trace-format", "alibaba-gpu-v2023"]) == 2
    assert "openb_pod_list_default.csv:8: column 2" in capsys.readouterr().err
    assert main(["trace-info", str(pods), "--trace-format", "alibaba-gpu-v2023", "--skip-bad-rows",
                 "--max-pods", "3", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["bad_rows"] == 1 and summary["pods"] == 3


def test_missing_path_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace-info", "/nonexistent", "--trace-format", "google-2019"]) == 2
    assert "drlsched: error: trace path /nonexistent does not exist" in capsys.readouterr().err
