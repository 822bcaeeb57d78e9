"""The learned GPU packer: masking, checkpoint round trip and refusals, and a run in fill."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from drlsched.errors import UserError
from drlsched.fill import FillRun, fill_once
from drlsched.rl.checkpoint import save_policy
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.packer_checkpoint import load_packer_net, save_packer
from drlsched.rl.packer_net import CONTEXT_WIDTH, MASKED, PackerNet, PackerSpec
from drlsched.scenarios import make_scenario


def test_masked_nodes_get_the_masked_logit() -> None:
    net = PackerNet(PackerSpec(slots=4, models=("T4",)))
    mask = torch.tensor([[True, False, True]])
    out = net(torch.rand(1, 3, net.spec.node_width), torch.rand(1, CONTEXT_WIDTH), mask)
    assert out[0, 1] == MASKED and out[0, 0] > MASKED and out[0, 2] > MASKED


def test_checkpoint_round_trip_and_refusals(tmp_path: Path) -> None:
    net = PackerNet(PackerSpec(slots=8, models=("A10", "T4")))
    save_packer(tmp_path / "policy.pt", net, {"x": 1})
    back, header = load_packer_net(tmp_path / "policy.pt")
    assert header["meta"] == {"x": 1}
    for a, b in zip(net.state_dict().values(), back.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    save_policy(tmp_path / "ppo.pt", SchedulerNet(NetConfig()), "ppo", {})
    with pytest.raises(UserError, match="placement policy"):
        load_packer_net(tmp_path / "ppo.pt")
    data = torch.load(tmp_path / "policy.pt", weights_only=True)
    data["feature_version"] = 99
    torch.save(data, tmp_path / "old.pt")
    with pytest.raises(UserError, match="feature version"):
        load_packer_net(tmp_path / "old.pt")


def test_packer_fills_the_cluster_deterministically(tmp_path: Path) -> None:
    w = make_scenario("ml-gpu", nodes=10, duration=1800.0, seed=1)
    from drlsched.cluster import Cluster

    c = Cluster(w.nodes)
    save_packer(tmp_path / "policy.pt", PackerNet(PackerSpec(int(c.gpu_exists.shape[1]), tuple(c.gpu_models))), {})
    pods = list(w.iter_pods())
    runs = [fill_once(FillRun(f"packer:{tmp_path / 'policy.pt'}", 3, w.nodes, pods, 1.0)) for _ in range(2)]
    assert runs[0]["demand"][-1] >= 1.0 and int(runs[0]["placed"]) > 0
    assert runs[0]["allocated_milli"].tolist() == runs[1]["allocated_milli"].tolist()
