"""Wall-clock PPO training time on 2 cores until the policy beats k8s-default on its own training objective.

Trains once for --minutes, saving a snapshot every --every seconds (training is not paused or changed by this);
afterwards each snapshot and k8s-default play the same validation workload seeds (900..900+n-1: below the training
range, disjoint from the evaluation seeds 0..n-1 of bench/learning/rl_compare.py). "Beats" = mean paired return
difference > 0 with its 95% CI above 0. Prints JSON: per snapshot, wall time, steps and the paired difference; the first
snapshot that beats, or null. Usage:
python bench/learning/rl_time_to_beat.py --scenario ecommerce --nodes 10 --duration 900 --load 2 --reward-preset
    ecommerce [--minutes 10] [--every 60] [--seeds 10] [--bc-steps 4000] [--shared-workload 4] [--algo ppo|dqn]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

from drlsched.machine import machine_info
from drlsched.rl.checkpoint import save_policy
from drlsched.rl.dqn import DQNSettings, train_dqn
from drlsched.rl.env import EnvConfig
from drlsched.rl.evaluation import compare
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.ppo import PPOSettings, train_ppo
from drlsched.rl.reward import PRESETS, load_reward

VALIDATION_SEED0 = 900


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="ecommerce")
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--duration", type=float, default=900.0)
    ap.add_argument("--load", type=float, default=2.0)
    ap.add_argument("--reward-preset", default="ecommerce", choices=sorted(PRESETS),
                    help="the objective snapshots are judged by (and trained on, unless --reward)")
    ap.add_argument("--reward", help="train on the weights in this YAML file instead")
    ap.add_argument("--algo", default="ppo", choices=("ppo", "dqn"))
    ap.add_argument("--encoder", default="lstm", choices=("lstm", "framestack"))
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=60.0, help="seconds between snapshots")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--bc-steps", type=int, default=0)
    ap.add_argument("--bc-expert", default="k8s-default")
    ap.add_argument("--shared-workload", type=int, default=1)
    ap.add_argument("--gamma", type=float, default=0.995)
    ap.add_argument("--lr", type=float, default=2.5e-4)
    ap.add_argument("--out", help="also save the final policy here (a policy.pt path)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="processes for the snapshot evaluation")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = EnvConfig(scenario=args.scenario, nodes=args.nodes, duration_s=args.duration, load=args.load,
                    reward=PRESETS[args.reward_preset])
    train_cfg = replace(cfg, reward=load_reward(args.reward)) if args.reward else cfg
    tmp = Path(tempfile.mkdtemp(prefix="rl_time_to_beat-"))
    net = SchedulerNet(NetConfig(encoder=args.encoder))
    snaps: list[tuple[float, int, Path]] = []
    t0 = time.perf_counter()
    last = [t0]

    def snapshot(row: dict[str, float]) -> None:
        now = time.perf_counter()
        if now - last[0] >= args.every:
            last[0] = now
            path = tmp / f"snap{len(snaps):03d}.pt"
            save_policy(path, net, args.algo, {"steps": int(row["step"])})
            snaps.append((now - t0, int(row["step"]), path))

    if args.algo == "ppo":
        s = PPOSettings(total_steps=10**9, minutes=args.minutes, num_envs=args.envs, seed=args.seed,
                        bc_steps=args.bc_steps, bc_expert=args.bc_expert, shared_workload=args.shared_workload,
                        gamma=args.gamma, lr=args.lr)
        _, rows = train_ppo(s, train_cfg, net.cfg, net=net, on_update=snapshot)
    else:
        d = DQNSettings(total_steps=10**9, minutes=args.minutes, num_envs=args.envs, seed=args.seed,
                        gamma=args.gamma, lr=args.lr)
        _, rows = train_dqn(d, train_cfg, net.cfg, net=net, on_log=snapshot)
    train_wall = time.perf_counter() - t0
    final = tmp / "final.pt"
    save_policy(final, net, args.algo, {"steps": int(rows[-1]["step"])})
    snaps.append((train_wall, int(rows[-1]["step"]), final))
    if args.out:
        save_policy(args.out, net, args.algo, {"scenario": args.scenario, "nodes": args.nodes,
                                               "duration_s": args.duration, "load": args.load,
                                               "reward": train_cfg.reward.to_dict(), "steps": int(rows[-1]["step"]),
                                               "wall_s": train_wall, "seed": args.seed})

    seeds = list(range(VALIDATION_SEED0, VALIDATION_SEED0 + args.seeds))
    names = [f"{args.algo}:{p}" for _, _, p in snaps]
    result = compare(["k8s-default", *names], cfg, seeds, jobs=args.jobs)
    base = result["k8s-default"]["return"]  # type: ignore[index]
    curve = []
    first = None
    for (wall, steps, _), name in zip(snaps, names, strict=True):
        diff = result[name]["return_minus_baseline"]  # type: ignore[index]
        entry = {"wall_s": round(wall, 1), "steps": steps, "return": result[name]["return"],  # type: ignore[index]
                 "return_minus_k8s_default": diff,
                 "sla_violation_rate": result[name].get("sla_violation_rate")}  # type: ignore[union-attr]
        curve.append(entry)
        if first is None and diff["mean"] - diff["ci95"] > 0:
            first = entry
    print(json.dumps({"bench": "rl_time_to_beat", "algo": args.algo, "encoder": args.encoder,
                      "scenario": args.scenario, "nodes": args.nodes, "duration_s": args.duration,
                      "load": args.load, "reward": cfg.reward.to_dict(),
                      "train_reward": train_cfg.reward.to_dict(), "bc_steps": args.bc_steps,
                      "bc_expert": args.bc_expert,
                      "shared_workload": args.shared_workload, "validation_seeds": seeds,
                      "k8s_default_return": base, "k8s_default_sla_violation_rate":
                      result["k8s-default"].get("sla_violation_rate"),  # type: ignore[union-attr]
                      "training_minutes": args.minutes, "snapshots": curve, "first_beating": first,
                      "machine": machine_info()}, indent=1))


if __name__ == "__main__":
    main()
