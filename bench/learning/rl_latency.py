"""Decision latency of a learned policy per pod: p50/p99 of `select` at 500 and 5,000 nodes, one core.

The policy decides every placement of a `batch` simulation at each size (the network runs only on the feasible
(node, GPU option) pairs; the observation is built for all nodes); each `select` call is timed, warm-up excluded.
With no --policy a freshly initialised network is used: latency does not depend on the weights.
Prints JSON. Usage: python bench/learning/rl_latency.py [--policy ppo:DIR/policy.pt] [--sizes 500,5000] [--pods 2000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

from drlsched.machine import machine_info
from drlsched.policies import make_policy
from drlsched.policies.base import Decision, PodContext
from drlsched.rl.network import SchedulerNet
from drlsched.rl.policy import LearnedPolicy
from drlsched.scenarios import make_scenario
from drlsched.simulator import SimConfig, Simulator


class Timed(LearnedPolicy):
    def __init__(self, inner: LearnedPolicy) -> None:
        super().__init__(inner.net, inner.name)
        self.times: list[float] = []

    def select(self, ctx: PodContext) -> Decision | None:
        t0 = time.perf_counter()
        d = super().select(ctx)
        self.times.append(time.perf_counter() - t0)
        return d


def one(size: int, pods: int, policy: str | None, seed: int) -> dict[str, float]:
    inner = make_policy(policy) if policy else LearnedPolicy(SchedulerNet(), "init")
    assert isinstance(inner, LearnedPolicy)
    timed = Timed(inner)
    # A window that offers about `pods` pods at load 1 on this many nodes, cut at that many.
    w = make_scenario("batch", nodes=size, duration=max(30.0, 900.0 * 40 * pods / (size * 29_000)), seed=seed)
    w.pods = list(itertools.islice(w.pods, pods))
    Simulator(w, timed, seed, SimConfig(series=False)).run()
    t = np.asarray(timed.times[50:]) * 1000.0
    return {"nodes": size, "decisions": int(t.size), "p50_ms": float(np.percentile(t, 50)),
            "p99_ms": float(np.percentile(t, 99)), "mean_ms": float(t.mean())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", help="ppo:PATH or dqn:PATH (default: an untrained network)")
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = [one(int(s), args.pods, args.policy, args.seed) for s in args.sizes.split(",")]
    print(json.dumps({"bench": "rl_latency", "policy": args.policy or "untrained", "torch_threads": 1,
                      "target": "p99 <= 5 ms at 500 nodes", "results": results, "machine": machine_info()},
                     indent=2))


if __name__ == "__main__":
    main()
