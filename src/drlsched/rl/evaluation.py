"""Score any policy (baseline or learned) on the training objective: its episode return in the env.

`drlsched evaluate` compares policies on simulator metrics; this adds the reward a policy was trained for, so
"at least as good as the best heuristic on the objective it was trained for" can be measured on the same
held-out workload seeds (below `TRAIN_SEED_BASE`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from drlsched.evaluate import mean_ci
from drlsched.policies import make_policy
from drlsched.rl.env import TRAIN_SEED_BASE, EnvConfig, SchedulingEnv
from drlsched.rl.features import action_for

REPORTED = ("cpu_util", "jct_p50_s", "jct_p99_s", "cross_node_traffic_gb", "sla_violation_rate", "gpu_util",
            "gpu_fragmentation", "pods_unschedulable", "anomaly_rate")


def episode(policy_name: str, env_cfg: EnvConfig, seed: int) -> dict[str, float]:
    """One held-out episode driven by the named policy: its return, reward terms and final metrics."""
    if seed >= TRAIN_SEED_BASE:
        raise ValueError(f"evaluation seed {seed} is in the training range (>= {TRAIN_SEED_BASE})")
    env = SchedulingEnv(replace(env_cfg, expert=None, max_steps=None))
    obs, _ = env.reset(seed=seed, options={"workload_seed": seed})
    policy = make_policy(policy_name)
    policy.reset(env.sim.cluster, np.random.default_rng(seed))  # type: ignore[union-attr]
    total, terms_sum, steps = 0.0, dict.fromkeys(
        ("utilization", "violation", "migration", "jct", "traffic", "saturation"), 0.0), 0
    while True:
        ctx = env.ctx
        assert ctx is not None
        d = policy.select(ctx)
        # None is a hold where the mask allows one (a BE pod under a reclaim model), else the first feasible pair.
        hold_ok = bool(obs["action_mask"][-1])
        a = action_for(d, ctx) if d is not None or hold_ok else int(np.flatnonzero(obs["action_mask"])[0])
        obs, r, term, trunc, info = env.step(a)
        total += r
        steps += 1
        for k, v in info["reward_terms"].items():
            terms_sum[k] += float(v)
        if term or trunc:
            break
    out = {"return": total, "steps": float(steps), **{f"term_{k}": v for k, v in terms_sum.items()}}
    metrics = info.get("metrics") or {}
    # A null metric (an empty sample) is left out: missing, not 0.
    out.update({k: float(metrics[k]) for k in REPORTED if metrics.get(k) is not None})  # type: ignore[arg-type]
    return out


def compare(policies: list[str], env_cfg: EnvConfig, seeds: list[int], jobs: int = 1,
            baseline: str = "k8s-default") -> dict[str, object]:
    """Per policy: mean ± 95% CI of the return and metrics over `seeds`; paired return difference to `baseline`."""
    tasks = [(p, s) for p in policies for s in seeds]
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(_episode_star, [(p, env_cfg, s) for p, s in tasks]))
    else:
        results = [episode(p, env_cfg, s) for p, s in tasks]
    by = {(p, s): r for (p, s), r in zip(tasks, results, strict=True)}
    out: dict[str, object] = {}
    for p in policies:
        rows = [by[(p, s)] for s in seeds]
        keys = list(dict.fromkeys(k for r in rows for k in r))  # a metric null in an episode is absent from its row
        entry = {k: mean_ci([r.get(k) for r in rows]) for k in keys}
        if baseline in policies and p != baseline:
            entry["return_minus_baseline"] = mean_ci([by[(p, s)]["return"] - by[(baseline, s)]["return"]
                                                      for s in seeds])
        out[p] = entry
    return out


def _episode_star(args: tuple[str, EnvConfig, int]) -> dict[str, float]:
    import torch

    torch.set_num_threads(1)
    return episode(*args)
