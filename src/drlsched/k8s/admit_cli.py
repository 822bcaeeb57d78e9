"""`drlsched admit`: the job-admission controller (docs/kubernetes.md "drlsched admit")."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import threading
from pathlib import Path

from drlsched.cli_args import positive_float, positive_int
from drlsched.errors import UserError
from drlsched.jobs.policies import JOB_POLICIES, make_job_policy
from drlsched.k8s.controller import add_controller_arguments, controller_options

STOP_GRACE_S = 10.0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    admit = sub.add_parser("admit", help="run the job-admission controller: release gated pods "
                                         "(drlsched.io/admission) job by job in a job policy's order and limits")
    admit.add_argument("--kubeconfig", type=Path, help="kubeconfig of the cluster (default: in-cluster)")
    admit.add_argument("--job-policy", required=True, metavar="NAME",
                       help=f"one of {', '.join(JOB_POLICIES)} (weighted-fair:ALPHA, fair:SHARE), or "
                            "ppo:DIR/policy.pt (a learned job policy)")
    admit.add_argument("--policy-file", type=Path, metavar="PATH",
                       help="YAML/JSON: executors, and per-job remaining_work_s / critical_path_s (needed by "
                            "weighted-fair, srpt-oracle, sjf-cp, ppo); read again when it changes")
    admit.add_argument("--executors", type=positive_int, metavar="N",
                       help="the executor pool the policy divides (default: the policy file's, else what the "
                            "schedulable nodes fit beside pods of no job)")
    admit.add_argument("--namespace", help="only pods of this namespace (default: all)")
    admit.add_argument("--period", type=positive_float, default=2.0, metavar="S",
                       help="seconds between passes (default %(default)s)")
    admit.add_argument("--once", action="store_true", help="one pass, print its result as JSON, exit")
    admit.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add_controller_arguments(admit, lease_name="drlsched-admit")
    admit.set_defaults(func=_admit)


def _admit(args: argparse.Namespace) -> int:
    from drlsched.k8s.admission import NEEDS
    from drlsched.k8s.admit_controller import COMPONENT, AdmitController, PassResult
    from drlsched.k8s.cli import _stop_on_signals
    from drlsched.k8s.client import api_client
    from drlsched.k8s.controller import Manager

    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="drlsched: %(asctime)s %(levelname)s %(message)s")
    policy = make_job_policy(args.job_policy)
    need = NEEDS.get(policy.name.partition(":")[0])
    if need is not None and args.policy_file is None:
        raise UserError(f"job policy {policy.name} needs each job's {need}: give them in --policy-file")
    options = controller_options(args)
    # The file is checked before the kubeconfig is read: a bad one is one line, whatever the cluster.
    controller = AdmitController(None, policy, args.executors, args.policy_file,  # type: ignore[arg-type]
                                 args.namespace)
    api = api_client(args.kubeconfig, retry_connections=False)
    manager = Manager(COMPONENT, api, options)
    controller.api = api
    controller.identity = controller.events.instance = manager.identity
    controller.register(manager.registry)
    if args.once:
        results: list[PassResult] = []
        manager.add("reconcile", args.period, lambda leading: results.append(controller.step()))
        manager.run_once()
        controller.events.drain(timeout_s=STOP_GRACE_S)
        print(json.dumps(dataclasses.asdict(results[0]), indent=2, default=str))
        return 0
    manager.add("reconcile", args.period, controller.reconcile, leader_only=False)
    stop = threading.Event()
    _stop_on_signals(stop)
    code = manager.run(stop)
    controller.events.drain(timeout_s=STOP_GRACE_S)
    return code
