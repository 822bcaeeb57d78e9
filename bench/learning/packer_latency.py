"""Decision latency of the learned GPU packer beside FGD's: p50/p99 of `select` per pod at 1,523 nodes, one core.

Every decision of one fill (docs/fill.md: the pod list in a seeded random order until 130% of the cluster's GPUs
are requested; FGD's target workload known up front, as in `fill` and training) is timed, the first 50 of each
policy excluded (warm-up). The cluster: openb's default 1,523 nodes with its default pod list when the trace
directory holds them, else the synthetic `ml-gpu` scenario on 1,523 nodes. With no --policy a freshly initialised
packer is timed: the latency does not depend on the weights. The packer's time is split into FGD's candidate
scores and features (`observe`) and the network (`logits`). Issue 26's target: p99 <= 20 ms.
Prints JSON. Usage: python bench/learning/packer_latency.py [--policy packer:PATH] [--trace DIR] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

from drlsched.cli import build_parser
from drlsched.cli_common import workload_source
from drlsched.cluster import Cluster
from drlsched.fill import Fill
from drlsched.machine import machine_info
from drlsched.policies import make_policy
from drlsched.policies.base import PodContext, Policy
from drlsched.rl.packer_net import PackerNet, PackerSpec
from drlsched.rl.packer_policy import PackerObs, PackerPolicy
from drlsched.workload import NodeSpec, PodSpec

DEFAULT_TRACE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "alibaba-gpu-v2023"
NODES = 1523
WARMUP = 50
TARGET_P99_MS = 20.0


class TimedPacker(PackerPolicy):
    """The packer with its two stages timed per decision (seconds)."""

    def __init__(self, inner: PackerPolicy) -> None:
        super().__init__(inner.net, inner.name)
        self.observe_s: list[float] = []
        self.net_s: list[float] = []

    def observe(self, ctx: PodContext) -> PackerObs | None:
        t0 = time.perf_counter()
        obs = super().observe(ctx)
        self.observe_s.append(time.perf_counter() - t0)
        return obs

    def logits(self, obs: PackerObs) -> np.ndarray:
        t0 = time.perf_counter()
        x = super().logits(obs)
        self.net_s.append(time.perf_counter() - t0)
        return x


def population(trace: Path, seed: int) -> tuple[str, list[NodeSpec], list[PodSpec]]:
    if (trace / "openb_pod_list_default.csv").is_file():
        argv = ["fill", "--trace", str(trace), "--trace-format", "alibaba-gpu-v2023"]
    else:
        argv = ["fill", "--scenario", "ml-gpu", "--nodes", str(NODES)]
    args = build_parser().parse_args([*argv, "--policies", "fgd", "--out", "unused"])
    workload = workload_source(args)(seed)
    return workload.name, workload.nodes, list(workload.iter_pods())


def stats_ms(seconds: list[float]) -> dict[str, float]:
    t = np.asarray(seconds[WARMUP:]) * 1000.0
    if t.size == 0:
        return {"decisions": 0}
    return {"decisions": int(t.size), "p50_ms": float(np.percentile(t, 50)), "p99_ms": float(np.percentile(t, 99)),
            "mean_ms": float(t.mean()), "max_ms": float(t.max())}


def one(policy: Policy, nodes: list[NodeSpec], pods: list[PodSpec], seed: int, max_demand: float) -> list[float]:
    """Wall time of each `select` over one fill."""
    fill = Fill(nodes, pods, seed, max_demand)
    policy.reset(fill.cluster, fill.policy_rng)
    times: list[float] = []
    gen = fill.decisions()
    try:
        ctx = next(gen)
        while True:
            t0 = time.perf_counter()
            decision = policy.select(ctx)
            times.append(time.perf_counter() - t0)
            ctx = gen.send(decision)
    except StopIteration:
        pass
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", help="packer:PATH (default: an untrained packer)")
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="openb directory (absent: synthetic)")
    ap.add_argument("--baselines", default="fgd,fgd-lookahead,k8s-default")
    ap.add_argument("--max-demand", type=float, default=1.3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    name, nodes, pods = population(args.trace, args.seed)
    print(f"packer_latency: {name}, {len(nodes)} nodes", file=sys.stderr)
    if args.policy:
        inner = make_policy(args.policy)
        if not isinstance(inner, PackerPolicy):
            raise SystemExit(f"packer_latency: {args.policy} is not a learned packer (give packer:PATH)")
    else:
        c = Cluster(nodes)
        inner = PackerPolicy(PackerNet(PackerSpec(slots=int(c.gpu_exists.shape[1]), models=tuple(c.gpu_models))))
    packer = TimedPacker(inner)
    results = {packer.name: {**stats_ms(one(packer, nodes, pods, args.seed, args.max_demand)),
                             "observe": stats_ms(packer.observe_s), "network": stats_ms(packer.net_s)}}
    for base in args.baselines.split(","):
        results[base] = stats_ms(one(make_policy(base), nodes, pods, args.seed, args.max_demand))
    p99 = results[packer.name]["p99_ms"]
    print(json.dumps({"bench": "packer_latency", "workload": name, "nodes": len(nodes), "pods": len(pods),
                      "seed": args.seed, "max_demand": args.max_demand, "warmup_excluded": WARMUP,
                      "torch_threads": 1, "target": f"packer p99 <= {TARGET_P99_MS:g} ms",
                      "met": bool(p99 <= TARGET_P99_MS), "results": results, "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()
