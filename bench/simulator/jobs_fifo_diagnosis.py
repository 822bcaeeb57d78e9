"""Why fifo loses on `tpch` (issue 23 item 4's stop check): the bandwidth's busy fraction per job policy, fifo
and fair with executorIdleTimeout 60 s vs 0 s (Decima-like: an executor with nothing to run leaves at once), and
the M/G/1 bounds of the shared bandwidth seen as one server with the tpch job sizes (FCFS, PS, SRPT).
Usage: python bench/simulator/jobs_fifo_diagnosis.py [--load 0.85] [--seeds 900,901]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

import numpy as np

from drlsched.jobs.engine import JobEngine
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.workload import JobSource, job_library
from drlsched.machine import machine_info

CASES = (("fifo", 60.0), ("fifo", 0.0), ("fair", 60.0), ("fair", 0.0), ("sjf-cp", 60.0),
         ("weighted-fair:-2", 60.0), ("srpt-oracle", 60.0))


class _Probe(JobEngine):
    """Counts the time at least one task is reading (the bandwidth is busy)."""

    bw_busy = 0.0
    _since: float | None = None

    def _launch(self, ex, job, t):  # type: ignore[no-untyped-def]
        if not self.io and job.stages[job.runnable[0]].spec.io_s > 0:
            self._since = t
        super()._launch(ex, job, t)

    def _read_done(self, t: float) -> None:
        super()._read_done(t)
        if not self.io and self._since is not None:
            self.bw_busy += t - self._since
            self._since = None


def one(policy: str, load: float, seed: int, idle: float) -> dict[str, object]:
    src = JobSource(load=load, idle_timeout_s=idle)
    arrivals, cfg = src.arrivals(seed), src.config()
    engine = _Probe(arrivals, make_job_policy(policy), cfg, seed)
    m = engine.run()
    offered = sum(sum(st.tasks * st.io_s for st in a.spec.stages) for a in arrivals) / cfg.bandwidth
    return {"job_policy": policy, "idle_timeout_s": idle, "seed": seed, "jobs": len(arrivals),
            "jct_mean_s": m["jct_mean_s"], "jct_mean_small_s": m["jct_mean_small_s"],
            "jct_mean_large_s": m["jct_mean_large_s"], "executor_starts": m["executor_starts"],
            "bandwidth_busy_frac": engine.bw_busy / m["makespan_s"], "io_offered_frac": offered / m["makespan_s"]}


def mg1(load: float) -> dict[str, float]:
    """Mean response of M/G/1 FCFS, PS and preemptive SRPT with service = a job's whole-bandwidth read time."""
    cfg = JobSource().config()
    s = np.sort([sum(st.tasks * st.io_s for st in j.stages) / cfg.bandwidth for j in job_library(None)])
    lam = load / s.mean()
    fcfs = s.mean() + lam * (s ** 2).mean() / (2 * (1 - load))
    srpt = 0.0
    for x in s:
        le = s <= x
        rho_x = lam * s[le].sum() / s.size
        wait = lam * ((s[le] ** 2).sum() + x * x * (~le).sum()) / s.size / (2 * (1 - rho_x) ** 2)
        grid = np.concatenate([[0.0], s[s < x], [x]])
        res = sum((b - a) / (1 - lam * s[s <= a].sum() / s.size) for a, b in itertools.pairwise(grid))
        srpt += (wait + res) / s.size
    return {"service_mean_s": float(s.mean()), "service_scv": float(s.var() / s.mean() ** 2),
            "fcfs_s": float(fcfs), "ps_s": float(s.mean() / (1 - load)), "srpt_s": float(srpt)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", type=float, default=0.85)
    ap.add_argument("--seeds", default="900,901")
    args = ap.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    runs = []
    for policy, idle in CASES:
        for seed in seeds:
            runs.append(one(policy, args.load, seed, idle))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    out = {"load": args.load, "seeds": seeds, "runs": runs, "mg1": mg1(args.load), "machine": machine_info()}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
