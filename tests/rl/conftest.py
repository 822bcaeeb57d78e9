"""Small, fast workloads for the RL tests."""

from __future__ import annotations

import numpy as np
import pytest

from drlsched.rl.env import EnvConfig
from drlsched.rl.reward import RewardWeights
from drlsched.workload import NodeSpec, PodSpec, Workload


def contention_workload(seed: int, duration: float = 40.0) -> Workload:
    """Two big and two small nodes; pods use 3x their CPU request, so requests let the small nodes take pods
    they cannot run at full speed. Placing on the big nodes keeps jobs short: a signal a policy can learn fast."""
    rng = np.random.default_rng(seed)
    nodes = [NodeSpec("big-0", 16_000, 65_536, rack="r0"), NodeSpec("big-1", 16_000, 65_536, rack="r0"),
             NodeSpec("small-0", 4_000, 16_384, rack="r1"), NodeSpec("small-1", 4_000, 16_384, rack="r1")]
    t = 0.0
    pods = []
    i = 0
    while True:
        t += float(rng.exponential(1.0))
        if t >= duration:
            break
        pods.append(PodSpec(uid=f"p{i}", job_id=f"j{i}", arrival_s=t, cpu_m=500, mem_mib=512, work_s=20.0,
                            usage_cpu=3.0, usage_cv=0.05, startup_s=0.5))
        i += 1
    return Workload("contention", nodes, pods, duration)


@pytest.fixture
def toy_config() -> EnvConfig:
    return EnvConfig(workload_fn=contention_workload, reward=RewardWeights(utilization=0.0, violation=0.0,
                                                                           migration=0.0, jct=1.0))


@pytest.fixture
def batch_config() -> EnvConfig:
    return EnvConfig(scenario="batch", nodes=4, duration_s=20.0)
