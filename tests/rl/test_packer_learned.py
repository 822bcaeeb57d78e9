"""The learned GPU packer end to end: `train-packer` on a small synthetic population, then `packer:PATH` in fill
and simulate; its checkpoint refused when it is not a packer's or was edited; its mask never picks a node the pod
does not fit."""

import json
from pathlib import Path

import pytest
import torch

from drlsched.cli import main
from drlsched.errors import UserError
from drlsched.rl.checkpoint import save_policy
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.packer_checkpoint import load_packer_net
from drlsched.rl.packer_policy import load_packer

SMALL = ["--scenario", "ml-gpu", "--nodes", "30", "--duration", "600"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("packer")
    assert main(["train-packer", *SMALL, "--imitation-fills", "1", "--imitation-epochs", "2", "--rl-updates", "2",
                 "--out", str(out)]) == 0
    return out / "policy.pt"


def test_train_writes_its_artefacts(trained: Path) -> None:
    facts = json.loads((trained.parent / "train.json").read_text())
    assert (trained.parent / "curve.csv").stat().st_size > 0
    assert facts["policy"] == str(trained) and facts["wall_s"] > 0 and facts["peak_rss_mib"] > 0
    assert len(facts["sha256"]) == 64


def test_packer_runs_in_fill_and_simulate(trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = f"packer:{trained}"
    assert main(["fill", *SMALL, "--policies", f"fgd,{policy}", "--seeds", "1", "--out", str(tmp_path / "f")]) == 0
    results = json.loads((tmp_path / "f" / "results.json").read_text())
    assert policy in json.dumps(results)
    capsys.readouterr()
    assert main(["simulate", *SMALL, "--policy", policy, "--json", "-", "--quiet"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["policy"] == policy and metrics["pods_scheduled"] > 0


def test_bad_checkpoints_are_one_line(trained: Path, tmp_path: Path) -> None:
    placement = tmp_path / "placement.pt"
    save_policy(placement, SchedulerNet(NetConfig()), "ppo", {})
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"junk")
    edited = tmp_path / "edited.pt"
    data = torch.load(trained, weights_only=True)
    data["meta"] = {"edited": True}
    torch.save(data, edited)
    for bad in (placement, junk, edited, tmp_path / "missing.pt"):
        with pytest.raises(UserError):
            load_packer(f"packer:{bad}")
    net, _ = load_packer_net(trained)
    assert net is not None
