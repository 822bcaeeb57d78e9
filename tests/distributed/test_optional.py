"""Ray stays optional: the core never imports it, and the Ray options fail clearly when misused or missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from drlsched.cli import main

TRAIN = ["train", "--nodes", "4", "--duration", "20", "--steps", "256", "--envs", "2", "--quiet"]


def test_core_does_not_import_ray() -> None:
    code = ("import sys, drlsched, drlsched.cli, drlsched.rl, drlsched.evaluate, drlsched.rl.ppo, "
            "drlsched.distributed; drlsched.cli.build_parser(); "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("extra", "message"), [
    (["--algo", "dqn", "--backend", "ray"], "--backend ray trains PPO only"),
    (["--backend", "ray", "--workers", "3"], "--workers 3 is more than --envs 2"),
    (["--workers", "2"], "--workers needs --backend ray"),
    (["--address", "auto"], "--address needs --backend ray"),
])
def test_train_option_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                             message: str) -> None:
    assert main([*TRAIN, "--out", str(tmp_path / "x"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_missing_ray_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail as if it were not installed
    assert main([*TRAIN, "--out", str(tmp_path / "x"), "--backend", "ray"]) == 2
    assert main(["evaluate", "--scenario", "batch", "--policies", "k8s-default", "--out", str(tmp_path / "e"),
                 "--backend", "ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("install drlsched[ray]" in line for line in err)


def test_unreachable_address_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray session is already open in this process")
    assert main([*TRAIN, "--out", str(tmp_path / "x"), "--backend", "ray", "--address", "127.0.0.1:1"]) == 2
    assert "cannot reach a Ray cluster at 127.0.0.1:1" in capsys.readouterr().err
