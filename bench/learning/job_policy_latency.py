"""Decision latency of the learned job policy: p50/p99 of `decide` (features, network, decision) with 100 jobs in
the system, one core. Target: p99 ≤ 10 ms (issue 24).

A batch of `--jobs` tpch jobs arrives at t=0 on the default cluster (25 nodes, 200 executors); every decision the
engine asks for is timed, and those taken with at least `--jobs` jobs in the system are reported (the first
`--warmup` of them excluded). With no --policy a freshly initialised network is used: latency does not depend on
the weights. Wall time (p50/p99_ms) and this process's CPU time (cpu_*: what a decision costs without the
waits of a shared machine; the load average is in `machine`). Prints JSON.
Usage: python bench/learning/job_policy_latency.py [--policy ppo:DIR/policy.pt]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

from drlsched.jobs.engine import JobEngine
from drlsched.jobs.model import Job
from drlsched.jobs.policies import Decision, make_job_policy
from drlsched.jobs.workload import JobSource
from drlsched.machine import machine_info
from drlsched.rl.job_net import JobNet, JobNetSpec
from drlsched.rl.job_policy import LearnedJobPolicy


class Timed:
    def __init__(self, inner: LearnedJobPolicy) -> None:
        self.inner, self.name = inner, inner.name
        self.samples: list[tuple[int, float, float]] = []  # jobs, wall s, CPU s of this process

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        t0, c0 = time.perf_counter(), time.process_time()
        out = self.inner.decide(jobs, executors, critical_path)
        self.samples.append((len(jobs), time.perf_counter() - t0, time.process_time() - c0))
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", help="ppo:PATH (default: an untrained network)")
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--decisions", type=int, default=1000, help="stop after this many decisions at --jobs or more")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    inner = make_job_policy(args.policy) if args.policy else LearnedJobPolicy(JobNet(JobNetSpec()), "untrained")
    assert isinstance(inner, LearnedJobPolicy)
    inner.record = []  # to count the graph's stage nodes
    timed = Timed(inner)
    source = JobSource(batch=args.jobs + 20)  # a few finish before the measurement has its decisions
    engine = JobEngine(source.arrivals(args.seed), timed, source.config(), args.seed)

    class Enough(Exception):
        pass

    def stop_when_enough(t: float, _decide: Callable[[float], None] = engine._decide) -> None:
        if sum(n >= args.jobs for n, _, _ in timed.samples) >= args.decisions + args.warmup:
            raise Enough
        _decide(t)

    engine._decide = stop_when_enough  # type: ignore[method-assign]
    try:
        engine.run()
    except Enough:
        pass
    at = np.array([s for n, s, _ in timed.samples if n >= args.jobs][args.warmup:]) * 1000.0
    cpu = np.array([c for n, _, c in timed.samples if n >= args.jobs][args.warmup:]) * 1000.0
    stages = [st.obs.stage_x.shape[0] for st in inner.record or [] if st.jobs >= args.jobs]
    print(json.dumps({"bench": "job_policy_latency", "policy": args.policy or "untrained", "torch_threads": 1,
                      "target": "p99 <= 10 ms with 100 jobs in the system",
                      "jobs_in_system_at_least": args.jobs, "decisions": int(at.size),
                      "stage_nodes_mean": float(np.mean(stages)) if stages else None,
                      "p50_ms": float(np.percentile(at, 50)), "p99_ms": float(np.percentile(at, 99)),
                      "mean_ms": float(at.mean()), "max_ms": float(at.max()),
                      "cpu_p50_ms": float(np.percentile(cpu, 50)), "cpu_p99_ms": float(np.percentile(cpu, 99)),
                      "met": bool(np.percentile(at, 99) <= 10.0), "cpu_met": bool(np.percentile(cpu, 99) <= 10.0),
                      "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()
