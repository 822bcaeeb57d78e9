"""`drlsched train-scaler`: train the learned replica scaler (`scaler_train`) and write DIR/policy.pt,
DIR/curve.csv, DIR/curve.png and DIR/train.json; use it as `--scaler ppo:DIR/policy.pt` (docs/autoscaling.md
"The learned scaler")."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from drlsched.autoscale.driver import NODE_AUTOSCALERS
from drlsched.autoscale.learned import save_scaler
from drlsched.autoscale.scaler_obs import ACTIONS
from drlsched.autoscale.scaler_train import SCALER_PRESETS, ScalerTrainSettings, train_scaler
from drlsched.cli_args import make_output_dir, non_negative_int, positive_float, positive_int
from drlsched.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("train-scaler", help="train the learned replica scaler (PPO) on flash-sale days",
                       description="PPO for the learned replica scaler on flash-sale days of training seeds; "
                                   "writes DIR/policy.pt, curve.csv, curve.png and train.json.")
    d = ScalerTrainSettings()
    p.add_argument("--reward-preset", default=d.reward_preset, metavar="NAME",
                   help=f"{', '.join(SCALER_PRESETS)} (default {d.reward_preset}): the seed's α·utilisation − "
                        "β·violation − γ·churn weights")
    p.add_argument("--encoder", default=d.encoder, choices=("lstm", "none"),
                   help="lstm over the last 16 syncs (default) or none (the newest only: the ablation)")
    p.add_argument("--actions", default=d.actions, metavar="SPACE",
                   help=f"{' or '.join(ACTIONS)}: a multiplier each sync (default {d.actions}), or down, keep or up "
                        "one level, so a raise lasts until undone")
    p.add_argument("--minutes", type=positive_float, default=d.minutes, help=f"wall budget (default {d.minutes:g})")
    p.add_argument("--steps", type=positive_int, default=d.total_steps, help=f"decisions (default {d.total_steps})")
    p.add_argument("--envs", type=positive_int, default=d.num_envs, help=f"parallel episodes (default {d.num_envs})")
    p.add_argument("--nodes", type=positive_int, default=d.nodes, help=f"cluster size (default {d.nodes})")
    p.add_argument("--node-autoscaler", default=d.node_autoscaler, metavar="NAME",
                   help=f"{', '.join(NODE_AUTOSCALERS)} (default {d.node_autoscaler})")
    p.add_argument("--days", type=positive_int, default=d.days, help=f"days per episode (default {d.days})")
    p.add_argument("--window-hours", type=float, default=d.window_h, metavar="H",
                   help="episodes of H hours (1-24) of the last day, half of them around its sale, the days before "
                        "read as history (default 0: whole episodes)")
    p.add_argument("--violation-minute-weight", type=float, default=d.minute_weight, metavar="W",
                   help="also take W from the reward of a decision whose 15 s had more than 1%% of requests "
                        "violating: the shape of the violation-minutes metric (default 0: the preset alone)")
    p.add_argument("--bc-episodes", type=non_negative_int, default=d.bc_episodes,
                   help=f"imitate the tuned predictive scaler on this many episodes first (default {d.bc_episodes}; 0: "
                        "none)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the network and sampling (default 0)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.node_autoscaler not in NODE_AUTOSCALERS:
        raise UserError(f"unknown node autoscaler {args.node_autoscaler!r}; choose one of "
                        f"{', '.join(NODE_AUTOSCALERS)}")
    s = ScalerTrainSettings(reward_preset=args.reward_preset, encoder=args.encoder, actions=args.actions,
                            minutes=args.minutes, total_steps=args.steps, num_envs=args.envs, nodes=args.nodes,
                            node_autoscaler=args.node_autoscaler, days=args.days, seed=args.seed,
                            window_h=args.window_hours, bc_episodes=args.bc_episodes,
                            minute_weight=args.violation_minute_weight)
    s.validate()
    out = make_output_dir(args.out)
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=s.total_steps, desc="train-scaler", unit="step", file=sys.stderr)
    last: dict[str, float] = {}

    def log(row: dict[str, float]) -> None:
        last.update({k: v for k, v in row.items() if k.startswith("episode_")})
        if bar is not None:
            bar.update(row["step"] - bar.n)
            if "episode_sla_violation_rate" in last:
                bar.set_postfix_str(f"violation={100 * last['episode_sla_violation_rate']:.2f}% "
                                    f"replica_h={last['episode_replica_hours']:.0f} m={row['mean_multiplier']:.2f}")

    try:
        net, facts = train_scaler(s, log)
    finally:
        if bar is not None:
            bar.close()
    curve = facts.pop("curve")
    digest = save_scaler(out / "policy.pt", net, {"kind": "scaler", **facts})
    _write_curve(out, curve)
    (out / "train.json").write_text(json.dumps({**facts, "sha256": digest}, indent=2) + "\n")
    print(f"trained {facts['steps']} decisions in {facts['wall_s']:.0f} s (peak RSS {facts['peak_rss_mib']:.0f} MiB); "
          f"wrote {out / 'policy.pt'} (sha256 {digest[:12]}), curve.csv, curve.png, train.json")
    print(f"use it with: drlsched evaluate --scenario flash-sale --scalers hpa:target=60,ppo:{out / 'policy.pt'} "
          "--node-autoscaler cluster-autoscaler --out DIR")
    return 0


def _write_curve(out: Path, rows: list[dict[str, float]]) -> None:
    from drlsched.rl.cli import write_curve_csv

    write_curve_csv(out, rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(12, 3.5))
    for a, key, title in ((ax[0], "reward", "scaled reward per step"),
                          (ax[1], "episode_sla_violation_rate", "SLA violation (finished episodes)"),
                          (ax[2], "episode_replica_hours", "replica-hours (finished episodes)")):
        pts = [r for r in rows if key in r]
        a.plot([r["step"] for r in pts], [r[key] for r in pts], marker=".", linewidth=1)
        a.set(xlabel="decisions", title=title)
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=90)
    plt.close(fig)
