"""`drlsched train`: train a PPO (or DQN) placement policy in the simulator and write DIR/policy.pt."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import resource
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from drlsched.cli_args import make_output_dir, non_negative_int, positive_float, positive_int
from drlsched.cli_common import (
    add_network_arguments,
    add_reclaim_arguments,
    add_usage_arguments,
    reclaim_config,
    trace_selection,
    usage_fields,
    workload_source,
)
from drlsched.distributed import add_backend_arguments, check_backend_arguments, load_ray_backend
from drlsched.errors import UserError
from drlsched.policies import BASELINES
from drlsched.scenarios import SCENARIOS
from drlsched.simulator import SimConfig
from drlsched.source import WorkloadSource
from drlsched.traces import add_trace_arguments

DEFAULT_RAY_WORKERS = 2


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("train", help="train a learned placement policy (PPO or DQN) in the simulator",
                       description="Train a placement policy on windows of a scenario (workload seeds >= 1000, so "
                                   "seeds below 1000 stay held out for evaluation); writes DIR/policy.pt, "
                                   "DIR/curve.csv, DIR/curve.png and DIR/train.json.")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), metavar="NAME",
                   help=f"training scenario: {', '.join(sorted(SCENARIOS))} (default batch, unless --trace)")
    add_trace_arguments(p)
    add_reclaim_arguments(p)
    add_network_arguments(p)
    add_usage_arguments(p)
    p.add_argument("--span", type=positive_float, metavar="SECONDS",
                   help="with --trace: windows are drawn from [--start, --start + SECONDS) of the trace (default: "
                        "to its end), so the rest stays held out")
    p.add_argument("--fill", action="store_true",
                   help="train on the fill experiment (docs/fill.md): episodes fill the cluster with the scenario's "
                        "or trace's pods in a random order; reward: minus the GPUs of pods that do not fit")
    p.add_argument("--max-demand", type=positive_float, default=1.3, metavar="D",
                   help="with --fill: an episode ends when the GPUs requested reach D x the cluster's (default 1.3)")
    p.add_argument("--algo", choices=("ppo", "dqn"), default="ppo", help="algorithm (default ppo)")
    rew = p.add_mutually_exclusive_group()
    rew.add_argument("--reward-preset", choices=("ecommerce", "batch", "traffic"),
                     help="reward weights preset (default: the scenario's own — ecommerce for ecommerce, traffic "
                          "for spark-tpcds — else batch)")
    rew.add_argument("--reward", metavar="FILE", help="reward weights from a YAML file (see docs/learning.md)")
    p.add_argument("--steps", type=positive_int, help="env steps (pod decisions) to train for (default 100000)")
    p.add_argument("--minutes", type=positive_float, help="wall-clock budget in minutes")
    p.add_argument("--envs", type=positive_int, default=8, help="parallel envs (default 8)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    p.add_argument("--nodes", type=positive_int,
                   help="cluster size of the training windows (default 10; a trace's own nodes with --trace)")
    p.add_argument("--duration", type=positive_float, default=120.0, metavar="SECONDS",
                   help="arrival window of each training episode in seconds (default 120)")
    p.add_argument("--load", type=positive_float, default=1.0, help="arrival-rate factor (default 1.0)")
    p.add_argument("--encoder", choices=("none", "lstm", "framestack"), default="none",  # network.ENCODERS
                   help="state encoder (none: an MLP over the newest metric snapshot, the default, since the "
                        "history measured no worth on held-out seeds, docs/learning.md; lstm: an LSTM over the "
                        "history window; framestack: an MLP over the flattened window)")
    p.add_argument("--bc-steps", type=non_negative_int, default=0,
                   help="PPO: behaviour-cloning warm start from --bc-expert over this many decisions "
                        "(default 0; 16000 takes about 20 s)")
    p.add_argument("--bc-expert", default="k8s-default", metavar="POLICY",
                   help="PPO: the baseline imitated by the warm start (default k8s-default)")
    p.add_argument("--shared-workload", type=positive_int, default=1, metavar="K",
                   help="PPO: groups of K envs replay the same workloads, with a per-group baseline (default 1)")
    p.add_argument("--gamma", type=positive_float, default=0.99, help="discount factor (default 0.99)")
    p.add_argument("--lr", type=positive_float, default=2.5e-4, help="learning rate (default 2.5e-4)")
    p.add_argument("--resume", action="store_true", help="continue from the weights in DIR/policy.pt")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_backend_arguments(p, workers_help=f"PPO on Ray: rollout workers (actors), each owning a slice of the envs "
                                          f"(default {DEFAULT_RAY_WORKERS}); see docs/ray.md")
    p.set_defaults(func=cmd_train)


def _fill_config(args: argparse.Namespace, weights: Any) -> tuple[Any, str, int]:
    """The fill env's config (population: the whole trace, or the scenario's pods for --seed), its name and the
    node count it trains on."""
    from drlsched.fill import check_inputs
    from drlsched.rl.fill_env import FillEnvConfig

    if args.span is not None:
        raise UserError("--span applies to trace windows, not to --fill (a fill uses the whole pod list)")
    factory = workload_source(args)
    if factory.trace is not None:  # the whole pod list
        factory = replace(factory, trace=replace(factory.trace, duration=None))
    duration = None if args.trace else args.duration
    population = factory(args.seed)
    check_inputs(population.nodes, list(population.iter_pods()), args.max_demand)
    name = f"fill:{args.trace_format}:{Path(args.trace).name}" if args.trace else f"fill:{args.scenario or 'batch'}"
    cfg = FillEnvConfig(scenario=args.scenario or "batch", nodes=args.nodes, duration_s=duration, load=args.load,
                        reward=weights, workload_fn=factory, max_demand=args.max_demand, population_seed=args.seed)
    return cfg, name, len(population.nodes)


def cmd_train(args: argparse.Namespace) -> int:
    from drlsched.rl.reward import PRESETS, SCENARIO_PRESETS, load_reward

    out = Path(args.out)
    if args.reward:
        weights = load_reward(args.reward)
        reward_name = str(args.reward)
    else:
        reward_name = args.reward_preset or SCENARIO_PRESETS.get(args.scenario or "", "batch")
        weights = PRESETS[reward_name]
    if args.bc_expert not in BASELINES:
        raise UserError(f"--bc-expert {args.bc_expert!r} is not a baseline; known: {', '.join(BASELINES)}")
    if args.trace and args.scenario:
        raise UserError("give --scenario NAME or --trace PATH (with --trace-format), not both")
    if args.trace and not args.trace_format:
        raise UserError("--trace needs --trace-format")
    if args.span is not None and not args.trace:
        raise UserError("--span applies to --trace only")
    if args.shared_workload > 1 and args.envs % args.shared_workload:
        raise UserError(f"--envs {args.envs} must be a multiple of --shared-workload {args.shared_workload}")
    usage = usage_fields(args)
    if usage and (args.trace or args.fill):
        raise UserError("--usage-trace trains on a --scenario's windows, not with --trace or --fill")
    check_backend_arguments(args)
    backend = None
    workers = 1
    if args.backend == "ray":
        if args.algo != "ppo":
            raise UserError("--backend ray trains PPO only; DQN trains in one process (drop --backend ray)")
        workers = args.workers or DEFAULT_RAY_WORKERS
        if workers > args.envs:
            raise UserError(f"--workers {workers} is more than --envs {args.envs}: each worker needs an env")
        backend = load_ray_backend()  # a missing Ray is one clear error, before any work
    make_output_dir(out)
    # torch is imported only now: `drlsched --help` and the baselines stay fast.
    import torch
    from tqdm import tqdm

    from drlsched.rl.checkpoint import load_policy, save_policy
    from drlsched.rl.env import EnvConfig
    from drlsched.rl.network import NetConfig, SchedulerNet

    torch.set_num_threads(1)
    stack = contextlib.ExitStack()
    sim = SimConfig(reclaim=reclaim_config(args), nic_gbps=args.nic_gbps,
                    rack_oversubscription=args.rack_oversubscription)
    if args.fill:
        env_cfg, workload_name, trained_nodes = _fill_config(args, weights)
    elif args.trace:
        from drlsched.rl.trace_windows import trace_windows

        if args.cache is None:  # every episode loads a window: parse the trace once, into a store for this run
            args.cache = stack.enter_context(tempfile.TemporaryDirectory(prefix="drlsched-train-"))
        windows = trace_windows(trace_selection(args), window_s=args.duration, span_s=args.span)  # type: ignore[arg-type]
        workload_name = f"{args.trace_format}:{Path(args.trace).name}"
        env_cfg = EnvConfig(scenario=workload_name, nodes=None, duration_s=args.duration, reward=weights,
                            workload_fn=windows, sim=sim)
        trained_nodes = windows.nodes  # the trace's cluster, after --nodes scaling (env_cfg.nodes is None)
    else:
        workload_name = args.scenario or "batch"
        # With real usage series every episode's workload carries them (a picklable source, for Ray's workers too).
        source = WorkloadSource(scenario=workload_name, nodes=args.nodes or 10, duration=args.duration,
                                load=args.load, **usage) if usage else None
        env_cfg = EnvConfig(scenario=workload_name, nodes=args.nodes or 10, duration_s=args.duration,
                            load=args.load, reward=weights, workload_fn=source, sim=sim)
        trained_nodes = env_cfg.nodes
    steps = args.steps or (10**9 if args.minutes else 100_000)
    done_before = 0
    net_cfg = NetConfig(encoder=args.encoder)
    net = None
    if args.resume:
        if not (out / "policy.pt").is_file():
            raise UserError(f"--resume: {out / 'policy.pt'} does not exist")
        net, header = load_policy(out / "policy.pt", algo=args.algo)
        net.train()
        net_cfg = net.cfg
        done_before = int(header["meta"].get("steps", 0))
    # torch seeds its generator at random on start: without this the initial weights differ from run to run.
    torch.manual_seed(args.seed)
    net = net or SchedulerNet(net_cfg)
    meta: dict[str, Any] = {"scenario": workload_name, "nodes": trained_nodes, "duration_s": args.duration,
                            "load": args.load, "reward": weights.to_dict(), "reward_name": reward_name,
                            "seed": args.seed, "envs": args.envs, "backend": args.backend}
    if backend is not None:
        meta["workers"] = workers
    if usage:  # as given, so that the held-out part can be named from it
        meta["usage"] = {"trace": args.usage_trace, "format": args.usage_format, "window": args.usage_window,
                         "series": args.usage_series}
    bar = tqdm(total=None if args.minutes and not args.steps else steps, unit="step", disable=args.quiet,
               desc=f"{args.algo} on {workload_name}", file=sys.stderr, dynamic_ncols=True)
    t0 = time.perf_counter()
    last_save = [t0]

    def checkpoint(row: dict[str, float]) -> None:
        if time.perf_counter() - last_save[0] > 60:  # a crash or Ctrl-C loses at most a minute
            save_policy(out / "policy.pt", net, args.algo, {**meta, "steps": done_before + int(row["step"])})
            last_save[0] = time.perf_counter()

    try:
        if args.algo == "ppo":
            from drlsched.rl.ppo import PPOSettings, settings_dict, train_ppo

            settings = PPOSettings(total_steps=steps, minutes=args.minutes, num_envs=args.envs, seed=args.seed,
                                   bc_steps=args.bc_steps, bc_expert=args.bc_expert,
                                   shared_workload=args.shared_workload,
                                   gamma=args.gamma, lr=args.lr)
            if backend is None:
                net, rows = train_ppo(settings, env_cfg, net_cfg, net=net, on_update=checkpoint, progress=bar)
            else:
                with backend.session(args.address, num_cpus=workers):
                    net, rows = train_ppo(settings, env_cfg, net_cfg, net=net, on_update=checkpoint, progress=bar,
                                          rollouts=backend.rollouts_factory(workers))
        else:
            from drlsched.rl.dqn import DQNSettings, settings_dict, train_dqn  # type: ignore[assignment]

            settings = DQNSettings(total_steps=steps, minutes=args.minutes, num_envs=args.envs, seed=args.seed,
                                   gamma=args.gamma, lr=args.lr)
            net, rows = train_dqn(settings, env_cfg, net_cfg, net=net, on_log=checkpoint, progress=bar)
    finally:
        bar.close()
        stack.close()
    wall = time.perf_counter() - t0
    trained = int(rows[-1]["step"]) if rows else 0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    meta.update({"steps": done_before + trained, "settings": settings_dict(settings), "wall_s": wall,
                 "peak_rss_mib": round(peak_mib)})
    digest = save_policy(out / "policy.pt", net, args.algo, meta)
    write_curve(out, rows)
    summary = {"policy": str(out / "policy.pt"), "sha256": digest, "algo": args.algo, "steps": done_before + trained,
               "wall_s": round(wall, 2), "peak_rss_mib": round(peak_mib), "updates": len(rows),
               "final": rows[-1] if rows else {}}
    (out / "train.json").write_text(json.dumps({**summary, "meta": meta}, indent=2, default=str) + "\n")
    print(f"trained {args.algo} for {trained} steps in {wall:.0f} s; wrote {out / 'policy.pt'} "
          f"(sha256 {digest[:12]}), {out / 'curve.csv'}, {out / 'curve.png'}")
    if args.trace:
        held_out = "" if args.span is None else f" --start {args.start + args.span:.0f}"
        same = f" --nodes {args.nodes}" if args.nodes else ""
        if args.arrival_speedup != 1.0:
            same += f" --arrival-speedup {args.arrival_speedup:g}"
        where = f"--trace {args.trace} --trace-format {args.trace_format}{same}{held_out}"
    else:
        where = f"--scenario {args.scenario or workload_name}"
        if usage:
            where += f" --usage-trace {args.usage_trace} (and the held-out --usage-window/--usage-series)"
    command = "fill" if args.fill else "evaluate"
    print(f"use it with: drlsched {command} {where} --policies k8s-default,{args.algo}:{out / 'policy.pt'} --out DIR")
    return 0


def write_curve_csv(out: Path, rows: list[dict[str, float]]) -> None:
    """DIR/curve.csv: one row per update, the union of the rows' keys as columns (a missing value left empty)."""
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    with open(out / "curve.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def write_curve(out: Path, rows: list[dict[str, float]]) -> None:
    """The learning curve as CSV (one row per update) and a PNG of reward and CPU utilisation against steps."""
    write_curve_csv(out, rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in rows if "reward_per_step" in r]
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    util = [r for r in pts if not math.isnan(r.get("cpu_util", math.nan))]
    for a, sel, key in ((ax[0], pts, "reward_per_step"), (ax[1], util, "cpu_util")):
        x, y = [r["step"] for r in sel], [r[key] for r in sel]
        a.plot(x, y, color="tab:blue", alpha=0.35, linewidth=0.8)
        k = max(1, len(y) // 25)  # moving average: episodes and workloads make single updates noisy
        smooth = [sum(y[max(0, i - k + 1):i + 1]) / len(y[max(0, i - k + 1):i + 1]) for i in range(len(y))]
        a.plot(x, smooth, color="tab:blue", linewidth=2, label=f"mean of {k}")
        a.legend(loc="lower right", fontsize=8)
    ax[0].set(xlabel="env steps", ylabel="mean reward per step", title="reward")
    ax[1].set(xlabel="env steps", ylabel="CPU utilisation (finished episodes)", title="utilisation")
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=90)
    plt.close(fig)
