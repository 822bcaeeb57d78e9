"""The real kube-scheduler's scheduling throughput on the testbed, in pods/s, printed as JSON.

For each node count: start the testbed without a scheduler, queue `--pods` pending pods (1 CPU, 1 GiB each,
no duration, so none finishes and frees room during the run), then start kube-scheduler and time until every
pod is bound. kwok runs throughout and turns bound pods Running, as kubelets would, sharing the machine's
CPUs with the scheduler and the apiserver; the figure is end-to-end for this one machine, not the scheduler
alone.

Reported: `pods_per_second` = pods / (seconds from the scheduler answering healthy until the last pod is
bound, polled every 0.5 s), and `bind_span_pods_per_second` from the pods' own PodScheduled timestamps (1 s
resolution).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from drlsched.k8s.objects import pod_manifest
from drlsched.machine import machine_info
from drlsched.testbed.build import build
from drlsched.testbed.build import build_versions as versions
from drlsched.testbed.controlplane import Options, Testbed, down, start_scheduler, up
from drlsched.testbed.pods import create_pods, list_pods

NAMESPACE = "default"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--profile", default="openb")
    args = parser.parse_args()
    build()
    results = [_measure(nodes, args.pods, args.profile) for nodes in args.nodes]
    print(
        json.dumps(
            {"benchmark": "testbed_throughput", "results": results, **versions(), "machine": machine_info()},
            indent=2,
        )
    )


def _measure(nodes: int, pods: int, profile: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="drlsched-bench-") as tmp:
        testbed = up(
            Options(
                state_dir=Path(tmp) / "state",
                nodes=nodes,
                gpu_nodes=nodes // 5,
                profile=profile,
                scheduler="none",
            )
        )
        try:
            return _run(testbed, pods)
        finally:
            down(testbed.state_dir)


def _run(testbed: Testbed, count: int) -> dict[str, Any]:
    api = testbed.api_client()
    queued_at = time.monotonic()
    create_pods(
        api,
        NAMESPACE,
        [pod_manifest(f"p-{i:05d}", cpu="1", memory="1Gi", duration=None) for i in range(count)],
    )
    queue_seconds = time.monotonic() - queued_at
    start_scheduler(testbed)
    started = time.monotonic()
    while list_pods(api, NAMESPACE, field_selector="spec.nodeName=", limit=1):
        time.sleep(0.5)
    elapsed = time.monotonic() - started
    pods = list_pods(api, NAMESPACE)
    bound = [_scheduled_at(p) for p in pods]
    span = max(bound) - min(bound) + 1  # timestamps are whole seconds
    per_node: dict[str, int] = {}
    for pod in pods:
        per_node[pod["spec"]["nodeName"]] = per_node.get(pod["spec"]["nodeName"], 0) + 1
    api.close()
    return {
        "nodes": testbed.nodes,
        "gpu_nodes": testbed.gpu_nodes,
        "profile": testbed.profile,
        "pods": count,
        "queue_seconds": round(queue_seconds, 2),
        "schedule_seconds": round(elapsed, 2),
        "pods_per_second": round(count / elapsed, 1),
        "bind_span_pods_per_second": round(count / span, 1),
        "nodes_used": len(per_node),
        "max_pods_on_a_node": max(per_node.values()),
        "startup_seconds": testbed.startup_seconds,
    }


def _scheduled_at(pod: dict[str, Any]) -> float:
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    return datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00")).timestamp()


if __name__ == "__main__":
    main()
