"""The queue's speed targets (issue 22): whole `batch` at 500 nodes under k8s-default, and its first 25k pods, with
two checkouts' `src` back to back. Each run is a fresh subprocess (single-threaded numpy; pods generated before the
clock); wall and CPU seconds are both printed, because on a shared, loaded machine CPU seconds are the comparable
number (`pods_per_cpu_s`). Prints JSON: one row per (seed, cut, side), `whole_over_first25k` per side and seed
(on placements per CPU second), and `after_over_before_cpu` per seed and cut.
Usage: python bench/simulator/whole_runs.py --after SRC --before /work/main/src [--seeds 0,1,2] [--cuts 25000,0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from drlsched.machine import machine_info

CHILD = """
import itertools, json, sys, time
from drlsched.policies import make_policy
from drlsched.reclaim import ReclaimConfig
from drlsched.scenarios import make_scenario
from drlsched.simulator import SimConfig, Simulator
nodes, seed, cut = (int(x) for x in sys.argv[1:4])
w = make_scenario("batch", nodes=nodes, seed=seed)
w.pods = list(itertools.islice(w.pods, cut or None))
sim = Simulator(w, make_policy("k8s-default"), seed, SimConfig(series=False, reclaim=ReclaimConfig("none")))
t0, c0 = time.perf_counter(), time.process_time()
m = sim.run()
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "pods": m["pods"],
                  "placements_per_s": round(m["pods_scheduled"] / wall), "failed": sim.queue.failed_attempts,
                  "pods_per_cpu_s": round(m["pods_scheduled"] / cpu)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--after", required=True, help="this change's src")
    ap.add_argument("--before", help="the other checkout's src (e.g. main's)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--cuts", default="25000,0", help="pods per run, 0 = the whole scenario")
    ap.add_argument("--nodes", type=int, default=500)
    a = ap.parse_args()
    for src in (a.after, a.before):
        if src and not os.path.isdir(src):
            ap.error(f"{src}: no such directory")
    try:
        seeds = [int(x) for x in a.seeds.split(",")]
        cuts = [int(x) for x in a.cuts.split(",")]
    except ValueError:
        ap.error("--seeds and --cuts take comma-separated integers")
    sides = {"after": a.after, **({"before": a.before} if a.before else {})}
    runs: dict[str, dict[str, object]] = {}
    for seed in seeds:
        for cut in cuts:
            for side, src in sides.items():  # back to back: the machine's load hits both alike
                env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
                out = subprocess.run([sys.executable, "-c", CHILD, str(a.nodes), str(seed), str(cut)], env=env,
                                     capture_output=True, text=True, check=True)
                key = f"{side}_seed{seed}" + (f"_first{cut}" if cut else "")
                runs[key] = {"nodes": a.nodes, "seed": seed, "cut": cut, **json.loads(out.stdout)}
                print(json.dumps({key: runs[key]}), file=sys.stderr)
    ratios: dict[str, object] = {}
    for seed in seeds:
        for side in sides:
            whole, first = runs.get(f"{side}_seed{seed}"), runs.get(f"{side}_seed{seed}_first{cuts[0]}")
            if whole and first and cuts[0]:
                ratios[f"{side}_seed{seed}_whole_over_first_per_cpu_s"] = round(
                    int(whole["pods_per_cpu_s"]) / int(first["pods_per_cpu_s"]), 3)  # type: ignore[call-overload]
        for cut in cuts:
            suffix = f"_first{cut}" if cut else ""
            b, f = runs.get(f"before_seed{seed}{suffix}"), runs.get(f"after_seed{seed}{suffix}")
            if b and f:
                ratios[f"seed{seed}{suffix}_cpu_before_over_after"] = round(
                    float(b["cpu_s"]) / float(f["cpu_s"]), 3)  # type: ignore[arg-type]
    print(json.dumps({"benchmark": "whole_runs", "policy": "k8s-default", "scenario": "batch", "after": a.after,
                      "before": a.before, "target_placements_per_s": 5000, "runs": runs, "ratios": ratios,
                      "machine": machine_info()}, indent=1))


if __name__ == "__main__":
    main()
