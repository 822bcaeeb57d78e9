"""`drlsched train-jobs`: train the learned job policy on a job workload (imitation of the best tuned heuristic,
then PPO); writes DIR/policy.pt, DIR/curve.csv, DIR/curve.png and DIR/train.json (docs/learning.md "Learned job
policy"). DIR/last.pt holds the final weights (policy.pt: the best on validation)."""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from pathlib import Path
from typing import Any

from drlsched.cli_args import make_output_dir, non_negative_int, positive_float, positive_int
from drlsched.errors import UserError
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.workload import DEFAULT_DURATION_S, DEFAULT_NODES, JobSource, check_source
from drlsched.rl.job_guard import training_range

DEFAULT_PRESET = "jct"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from drlsched.rl.job_train import EXPERT, JobTrainSettings

    d = JobTrainSettings()
    p = sub.add_parser("train-jobs", help="train the learned job policy (imitation of weighted-fair, then PPO)",
                       description="Imitate the best tuned job heuristic, then PPO on −(jobs in system × time) "
                                   "with a differential reward and a per-time baseline over rollouts on the same "
                                   "job sequence. Training seeds 1000+, validation (best checkpoint) 900+, so "
                                   "seeds 0-899 stay held out. Writes DIR/policy.pt (use it as --job-policy "
                                   "ppo:DIR/policy.pt), DIR/curve.csv, DIR/curve.png and DIR/train.json.")
    p.add_argument("--algo", choices=("ppo", "dqn"), default="ppo",
                   help="ppo (default: imitation, then PPO) or dqn (masked double DQN on the same network, from "
                        "scratch: no imitation; served as --job-policy dqn:DIR/policy.pt)")
    p.add_argument("--scenario", choices=("tpch",), default="tpch", help="job workload (default tpch)")
    p.add_argument("--trace", metavar="DIR", help="a spark-profiles directory instead of the embedded tpch set")
    p.add_argument("--nodes", type=positive_int, default=DEFAULT_NODES, help=f"default {DEFAULT_NODES}")
    p.add_argument("--load", type=positive_float, default=0.85, help="offered load (default 0.85)")
    p.add_argument("--duration", type=positive_float, default=DEFAULT_DURATION_S, metavar="SECONDS",
                   help=f"arrival window of a training episode (default {DEFAULT_DURATION_S:g})")
    p.add_argument("--expert", default=EXPERT, metavar="POLICY",
                   help=f"job policy to imitate first (default {EXPERT}, the best tuned at load 0.85)")
    p.add_argument("--imitation-episodes", type=non_negative_int, default=d.imitation_episodes, metavar="N",
                   help=f"expert episodes to imitate (default {d.imitation_episodes}; 0 = none)")
    p.add_argument("--imitation-epochs", type=positive_int, default=d.imitation_epochs, metavar="N")
    p.add_argument("--minutes", type=float, default=d.minutes, metavar="M",
                   help=f"PPO budget in minutes (default {d.minutes:g}; 0 = imitation only)")
    p.add_argument("--updates", type=positive_int, metavar="N", help="at most N PPO updates (dqn: training episodes)")
    p.add_argument("--rollouts", type=positive_int, default=d.rollouts, metavar="K",
                   help=f"episodes per update on the same job sequence (default {d.rollouts})")
    p.add_argument("--lr", type=positive_float, default=d.lr, help=f"learning rate (default {d.lr:g})")
    p.add_argument("--validation-seeds", type=positive_int, default=d.validation_seeds, metavar="N",
                   help=f"validation seeds 900.. for the best checkpoint (default {d.validation_seeds})")
    p.add_argument("--reward-preset", default=DEFAULT_PRESET, metavar="NAME",
                   help=f"reward weights (drlsched.rl.reward.PRESETS; default {DEFAULT_PRESET}: −jobs in system)")
    p.add_argument("--load-policy", metavar="PATH", help="start from this job policy checkpoint (no imitation)")
    p.add_argument("--hidden", type=positive_int, default=32, help="network width (default 32)")
    p.add_argument("--rounds", type=positive_int, default=4, help="message-passing rounds (default 4)")
    p.add_argument("--history", choices=("none", "lstm"), default=None,
                   help="history input to the global summary (rl.job_history): lstm over the last arrivals' "
                        "load, job size, utilisation and jobs in the system; default none (with --load-policy: "
                        "the checkpoint's; lstm on a checkpoint without history adds the branch with its output "
                        "at zero, so training starts from the same policy)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.set_defaults(func=cmd_train_jobs)


def cmd_train_jobs(args: argparse.Namespace) -> int:
    from drlsched.rl.reward import PRESETS

    if args.minutes < 0:
        raise UserError(f"--minutes must be 0 or more, got {args.minutes}")
    weights = PRESETS.get(args.reward_preset)
    if weights is None:
        raise UserError(f"unknown --reward-preset {args.reward_preset!r}; known: {', '.join(PRESETS)}")
    if weights.jct <= 0:
        raise UserError(f"--reward-preset {args.reward_preset} has no JCT term (jct weight 0): a job policy's reward "
                        f"is −jobs in the system; use {DEFAULT_PRESET}")
    make_job_policy(args.expert)
    source = JobSource(profiles=args.trace, nodes=args.nodes, duration_s=args.duration, load=args.load)
    check_source(source)
    out = make_output_dir(args.out)

    import torch

    from drlsched.rl.job_net import JobNet, JobNetSpec
    from drlsched.rl.job_policy import load_job_net, save_job_policy
    from drlsched.rl.job_train import JobTrainSettings, imitate, train

    if args.algo == "dqn" and args.history == "lstm":
        raise UserError("--history lstm is for --algo ppo only (the DQN's replay buffer keeps no history window)")
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    if args.load_policy:
        net, header = load_job_net(args.load_policy, args.algo)
        imitation_episodes = 0
        if args.history is not None and args.history != net.spec.history:
            if net.spec.history != "none":
                raise UserError(f"--history {args.history}: {args.load_policy} has history {net.spec.history}; "
                                "its branch cannot be dropped (train without --load-policy)")
            grown = JobNet(JobNetSpec(net.spec.hidden, net.spec.rounds, args.history))
            missing = grown.load_state_dict(net.state_dict(), strict=False).missing_keys
            assert all(k.startswith("history") for k in missing), missing  # only the new branch starts fresh
            net = grown
    else:
        net, header = JobNet(JobNetSpec(args.hidden, args.rounds, args.history or "none")), None
        imitation_episodes = args.imitation_episodes if args.algo == "ppo" else 0  # dqn: from scratch
    s = JobTrainSettings(expert=args.expert, imitation_episodes=imitation_episodes,
                         imitation_epochs=args.imitation_epochs, minutes=args.minutes, updates=args.updates,
                         rollouts=args.rollouts, lr=args.lr, validation_seeds=args.validation_seeds, seed=args.seed)
    rows: list[dict[str, float]] = []
    t0 = time.perf_counter()

    bar = TrainBar(s.updates, s.minutes)

    def log(row: dict[str, float]) -> None:
        rows.append(row)
        print(json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
        bar.show(row)

    imitation: dict[str, float] = {}
    if s.imitation_episodes:
        imitation = imitate(net, source, s, log)
    imitation_s = time.perf_counter() - t0
    bounds = training_range(source, s.seed)
    meta: dict[str, Any] = {"workload": source.name, "nodes": source.nodes, "load": source.load,
                            "duration_s": source.duration_s, "algo": args.algo, "reward_preset": args.reward_preset,
                            "reward": weights.to_dict(), "settings": s.to_dict(), "imitation": imitation,
                            "started_from": args.load_policy, "history": net.spec.history,
                            "parent_meta": header["meta"] if header else None,
                            "guard_range": None if bounds is None else bounds.to_dict()}
    best: dict[str, float] = {}

    def on_best(model: JobNet, jct: float, update: int) -> None:  # the checkpoint is the best on validation
        best.update(validation_jct_mean_s=jct, update=update)
        save_job_policy(out / "policy.pt", model, {**meta, "best": dict(best)}, args.algo)

    if args.algo == "dqn" and (s.minutes > 0 or s.updates):
        from drlsched.rl.job_dqn import JobDQNSettings, train_dqn

        d = JobDQNSettings(minutes=s.minutes, episodes=s.updates, lr=args.lr, validation_seeds=s.validation_seeds,
                           seed=s.seed)
        meta["settings"] = {**s.to_dict(), "dqn": d.to_dict()}
        counters = train_dqn(net, source, d, weights, log, on_best)
    elif s.minutes > 0 or s.updates:
        counters = train(net, source, s, weights, log, on_best)
    else:
        from drlsched.rl.job_train import validate

        counters = {"updates": 0.0}
        on_best(net, validate(net, source, s), 0)
    # The last weights too: the best-on-validation checkpoint may be the start itself (a short fine-tune whose
    # updates never beat it on the 3 validation seeds), and comparing recipes then needs where training went.
    save_job_policy(out / "last.pt", net, {**meta, "best": dict(best), "last_update": counters.get("updates", 0.0)})
    bar.close()
    wall = time.perf_counter() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = {"policy": str(out / "policy.pt"), "wall_s": round(wall, 1), "imitation_s": round(imitation_s, 1),
               "peak_rss_mib": round(peak_mib), "best": best, "counters": counters, "meta": meta}
    try:
        write_job_curve(out, rows)
        (out / "train.json").write_text(json.dumps(summary, indent=2) + "\n")
    except OSError as err:
        raise UserError(f"cannot write to {out}: {err.strerror}") from None
    print(f"trained the job policy in {wall:.0f} s (best validation mean JCT {best['validation_jct_mean_s']:.1f} s "
          f"at update {best['update']:g}); wrote {out / 'policy.pt'}, last.pt (the final weights), curve.csv, "
          f"curve.png, train.json\n"
          f"use it with: drlsched evaluate --scenario tpch --job-policies "
          f"fifo,{s.expert},{args.algo}:{out / 'policy.pt'} --seeds 10 --out DIR")
    return 0


class TrainBar:
    """A bar on stderr over the PPO budget (updates, else minutes) that shows the objective as it improves: the
    best validation mean JCT so far and the last rollouts' mean JCT (imitation: its epoch and loss)."""

    def __init__(self, updates: int | None, minutes: float) -> None:
        from tqdm import tqdm

        self.by_update = bool(updates)
        total = updates if updates else max(1, round(60 * minutes))
        self.bar = tqdm(total=total, desc="train-jobs", unit="update" if self.by_update else "s", file=sys.stderr,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}{postfix}")
        self.best: float | None = None

    def show(self, row: dict[str, float]) -> None:
        if row.get("phase") == 0.0:
            self.bar.set_postfix_str(f"imitation epoch {row['epoch'] + 1:.0f} loss {row['imitation_loss']:.3f}")
            return
        v = row.get("validation_jct_mean_s")
        if v is not None and math.isfinite(v) and (self.best is None or v < self.best):
            self.best = v
        parts = [] if self.best is None else [f"best validation JCT {self.best:.0f} s"]
        if "train_jct_mean_s" in row:
            parts.append(f"rollouts {row['train_jct_mean_s']:.0f} s")
        self.bar.set_postfix_str(", ".join(parts))
        done = row.get("update", 0.0) if self.by_update else row.get("wall_s", 0.0)
        if done > self.bar.n:
            self.bar.update(min(done, self.bar.total) - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def write_job_curve(out: Path, rows: list[dict[str, float]]) -> None:
    """curve.csv (every row) and curve.png: training and validation mean JCT against PPO updates."""
    from drlsched.rl.cli import write_curve_csv

    write_curve_csv(out, rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, label in (("train_jct_mean_s", "training episodes (sampled)"),
                       ("validation_jct_mean_s", "validation seeds (greedy)")):
        pts = [(r["update"], r[key]) for r in rows if key in r]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="." if key.startswith("v") else None, label=label)
    ax.set(xlabel="PPO update", ylabel="mean JCT (s)", title="learned job policy")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=90)
    plt.close(fig)
