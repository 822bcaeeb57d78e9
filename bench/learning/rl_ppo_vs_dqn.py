"""Issue 15 §2: steps and wall time for PPO and for DQN to reach a CPU-utilisation target on `colocation`.

The target is 90% CPU utilisation if the best heuristic reaches it on the same cluster, else 90% of the best
heuristic's utilisation (the JSON says which). The best heuristic is the highest mean utilisation within 5% SLA
violations among `--heuristics` under the learned policy's reclaim configuration and under Koordinator's defaults,
on validation seeds 900.. (never the evaluation seeds). Each algorithm then trains for `--minutes` from scratch
(no warm start: a warm start would measure the expert) with the `batch` preset, and the first training report whose
finished episodes' mean utilisation reaches the target gives the steps and wall time (null if never). Training
episodes draw seeds >= 1000. Prints JSON with both curves. Usage:
python bench/learning/rl_ppo_vs_dqn.py [--minutes 3] [--nodes 5 --duration 300 --load 2] [--reclaim koordinator:cpu=1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

from drlsched.machine import machine_info
from drlsched.rl.colocation import compare, parse_entry
from drlsched.rl.dqn import DQNSettings, train_dqn
from drlsched.rl.env import EnvConfig
from drlsched.rl.network import NetConfig
from drlsched.rl.ppo import PPOSettings, train_ppo
from drlsched.rl.reward import PRESETS
from drlsched.simulator import SimConfig
from drlsched.source import WorkloadSource

VALIDATION_SEED0 = 900
SLA_BOUND = 0.05


def best_heuristic(args: argparse.Namespace) -> tuple[str, float]:
    labels = [f"{h}@{m}" for m in (args.reclaim, "koordinator") for h in args.heuristics.split(",")]
    source = WorkloadSource(scenario="colocation", nodes=args.nodes, duration=args.duration, load=args.load)
    seeds = list(range(VALIDATION_SEED0, VALIDATION_SEED0 + args.seeds))
    results, _ = compare([parse_entry(x) for x in labels], source, seeds, args.jobs)
    summary = results["policies"]
    assert isinstance(summary, dict)
    ok = [x for x in labels if summary[x]["sla_violation_rate"]["mean"] <= SLA_BOUND] or labels
    best = max(ok, key=lambda x: summary[x]["cpu_util"]["mean"])
    return best, float(summary[best]["cpu_util"]["mean"])


def first_reaching(rows: list[dict[str, float]], target: float) -> dict[str, float] | None:
    for r in rows:
        u = r.get("cpu_util", math.nan)
        if not math.isnan(u) and u >= target:
            return {"steps": int(r["step"]), "wall_s": round(r["wall_s"], 1), "cpu_util": round(u, 4)}
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=3.0, help="training budget per algorithm")
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--load", type=float, default=2.0)
    ap.add_argument("--reclaim", default="koordinator:cpu=1", help="MODEL[:cpu=X][:suppress=Y] of the learner")
    ap.add_argument("--heuristics", default="k8s-default,most-allocated,first-fit")
    ap.add_argument("--seeds", type=int, default=5, help="validation seeds for the best heuristic")
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    best, best_util = best_heuristic(args)
    target, kind = (0.9, "90% CPU utilisation") if best_util >= 0.9 else (
        0.9 * best_util, f"90% of the best heuristic's utilisation ({best}: {best_util:.4f})")
    cfg = EnvConfig(scenario="colocation", nodes=args.nodes, duration_s=args.duration, load=args.load,
                    reward=PRESETS["batch"], sim=SimConfig(reclaim=parse_entry(f"x@{args.reclaim}").reclaim))
    out: dict[str, object] = {"bench": "rl_ppo_vs_dqn", "target": target, "target_kind": kind,
                              "cluster": {"nodes": args.nodes, "duration": args.duration, "load": args.load,
                                          "reclaim": args.reclaim}, "minutes": args.minutes, "envs": args.envs}
    for algo in ("ppo", "dqn"):
        t0 = time.perf_counter()
        if algo == "ppo":
            s = PPOSettings(total_steps=10**9, minutes=args.minutes, num_envs=args.envs, seed=args.seed)
            _, rows = train_ppo(s, cfg, NetConfig())
        else:
            d = DQNSettings(total_steps=10**9, minutes=args.minutes, num_envs=args.envs, seed=args.seed)
            _, rows = train_dqn(d, cfg, NetConfig())
        curve = [{"steps": int(r["step"]), "wall_s": round(r["wall_s"], 1), "cpu_util": r.get("cpu_util")}
                 for r in rows if not math.isnan(r.get("cpu_util", math.nan))]
        out[algo] = {"reached": first_reaching(rows, target), "steps_trained": int(rows[-1]["step"]),
                     "wall_s": round(time.perf_counter() - t0, 1), "curve": curve}
    p, q = out["ppo"]["reached"], out["dqn"]["reached"]  # type: ignore[index]
    out["dqn_over_ppo"] = ({"steps": q["steps"] / p["steps"], "wall_s": q["wall_s"] / p["wall_s"]}
                           if p and q else None)
    out["machine"] = machine_info()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
