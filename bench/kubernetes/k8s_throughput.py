"""End-to-end scheduling throughput on the testbed, side by side in one run; printed as JSON.

Three arms, each on a fresh testbed (`--scheduler none`, profile openb, 20% GPU nodes) with the same `--pods`
pending pods (1 CPU, 1 GiB, no duration) queued before the scheduler starts:

- `kube-scheduler`: the real kube-scheduler alone;
- `kube-scheduler+extender`: kube-scheduler with deploy/scheduler-config.yaml (extender pointing at
  `drlsched serve --kubeconfig`, a separate process, policy `--policy`; percentageOfNodesToScore 100 unless
  `--adaptive`), except that `managedResources` is dropped so that every pod, not only GPU pods, goes through
  the extender;
- `drlsched-second-scheduler`: `drlsched schedule` (a separate process) for pods naming it in schedulerName.

`pods_per_second` = pods / seconds from the scheduler answering /healthz (kube-scheduler, drlsched schedule;
for the extender arm, kube-scheduler once the extender is ready) until the last pod is bound, polled every
0.5 s. `bind_span_pods_per_second` uses the pods' own PodScheduled timestamps (1 s resolution)
and leaves start-up out. `ratio_to_kube_scheduler` compares pods_per_second (target for drlsched >= 0.8).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from drlsched.k8s.objects import pod_manifest
from drlsched.machine import machine_info
from drlsched.testbed import processes
from drlsched.testbed.build import build
from drlsched.testbed.build import build_versions as versions
from drlsched.testbed.controlplane import Options, Testbed, down, start_scheduler, up
from drlsched.testbed.pods import create_pods, list_pods

NAMESPACE = "default"
ARMS = ("kube-scheduler", "kube-scheduler+extender", "drlsched-second-scheduler")
DEPLOY_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "scheduler-config.yaml"
DRL_SCHEDULER = "drl-scheduler"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--policy", default="k8s-default")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--adaptive", action="store_true",
                        help="drop the shipped percentageOfNodesToScore: 100 (score a sample of nodes, as alone)")
    args = parser.parse_args()
    build()
    results = [_measure(arm, args.nodes, args.pods, args.policy, args.adaptive) for arm in args.arms]
    base = next((r["pods_per_second"] for r in results if r["arm"] == "kube-scheduler"), None)
    for r in results:
        r["ratio_to_kube_scheduler"] = round(r["pods_per_second"] / base, 2) if base else None
    print(json.dumps({"benchmark": "k8s_throughput", "results": results, **versions(), "machine": machine_info()},
                     indent=2))


def _drlsched(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "drlsched.cli", *argv], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _measure(arm: str, nodes: int, count: int, policy: str, adaptive: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="drlsched-bench-") as tmp:
        testbed = up(Options(state_dir=Path(tmp) / "state", nodes=nodes, gpu_nodes=nodes // 5, profile="openb",
                             scheduler="none"))
        helper: subprocess.Popen[bytes] | None = None
        try:
            api = testbed.api_client()
            manifests = [pod_manifest(f"p-{i:05d}", cpu="1", memory="1Gi", duration=None) for i in range(count)]
            if arm == "drlsched-second-scheduler":
                for m in manifests:
                    m["spec"]["schedulerName"] = DRL_SCHEDULER
            create_pods(api, NAMESPACE, manifests)
            if arm == "kube-scheduler+extender":
                helper = _start_extender(testbed, policy, Path(tmp))
                config = yaml.safe_load(DEPLOY_CONFIG.read_text())
                extender = config["extenders"][0]
                extender["urlPrefix"] = f"http://{processes.LOOPBACK}:{testbed.ports['extender']}"
                del extender["tlsConfig"]  # the loopback extender serves plain HTTP
                del extender["managedResources"]
                settings = {k: v for k, v in config.items() if k not in ("apiVersion", "kind")}
                if adaptive:
                    del settings["percentageOfNodesToScore"]
                start_scheduler(testbed, settings)
            started = time.monotonic()
            if arm == "kube-scheduler":
                start_scheduler(testbed)
                started = time.monotonic()
            elif arm == "drlsched-second-scheduler":
                port = processes.free_ports(1)[0]
                log = Path(tmp) / "schedule.log"
                helper = _drlsched(["schedule", "--policy", policy, "--scheduler-name", DRL_SCHEDULER,
                                    "--kubeconfig", str(testbed.kubeconfig), "--metrics-port", str(port)], log)
                # As for kube-scheduler, the clock starts when the process answers /healthz (its Python start-up
                # left out; its initial list of nodes and pods counted).
                running = helper
                processes.wait_until(lambda: processes.http_ok(f"http://{processes.LOOPBACK}:{port}/healthz"), 60,
                                     lambda: running.poll() is None, "drlsched schedule", log)
                started = time.monotonic()
            while list_pods(api, NAMESPACE, field_selector="spec.nodeName=", limit=1):
                if helper is not None and helper.poll() is not None:
                    raise RuntimeError(f"drlsched exited: {(Path(tmp) / 'schedule.log').read_text()[-2000:]}")
                time.sleep(0.5)
            elapsed = time.monotonic() - started
            pods = list_pods(api, NAMESPACE)
            api.close()
        finally:
            if helper is not None:
                helper.send_signal(signal.SIGTERM)
                helper.wait(timeout=30)
            down(testbed.state_dir)
    bound = [_scheduled_at(p) for p in pods]
    return {
        "arm": arm,
        "extender_scores": ("a sample of nodes" if adaptive else "all feasible nodes") if "extender" in arm else None,
        "policy": policy if arm != "kube-scheduler" else "default profile",
        "nodes": nodes,
        "pods": count,
        "schedule_seconds": round(elapsed, 2),
        "pods_per_second": round(count / elapsed, 1),
        "bind_span_pods_per_second": round(count / (max(bound) - min(bound) + 1), 1),
        "nodes_used": len({p["spec"]["nodeName"] for p in pods}),
    }


def _start_extender(testbed: Testbed, policy: str, tmp: Path) -> subprocess.Popen[bytes]:
    port = processes.free_ports(1)[0]
    testbed.ports["extender"] = port
    helper = _drlsched(["serve", "--policy", policy, "--port", str(port), "--kubeconfig", str(testbed.kubeconfig)],
                       tmp / "schedule.log")
    processes.wait_until(lambda: processes.http_ok(f"http://{processes.LOOPBACK}:{port}/readyz"), 60,
                         lambda: helper.poll() is None, "drlsched serve", tmp / "schedule.log")
    return helper


def _scheduled_at(pod: dict[str, Any]) -> float:
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    return datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00")).timestamp()


if __name__ == "__main__":
    main()
