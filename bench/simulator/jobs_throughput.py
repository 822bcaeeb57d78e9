"""Job simulator speed (issue 23): `tpch` at 100 nodes, load 0.85, fifo — task completions per second of wall
time — side by side with the pod simulator's placements per second on `spark-tpcds`, in one run (medians).
Usage: python bench/simulator/jobs_throughput.py [--repeats 3] [--duration 3600]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from drlsched.jobs.workload import JobSource, job_library, run_jobs
from drlsched.machine import machine_info
from drlsched.policies import make_policy
from drlsched.scenarios import make_scenario
from drlsched.simulator import SimConfig, Simulator


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3600.0)
    args = ap.parse_args()
    job_library(None)  # calibration is once per process, not part of a run
    jobs = []
    for seed in range(args.repeats):
        m = run_jobs(JobSource(nodes=100, load=0.85, duration_s=args.duration), "fifo", seed)
        jobs.append({"seed": seed, "tasks": m["tasks_done"], "wall_s": m["wall_s"],
                     "task_completions_per_s": m["task_completions_per_s"]})
    pods = []
    for seed in range(args.repeats):
        w = make_scenario("spark-tpcds", nodes=100, duration=args.duration, load=1.0, seed=seed)
        m = Simulator(w, make_policy("k8s-default"), seed, SimConfig()).run()
        pods.append({"seed": seed, "placements_per_s": m["placements_per_s"], "wall_s": m["wall_s"]})
    out = {"tpch_fifo_100_nodes_load_0.85": {
               "median_task_completions_per_s": statistics.median(j["task_completions_per_s"] for j in jobs),
               "runs": jobs},
           "spark_tpcds_k8s_default_100_nodes": {
               "median_placements_per_s": statistics.median(p["placements_per_s"] for p in pods), "runs": pods},
           "machine": machine_info()}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
