"""`drlsched replay`: the same workload on a real cluster, measured with the simulator's metrics."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from drlsched.autoscale.cli_replay import cmd_replay_scaler, wants_scaler_replay
from drlsched.autoscale.cli_simulate import add_scaler_arguments
from drlsched.cli_args import non_negative_int, positive_float
from drlsched.cli_common import add_workload_arguments, emit_json, fmt, reclaim_config, workload_source
from drlsched.errors import UserError
from drlsched.evaluate import to_jsonable
from drlsched.jobs import cli as jobs_cli
from drlsched.metrics import ANOMALY_KEYS, METRIC_KEYS, metric_value, null_warning

LAG_WARN_S = 2.0  # workload seconds; below the 5 s pending-time SLA and a pod's 1 s cold start in the simulator
SCHEDULERS = {"default": "default-scheduler", "drl-extender": "default-scheduler", "drl-scheduler": "drl-scheduler"}


def _api(kubeconfig: str):  # type: ignore[no-untyped-def]
    import kubernetes

    if not Path(kubeconfig).is_file():
        raise UserError(f"kubeconfig {kubeconfig} does not exist")
    from drlsched.k8s.client import POOL_SIZE

    config = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=config)
    except Exception as err:  # the client raises several unrelated types for a bad file
        raise UserError(f"cannot load kubeconfig {kubeconfig}: {err}") from None
    config.connection_pool_maxsize = POOL_SIZE  # pod writes, the watch and (with --job-policy) the admit controller
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


def connect(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The CoreV1Api of --kubeconfig, with --namespace created if missing."""
    import kubernetes

    core = _api(args.kubeconfig)
    try:
        core.read_namespace(args.namespace)
    except kubernetes.client.ApiException as err:
        if err.status != 404:
            raise UserError(f"the API at {args.kubeconfig} answered {err.status} {err.reason}") from None
        core.create_namespace({"metadata": {"name": args.namespace}})
    except Exception as err:  # connection refused, TLS errors: the cluster is not there
        raise UserError(f"cannot reach the cluster in {args.kubeconfig}: {err}") from None
    return core


def cmd_replay(args: argparse.Namespace) -> int:
    import kubernetes

    from drlsched.replay import placement_warning, replay

    if args.job_policy and not jobs_cli.is_job_workload(args):
        raise UserError("--job-policy needs a job workload: --scenario tpch, or --trace DIR --trace-format "
                        "spark-profiles")
    if wants_scaler_replay(args):  # one service under a replica scaler (docs/replay.md "Scalers")
        return cmd_replay_scaler(args, connect)
    if jobs_cli.is_job_workload(args):  # jobs of stages of tasks, executors admitted by `drlsched admit`
        return jobs_cli.replay(args, connect)
    reclaim = reclaim_config(args)
    factory = workload_source(args)
    workload = factory(args.seed)
    core = connect(args)
    if reclaim.enabled:
        try:
            kubernetes.client.CustomObjectsApi(core.api_client).list_cluster_custom_object(
                "metrics.k8s.io", "v1beta1", "nodes")
        except kubernetes.client.ApiException as err:
            raise UserError(f"replay --reclaim {reclaim.model} runs the reclaim controller, which reads "
                            f"metrics.k8s.io; the cluster answered {err.status} {err.reason} (start the testbed with "
                            "`drlsched testbed up --metrics-server`)") from None

    show = not args.quiet and sys.stderr.isatty()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if show and (now - last[0] > 0.5 or done == total):
            last[0] = now
            print(f"\rreplay: {done}/{total} pods finished", end="", file=sys.stderr, flush=True)

    metrics = replay(workload, core, namespace=args.namespace, scheduler_name=SCHEDULERS[args.scheduler],
                     speedup=args.speedup, pending_timeout_s=args.pending_timeout, horizon_s=args.horizon,
                     keep_pods=args.keep_pods, progress=progress, reclaim=reclaim)
    if show:
        print(file=sys.stderr)
    for warning in (placement_warning(metrics, SCHEDULERS[args.scheduler]), null_warning([metrics])):
        if warning:
            print(warning, file=sys.stderr)
    lag = metrics["submit_lag_p99_s"]
    if lag is not None and float(lag) > LAG_WARN_S:  # type: ignore[arg-type]
        print(f"drlsched: warning: pods were created up to {lag:.1f} s (p99, workload time) after their arrival "
              f"times: the cluster or this client could not keep up with --speedup {args.speedup:g}, so the "
              "workload ran stretched; replay with a lower --speedup", file=sys.stderr)
    metrics["policy"] = f"real:{args.scheduler}" + (f":{args.policy}" if args.policy else "")
    metrics["seed"] = args.seed
    out = to_jsonable(metrics)
    if not emit_json(args.json, out):
        print(f"{metrics['policy']} on {metrics['scenario']}: {metrics['pods']} pods in {metrics['wall_s']:.1f} s")
        for key in (*METRIC_KEYS, *ANOMALY_KEYS, "submit_lag_p99_s"):
            print(f"  {key:32s} {fmt(metric_value(metrics, key))}")
        print(f"metrics written to {args.json}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("replay", help="replay a workload on a real cluster and compute the simulator's metrics",
                       description="Submit the workload's pods to a real cluster at their arrival times "
                                   "(compressed by --speedup), wait for them, and compute the same metrics as "
                                   "the simulator from the observed timeline.")
    add_workload_arguments(p)
    jobs_cli.add_job_arguments(p, many=False)
    jobs_cli.extend_trace_formats(p)
    p.add_argument("--kubeconfig", required=True, metavar="PATH", help="kubeconfig of the cluster")
    p.add_argument("--scheduler", choices=sorted(SCHEDULERS), default="default",
                   help="who places the pods: the cluster's kube-scheduler (default, or configured with the "
                        "drlsched extender), or the drlsched second scheduler (schedulerName drl-scheduler)")
    p.add_argument("--policy", metavar="NAME", help="the drlsched policy serving the extender or second scheduler "
                                                     "(recorded in the result)")
    p.add_argument("--speedup", type=positive_float, default=1.0, help="time compression factor (default 1)")
    p.add_argument("--namespace", default="drlsched-replay", help="namespace for the pods (created if missing)")
    p.add_argument("--pending-timeout", type=positive_float, default=30.0, metavar="SECONDS",
                   help="stop when nothing has changed for this long after the last arrival (default 30)")
    p.add_argument("--horizon", type=positive_float, metavar="SECONDS",
                   help="stop this many workload seconds after the start; pods still running then count as "
                        "running at the end (default: the simulator's horizon, the window then 10 × it)")
    p.add_argument("--keep-pods", action="store_true", help="leave the replay's pods on the cluster when done")
    p.add_argument("--seed", type=non_negative_int, default=0, help="workload seed (default 0)")
    p.add_argument("--json", required=True, metavar="FILE|-", help="write the metrics JSON here (- for stdout)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    add_scaler_arguments(p)
    p.set_defaults(func=cmd_replay)
