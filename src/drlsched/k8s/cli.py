"""`drlsched serve` (scheduler extender) and `drlsched schedule` (second scheduler)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from drlsched.errors import UserError
from drlsched.k8s import prom
from drlsched.k8s.client import LOOPBACK, api_client
from drlsched.k8s.metrics_pipeline import KubeletCollector, MetricsStore, Poller, PrometheusCollector
from drlsched.k8s.placement import Placer
from drlsched.k8s.rollout import Rollout
from drlsched.policies import make_policy


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    serve = sub.add_parser("serve", help="run the kube-scheduler extender service (filter/prioritize/bind)")
    _policy_args(serve)
    serve.add_argument("--host", default=LOOPBACK, help="address to listen on (default %(default)s)")
    serve.add_argument("--port", type=int, default=8888, help="port (default %(default)s; 0 picks a free one)")
    serve.add_argument("--max-body-mib", type=int, default=32, help="largest request body accepted (MiB)")
    _rollout_args(serve)
    serve.set_defaults(func=_serve)

    schedule = sub.add_parser("schedule", help="run drlsched as a second scheduler (pods naming it in schedulerName)")
    _policy_args(schedule)
    schedule.add_argument("--scheduler-name", default="drl-scheduler", help="spec.schedulerName to serve")
    schedule.add_argument("--metrics-port", type=int,
                          help="serve /metrics, /healthz and /readyz (ready once the watch has listed the cluster)")
    schedule.add_argument("--metrics-host", default=LOOPBACK, help="address for --metrics-port (default %(default)s)")
    _rollout_args(schedule)
    schedule.set_defaults(func=_schedule)

    report = sub.add_parser("ab-report", help="compare the A/B arms of placed pods; optionally apply rollback")
    report.add_argument("--kubeconfig", type=Path, help="kubeconfig of the cluster (default: in-cluster)")
    report.add_argument("--namespace", help="only this namespace (default: all)")
    report.add_argument("--sla-seconds", type=float, default=60.0,
                        help="a pod violates its SLA when it waits longer than this to be scheduled, or runs "
                             "past its drlsched.io/deadline-seconds annotation (default %(default)s)")
    report.add_argument("--apply", type=Path, metavar="STATE_FILE",
                        help="write the decision (rollback when the candidate is worse) to this rollout state file")
    report.add_argument("--promote", action="store_true", help="with --apply: promote a candidate that is better")
    report.set_defaults(func=_ab_report)


def _policy_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default="k8s-default", help="policy name, or ppo:PATH / dqn:PATH")
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig of the cluster to watch")
    parser.add_argument("--in-cluster", action="store_true", help="use the pod's service account instead")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    metrics = parser.add_argument_group("live metrics (load-aware policies; without any, usage is taken as zero)")
    metrics.add_argument("--kubelet-metrics", metavar="URL",
                         help="kubelet resource-metrics URL with {node}, e.g. kwok's "
                              "http://127.0.0.1:PORT/metrics/nodes/{node}/metrics/resource")
    metrics.add_argument("--prometheus", metavar="URL", help="Prometheus server (cAdvisor and DCGM series)")
    metrics.add_argument("--metrics-interval", type=float, default=10.0, help="seconds between collections")
    metrics.add_argument("--stale-after", type=float, default=30.0,
                         help="seconds without a sample after which a node is scored from its requests")


def _rollout_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("shadow and A/B rollout of a candidate policy")
    group.add_argument("--shadow", metavar="POLICY", help="score every pod with this policy too, without acting")
    group.add_argument("--ab", metavar="POLICY", help="place a fraction of pods with this candidate policy")
    group.add_argument("--ab-fraction", type=float, default=0.1, help="share of pods for --ab (default 0.1)")
    group.add_argument("--ab-key", choices=("uid", "namespace"), default="uid",
                       help="hash the pod's UID, or its namespace (whole namespaces in one arm)")
    group.add_argument("--rollout-state", type=Path, metavar="FILE",
                       help="follow promote/rollback decisions written here by `drlsched ab-report --apply`")


def _rollout(args: argparse.Namespace) -> Callable[[Placer, prom.Registry], Rollout] | None:
    if args.shadow is None and args.ab is None:
        if args.rollout_state is not None:
            raise UserError("--rollout-state needs --ab")
        return None
    if not 0.0 <= args.ab_fraction <= 1.0:
        raise UserError(f"--ab-fraction must be between 0 and 1, not {args.ab_fraction}")
    shadow = make_policy(args.shadow) if args.shadow else None
    candidate = make_policy(args.ab) if args.ab else None

    def build(live: Placer, registry: prom.Registry) -> Rollout:
        return Rollout(
            live, args.policy, registry,
            shadow=(Placer(shadow, metrics=live.metrics), args.shadow) if shadow else None,
            candidate=(Placer(candidate, metrics=live.metrics), args.ab) if candidate else None,
            fraction=args.ab_fraction, key=args.ab_key, state_file=args.rollout_state,
        )

    return build


def _metrics(args: argparse.Namespace, nodes: Callable[[], list[str]]) -> tuple[MetricsStore | None, list[Poller]]:
    """The metrics store and its pollers for the options given (none: no store)."""
    if args.kubelet_metrics is None and args.prometheus is None:
        return None, []
    if args.metrics_interval <= 0 or args.stale_after <= 0:
        raise UserError("--metrics-interval and --stale-after must be positive")
    if args.kubelet_metrics is not None and "{node}" not in args.kubelet_metrics:
        raise UserError("--kubelet-metrics must contain {node}, where each node's name goes")
    store = MetricsStore(window_s=max(60.0, 3 * args.metrics_interval), stale_after_s=args.stale_after)
    pollers = []
    if args.kubelet_metrics is not None:
        kubelet = KubeletCollector(lambda node: args.kubelet_metrics.replace("{node}", node))
        pollers.append(Poller(store, lambda: kubelet.collect(nodes()), args.metrics_interval))
    if args.prometheus is not None:
        pollers.append(Poller(store, PrometheusCollector(args.prometheus).collect, args.metrics_interval))
    return store, pollers


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _logging(level: str) -> None:
    logging.basicConfig(level=level, stream=sys.stderr, format="drlsched: %(asctime)s %(levelname)s %(message)s")


def _serve(args: argparse.Namespace) -> int:
    from drlsched.k8s.extender import Extender, ExtenderServer
    from drlsched.k8s.state import ClusterState
    from drlsched.k8s.watch import Informer

    _logging(args.log_level)
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be between 0 and 65535, not {args.port}")
    if args.max_body_mib < 1:
        raise UserError("--max-body-mib must be at least 1")
    policy = make_policy(args.policy)
    rollout = _rollout(args)  # options first: a bad one is reported before the kubeconfig is read
    state = ClusterState() if args.kubeconfig is not None or args.in_cluster else None
    metrics, pollers = _metrics(args, state.node_names if state is not None else list)
    informer = api = ready = None
    if state is not None:
        api = api_client(args.kubeconfig)
        informer = Informer(api, state)
        ready = threading.Event()
    extender = Extender(policy, args.policy, state, api, ready, max_body=args.max_body_mib << 20, metrics=metrics,
                        rollout=rollout)
    try:
        server = ExtenderServer((args.host, args.port), extender)
    except OSError as err:
        raise UserError(f"cannot listen on {args.host}:{args.port}: {err.strerror}") from None
    stop = threading.Event()
    _stop_on_signals(stop)
    for poller in pollers:
        poller.start()
    if informer is not None and ready is not None:
        informer.start()
        threading.Thread(target=lambda: informer.wait_synced(3600) and ready.set(), daemon=True).start()
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    logging.getLogger("drlsched.k8s").info(
        "extender for policy %s on %s (%s)", args.policy, server.url,
        "node cache from the API" if state is not None else "scoring the Nodes in each request")
    print(server.url, flush=True)
    stop.wait()
    server.shutdown()
    if informer is not None:
        informer.stop()
    return 0


def _schedule(args: argparse.Namespace) -> int:
    from drlsched.k8s.second_scheduler import SecondScheduler

    _logging(args.log_level)
    policy = make_policy(args.policy)
    if args.kubeconfig is None and not args.in_cluster:
        raise UserError("the second scheduler needs --kubeconfig PATH or --in-cluster")
    metrics, pollers = _metrics(args, lambda: scheduler.state.node_names())
    rollout = _rollout(args)  # options first: a bad one is reported before the kubeconfig is read
    scheduler = SecondScheduler(api_client(args.kubeconfig), policy, args.scheduler_name, metrics, rollout)
    stop = threading.Event()
    _stop_on_signals(stop)
    if args.metrics_port is not None:
        try:
            server = prom.MetricsServer((args.metrics_host, args.metrics_port), scheduler.registry,
                                        ready=scheduler.informer.is_synced)
        except OSError as err:
            raise UserError(f"cannot listen on {args.metrics_host}:{args.metrics_port}: {err.strerror}") from None
        threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    for poller in pollers:
        poller.start()
    scheduler.start()
    stop.wait()
    scheduler.stop()
    return 0


def _ab_report(args: argparse.Namespace) -> int:
    from drlsched.k8s.ab_report import apply_decision, compare, fetch_pods, render

    report = compare(fetch_pods(api_client(args.kubeconfig), args.namespace), args.sla_seconds)
    print(render(report))
    if args.apply is not None:
        apply_decision(report, args.apply, args.promote)
    return 0
