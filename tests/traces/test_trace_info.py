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


def test_pods_that_fit_no_node_are_listed(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    # The fixture's largest node has 104 cores and 8 GPUs: 120 cores, 16 GPUs or a model the cluster lacks fit
    # nowhere, whatever the policy.
    trace = tmp_path / "openb"
    trace.mkdir()
    (trace / "openb_node_list_all_node.csv").write_text(
        (FIXTURES / "alibaba-gpu-v2023" / "openb_node_list_all_node.csv").read_text())
    (trace / "openb_pod_list_gpuspec33.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        "fits,8000,1024,1,500\nbig-cpu,120000,1024,1,500\nbig-cpu-2,120000,1024,1,500\n"
        "many-gpus,8000,1024,16,1000\nfits-too,96000,1024,8,1000\n")
    assert main(["trace-info", str(trace), "--trace-format", "alibaba-gpu-v2023", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pods_fitting_no_node"] == 3
    examples = summary["pods_fitting_no_node_examples"]
    assert sorted(e.split(" ")[0] for e in examples) == ["big-cpu", "big-cpu-2", "many-gpus"]
    assert any("Insufficient cpu" in e for e in examples) and any("nvidia.com/gpu" in e for e in examples)
    assert main(["trace-info", str(trace), "--trace-format", "alibaba-gpu-v2023"]) == 0
    out = capsys.readouterr().out
    assert "unplaceable 3 pods fit no node even on the empty cluster" in out and "e.g. big-cpu" in out


def test_text_summary_says_when_every_pod_fits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace-info", str(FIXTURES / "alibaba-gpu-v2023"), "--trace-format", "alibaba-gpu-v2023"]) == 0
    assert "unplaceable 0 pods fit no node" in capsys.readouterr().out
