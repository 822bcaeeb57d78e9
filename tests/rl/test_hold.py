"""The admission decision for BE pods under a reclaim model (the hold action) and the reclaim features."""

from __future__ import annotations

import numpy as np
import torch

from drlsched.reclaim import ReclaimConfig
from drlsched.rl.env import EnvConfig, SchedulingEnv
from drlsched.rl.features import MAX_OPTIONS, hold_action
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.policy import LearnedPolicy
from drlsched.scenarios import make_scenario
from drlsched.simulator import SimConfig, Simulator
from drlsched.workload import QoS

KOORD = ReclaimConfig("koordinator", cpu_threshold=1.0)


def _colocation_env(reclaim: ReclaimConfig = KOORD) -> SchedulingEnv:
    return SchedulingEnv(EnvConfig(scenario="colocation", nodes=2, duration_s=240.0, load=2.0,
                                   sim=SimConfig(reclaim=reclaim)))


def test_hold_is_offered_for_be_pods_only_and_leaves_them_pending() -> None:
    env = _colocation_env()
    obs, _ = env.reset(seed=0)
    hold = hold_action(2)
    held: set[str] = set()
    seen_ls = seen_be = retried = 0
    for _ in range(3000):
        ctx = env.ctx
        assert ctx is not None
        is_be = ctx.pod.qos == QoS.BE
        assert obs["action_mask"][hold] == is_be
        seen_be += is_be
        seen_ls += not is_be
        if is_be and ctx.pod.uid in held:
            retried += 1  # a held pod comes back to the agent later
        if is_be and len(held) < 20 and ctx.pod.uid not in held:
            placed = env.sim.acc.pods_scheduled  # type: ignore[union-attr]
            held.add(ctx.pod.uid)
            obs, _, term, _, info = env.step(hold)
            assert not info["invalid_action"]
            assert env.sim.acc.pods_scheduled == placed  # type: ignore[union-attr]
        else:
            obs, _, term, _, _ = env.step(int(np.flatnonzero(obs["action_mask"][:hold])[0]))
        if term:
            break
    assert seen_ls and seen_be and len(held) == 20 and retried > 0


def test_without_reclaim_there_is_no_hold_and_no_reclaim_feature() -> None:
    env = _colocation_env(ReclaimConfig())
    obs, _ = env.reset(seed=0)
    for _ in range(200):
        assert obs["action_mask"][-1] == 0
        assert not obs["nodes"][:, 18:].any()
        obs, _, term, _, _ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        if term:
            break


def test_reclaim_features_read_the_cluster_and_the_signals() -> None:
    env = _colocation_env()
    obs, _ = env.reset(seed=1)
    checked = 0
    for _ in range(2000):
        ctx = env.ctx
        assert ctx is not None and ctx.reclaim is not None
        c = ctx.cluster
        room = (c.batch_cpu - c.be_cpu) / c.cap_cpu
        np.testing.assert_allclose(obs["nodes"][:, 20], room, rtol=1e-5)
        np.testing.assert_allclose(obs["nodes"][:, 18], np.minimum(ctx.reclaim.ls_cpu / c.cap_cpu, 2.0), rtol=1e-5)
        np.testing.assert_allclose(obs["nodes"][:, 23], 1.0 - ctx.reclaim.be_satisfaction, rtol=1e-5, atol=1e-6)
        checked += bool(room.any()) and bool(ctx.reclaim.ls_cpu.any())
        obs, _, term, _, _ = env.step(int(np.flatnonzero(obs["action_mask"][:-1])[0]))
        if term:
            break
    assert checked > 10
    assert obs is not None


def test_a_policy_that_always_holds_runs_no_be_pod() -> None:
    torch.manual_seed(0)
    net = SchedulerNet(NetConfig())
    with torch.no_grad():
        net.a_hold[-1].bias.fill_(100.0)  # the hold's logit beats every node's
    w = make_scenario("colocation", nodes=2, duration=240.0, load=2.0, seed=0)
    m = Simulator(w, LearnedPolicy(net), 0, SimConfig(reclaim=KOORD)).run()
    assert m["pods_scheduled"] > 0 and m["cpu_util_reclaimed"] == 0.0
    w = make_scenario("colocation", nodes=2, duration=240.0, load=2.0, seed=0)
    assert Simulator(w, LearnedPolicy(net), 0, SimConfig(reclaim=ReclaimConfig())).run()["cpu_util"] > 0


def test_every_encoder_scores_the_same_shapes() -> None:
    env = _colocation_env()
    obs, _ = env.reset(seed=0)
    batch = {k: torch.as_tensor(v)[None] for k, v in obs.items()}
    for encoder in ("lstm", "framestack", "none"):
        net = SchedulerNet(NetConfig(encoder=encoder))
        logits, value = net(batch)
        assert logits.shape == (1, 2 * MAX_OPTIONS + 1) and value.shape == (1,)
        feasible = np.flatnonzero(obs["action_mask"])
        np.testing.assert_allclose(net.act_one(obs), logits[0, feasible].detach().numpy(), rtol=1e-4, atol=1e-5)


def test_the_warm_start_leaves_the_hold_alone() -> None:
    from drlsched.rl.ppo import PPOSettings, behaviour_clone

    torch.manual_seed(0)
    net = SchedulerNet(NetConfig())
    before = [p.detach().clone() for p in net.a_hold.parameters()]
    scorer = net.a_out[-1].weight.detach().clone()
    cfg = EnvConfig(scenario="colocation", nodes=2, duration_s=240.0, load=2.0, sim=SimConfig(reclaim=KOORD))
    behaviour_clone(net, cfg, PPOSettings(num_envs=2, bc_steps=200, bc_epochs=2))
    assert all(torch.equal(a, b) for a, b in zip(before, net.a_hold.parameters(), strict=True))
    assert not torch.equal(scorer, net.a_out[-1].weight)  # the placement scorer did learn


def test_every_encoder_round_trips_through_a_checkpoint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from drlsched.rl.checkpoint import load_policy, save_policy

    for encoder in ("lstm", "framestack", "none"):
        save_policy(tmp_path / f"{encoder}.pt", SchedulerNet(NetConfig(encoder=encoder)), "ppo", {})
        net, _ = load_policy(tmp_path / f"{encoder}.pt", algo="ppo")
        assert net.cfg.encoder == encoder
