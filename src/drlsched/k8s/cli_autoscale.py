"""`drlsched autoscale`: the predictive replica controller for one workload (drlsched.k8s.autoscale_controller)."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from drlsched.cli_args import positive_float
from drlsched.errors import UserError
from drlsched.k8s.controller import add_controller_arguments, controller_options

SCALERS = ("predictive",)


def parse_scaler(text: str) -> str | None:
    """`predictive` (None) or `ppo:PATH` (the path of a `drlsched train-scaler` policy, checked here: a missing,
    damaged or placement-policy file is a UserError, one line, exit 2)."""
    if text in SCALERS:
        return None
    if text.startswith("ppo:"):
        from drlsched.autoscale.learned import load_scaler

        load_scaler(text[len("ppo:"):])
        return text[len("ppo:"):]
    raise UserError(f"unknown --scaler {text!r}; choose predictive or ppo:PATH (a policy of drlsched train-scaler)")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("autoscale", help="run the predictive replica controller for one Deployment (scales ahead "
                                         "of forecast load; raises an HPA's minReplicas where one exists)")
    p.add_argument("--kubeconfig", type=Path, help="kubeconfig of the cluster (default: in-cluster)")
    p.add_argument("--scaler", required=True,
                   help="predictive (Holt-Winters) or ppo:PATH (a policy of drlsched train-scaler)")
    p.add_argument("--target", required=True, metavar="NAMESPACE/DEPLOYMENT",
                   help="the workload to scale (NAMESPACE/KIND/NAME for a StatefulSet or ReplicaSet)")
    p.add_argument("--min-replicas", type=int, default=1, help="fewest replicas (default 1; never 0)")
    p.add_argument("--max-replicas", type=int, required=True, help="most replicas")
    p.add_argument("--target-utilization", type=int, metavar="PERCENT",
                   help="CPU utilisation target, %% of request (default: the HPA's, else 80)")
    p.add_argument("--period", type=positive_float, default=15.0, metavar="S",
                   help="seconds between passes (default 15, the HPA's sync period)")
    p.add_argument("--stale-after", type=positive_float, default=60.0, metavar="S",
                   help="a pod metric older than this is stale; none fresh holds the count (default 60)")
    p.add_argument("--downscale-stabilization", type=float, default=300.0, metavar="S",
                   help="the floor (and the reactive count) is the highest of this window (default 300, the HPA's)")
    f = p.add_argument_group("forecast (Holt-Winters over the pods' CPU demand; the simulator's predictive scaler)")
    f.add_argument("--season", type=positive_float, default=86_400.0, metavar="S", help="season (default 1 day)")
    f.add_argument("--step", type=positive_float, default=60.0, metavar="S", help="bucket (default 60 s)")
    f.add_argument("--lead", type=float, default=180.0, metavar="S",
                   help="how far ahead the replicas must be ready (default 180 s)")
    f.add_argument("--alpha", type=float, default=0.5)
    f.add_argument("--beta", type=float, default=0.01)
    f.add_argument("--gamma", type=float, default=0.3)
    p.add_argument("--once", action="store_true", help="one pass, print its outcome as JSON, exit")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add_controller_arguments(p, lease_name="drlsched-autoscale")
    p.set_defaults(func=_autoscale)


def _autoscale(args: argparse.Namespace) -> int:
    from drlsched.k8s.autoscale_controller import COMPONENT, AutoscaleConfig, AutoscaleController, describe_pass
    from drlsched.k8s.autoscale_target import parse_target
    from drlsched.k8s.cli import STOP_GRACE_S, _logging, _stop_on_signals
    from drlsched.k8s.client import api_client
    from drlsched.k8s.controller import Manager

    _logging(args.log_level)
    learned = parse_scaler(args.scaler)
    target = parse_target(args.target)
    if args.min_replicas < 1:
        raise UserError(f"--min-replicas must be at least 1 (the controller never scales to zero), "
                        f"not {args.min_replicas}")
    if args.min_replicas > args.max_replicas:
        raise UserError(f"--min-replicas {args.min_replicas} is above --max-replicas {args.max_replicas}")
    if args.target_utilization is not None and args.target_utilization < 1:
        raise UserError(f"--target-utilization must be a positive percentage, not {args.target_utilization}")
    if not 0 <= args.downscale_stabilization < float("inf"):
        raise UserError(f"--downscale-stabilization must be >= 0 seconds, not {args.downscale_stabilization}")
    cfg = AutoscaleConfig(args.min_replicas, args.max_replicas, args.target_utilization, args.period,
                          args.stale_after, args.downscale_stabilization, args.step, args.season, args.lead,
                          args.alpha, args.beta, args.gamma, learned)
    from drlsched.autoscale.predictive import PredictiveConfig

    PredictiveConfig(1000, 1.0, cfg.max_replicas, cfg.min_replicas, cfg.target_utilization or 80, cfg.step_s,
                     cfg.season_s, cfg.lead_s, cfg.alpha, cfg.beta, cfg.gamma).validate()
    options = controller_options(args)
    api = api_client(args.kubeconfig, retry_connections=False)
    manager = Manager(COMPONENT, api, options)
    stop = threading.Event()
    controller = AutoscaleController(api, target, cfg, stop=stop)
    controller.events.instance = manager.identity
    controller.register(manager.registry)
    manager.add("reconcile", args.period, controller.reconcile, leader_only=False)
    if args.once:
        manager.run_once()
        controller.events.drain(timeout_s=STOP_GRACE_S)
        if controller.refused is None:
            print(describe_pass(controller.last))
    else:
        _stop_on_signals(stop)
        manager.run(stop)
        controller.events.drain(timeout_s=STOP_GRACE_S)
    if controller.refused is not None:
        raise UserError(controller.refused)
    return 0
