"""Is a change to the scheduling queue exact? Runs scenarios here and with another checkout's `src` (`--before`) and
compares everything the queue decides: the metrics dict (timings left out), the failed attempts, and a digest of
every pop in order (which pod, at what time, with how many failed attempts so far) — same pods tried, same order,
same attempts. Each run is a fresh subprocess; prints JSON with one row per case and `all_equal`.
Usage: python bench/simulator/queue_exactness.py --before /work/main/src [--cases batch:100:2,mixed:0:0]
       (scenario:nodes:seed[:reclaim model], nodes 0 = the scenario's default size) [--duration S]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

TIMINGS = ("wall_s", "placements_per_s")
DEFAULT_CASES = ("batch:100:2,batch:100:0,mixed:0:0,spark-tpcds:0:1,ecommerce:0:0,ml-gpu:0:2,batch:20:5,"
                 "colocation:0:1:koordinator,mixed:0:3:koordinator")


def one(scenario: str, nodes: int, seed: int, reclaim: str, duration: float | None) -> dict[str, object]:
    from drlsched.policies import make_policy
    from drlsched.reclaim import ReclaimConfig
    from drlsched.scenarios import make_scenario
    from drlsched.simulator import SimConfig, Simulator

    w = make_scenario(scenario, nodes=nodes or None, duration=duration, seed=seed)
    sim = Simulator(w, make_policy("k8s-default"), seed, SimConfig(series=False, reclaim=ReclaimConfig(reclaim)))
    q = sim.queue
    pop = q.pop
    digest = hashlib.sha256()
    pops = [0]

    def recorded(t: float):  # type: ignore[no-untyped-def]
        entry = pop(t)
        if entry is not None:
            digest.update(f"{entry.pod.spec.uid}|{t!r}|{entry.attempts};".encode())
            pops[0] += 1
        return entry

    q.pop = recorded  # type: ignore[method-assign]
    t0 = time.perf_counter()
    m = sim.run()
    wall = time.perf_counter() - t0
    metrics = {k: v for k, v in m.items() if k not in TIMINGS}
    return {"metrics_sha": hashlib.sha256(json.dumps(metrics, sort_keys=True, default=str).encode()).hexdigest(),
            "pops": pops[0], "pops_sha": digest.hexdigest(), "failed_attempts": q.failed_attempts,
            "pods": m["pods"], "wall_s": round(wall, 2)}


def _run(src: str, case: str, duration: float | None) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--one", case] + ([] if duration is None else ["--duration", str(duration)])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"rc {out.returncode}"}
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="the other checkout's src (default: only run here)")
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--duration", type=float)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        scenario, nodes, seed, *reclaim = a.one.split(":")
        print(json.dumps(one(scenario, int(nodes), int(seed), reclaim[0] if reclaim else "none", a.duration)))
        return
    here = os.environ.get("PYTHONPATH", "src")
    rows = []
    for case in a.cases.split(","):
        after = _run(here, case, a.duration)
        row: dict[str, object] = {"case": case, "after": after}
        if a.before:
            before = _run(a.before, case, a.duration)
            row["before"] = before
            keys = ("metrics_sha", "pops", "pops_sha", "failed_attempts")
            row["equal"] = "error" not in after and all(before.get(k) == after.get(k) for k in keys)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    print(json.dumps({"cases": rows, "all_equal": all(r.get("equal", False) for r in rows)}, indent=1))


if __name__ == "__main__":
    main()
