"""policy.pt round-trips, and damaged, tampered or incompatible files are refused with a clear message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from drlsched.cli import main
from drlsched.errors import UserError
from drlsched.policies import make_policy
from drlsched.rl.checkpoint import load_policy, save_policy
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.scenarios import make_scenario
from drlsched.simulator import SimConfig, Simulator


def _saved(tmp_path: Path, encoder: str = "lstm") -> Path:
    torch.manual_seed(0)
    path = tmp_path / "run" / "policy.pt"
    save_policy(path, SchedulerNet(NetConfig(encoder=encoder)), "ppo", {"scenario": "batch", "steps": 0})
    return path


def test_round_trip_gives_the_same_network(tmp_path: Path) -> None:
    for encoder in ("lstm", "framestack"):
        path = _saved(tmp_path, encoder)
        torch.manual_seed(0)
        original = SchedulerNet(NetConfig(encoder=encoder))
        loaded, header = load_policy(path, algo="ppo")
        assert header["net"]["encoder"] == encoder and header["meta"]["scenario"] == "batch"
        for (k, v), (k2, v2) in zip(original.state_dict().items(), loaded.state_dict().items(), strict=True):
            assert k == k2 and torch.equal(v, v2)


def test_learned_policy_runs_in_the_simulator_and_is_deterministic(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    runs = []
    for _ in range(2):
        w = make_scenario("ml-gpu", nodes=30, duration=300.0, seed=1)
        policy = make_policy(f"ppo:{path}")
        assert policy.name == f"ppo:{path}"
        runs.append(Simulator(w, policy, 1, SimConfig(allow_unschedulable=True)).run())
    assert runs[0]["pods_scheduled"] > 0
    keys = ("jct_p99_s", "cpu_util", "gpu_fragmentation", "pods_scheduled")
    assert [runs[0][k] for k in keys] == [runs[1][k] for k in keys]


def test_predicted_value_is_the_critic_on_the_state_select_saw(tmp_path: Path) -> None:
    from drlsched.rl.env import EnvConfig, SchedulingEnv
    from drlsched.rl.rollout import obs_to_torch

    policy = make_policy(f"ppo:{_saved(tmp_path)}")
    env = SchedulingEnv(EnvConfig(scenario="batch", nodes=4, duration_s=30.0))
    env.reset(seed=5)
    assert env.sim is not None and env.ctx is not None
    policy.reset(env.sim.cluster, np.random.default_rng(0))
    policy.select(env.ctx)
    snapshots = len(policy.builder.snaps)
    value = policy.predicted_value(env.ctx)  # type: ignore[attr-defined]
    assert len(policy.builder.snaps) == snapshots  # the history is not advanced a second time
    obs = policy._last[1]  # type: ignore[attr-defined]
    with torch.no_grad():
        _, expected = policy.net({k: v[None] for k, v in obs_to_torch(obs).items()})  # type: ignore[attr-defined]
    assert value == pytest.approx(float(expected[0]), abs=1e-5)


def test_tampered_weights_are_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    name = next(iter(data["state"]))
    data["state"][name] = data["state"][name] + 1e-3
    torch.save(data, path)
    with pytest.raises(UserError, match="sha256"):
        load_policy(path)


def test_tampered_metadata_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    data["meta"]["scenario"] = "ecommerce"
    torch.save(data, path)
    with pytest.raises(UserError, match="sha256"):
        load_policy(path)


def test_other_spec_version_and_garbage_are_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    data["obs_spec_version"] = 999
    torch.save(data, path)
    with pytest.raises(UserError, match="observation spec version 999"):
        load_policy(path)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="not a readable drlsched policy"):
        load_policy(path)
    with pytest.raises(UserError, match="does not exist"):
        load_policy(tmp_path / "missing.pt")


def test_pickled_code_is_never_run(tmp_path: Path) -> None:
    path = tmp_path / "evil.pt"
    torch.save({"format": "drlsched-policy", "payload": np.dtype("float64")}, path)  # needs full unpickling
    with pytest.raises(UserError, match="not a readable"):
        load_policy(path)


def test_wrong_algo_prefix_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    with pytest.raises(UserError, match="holds a ppo policy"):
        make_policy(f"dqn:{path}")


def test_cli_refuses_a_tampered_policy_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    data["meta"]["steps"] = 10**6
    torch.save(data, path)
    code = main(["simulate", "--scenario", "batch", "--nodes", "4", "--duration", "10", "--quiet",
                 "--policy", f"ppo:{path}"])
    err = capsys.readouterr().err
    assert code == 2 and "sha256" in err and "Traceback" not in err


def test_large_cluster_scores_a_rotating_subset(tmp_path: Path) -> None:
    from drlsched.rl.policy import LearnedPolicy

    path = _saved(tmp_path)
    policy = make_policy(f"ppo:{path}")
    assert isinstance(policy, LearnedPolicy)
    m = Simulator(make_scenario("ecommerce", nodes=150, duration=300.0, seed=2), policy, 2).run()
    assert policy.to_find < 150 and m["pods_scheduled"] > 0  # every choice was feasible (the simulator checks)


def _forged(tmp_path: Path, **net: object) -> Path:
    """A checkpoint whose header claims other dimensions, with a digest recomputed to match (it is not keyed)."""
    from drlsched.rl import checkpoint

    path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    data["net"] = {**data["net"], **net}
    header = {k: data[k] for k in ("format", "format_version", "obs_spec_version", "algo", "net", "meta")}
    data["sha256"] = checkpoint._digest(header, data["state"])
    torch.save(data, path)
    return path


def test_forged_dimensions_are_refused_before_any_network_is_built(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from drlsched.rl import checkpoint

    built: list[NetConfig] = []
    real = checkpoint.SchedulerNet

    def counting(cfg: NetConfig) -> SchedulerNet:
        if torch.empty(0).device.type != "meta":  # only real allocations count
            built.append(cfg)
        return real(cfg)

    monkeypatch.setattr(checkpoint, "SchedulerNet", counting)
    with pytest.raises(UserError, match=r"is torch.float32 \(64, \d+\), expected torch.float32 \(4000, \d+\)"):
        load_policy(_forged(tmp_path / "a", hidden=4000))
    with pytest.raises(UserError, match=r"net\.hidden must be an integer from 1 to 4096, not 100000"):
        load_policy(_forged(tmp_path / "b", hidden=100_000))
    with pytest.raises(UserError, match=r"net\.lstm must be an integer"):
        load_policy(_forged(tmp_path / "c", lstm="64"))
    with pytest.raises(UserError, match="unknown encoder"):
        load_policy(_forged(tmp_path / "d", encoder="transformer"))
    with pytest.raises(UserError, match="expected the keys"):
        load_policy(_forged(tmp_path / "e", layers=3))
    assert built == []
    load_policy(_saved(tmp_path / "f"))
    assert len(built) == 1  # the check above can see a real build


def test_tensor_shape_and_dtype_are_checked(tmp_path: Path) -> None:
    from drlsched.rl import checkpoint

    path = _saved(tmp_path)
    data = torch.load(path, weights_only=True)
    name = next(iter(data["state"]))
    data["state"][name] = data["state"][name].double()
    header = {k: data[k] for k in ("format", "format_version", "obs_spec_version", "algo", "net", "meta")}
    data["sha256"] = checkpoint._digest(header, data["state"])
    torch.save(data, path)
    with pytest.raises(UserError, match=rf"{name} is torch.float64"):
        load_policy(path)


def test_paths_that_are_not_files_are_named_for_what_they_are(tmp_path: Path) -> None:
    import os

    directory = tmp_path / "policy.pt"
    directory.mkdir()
    with pytest.raises(UserError, match="is a directory, not a file"):
        load_policy(directory)
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="is a FIFO, not a file"):  # and the load does not block on it
        load_policy(fifo)
    loop = tmp_path / "loop.pt"
    loop.symlink_to(loop)
    with pytest.raises(UserError, match="cannot be opened: Too many levels of symbolic links"):
        load_policy(loop)
    dangling = tmp_path / "dangling.pt"
    dangling.symlink_to(tmp_path / "nowhere.pt")
    with pytest.raises(UserError, match="does not exist \\(a symbolic link to a missing file\\)"):
        load_policy(dangling)
    big = tmp_path / "big.pt"
    with big.open("wb") as handle:
        handle.truncate((256 << 20) + 1)  # sparse: no disk used
    with pytest.raises(UserError, match="more than a drlsched policy can have"):
        load_policy(big)
