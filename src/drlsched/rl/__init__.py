"""Learned placement: a Gymnasium env over the simulator, the policy network, PPO and a DQN baseline.

Importing this package registers the env id `drlsched/Scheduling-v0` with Gymnasium (the env module itself, and
torch, load only when used), so `gymnasium.make("drlsched/Scheduling-v0", config=EnvConfig(...))` works after
`import drlsched.rl`.
"""

from __future__ import annotations

ENV_ID = "drlsched/Scheduling-v0"


def register() -> None:
    """Register `drlsched/Scheduling-v0` with Gymnasium (idempotent)."""
    import gymnasium as gym

    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="drlsched.rl.env:SchedulingEnv")


register()
