"""`drlsched testbed build|up|down|status`: a real local control plane (etcd, kube-apiserver, kube-
scheduler, kwok; metrics-server, kube-controller-manager and Karpenter on request)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from drlsched.cli_args import positive_float
from drlsched.testbed import build as build_mod
from drlsched.testbed import controlplane
from drlsched.testbed.nodes import profile_names


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("testbed", help="run a local Kubernetes control plane with fake (KWOK) nodes")
    actions = parser.add_subparsers(dest="testbed_command", metavar="ACTION", required=True)

    build = actions.add_parser("build", help="build the control-plane binaries into the cache (once per version)")
    build.add_argument("--force", action="store_true", help="rebuild even if the cache holds this version")
    build.add_argument("--metrics-server", action="store_true",
                       help="build metrics-server too (its own cache key; `up --metrics-server` builds it on demand)")
    build.add_argument("--controller-manager", action="store_true",
                       help="build kube-controller-manager too (its own cache key; `up --controller-manager` builds "
                            "it on demand)")
    build.add_argument("--karpenter", action="store_true",
                       help="build Karpenter with its KWOK provider too (its own cache key; `up --node-autoscaler "
                            "karpenter` builds it on demand)")
    build.set_defaults(func=_build)

    up = actions.add_parser("up", help="start the control plane and fake nodes; prints the kubeconfig path")
    up.add_argument("--nodes", type=int, default=10, help="fake nodes in all (default 10)")
    up.add_argument("--gpu-nodes", type=int, default=0, help="how many of them have GPUs (default 0)")
    up.add_argument("--node-profile", choices=profile_names(), default="uniform", metavar="PROFILE",
                    help="node shapes: uniform, openb, pai, or scenario:NAME for a scenario's own cluster "
                         "(e.g. scenario:spark-tpcds)")
    up.add_argument(
        "--scheduler",
        choices=controlplane.SCHEDULERS,
        default="default",
        help="run the real kube-scheduler, or none (pods stay Pending until bound by someone)",
    )
    up.add_argument("--apiserver-port", type=int, default=0, help="kube-apiserver port (default: any free one)")
    up.add_argument("--metrics-server", action="store_true",
                    help="run metrics-server on kwok's emulated usage: metrics.k8s.io NodeMetrics/PodMetrics, as "
                         "`kubectl top` and `drlsched reclaim` read them (built first if the cache lacks it)")
    up.add_argument("--controller-manager", action="store_true",
                    help="run the real kube-controller-manager: Deployments, ReplicaSets, the HPA controller, garbage "
                         "collection (built first if the cache lacks it); HPAs also need --metrics-server")
    up.add_argument("--hpa-sync-period", type=positive_float, default=15.0, metavar="SECONDS",
                    help="the HPA controller's --horizontal-pod-autoscaler-sync-period (default 15)")
    up.add_argument("--node-autoscaler", choices=controlplane.NODE_AUTOSCALERS, default="none",
                    help="karpenter: Karpenter with its KWOK provider, NodePools made from the nodes' shapes "
                         "(--node-profile scenario:NAME gives a scenario's); default none")
    up.add_argument("--node-provision-s", type=float, default=0.0, metavar="SECONDS",
                    help="how long a node Karpenter launches takes to register (default 0)")
    up.add_argument("--consolidate-after", type=float, default=0.0, metavar="SECONDS",
                    help="NodePool consolidateAfter: how long a node's pods must be unchanged before Karpenter may "
                         "consolidate it (default 0, upstream's)")
    _state_dir_arg(up)
    up.set_defaults(func=_up)

    down = actions.add_parser("down", help="stop every process the testbed started and remove its state")
    _state_dir_arg(down)
    down.set_defaults(func=_down)

    status = actions.add_parser("status", help="say what runs")
    status.add_argument("--json", action="store_true", help="print the testbed's state as JSON")
    _state_dir_arg(status)
    status.set_defaults(func=_status)


def _state_dir_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=build_mod.cache_root() / "run",
        help="where the testbed keeps its state, logs and kubeconfig (default: %(default)s)",
    )


def _build(args: argparse.Namespace) -> int:
    print(build_mod.build(force=args.force))
    for name, wanted in (("metrics-server", args.metrics_server), ("kube-controller-manager",
                                                                    args.controller_manager),
                         ("karpenter", args.karpenter)):
        if wanted:
            print(build_mod.build_extra(name, force=args.force))
    return 0


def _up(args: argparse.Namespace) -> int:
    testbed = controlplane.up(
        controlplane.Options(
            state_dir=args.state_dir,
            nodes=args.nodes,
            gpu_nodes=args.gpu_nodes,
            profile=args.node_profile,
            scheduler=args.scheduler,
            apiserver_port=args.apiserver_port,
            metrics_server=args.metrics_server,
            controller_manager=args.controller_manager,
            hpa_sync_period_s=args.hpa_sync_period,
            node_autoscaler=args.node_autoscaler,
            node_provision_s=args.node_provision_s,
            consolidate_after_s=args.consolidate_after,
        )
    )
    controlplane.log(f"testbed up in {testbed.startup_seconds} s: {testbed.apiserver_url}, {testbed.nodes} nodes")
    print(testbed.kubeconfig)
    return 0


def _down(args: argparse.Namespace) -> int:
    if controlplane.Testbed.load(args.state_dir.resolve()) is None:
        controlplane.log(f"no testbed in {args.state_dir}")
        return 0
    stopped = controlplane.down(args.state_dir)
    controlplane.log(f"stopped {', '.join(stopped) or 'nothing (no process was running)'}; removed {args.state_dir}")
    return 0


def _status(args: argparse.Namespace) -> int:
    testbed = controlplane.Testbed.load(args.state_dir.resolve())
    if testbed is None:
        print(json.dumps(None) if args.json else f"no testbed in {args.state_dir}")
        return 1
    running = testbed.running()
    if args.json:
        state = json.loads((testbed.state_dir / controlplane.STATE_FILE).read_text())
        print(json.dumps({**state, "running": running}, indent=2))
    else:
        print(f"testbed in {testbed.state_dir}: {testbed.apiserver_url}, kubeconfig {testbed.kubeconfig}")
        print(
            f"  {testbed.nodes} nodes ({testbed.gpu_nodes} GPU, profile {testbed.profile}), "
            f"scheduler {testbed.scheduler}"
        )
        for name, proc in testbed.processes.items():
            print(f"  {name:15} pid {proc['pid']:>7}  {'running' if running[name] else 'NOT running'}")
    return 0 if running and all(running.values()) else 1
