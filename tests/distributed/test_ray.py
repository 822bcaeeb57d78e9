"""The Ray backend gives the local backend's results: trained weights and curves, and evaluation results.

One local Ray (2 CPUs) serves the whole module; the commands find it running and leave it so."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from drlsched.cli import main
from drlsched.rl.checkpoint import load_policy
from drlsched.rl.env import EnvConfig
from drlsched.rl.network import NetConfig
from drlsched.rl.ppo import PPOSettings, train_ppo

ray = pytest.importorskip("ray")

TIMING = ("wall_s", "rollout_s", "learn_s", "placements_per_s")
TRAIN = ["train", "--scenario", "batch", "--nodes", "4", "--duration", "20", "--steps", "1024", "--envs", "4",
         "--seed", "2", "--shared-workload", "2", "--quiet"]


@pytest.fixture(scope="module", autouse=True)
def ray_session() -> Iterator[None]:
    import logging

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    yield
    ray.shutdown()


def _curve(path: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(open(path))]


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _without_timing(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def test_train_and_evaluate_match_the_local_backend(tmp_path: Path) -> None:
    local, remote = tmp_path / "local", tmp_path / "ray"
    assert main([*TRAIN, "--out", str(local)]) == 0
    assert main([*TRAIN, "--out", str(remote), "--backend", "ray", "--workers", "2"]) == 0
    a, _ = load_policy(local / "policy.pt")
    b, header = load_policy(remote / "policy.pt")
    assert _same_weights(a, b)
    assert _curve(local / "curve.csv") == _curve(remote / "curve.csv")
    assert len(_curve(local / "curve.csv")) == 2
    assert header["meta"]["backend"] == "ray" and header["meta"]["workers"] == 2

    evaluate = ["evaluate", "--scenario", "batch", "--nodes", "4", "--duration", "20", "--seeds", "2",
                "--policies", f"k8s-default,random,ppo:{local / 'policy.pt'}", "--quiet"]
    assert main([*evaluate, "--out", str(tmp_path / "ev-local"), "--jobs", "1"]) == 0
    assert main([*evaluate, "--out", str(tmp_path / "ev-ray"), "--backend", "ray"]) == 0
    ra = json.loads((tmp_path / "ev-local" / "results.json").read_text())
    rb = json.loads((tmp_path / "ev-ray" / "results.json").read_text())
    assert len(ra["runs"]) == 6
    assert _without_timing(ra) == _without_timing(rb)


def test_uneven_split_with_truncation(batch_config: EnvConfig) -> None:
    from drlsched.distributed.ray_backend import rollouts_factory

    cfg = EnvConfig(scenario=batch_config.scenario, nodes=batch_config.nodes, duration_s=batch_config.duration_s,
                    max_steps=12)  # truncated episodes: the bootstrap values come from the actors
    s = PPOSettings(total_steps=2 * 3 * 24, num_envs=3, num_steps=24, lr=1e-3, seed=4)
    a, rows_a = train_ppo(s, cfg, NetConfig())
    b, rows_b = train_ppo(s, cfg, NetConfig(), rollouts=rollouts_factory(2))  # envs split 2 + 1
    assert _same_weights(a, b)
    assert [repr(_without_timing(r)) for r in rows_a] == [repr(_without_timing(r)) for r in rows_b]
    assert sum(r["episodes"] for r in rows_a) > 0


def test_more_workers_than_cpus_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TRAIN, "--out", str(tmp_path / "x"), "--backend", "ray", "--workers", "3"]) == 2
    assert "3 rollout workers need 3 CPUs but the Ray cluster has 2" in capsys.readouterr().err
