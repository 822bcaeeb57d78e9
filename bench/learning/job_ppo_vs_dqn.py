"""Issue 24 §4 (last sentence): env steps and wall time for PPO and for DQN to close 90% of the mean-JCT gap from
`fifo` to the best tuned heuristic (`weighted-fair:-2`) on validation seeds, for the learned job policy.

Same world as bench/learning/job_policy_compare.py: tpch, 25 nodes, continuous arrivals at load 0.85, 6 h episodes.
Both algorithms train the same network (rl/job_net.py, hidden 32, 4 rounds) with the same masks and reward
(−jobs in system × Δt, differential) from scratch: no imitation warm start (a warm start would measure the expert).
PPO is rl/job_train.train (4 rollouts per update on one training seed), DQN rl/job_dqn.train_dqn (masked double
DQN, n-step). Training seeds 1000+, validation seeds 900.. (`--validation-seeds`, greedy mean JCT), never the
evaluation seeds 0–9. Every `--every` env steps (eligible decisions, counted the same way for both) the greedy
policy is validated; validation time is excluded from the reported wall seconds (training wall only). The two
algorithms run at the same time in two processes so both see the same contention on the shared machine.
Fraction of the gap closed: (fifo − policy) / (fifo − weighted-fair:-2), on the same validation seeds.
Prints JSON (and writes --out). Usage:
nice python bench/learning/job_ppo_vs_dqn.py --minutes 12 [--every 8000] [--seed 0] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

from drlsched.jobs.engine import JobEngine
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.workload import DEFAULT_DURATION_S, JobSource
from drlsched.machine import machine_info
from drlsched.rl.job_dqn import JobDQNSettings, train_dqn
from drlsched.rl.job_net import JobNet, JobNetSpec
from drlsched.rl.job_train import VALIDATION_SEED, JobTrainSettings, train, validate
from drlsched.rl.reward import PRESETS

BEST = "weighted-fair:-2"
TARGET = 0.9


def heuristic_jct(source: JobSource, name: str, seeds: int) -> float:
    vals = []
    for i in range(seeds):
        seed = VALIDATION_SEED + i
        m = JobEngine(source.arrivals(seed), make_job_policy(name), source.config(), seed).run()
        vals.append(float(m["jct_mean_s"]))
    return float(np.mean(vals))


def run(algo: str, minutes: float, every: int, seed: int, val_seeds: int, source: JobSource) -> dict[str, Any]:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    net = JobNet(JobNetSpec())
    vs = JobTrainSettings(validation_seeds=val_seeds)
    curve: list[dict[str, float]] = []
    spent = [0.0]  # seconds spent validating inside the trainer's log callback (not training)
    last = [-math.inf]

    def log(row: dict[str, float]) -> None:
        step = row.get("step", 0.0)
        if step == 0.0 and "validation_jct_mean_s" in row:  # the trainer's own untrained-start validation
            curve.append({"steps": 0, "wall_s": 0.0, "validation_jct_mean_s": row["validation_jct_mean_s"]})
            last[0] = 0.0
            return
        if step - last[0] < every:
            return
        last[0] = step
        wall = row["wall_s"] - spent[0]
        t = time.perf_counter()
        v = validate(net, source, vs)
        spent[0] += time.perf_counter() - t
        curve.append({"steps": int(step), "wall_s": round(wall, 1), "validation_jct_mean_s": v})

    def on_best(_: JobNet, __: float, ___: int) -> None:
        return None

    t0 = time.perf_counter()
    reward = PRESETS["jct"]
    if algo == "ppo":
        s = JobTrainSettings(imitation_episodes=0, minutes=minutes, validate_every=10**9,
                             validation_seeds=val_seeds, seed=seed)
        counters = train(net, source, s, reward, log, on_best)
        settings: dict[str, object] = s.to_dict()
    else:
        d = JobDQNSettings(minutes=minutes, validate_every=10**9, validation_seeds=val_seeds, seed=seed)
        counters = train_dqn(net, source, d, reward, log, on_best)
        settings = d.to_dict()
    wall = counters["rl_s"] - spent[0]
    final = validate(net, source, vs)
    curve.append({"steps": int(counters["rl_decisions"]), "wall_s": round(wall, 1), "validation_jct_mean_s": final,
                  "final": 1.0})
    return {"settings": settings, "counters": counters, "curve": curve,
            "process_wall_s": round(time.perf_counter() - t0, 1), "validation_s": round(spent[0], 1)}


def summarise(res: dict[str, Any], fifo: float, best: float) -> None:
    gap = fifo - best if fifo > best else math.nan  # no gap (tiny smoke worlds): every fraction is nan
    for p in res["curve"]:
        p["fraction_closed"] = round((fifo - p["validation_jct_mean_s"]) / gap, 4)
    reached = next((p for p in res["curve"] if p["fraction_closed"] >= TARGET), None)
    top = max(res["curve"], key=lambda p: -math.inf if math.isnan(p["fraction_closed"]) else p["fraction_closed"])
    res["reached_90pct"] = None if reached is None else {k: reached[k] for k in ("steps", "wall_s", "fraction_closed")}
    res["best"] = {k: top[k] for k in ("steps", "wall_s", "fraction_closed", "validation_jct_mean_s")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=12.0, help="training wall budget per algorithm")
    ap.add_argument("--every", type=int, default=8000, help="env steps (eligible decisions) between validations")
    ap.add_argument("--validation-seeds", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=25)
    ap.add_argument("--load", type=float, default=0.85)
    ap.add_argument("--duration", type=float, default=DEFAULT_DURATION_S, help="episode arrival window (s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    source = JobSource(nodes=args.nodes, load=args.load, duration_s=args.duration)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        futs = {a: pool.submit(run, a, args.minutes, args.every, args.seed, args.validation_seeds, source)
                for a in ("ppo", "dqn")}
        fifo = heuristic_jct(source, "fifo", args.validation_seeds)
        best = heuristic_jct(source, BEST, args.validation_seeds)
        results = {a: f.result() for a, f in futs.items()}
    for r in results.values():
        summarise(r, fifo, best)
    p, q = results["ppo"]["reached_90pct"], results["dqn"]["reached_90pct"]
    out = {"bench": "job_ppo_vs_dqn", "workload": "tpch", "nodes": args.nodes, "load": args.load,
           "duration_s": source.duration_s, "training_seeds": f"1000 + 100000*{args.seed} + n (one seed: {args.seed})",
           "validation_seeds": list(range(VALIDATION_SEED, VALIDATION_SEED + args.validation_seeds)),
           "fifo_jct_mean_s": fifo, "best_heuristic": BEST, "best_jct_mean_s": best, "target_fraction": TARGET,
           "minutes_per_algorithm": args.minutes, "every_steps": args.every, "warm_start": None,
           "ppo": results["ppo"], "dqn": results["dqn"],
           "dqn_over_ppo": ({"steps": q["steps"] / p["steps"], "wall_s": q["wall_s"] / max(p["wall_s"], 1e-9)}
                            if p and q else None),
           "wall_s": round(time.perf_counter() - t0, 1), "load_average": list(os.getloadavg()),
           "machine": machine_info()}
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
