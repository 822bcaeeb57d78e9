"""Extender /prioritize latency over HTTP on loopback, p50/p99, at 500 and 5,000 nodes; printed as JSON.

The extender runs in this process (`ExtenderServer`); one keep-alive client posts requests in a loop,
as kube-scheduler does. Its node cache is filled from testbed node manifests (profile openb, 20% GPU nodes)
with `--load` of the nodes' CPU already bound to pods, so scores are computed on a busy cluster.

- `cache` (nodeCacheCapable: true, the shipped configuration): the request carries node names only.
- `full-nodes` (nodeCacheCapable: false): every request carries every Node object and the cluster is rebuilt
  from them per request; reported for comparison.

Targets (issue 6): p99 <= 5 ms at 500 nodes and <= 25 ms at 5,000 nodes, for the cache mode.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import threading
import time
from typing import Any

import numpy as np

from drlsched.k8s.extender import Extender, ExtenderServer
from drlsched.k8s.objects import pod_manifest
from drlsched.k8s.state import ClusterState
from drlsched.machine import machine_info
from drlsched.policies import make_policy
from drlsched.testbed.nodes import node_manifests


def _state(nodes: list[dict[str, Any]], load: float) -> ClusterState:
    state = ClusterState()
    for node in nodes:
        state.set_node(node)
    cluster = state.cluster()
    for i, name in enumerate(cluster.names):
        pods = int(cluster.cap_cpu[i] * load // 4000)  # 4-core pods up to the load
        for k in range(pods):
            pod = pod_manifest(f"{name}-{k}", cpu="4", memory="8Gi")
            pod["metadata"]["uid"] = f"{name}-{k}"
            pod["spec"]["nodeName"] = name
            state.set_pod(pod)
    return state


def _measure(nodes: int, mode: str, policy: str, requests: int, load: float) -> dict[str, Any]:
    manifests = node_manifests(nodes, nodes // 5, "openb")
    state = _state(manifests, load) if mode == "cache" else None
    server = ExtenderServer(("127.0.0.1", 0), Extender(make_policy(policy), policy, state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    names = [m["metadata"]["name"] for m in manifests]
    bodies = []
    for i in range(8):  # alternate CPU-only and GPU pods
        pod = pod_manifest(f"bench-{i}", cpu="2", memory="4Gi", gpus=i % 2)
        pod["metadata"].update(namespace="default", uid=f"bench-{i}")
        args: dict[str, Any] = {"Pod": pod}
        args["NodeNames" if mode == "cache" else "Nodes"] = names if mode == "cache" else {"items": manifests}
        bodies.append(json.dumps(args).encode())
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=60)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's net package does by default
    latencies = []
    try:
        for i in range(requests + 20):
            started = time.perf_counter()
            conn.request("POST", "/prioritize", bodies[i % len(bodies)], {"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            elapsed = time.perf_counter() - started
            assert response.status == 200, data[:200]
            if i >= 20:  # warm-up: the first requests build the Cluster
                latencies.append(elapsed)
    finally:
        conn.close()
        server.stop()
    ms = np.array(latencies) * 1000
    return {
        "nodes": nodes, "mode": mode, "policy": policy, "requests": len(latencies),
        "request_bytes": len(bodies[0]),
        "p50_ms": round(float(np.percentile(ms, 50)), 3), "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "max_ms": round(float(ms.max()), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--policies", nargs="+", default=["k8s-default", "most-allocated"])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--full-nodes-requests", type=int, default=50)
    parser.add_argument("--load", type=float, default=0.5, help="share of each node's CPU bound to pods")
    args = parser.parse_args()
    results = []
    for nodes in args.nodes:
        for policy in args.policies:
            results.append(_measure(nodes, "cache", policy, args.requests, args.load))
        results.append(_measure(nodes, "full-nodes", args.policies[0], args.full_nodes_requests, args.load))
    print(json.dumps({"benchmark": "k8s_prioritize_latency", "machine": machine_info(), "results": results},
                     indent=2))


if __name__ == "__main__":
    main()
