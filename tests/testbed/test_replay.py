"""`drlsched replay` on the real control plane: the simulator's metrics from a real kube-scheduler's run."""

from __future__ import annotations

import json
import subprocess
import sys

import kubernetes

from drlsched.metrics import METRIC_KEYS, RUN_KEYS
from drlsched.testbed import controlplane


def test_replay_matches_the_simulated_timeline(testbed: controlplane.Testbed, tmp_path) -> None:
    out = tmp_path / "replay.json"
    common = ["--scenario", "spark-tpcds", "--duration", "60", "--seed", "5"]
    res = subprocess.run([sys.executable, "-m", "drlsched.cli", "replay", *common, "--speedup", "20",
                          "--kubeconfig", str(testbed.kubeconfig), "--json", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    real = json.loads(out.read_text())
    for key in (*METRIC_KEYS, *RUN_KEYS):
        assert key in real
    assert real["policy"] == "real:default" and real["source"] == "replay"
    assert real["pods_scheduled"] == real["pods"] > 0 and real["pods_unschedulable"] == 0
    sim = subprocess.run([sys.executable, "-m", "drlsched.cli", "simulate", *common, "--policy", "k8s-default",
                          "--json", "-", "--quiet"], capture_output=True, text=True, timeout=300)
    simulated = json.loads(sim.stdout)
    assert real["pods"] == simulated["pods"]
    # The stages run one after another for their annotated (compressed) times on both sides: stages released
    # together instead of in order would cut the JCT by half or more. The simulator adds a 1 s cold start per
    # stage; the replay adds the API's and KWOK's latencies, multiplied by the speed-up, which grow without bound
    # on a loaded machine. So the JCT may not fall below the simulated one, and may exceed it only by what the
    # replay measured of its own delays (pending time per stage) plus the stages' own time.
    assert real["jct_p50_s"] > 0.85 * simulated["jct_p50_s"]
    stages = 4  # spark-tpcds jobs have 2-4 stages
    assert real["jct_p50_s"] < 1.3 * simulated["jct_p50_s"] + stages * (real["pending_p99_s"] + 20 * 2.0)
    assert real["cross_node_traffic_gb"] > 0


def test_replay_stops_at_its_horizon_and_removes_its_pods(testbed: controlplane.Testbed, tmp_path) -> None:
    out = tmp_path / "replay.json"
    res = subprocess.run([sys.executable, "-m", "drlsched.cli", "replay", "--scenario", "spark-tpcds", "--duration",
                          "60", "--seed", "5", "--speedup", "20", "--horizon", "20", "--namespace", "horizon",
                          "--kubeconfig", str(testbed.kubeconfig), "--json", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    real = json.loads(out.read_text())
    assert real["pods_running_at_end"] > 0  # spark stages run for tens of seconds: at 20 s many are still running
    assert real["pods_finished"] + real["pods_running_at_end"] == real["pods_scheduled"]
    core = kubernetes.client.CoreV1Api(testbed.api_client())
    left = [p for p in core.list_namespaced_pod("horizon").items if not p.metadata.deletion_timestamp]
    assert left == []


def test_replay_without_a_cluster_is_a_clear_error(tmp_path) -> None:
    res = subprocess.run([sys.executable, "-m", "drlsched.cli", "replay", "--scenario", "batch", "--kubeconfig",
                          str(tmp_path / "missing"), "--json", "-"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "does not exist" in res.stderr and "Traceback" not in res.stderr


def test_replay_for_a_scheduler_that_is_not_running_warns_and_reports_nulls(testbed: controlplane.Testbed,
                                                                            tmp_path) -> None:
    out = tmp_path / "replay.json"
    res = subprocess.run([sys.executable, "-m", "drlsched.cli", "replay", "--scenario", "batch", "--nodes", "4",
                          "--duration", "5", "--seed", "1", "--speedup", "10", "--pending-timeout", "3",
                          "--scheduler", "drl-scheduler", "--namespace", "nobody", "--kubeconfig",
                          str(testbed.kubeconfig), "--json", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    real = json.loads(out.read_text())
    assert real["pods"] > 0 and real["pods_scheduled"] == 0
    assert real["jct_p99_s"] is None and real["pending_p99_s"] is None
    # every pod created waits for ever (DAG children of unfinished stages are never created: no anomaly of theirs)
    stuck = real["anomalies"]["unschedulable_60s"]
    assert stuck > 0 and real["anomaly_rate"] == stuck / real["pods"]
    assert real["anomalies"]["bind_failed"] is None and "bind_failed" in real["anomalies_unavailable"]
    warning = [line for line in res.stderr.splitlines() if "likely cause" in line]
    assert len(warning) == 1 and "no scheduler named 'drl-scheduler'" in warning[0]
