"""PPO rollout throughput: local backend vs Ray with 1 and 2 rollout workers, and the numbers of the scaling model.

For each backend: env steps/s of rollouts alone (`collect`, after one warm-up) and of full PPO iterations (rollout +
learner update), medians of `--repeats` runs. Then the per-step costs that docs/ray.md's scaling model takes:
rollout µs per env step, learner update seconds per batch, trajectory bytes per env step, weight bytes, and the Ray
overhead per iteration; and the throughput that model predicts for more workers. Prints JSON.
Usage: python bench/ray_rollout.py [--envs 8] [--steps 128] [--repeats 3] [--nodes 10] [--duration 120]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

from _machine import machine_info
from drlsched.rl.env import EnvConfig
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.ppo import PPOSettings, train_ppo
from drlsched.rl.rollout import LocalRollouts, Rollouts

# Assumed for the many-node prediction (not measured here): a 10 Gbit/s network between workers and learner.
NETWORK_BYTES_PER_S = 1.25e9


def rollout_rate(make: object, env_cfg: EnvConfig, s: PPOSettings, repeats: int) -> dict[str, object]:
    net = SchedulerNet(NetConfig())
    workers: Rollouts = make(env_cfg, net.cfg, s)  # type: ignore[operator]
    batch = s.num_envs * s.num_steps
    try:
        workers.collect(net)  # warm-up: actor start, first workloads
        times, stats = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            traj = workers.collect(net)
            times.append(time.perf_counter() - t0)
            stats.append(dict(getattr(workers, "stats", {})))
    finally:
        workers.close()
    out: dict[str, object] = {"steps_per_s": round(batch / statistics.median(times), 1),
                              "collect_s": [round(t, 3) for t in times],
                              "trajectory_bytes_per_step": round(traj.nbytes() / batch, 1)}
    for key in ("put_s", "worker_s", "wait_s", "concat_s"):
        if stats and key in stats[0]:
            out[f"median_{key}"] = round(statistics.median(st[key] for st in stats), 4)
    return out


def ppo_rate(rollouts: object, env_cfg: EnvConfig, s: PPOSettings, repeats: int) -> dict[str, object]:
    """Full iterations: the first (warm-up) is left out of the medians."""
    batch = s.num_envs * s.num_steps
    run = PPOSettings(**{**s.__dict__, "total_steps": batch * (repeats + 1)})
    _, rows = train_ppo(run, env_cfg, NetConfig(), rollouts=rollouts)  # type: ignore[arg-type]
    rows = rows[1:]
    per_iter = [r["rollout_s"] + r["learn_s"] for r in rows]
    return {"steps_per_s": round(batch / statistics.median(per_iter), 1),
            "median_rollout_s": round(statistics.median(r["rollout_s"] for r in rows), 3),
            "median_learn_s": round(statistics.median(r["learn_s"] for r in rows), 3)}


def predict(rollout_s: float, learn_s: float, overhead_s: float, traj_bytes: float, weight_bytes: float,
            batch: int) -> dict[str, list[dict[str, float]]]:
    """Synchronous PPO on W workers (docs/ray.md). Fixed batch (the envs split W ways):
    T(W) = rollout_s / W + overhead_s + (traj_bytes + W * weight_bytes) / bandwidth + learn_s.
    Batch per worker (each worker keeps the envs, the batch grows W-fold, and so does the update):
    T(W) = rollout_s + overhead_s + W * (traj_bytes + weight_bytes) / bandwidth + W * learn_s."""
    fixed, grown = [], []
    for w in (1, 2, 4, 8, 16, 32, 64, 128):
        t = rollout_s / w + overhead_s + (traj_bytes + w * weight_bytes) / NETWORK_BYTES_PER_S + learn_s
        fixed.append({"workers": w, "iteration_s": round(t, 3), "steps_per_s": round(batch / t, 1),
                      "learner_share": round(learn_s / t, 2)})
        t = rollout_s + overhead_s + w * (traj_bytes + weight_bytes) / NETWORK_BYTES_PER_S + w * learn_s
        grown.append({"workers": w, "iteration_s": round(t, 3), "steps_per_s": round(w * batch / t, 1),
                      "learner_share": round(w * learn_s / t, 2)})
    return {"fixed_batch": fixed, "batch_per_worker": grown}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=128, help="steps per env per rollout")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--duration", type=float, default=120.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    env_cfg = EnvConfig(scenario="batch", nodes=args.nodes, duration_s=args.duration)
    s = PPOSettings(num_envs=args.envs, num_steps=args.steps, seed=0)
    batch = args.envs * args.steps
    t0 = time.perf_counter()
    result: dict[str, object] = {"bench": "ray_rollout", "envs": args.envs, "steps_per_env": args.steps,
                                 "batch": batch, "nodes": args.nodes, "duration_s": args.duration,
                                 "repeats": args.repeats}
    rollouts: dict[str, object] = {"local": rollout_rate(LocalRollouts, env_cfg, s, args.repeats)}
    ppo: dict[str, object] = {"local": ppo_rate(None, env_cfg, s, args.repeats)}

    import ray

    from drlsched.distributed.ray_backend import RayRollouts, rollouts_factory, session

    with session(None, num_cpus=2):
        result["ray"] = ray.__version__
        for w in (1, 2):
            rollouts[f"ray_{w}"] = rollout_rate(lambda e, n, st, w=w: RayRollouts(e, n, st, w), env_cfg, s,
                                                args.repeats)
            ppo[f"ray_{w}"] = ppo_rate(rollouts_factory(w), env_cfg, s, args.repeats)
    local = rollouts["local"]["steps_per_s"]  # type: ignore[index]
    for name in ("ray_1", "ray_2"):
        rollouts[name]["vs_local"] = round(rollouts[name]["steps_per_s"] / local, 2)  # type: ignore[index]
        ppo[name]["vs_local"] = round(ppo[name]["steps_per_s"] / ppo["local"]["steps_per_s"], 2)  # type: ignore[index]
    result["rollouts_only"] = rollouts
    result["ppo_iterations"] = ppo

    # The model's inputs, from the runs above.
    rollout_s = batch / local  # one worker's compute for the whole batch
    learn_s = ppo["local"]["median_learn_s"]  # type: ignore[index]
    one = rollouts["ray_1"]
    overhead_s = max(0.0, one["median_wait_s"] - one["median_worker_s"]) + one["median_put_s"] + one["median_concat_s"]  # type: ignore[index,operator]
    weight_bytes = sum(p.numel() * p.element_size() for p in SchedulerNet(NetConfig()).parameters())
    traj_bytes = one["trajectory_bytes_per_step"] * batch  # type: ignore[index,operator]
    result["model_inputs"] = {
        "rollout_us_per_step": round(1e6 * rollout_s / batch, 1), "learn_s_per_batch": learn_s,
        "learn_us_per_step": round(1e6 * learn_s / batch, 1), "ray_overhead_s_per_iteration": round(overhead_s, 4),
        "trajectory_bytes_per_step": one["trajectory_bytes_per_step"], "weight_bytes": weight_bytes,  # type: ignore[index]
        "assumed_network_bytes_per_s": NETWORK_BYTES_PER_S,
    }
    result["predicted"] = predict(rollout_s, learn_s, overhead_s, traj_bytes, weight_bytes, batch)  # type: ignore[arg-type]
    result["learner_bound_steps_per_s"] = round(batch / learn_s, 1)  # type: ignore[operator]
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    result["machine"] = machine_info()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
