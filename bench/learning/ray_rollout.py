"""PPO rollout throughput: local backend vs Ray with 1 and 2 rollout workers, and the numbers of the scaling model.

For each backend: env steps/s of rollouts alone (`collect`, after one warm-up) and of full PPO iterations (rollout +
learner update), medians of `--repeats` runs. Then the per-step costs that docs/ray.md's scaling model takes:
rollout µs per env step, learner update seconds per batch, trajectory bytes per env step, weight bytes, and the Ray
overhead per iteration; and the throughput that model predicts for more workers. Prints JSON.
Usage: python bench/learning/ray_rollout.py [--envs 8] [--steps 128] [--repeats 3] [--nodes 10] [--duration 120]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

from drlsched.machine import machine_info
from drlsched.rl.env import EnvConfig
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.ppo import PPOSettings, train_ppo
from drlsched.rl.rollout import LocalRollouts, Rollouts, RolloutSettings

# Assumed for the many-node prediction (not measured here): a 10 Gbit/s network between workers and learner.
NETWORK_BYTES_PER_S = 1.25e9


BACKENDS = ("local", "ray_1", "ray_2")


def factory(name: str) -> Callable[[EnvConfig, NetConfig, RolloutSettings], Rollouts]:
    if name == "local":
        return LocalRollouts
    from drlsched.distributed.ray_backend import rollouts_factory

    return rollouts_factory(int(name.removeprefix("ray_")))


def measure_rollouts(env_cfg: EnvConfig, s: PPOSettings, repeats: int) -> dict[str, dict[str, float]]:
    """Rollouts alone, after one warm-up each. Backends take turns, so load from other processes on the machine
    hits all of them alike; each runs the same envs from the same seeds, so each does the same work."""
    net = SchedulerNet(NetConfig())
    batch = s.num_envs * s.num_steps
    backends = {name: factory(name)(env_cfg, net.cfg, s.rollout_settings()) for name in BACKENDS}
    times: dict[str, list[float]] = {name: [] for name in BACKENDS}
    stats: dict[str, list[dict[str, float]]] = {name: [] for name in BACKENDS}
    try:
        for b in backends.values():
            traj = b.collect(net)  # warm-up: actor start, first workloads
        for _ in range(repeats):
            for name, b in backends.items():
                t0 = time.perf_counter()
                b.collect(net)
                times[name].append(time.perf_counter() - t0)
                stats[name].append(dict(getattr(b, "stats", {})))
    finally:
        for b in backends.values():
            b.close()
    out: dict[str, dict[str, float]] = {}
    for name in BACKENDS:
        row = {"steps_per_s": round(batch / statistics.median(times[name]), 1),
               "collect_s": [round(t, 3) for t in times[name]]}
        for key in ("put_s", "worker_s", "wait_s", "concat_s"):
            if key in stats[name][0]:
                row[f"median_{key}"] = round(statistics.median(st[key] for st in stats[name]), 4)
        out[name] = row  # type: ignore[assignment]
    out["trajectory_bytes_per_step"] = round(traj.nbytes() / batch, 1)  # type: ignore[assignment]
    return out


def measure_ppo(env_cfg: EnvConfig, s: PPOSettings, repeats: int) -> dict[str, dict[str, float]]:
    """Full PPO iterations (rollout + update): per repeat and backend a two-iteration run from the same seed, of
    which the second iteration is timed (the first includes actor start); backends take turns."""
    batch = s.num_envs * s.num_steps
    run = PPOSettings(**{**s.__dict__, "total_steps": 2 * batch})
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in BACKENDS}
    for _ in range(repeats):
        for name in BACKENDS:
            _, curve = train_ppo(run, env_cfg, NetConfig(), rollouts=factory(name))
            rows[name].append(curve[-1])
    out = {}
    for name in BACKENDS:
        rs = rows[name]
        out[name] = {"steps_per_s": round(batch / statistics.median(r["rollout_s"] + r["learn_s"] for r in rs), 1),
                     "median_rollout_s": round(statistics.median(r["rollout_s"] for r in rs), 3),
                     "median_learn_s": round(statistics.median(r["learn_s"] for r in rs), 3)}
    return out


def predict(rollout_s: float, learn_s: float, overhead_s: float, traj_bytes: float, weight_bytes: float,
            batch: int, envs: int) -> dict[str, list[dict[str, float]]]:
    """Synchronous PPO on W workers (docs/ray.md). Fixed batch (the envs split W ways):
    T(W) = rollout_s / W + overhead_s + (traj_bytes + W * weight_bytes) / bandwidth + learn_s.
    Batch per worker (each worker keeps the envs, the batch grows W-fold, and so does the update):
    T(W) = rollout_s + overhead_s + W * (traj_bytes + weight_bytes) / bandwidth + W * learn_s."""
    fixed, grown = [], []
    for w in (1, 2, 4, 8, 16, 32, 64, 128):
        if w <= envs:  # a worker needs at least one env
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
                                 "repeats": args.repeats, "loadavg_before": os.getloadavg()}
    import ray

    from drlsched.distributed.ray_backend import session

    # 3 CPUs: the 1- and 2-worker backends exist side by side, but only one collects at a time.
    with session(None, num_cpus=3):
        result["ray"] = ray.__version__
        rollouts = measure_rollouts(env_cfg, s, args.repeats)
        ppo = measure_ppo(env_cfg, s, args.repeats)
    local = rollouts["local"]["steps_per_s"]
    for name in ("ray_1", "ray_2"):
        rollouts[name]["vs_local"] = round(rollouts[name]["steps_per_s"] / local, 2)
        ppo[name]["vs_local"] = round(ppo[name]["steps_per_s"] / ppo["local"]["steps_per_s"], 2)
    result["rollouts_only"] = rollouts
    result["ppo_iterations"] = ppo

    # The model's inputs, from the runs above.
    rollout_s = ppo["local"]["median_rollout_s"]  # one worker's compute for the whole batch, under training
    learn_s = ppo["local"]["median_learn_s"]
    one = rollouts["ray_1"]
    overhead_s = max(0.0, one["median_wait_s"] - one["median_worker_s"]) + one["median_put_s"] + one["median_concat_s"]
    weight_bytes = sum(p.numel() * p.element_size() for p in SchedulerNet(NetConfig()).parameters())
    step_bytes: float = rollouts["trajectory_bytes_per_step"]  # type: ignore[assignment]
    result["model_inputs"] = {
        "rollout_us_per_step": round(1e6 * rollout_s / batch, 1), "learn_s_per_batch": learn_s,
        "learn_us_per_step": round(1e6 * learn_s / batch, 1), "ray_overhead_s_per_iteration": round(overhead_s, 4),
        "trajectory_bytes_per_step": step_bytes, "weight_bytes": weight_bytes,
        "assumed_network_bytes_per_s": NETWORK_BYTES_PER_S,
    }
    result["predicted"] = predict(rollout_s, learn_s, overhead_s, step_bytes * batch, weight_bytes, batch, args.envs)
    result["learner_bound_steps_per_s"] = round(batch / learn_s, 1)
    result["loadavg_after"] = os.getloadavg()
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    result["machine"] = machine_info()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
