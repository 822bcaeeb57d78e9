"""Fidelity of the simulator's `k8s-default` against the real kube-scheduler on the testbed.

Starts a testbed (real etcd, kube-apiserver, kube-scheduler, kwok) with --nodes fake nodes (fewer than 100, so
kube-scheduler scores every feasible node, as percentageOfNodesToScore does below 100 nodes), submits --pods
pods one at a time and asks, for each placement, whether the real node is among the nodes the simulator's
k8s-default scores highest given the same state (drlsched.fidelity). Prints JSON: the agreement share
(target >= 0.99) and every disagreement with both sides' scores. `--minor 32` compares the pre-1.36
BalancedAllocation instead, to show the check tells the two apart.
Usage: python bench/fidelity_k8s_default.py [--nodes 80] [--gpu-nodes 20] [--pods 300] [--seed 0] [--minor 36]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import kubernetes
import numpy as np

from drlsched.fidelity import compare
from drlsched.machine import machine_info
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, down, up


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=80)
    ap.add_argument("--gpu-nodes", type=int, default=20)
    ap.add_argument("--pods", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minor", type=int, default=36,
                    help="kube-scheduler minor release the simulator mirrors (32: the pre-1.36 BalancedAllocation)")
    args = ap.parse_args()
    build()
    state = Path(tempfile.mkdtemp(prefix="drlsched-fidelity-"))
    t0 = time.perf_counter()
    testbed = up(Options(state_dir=state, nodes=args.nodes, gpu_nodes=args.gpu_nodes, profile="openb"))
    try:
        api = testbed.api_client()
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "fidelity"}})
        fid = compare(core, "fidelity", args.pods, np.random.default_rng(args.seed), args.minor)
        api.close()
    finally:
        down(state)
    json.dump({"benchmark": "fidelity_k8s_default", "kube_scheduler": "v1.36.3 (testbed)",
               "simulator_mirrors": f"1.{args.minor}", "nodes": args.nodes, "gpu_nodes": args.gpu_nodes,
               "pods": fid.pods, "seed": args.seed, "agreement": fid.agreement,
               "both_unschedulable": fid.both_unschedulable, "target": 0.99, "disagreements": fid.disagreements,
               "wall_s": round(time.perf_counter() - t0, 1), "machine": machine_info()}, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
