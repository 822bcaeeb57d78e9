"""Learned policies vs the baselines on held-out workload seeds: training objective and metrics, 95% CIs.

Seeds 0..n-1 are evaluation seeds; training draws workload seeds >= 1000 (drlsched.rl.env.TRAIN_SEED_BASE), so no
evaluation workload was seen in training. The env window (scenario, nodes, duration, load) and the reward are
read from the first learned policy's checkpoint unless given. For each policy: mean ± 95% CI over seeds of the
episode return under that reward, of its terms, and of the simulator metrics; for each non-baseline policy the
paired return difference to k8s-default. Prints JSON.
Usage: python bench/learning/rl_compare.py --policies ppo:DIR/policy.pt[,dqn:...] [--seeds 10] [--nodes N --duration S]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from drlsched.machine import machine_info
from drlsched.policies import BASELINES
from drlsched.rl.checkpoint import load_policy
from drlsched.rl.env import EnvConfig
from drlsched.rl.evaluation import compare
from drlsched.rl.reward import PRESETS, RewardWeights


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", required=True, help="comma-separated learned policies (ppo:PATH, dqn:PATH)")
    ap.add_argument("--baselines", default=",".join(b for b in BASELINES if b != "fgd"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--scenario")
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--duration", type=float)
    ap.add_argument("--load", type=float)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reward-preset", choices=sorted(PRESETS), help="judge by this preset, not the training reward")
    args = ap.parse_args()
    learned = [p for p in args.policies.split(",") if p]
    _, header = load_policy(learned[0].split(":", 1)[1])
    meta = header["meta"]
    cfg = EnvConfig(scenario=args.scenario or meta["scenario"], nodes=args.nodes or meta["nodes"],
                    duration_s=args.duration or meta["duration_s"], load=args.load or meta["load"],
                    reward=PRESETS[args.reward_preset] if args.reward_preset else RewardWeights(**meta["reward"]))
    policies = [b for b in args.baselines.split(",") if b] + learned
    t0 = time.perf_counter()
    result = compare(policies, cfg, list(range(args.seeds)), jobs=args.jobs)
    print(json.dumps({"bench": "rl_compare", "scenario": cfg.scenario, "nodes": cfg.nodes,
                      "duration_s": cfg.duration_s, "load": cfg.load, "reward": cfg.reward.to_dict(),
                      "seeds": list(range(args.seeds)), "trained_steps": meta.get("steps"),
                      "training_wall_s": meta.get("wall_s"), "wall_s": round(time.perf_counter() - t0, 1),
                      "policies": result, "machine": machine_info()}, indent=1))


if __name__ == "__main__":
    main()
