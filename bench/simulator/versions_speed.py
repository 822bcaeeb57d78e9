"""Two versions of the simulator side by side (issue 22: "no scenario slower than before"): every scenario at its
default size under k8s-default, and `spark-tpcds` with `--reclaim koordinator --nic-gbps 1
--rack-oversubscription 4`, each run a fresh subprocess per version (PYTHONPATH=<src>, single-threaded numpy),
the versions alternated, --repeats rounds. Prints JSON: per case the median CPU seconds of each version (process
time: less sensitive than wall time to the other load on a shared machine), after / before, and whether the
metrics agreed (pods and JCT p99 of every run).
Usage: python bench/simulator/versions_speed.py --before /work/main/src --after src [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from drlsched.machine import machine_info

CASES = [("ecommerce", "none", False), ("batch", "none", False), ("spark-tpcds", "none", False),
         ("spark-tpcds", "koordinator", True), ("ml-gpu", "none", False), ("mixed", "none", False),
         ("colocation", "koordinator", False)]

CHILD = """
import json, sys, time
from drlsched.policies import make_policy
from drlsched.reclaim import ReclaimConfig
from drlsched.scenarios import make_scenario
from drlsched.simulator import SimConfig, Simulator
scen, reclaim, links = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
w = make_scenario(scen, seed=0)
w.pods = list(w.pods)  # generated before the clock starts
net = {"nic_gbps": 1.0, "rack_oversubscription": 4.0} if links else {}
cfg = SimConfig(allow_unschedulable=True, reclaim=ReclaimConfig(model=reclaim), **net)
sim = Simulator(w, make_policy("k8s-default"), 0, cfg)
t = time.process_time()
m = sim.run()
print(json.dumps({"cpu_s": time.process_time() - t, "pods": m["pods"], "jct_p99_s": m["jct_p99_s"]}))
"""


def one(src: str, case: tuple[str, str, bool]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    scen, reclaim, links = case
    out = subprocess.run([sys.executable, "-c", CHILD, scen, reclaim, "1" if links else "0"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--before", required=True, metavar="SRC")
    p.add_argument("--after", required=True, metavar="SRC")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    for src in (args.before, args.after):
        if not os.path.isdir(os.path.join(src, "drlsched")):
            print(f"error: {src} has no drlsched package", file=sys.stderr)
            return 2
    rows = []
    for case in CASES:
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for _ in range(args.repeats):
            for name, src in (("before", args.before), ("after", args.after)):
                runs[name].append(one(src, case))
        med = {k: statistics.median(r["cpu_s"] for r in v) for k, v in runs.items()}
        same = len({(r["pods"], r["jct_p99_s"]) for v in runs.values() for r in v}) == 1
        label = f"{case[0]}" + (f" --reclaim {case[1]}" if case[1] != "none" else "") + (
            " --nic-gbps 1 --rack-oversubscription 4" if case[2] else "")
        rows.append({"case": label, "pods": runs["before"][0]["pods"], "before_cpu_s": round(med["before"], 3),
                     "after_cpu_s": round(med["after"], 3), "after_over_before": round(med["after"] / med["before"], 3),
                     "same_metrics": same})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"machine": machine_info(), "repeats": args.repeats, "cases": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
