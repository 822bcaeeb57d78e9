"""`drlsched simulate --scaler ...`: one service under a replica scaler (and a node autoscaler) on the `flash-sale`
load or a `--load-trace`, run by `driver.Driver`; prints its metrics (docs/autoscaling.md "Services")."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from drlsched.autoscale.cli import add_load_arguments, load_curve
from drlsched.autoscale.cluster_autoscaler import DEFAULT_NODE_PROVISION_S
from drlsched.autoscale.driver import LEARNED_PREFIX, NODE_AUTOSCALERS, SCALERS, Driver, DriverConfig
from drlsched.autoscale.flash_sale import flash_sale
from drlsched.autoscale.load import LoadCurve
from drlsched.autoscale.services import ServiceSpec
from drlsched.errors import UserError

FLASH_SALE = "flash-sale"
DEFAULT_NODES = 100


def add_scaler_arguments(p: argparse.ArgumentParser, many: bool = False) -> None:
    """The service-autoscaling options of `simulate` (`--scaler`) or `evaluate` (`--scalers`); `--scenario` also
    accepts flash-sale."""
    for action in p._actions:
        if action.dest == "scenario" and action.choices is not None:
            action.choices = sorted([*action.choices, FLASH_SALE])
    g = p.add_argument_group("service autoscaling (with --scaler; docs/autoscaling.md)")
    if many:
        g.add_argument("--scalers", metavar="A,B",
                       help=f"compare replica scalers ({', '.join(SCALERS)}; NAME:key=value:... overrides target, "
                            "fraction or lead, e.g. hpa:target=60) on the flash-sale scenario or --load-trace")
    else:
        g.add_argument("--scaler", metavar="NAME",
                       help=f"scale one service's replicas: {', '.join(SCALERS)} or ppo:PATH (the flash-sale "
                            "scenario or --load-trace)")
    g.add_argument("--node-autoscaler", default="none", metavar="NAME",
                   help=f"{', '.join(NODE_AUTOSCALERS)} (default none: a fixed cluster of --nodes)")
    g.add_argument("--node-provision-s", type=float, default=DEFAULT_NODE_PROVISION_S, metavar="S",
                   help=f"seconds from a node's request to its readiness (default {DEFAULT_NODE_PROVISION_S:g})")
    g.add_argument("--min-replicas", type=int, default=1, metavar="N", help="default 1")
    g.add_argument("--max-replicas", type=int, metavar="N",
                   help="default: what --nodes hold (replicas per node x nodes)")
    g.add_argument("--target", type=int, default=80, metavar="PERCENT",
                   help="the HPA's CPU utilisation target, %% of request (default 80)")
    g.add_argument("--overprovision", type=float, default=0.1, metavar="FRACTION",
                   help="overprovision: placeholder pods as a fraction of the replicas (default 0.1)")
    g.add_argument("--lead", type=float, default=180.0, metavar="SECONDS",
                   help="predictive: forecast this far ahead (default 180)")
    add_load_arguments(p)


def wants_scaler(args: argparse.Namespace) -> bool:
    return (bool(getattr(args, "scaler", None)) or bool(getattr(args, "scalers", None))
            or getattr(args, "scenario", None) == FLASH_SALE)


def check_scaled_arguments(args: argparse.Namespace) -> None:
    """The workload half of `--scaler` runs (simulate and evaluate): bad combinations fail before any run."""
    if args.scenario not in (None, FLASH_SALE):
        raise UserError(f"scalers run the flash-sale scenario or a --load-trace, not --scenario {args.scenario}")
    if args.scenario and args.load_trace:
        raise UserError("give --scenario flash-sale or --load-trace, not both")
    if not args.scenario and not args.load_trace:
        raise UserError("a scaler needs --scenario flash-sale or --load-trace FILE")
    if not (math.isfinite(args.node_provision_s) and args.node_provision_s >= 0):
        raise UserError(f"--node-provision-s must be a non-negative number of seconds, got {args.node_provision_s}")


def scaled_inputs(args: argparse.Namespace, scaler: str, seed: int) -> tuple[ServiceSpec, LoadCurve, DriverConfig]:
    """The service, its load (the flash-sale of `seed` or the --load-trace) and the driver's settings the options
    describe, validated."""
    nodes = args.nodes or DEFAULT_NODES
    config = DriverConfig(scaler=scaler, target_utilization=args.target, overprovision_fraction=args.overprovision,
                          lead_s=args.lead, node_autoscaler=args.node_autoscaler,
                          node_provision_s=args.node_provision_s, nodes=nodes,
                          policy=args.policy or "k8s-default")
    base = ServiceSpec()
    per_node = min(config.template.cpu_m // base.request_m, config.template.mem_mib // base.mem_mib)
    max_replicas = args.max_replicas if args.max_replicas is not None else per_node * nodes
    spec = ServiceSpec(min_replicas=args.min_replicas, max_replicas=max_replicas)
    spec.validate()
    config.validate()
    # Default peak: the rate half of the cluster's replica slots serve at the HPA's default target (80%).
    peak = 0.5 * per_node * nodes * 0.8 * base.request_m / base.cpu_per_rps_m
    days = max(1, math.ceil((args.duration or 86_400.0) / 86_400.0))
    pattern = flash_sale(seed, days, 15.0, peak) if args.scenario == FLASH_SALE else None
    curve = load_curve(args, pattern)
    if args.load_trace and not args.load_peak:
        curve = curve.scaled(peak)
    if args.duration:
        curve = curve.window(0.0, args.duration)
    return spec, curve, config


def cmd_scaled(args: argparse.Namespace) -> int:
    if not args.scaler:
        raise UserError("the flash-sale scenario scales a service: give --scaler " + "|".join(SCALERS))
    if args.scaler not in SCALERS and not args.scaler.startswith(LEARNED_PREFIX):
        raise UserError(f"unknown scaler {args.scaler!r}; choose one of {', '.join(SCALERS)} or {LEARNED_PREFIX}PATH "
                        "(a policy of `drlsched train-scaler`)")
    check_scaled_arguments(args)
    spec, curve, config = scaled_inputs(args, args.scaler, args.seed)
    nodes = config.nodes
    result = Driver(spec, curve, config, args.seed).run()
    metrics = {"scenario": args.scenario or args.load_trace, **result.metrics, "nodes": nodes}
    if args.json == "-":
        json.dump(metrics, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"{args.scaler} on {metrics['scenario']} (seed {args.seed}, {nodes} nodes, node autoscaler "
          f"{args.node_autoscaler})")
    for key, value in metrics.items():
        print(f"  {key:24s} {value:.4g}" if isinstance(value, float) else f"  {key:24s} {value}")
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(metrics, indent=2) + "\n")
        except OSError as err:
            raise UserError(f"cannot write {args.json}: {err.strerror}") from None
        print(f"metrics written to {args.json}")
    return 0
