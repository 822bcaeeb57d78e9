"""`drlsched testbed ...` as a user runs it: clear one-line errors, and a full up/status/down cycle by pid."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from drlsched.testbed import processes


def _drlsched(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drlsched.cli", "testbed", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def _assert_user_error(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("drlsched: error: "), result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_up_without_binaries_says_which_are_missing(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    result = _drlsched("up", "--state-dir", str(tmp_path / "state"), env={"DRLSCHED_TESTBED_BIN": str(empty)})
    _assert_user_error(result, "testbed binaries missing")
    assert "kube-apiserver" in result.stderr


def test_up_on_a_taken_port_fails_clearly(binaries: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _drlsched("up", "--apiserver-port", str(port), "--state-dir", str(tmp_path / "state"))
    _assert_user_error(result, f"port {port} on 127.0.0.1 (kube-apiserver) is already in use")


def test_up_rejects_more_gpu_nodes_than_nodes(tmp_path: Path) -> None:
    result = _drlsched("up", "--nodes", "2", "--gpu-nodes", "3", "--state-dir", str(tmp_path / "state"))
    _assert_user_error(result, "--gpu-nodes must be between 0 and --nodes")


def test_up_status_down_cycle_stops_every_process(binaries: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    up = _drlsched("up", "--nodes", "3", "--gpu-nodes", "1", "--scheduler", "none", "--state-dir", str(state))
    assert up.returncode == 0, up.stderr
    kubeconfig = Path(up.stdout.strip())
    assert kubeconfig.is_file()

    status = _drlsched("status", "--json", "--state-dir", str(state))
    assert status.returncode == 0, status.stdout
    described = json.loads(status.stdout)
    assert described["running"] == {"etcd": True, "kube-apiserver": True, "kwok": True}
    _assert_user_error(_drlsched("up", "--state-dir", str(state)), "a testbed already runs")

    down = _drlsched("down", "--state-dir", str(state))

    assert down.returncode == 0, down.stderr
    assert not state.exists()
    for proc in described["processes"].values():
        assert not processes.runs(proc["pid"], proc["binary"])
    assert _drlsched("status", "--state-dir", str(state)).returncode == 1
