"""The seed article's table on a real control plane: the same workload replayed under the real kube-scheduler,
under kube-scheduler with the drlsched extender, and under the drlsched second scheduler.

For each workload, mode and seed a fresh testbed starts (kube-scheduler v1.36.3 built from upstream, KWOK nodes
exactly the workload's: names, sizes, GPU models, racks), the workload is replayed (`drlsched.replay`, time
compressed by --speedup) and the simulator's metrics are computed from the API's timeline. Prints JSON: per
workload and mode the mean and 95% CI of each metric over the seeds, the wall-clock per replay, and a markdown
table.

The extender runs with deploy/scheduler-config.yaml's settings except `managedResources` (which would send only
GPU pods to it), so every pod is placed with its help.
Usage: python bench/kubernetes/replay_compare.py [--workloads spark-tpcds,ml-gpu[,openb]] [--nodes 200] [--seeds 3]
       [--duration 120] [--speedup 2] [--openb-speedup 10] [--policy k8s-default|ppo:DIR/policy.pt]
       [--modes default,drl-extender,...]
       [--simulate]   (adds rows sim:k8s-default and sim:POLICY: the simulator on the same workloads and seeds)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import kubernetes
import yaml

from drlsched.cli import build_parser
from drlsched.cli_common import sim_config, workload_source
from drlsched.evaluate import mean_ci
from drlsched.machine import machine_info
from drlsched.metrics import METRIC_KEYS
from drlsched.policies import make_policy
from drlsched.replay import replay, replayed_workload
from drlsched.report import TABLE_COLUMNS
from drlsched.simulator import SimConfig, Simulator
from drlsched.testbed import processes
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, down, start_scheduler, up

ROOT = Path(__file__).resolve().parents[2]
OPENB = ROOT.parent / "shared" / "traces" / "alibaba-gpu-v2023"
FIDELITY_KEYS = ("jct_p50_s", "jct_p99_s", "pending_p99_s", "cpu_util", "cpu_alloc", "gpu_alloc",
                 "cross_node_traffic_gb", "gpu_fragmentation", "sla_violation_rate", "makespan_s")
SCHEDULER_NAME = {"default": "default-scheduler", "drl-extender": "default-scheduler",
                  "drl-scheduler": "drl-scheduler"}


# openb: seed k replays the trace's pods arriving in [start + k·window, start + (k+1)·window) trace seconds, from
# after the median arrival (the half the openb PPO policy never trained on), arrivals compressed 3,000× (4.6 days in
# 133 s: the sample is a few pods a day, which would leave 200 nodes nearly empty), run times as in the trace.
OPENB_START, OPENB_WINDOW, OPENB_ARRIVAL_SPEEDUP = 11_520_000, 400_000, 3000


def workload_args(name: str, nodes: int, duration: float, seed: int) -> list[str]:
    if name == "openb":
        return ["--trace", str(OPENB), "--trace-format", "alibaba-gpu-v2023", "--nodes", str(nodes),
                "--start", str(OPENB_START + seed * OPENB_WINDOW), "--duration", str(OPENB_WINDOW),
                "--arrival-speedup", str(OPENB_ARRIVAL_SPEEDUP), "--allow-unschedulable"]
    return ["--scenario", name, "--nodes", str(nodes), "--duration", str(duration)]


def speedup_for(name: str, args: argparse.Namespace) -> float:
    return args.openb_speedup if name == "openb" else args.speedup


def wait_http(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if processes.http_ok(url):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout_s} s")


def run_one(workload_name: str, mode: str, seed: int, args: argparse.Namespace) -> dict[str, object]:
    ns = build_parser().parse_args(["simulate", *workload_args(workload_name, args.nodes, args.duration, seed),
                                    "--policy", "k8s-default", "--seed", str(seed)])
    workload = workload_source(ns)(seed)
    state = Path(tempfile.mkdtemp(prefix="drlsched-compare-"))
    gpu_nodes = sum(1 for n in workload.nodes if n.gpus)
    testbed = up(Options(state_dir=state, nodes=len(workload.nodes), gpu_nodes=gpu_nodes, profile=workload_name,
                         node_specs=workload.nodes, scheduler="none" if mode == "drl-extender" else "default"))
    helper = None
    try:
        drlsched = [sys.executable, "-m", "drlsched.cli"]
        if mode == "drl-extender":
            port = processes.free_ports(1)[0]
            helper = subprocess.Popen([*drlsched, "serve", "--policy", args.policy, "--port", str(port),
                                       "--kubeconfig", str(testbed.kubeconfig)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_http(f"http://{processes.LOOPBACK}:{port}/readyz")
            config = yaml.safe_load((ROOT / "deploy" / "scheduler-config.yaml").read_text())
            config.pop("apiVersion")
            config.pop("kind")
            config["extenders"][0]["urlPrefix"] = f"http://{processes.LOOPBACK}:{port}"
            del config["extenders"][0]["tlsConfig"]  # the loopback extender serves plain HTTP
            # Placement quality is compared here: a call timing out on this shared machine would silently leave
            # the choice to kube-scheduler (the shipped 250ms is sized for an extender with a core of its own).
            config["extenders"][0]["httpTimeout"] = "5s"
            config["extenders"][0].pop("managedResources", None)
            start_scheduler(testbed, config)
        elif mode == "drl-scheduler":
            port = processes.free_ports(1)[0]
            helper = subprocess.Popen([*drlsched, "schedule", "--scheduler-name", "drl-scheduler", "--policy",
                                       args.policy, "--kubeconfig", str(testbed.kubeconfig), "--metrics-port",
                                       str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Ready = its watch has listed the cluster; pods created before would wait for its start-up.
            wait_http(f"http://{processes.LOOPBACK}:{port}/readyz")
        api = testbed.api_client()
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "compare"}})
        metrics = replay(workload, core, namespace="compare", scheduler_name=SCHEDULER_NAME[mode],
                         speedup=speedup_for(workload_name, args))
        api.close()
    finally:
        if helper is not None:
            helper.terminate()
            helper.wait(timeout=30)
        down(state)
    metrics.update({"mode": mode, "seed": seed})
    return metrics


def testbed_config(ns: argparse.Namespace, speedup: float) -> SimConfig:
    """The simulator under the testbed's conditions: KWOK starts a pod the moment it is bound (no cold start), and
    kube-scheduler's backoff (1 s doubling to 10 s) runs on the wall clock, i.e. `speedup` times longer in
    workload seconds."""
    return replace(sim_config(ns), startup_mean_s=0.0, startup_std_s=0.0,
                   backoff_initial_s=speedup * SimConfig.backoff_initial_s,
                   backoff_max_s=speedup * SimConfig.backoff_max_s)


def simulate_one(workload_name: str, policy: str, seed: int, args: argparse.Namespace) -> dict[str, object]:
    """The simulator on the same pods as replayed (whole GPUs, no elastic GPU counts), under the testbed's
    conditions, for the fidelity of the aggregates (rows `sim:POLICY`)."""
    ns = build_parser().parse_args(["simulate", *workload_args(workload_name, args.nodes, args.duration, seed),
                                    "--policy", policy, "--seed", str(seed)])
    workload = replayed_workload(workload_source(ns)(seed))
    config = testbed_config(ns, speedup_for(workload_name, args))
    metrics = Simulator(workload, make_policy(policy), seed, config).run()
    metrics.update({"mode": f"sim:{policy}", "seed": seed, "wall_s": 0.0})
    return metrics


def fidelity(results: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per workload: the simulator's k8s-default mean over the real kube-scheduler's, for each metric."""
    out = {}
    for name, real in results.items():
        workload, mode = name.split("/", 1)
        sim = results.get(f"{workload}/sim:k8s-default")
        if mode == "default" and sim is not None:
            out[workload] = {key: sim[key]["mean"] / real[key]["mean"] if real[key]["mean"] else float("nan")
                             for key in FIDELITY_KEYS}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="spark-tpcds,ml-gpu")
    ap.add_argument("--modes", default="default,drl-extender,drl-scheduler")
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--speedup", type=float, default=2.0,
                    help="replay time compression of the scenarios (default 2: the testbed keeps up)")
    ap.add_argument("--openb-speedup", type=float, default=10.0,
                    help="replay time compression of openb (default 10: its pods run for hours)")
    ap.add_argument("--policy", default="k8s-default", help="drlsched's policy for the extender and scheduler")
    ap.add_argument("--simulate", action="store_true",
                    help="also run the simulator (k8s-default and --policy) on the same workloads and seeds")
    args = ap.parse_args()
    build()
    results: dict[str, dict[str, object]] = {}
    runs = []
    sims = [f"sim:{p}" for p in dict.fromkeys(["k8s-default", args.policy])] if args.simulate else []
    for workload in args.workloads.split(","):
        for mode in [*args.modes.split(","), *sims]:
            mine = []
            for seed in range(args.seeds):
                if mode in sims:
                    m = simulate_one(workload, mode.removeprefix("sim:"), seed, args)
                else:
                    m = run_one(workload, mode, seed, args)
                print(json.dumps({k: m.get(k) for k in ("scenario", "mode", "seed", "pods", "jct_p99_s", "wall_s",
                                                         "submit_lag_p99_s")}), file=sys.stderr)
                mine.append(m)
                runs.append(m)
            results[f"{workload}/{mode}"] = {key: mean_ci([float(m.get(key, 0.0)) for m in mine])
                                             for key in (*METRIC_KEYS, "wall_s", "submit_lag_p99_s")}
    head = "| workload / scheduler | " + " | ".join(t for _, t, _, _ in TABLE_COLUMNS) + " | wall per replay (s) |"
    rows = [head, "|---|" + "---|" * (len(TABLE_COLUMNS) + 1)]
    for name, entry in results.items():
        cells = [f"{entry[k]['mean'] * s:.2f} ± {entry[k]['ci95'] * s:.2f}" for k, _, _, s in TABLE_COLUMNS]
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {entry['wall_s']['mean']:.0f} |")
    json.dump({"benchmark": "replay_compare", "policy": args.policy, "nodes": args.nodes, "seeds": args.seeds,
               "duration_s": args.duration, "speedup": args.speedup, "openb_speedup": args.openb_speedup,
               "openb_window": [OPENB_START, OPENB_WINDOW, OPENB_ARRIVAL_SPEEDUP], "results": results,
               "table": "\n".join(rows),
               "fidelity": fidelity(results), "runs": runs, "machine": machine_info()},
              sys.stdout, indent=2, default=str)
    print()


if __name__ == "__main__":
    main()
