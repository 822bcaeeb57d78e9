"""`drlsched train-packer`: train the learned GPU packer on the fill experiment; writes DIR/policy.pt,
DIR/curve.csv and DIR/train.json (docs/learning.md, "Learned GPU packer")."""

from __future__ import annotations

import argparse
import csv
import json
import resource
import time
from typing import Any

from drlsched.cli_args import make_output_dir, non_negative_int, positive_float, positive_int
from drlsched.cli_common import workload_source
from drlsched.errors import UserError
from drlsched.scenarios import SCENARIOS
from drlsched.traces import add_trace_arguments

EXPERTS = ("fgd-lookahead", "fgd")  # the experts packer_train imitates


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("train-packer", help="train the learned GPU packer (imitation of FGD, then PPO on the fill)",
                       description="Imitate an FGD expert on fills of the population, then fine-tune with PPO on "
                                   "the fill objective (GPUs of pods that fail); training seeds 1000+ and 2000+, "
                                   "so `drlsched fill`'s seeds 0.. are other orders. Writes DIR/policy.pt (use it "
                                   "as --policy packer:DIR/policy.pt), DIR/curve.csv and DIR/train.json.")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), metavar="NAME",
                   help="synthetic scenario whose pods are the population (e.g. ml-gpu), instead of --trace")
    add_trace_arguments(p)
    p.add_argument("--nodes", type=positive_int, help="cluster size (default: the scenario's or the trace's)")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS",
                   help="arrival window that generates (scenario) or selects (trace) the population")
    p.add_argument("--expert", choices=EXPERTS, default="fgd-lookahead", help="imitated policy (default "
                                                                              "fgd-lookahead)")
    p.add_argument("--imitation-fills", type=non_negative_int, default=2, metavar="N",
                   help="fills placed by the expert to imitate (default 2)")
    p.add_argument("--imitation-epochs", type=positive_int, default=6, metavar="N", help="default 6")
    p.add_argument("--rl-minutes", type=float, default=5.0, metavar="M",
                   help="PPO fine-tuning budget in minutes (default 5; 0 = imitation only)")
    p.add_argument("--rl-updates", type=positive_int, metavar="N", help="at most N PPO updates")
    p.add_argument("--episodes", type=positive_int, default=2, metavar="K",
                   help="fills per PPO update, same submission order (paired baseline; default 2)")
    p.add_argument("--rl-lr", type=positive_float, default=1e-4, help="PPO learning rate (default 1e-4)")
    p.add_argument("--max-demand", type=positive_float, default=1.3, metavar="D",
                   help="a training fill ends when the GPUs requested reach D x the cluster's (default 1.3)")
    p.add_argument("--candidates", type=positive_int, default=16, metavar="K",
                   help="FGD's K best nodes are rescored per decision (default 16, fgd-lookahead's)")
    p.add_argument("--hidden", type=positive_int, default=64, help="network width (default 64)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.set_defaults(func=cmd_train_packer, load=1.0, usage_trace=None, usage_format=None, usage_window=None,
                   usage_series=None)


def cmd_train_packer(args: argparse.Namespace) -> int:
    if not args.trace and not args.scenario:
        raise UserError("give --trace DIR --trace-format alibaba-gpu-v2023 (an openb pod list) or --scenario NAME "
                        "(a synthetic population, e.g. ml-gpu)")
    if args.rl_minutes < 0:
        raise UserError(f"--rl-minutes must be 0 or more, got {args.rl_minutes}")
    if args.candidates < 2:
        raise UserError("--candidates must be at least 2 (one candidate leaves nothing to choose)")
    from drlsched.fill import check_inputs

    workload = workload_source(args)(args.seed)
    workload.validate_nodes()
    pods = list(workload.iter_pods())
    check_inputs(workload.nodes, pods, args.max_demand)
    out = make_output_dir(args.out)

    import numpy as np
    import torch

    from drlsched.cluster import Cluster
    from drlsched.rl.packer_checkpoint import save_packer
    from drlsched.rl.packer_net import PackerNet, PackerSpec
    from drlsched.rl.packer_policy import PackerPolicy
    from drlsched.rl.packer_train import (
        IMITATION_SEED,
        PackerTrainSettings,
        concat,
        fine_tune,
        imitate,
        imitation_fill,
    )

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    cluster = Cluster(workload.nodes)
    spec = PackerSpec(slots=max(int(cluster.gpu_exists.shape[1]), 1), models=tuple(cluster.gpu_models),
                      candidates=args.candidates, hidden=args.hidden)
    net = PackerNet(spec)
    net.eval()
    packer = PackerPolicy(net)
    s = PackerTrainSettings(expert=args.expert, imitation_fills=args.imitation_fills,
                            imitation_epochs=args.imitation_epochs, rl_minutes=args.rl_minutes,
                            rl_updates=args.rl_updates, episodes=args.episodes, rl_lr=args.rl_lr,
                            max_demand=args.max_demand, seed=args.seed)
    rows: list[dict[str, float]] = []
    t0 = time.perf_counter()

    def log(row: dict[str, float]) -> None:
        rows.append(row)
        print(json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)

    from drlsched.fill import values_at

    batches, expert_at100 = [], []
    for i in range(s.imitation_fills):
        batch, curve = imitation_fill(workload.nodes, pods, IMITATION_SEED + 1000 * args.seed + i, s.max_demand,
                                      packer, s.expert)
        batches.append(batch)
        expert_at100.append(values_at(curve, 1.0)["gpu_unallocated"])
    imitation_s = time.perf_counter() - t0
    accuracy = None
    if batches:
        data = concat(batches)
        accuracy = imitate(net, data, s, rng, log)
        net.eval()
    t1 = time.perf_counter()
    steps = fine_tune(net, packer, workload.nodes, pods, s, rng, log) if s.rl_minutes > 0 else 0
    wall = time.perf_counter() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    meta: dict[str, Any] = {"workload": workload.name, "nodes": len(workload.nodes), "pods": len(pods),
                            "settings": s.to_dict(), "imitation_decisions": int(sum(b.mask.shape[0] for b in batches)),
                            "imitation_accuracy": accuracy, "expert_gpu_unallocated_at_100": expert_at100,
                            "rl_decisions": steps, "wall_s": round(wall, 1), "peak_rss_mib": round(peak_mib)}
    digest = save_packer(out / "policy.pt", net, meta)
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    try:
        with open(out / "curve.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys or ["phase"])
            w.writeheader()
            w.writerows(rows)
        summary = {"policy": str(out / "policy.pt"), "sha256": digest, "wall_s": round(wall, 1),
                   "imitation_s": round(imitation_s, 1), "imitation_train_s": round(t1 - t0 - imitation_s, 1),
                   "rl_s": round(wall - (t1 - t0), 1), "peak_rss_mib": round(peak_mib), "meta": meta}
        (out / "train.json").write_text(json.dumps(summary, indent=2) + "\n")
    except OSError as err:
        raise UserError(f"cannot write to {out}: {err.strerror}") from None
    print(f"trained the packer in {wall:.0f} s (imitation accuracy {accuracy}, {steps} PPO decisions); wrote "
          f"{out / 'policy.pt'} (sha256 {digest[:12]}), curve.csv, train.json\n"
          f"use it with: drlsched fill ... --policies fgd,packer:{out / 'policy.pt'} --out DIR")
    return 0
