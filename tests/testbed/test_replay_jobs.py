"""`drlsched replay --scenario tpch --job-policy NAME` on the real control plane: executor pods gated, released by the
admit controller running beside the replay, bound by the real kube-scheduler onto KWOK nodes; the replay's engine
times the tasks. Two tpch jobs at once on two 8-core nodes (16 executors): they must finish, with a JCT close to
the simulator's on the same workload (the difference is the executor start-up: the API's, the controller's and
KWOK's latency × the speed-up instead of the simulator's 1 s cold start), and leave no pod behind."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import kubernetes
import pytest

from drlsched.testbed import controlplane
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, down, up
from drlsched.workload import NodeSpec

NODES = [NodeSpec(f"tpch-{i}", 8000, 65536) for i in range(2)]  # 8 executors of 1 core / 4 GiB each
WORKLOAD = ["--scenario", "tpch", "--batch", "2", "--seed", "0"]
SPEEDUP = 200  # the two jobs take ~2.5 h of workload time: under a minute of wall time each


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.Testbed]:
    build()
    state_dir = tmp_path_factory.mktemp("replay-jobs-testbed")
    running = up(Options(state_dir=state_dir, nodes=len(NODES), node_specs=NODES, scheduler="default"))
    try:
        yield running
    finally:
        down(state_dir)


def _cli(*args: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drlsched.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("policy", ["fifo", "weighted-fair:-2"])  # the second needs the engine's metadata
def test_tpch_jobs_replay_close_to_the_simulator(bed: controlplane.Testbed, tmp_path, policy: str) -> None:
    namespace = "jobs-" + policy.replace(":", "").replace("-", "")
    out = tmp_path / "replay.json"
    res = _cli("replay", *WORKLOAD, "--job-policy", policy, "--speedup", str(SPEEDUP), "--namespace", namespace,
               "--kubeconfig", str(bed.kubeconfig), "--json", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    real = json.loads(out.read_text())
    sim = json.loads(_cli("simulate", *WORKLOAD, "--nodes", str(len(NODES)), "--job-policy", policy,
                          "--json", "-").stdout)
    assert real["source"] == "replay" and real["executors"] == sim["executors"] == 16
    assert real["jobs_finished"] == sim["jobs_finished"] == 2 and real["jobs_unfinished"] == 0
    assert real["tasks_done"] == sim["tasks_done"]
    assert real["executor_starts"] >= 16 and real["admit_passes"] > 0
    # Tasks run the engine's times on both sides: only executor start-up differs, a few of ~16 starts per job,
    # each at most the measured P99 start latency. A replay that lost tasks or never released executors would be
    # far off (or never finish); one that started executors outside the controller would not wait at all.
    assert real["jct_mean_s"] >= 0.97 * sim["jct_mean_s"]
    assert real["jct_mean_s"] <= 1.05 * sim["jct_mean_s"] + 4 * real["executor_start_p99_s"]
    assert real["executor_start_p50_s"] > 0
    core = kubernetes.client.CoreV1Api(bed.api_client())
    left = [p for p in core.list_namespaced_pod(namespace).items if not p.metadata.deletion_timestamp]
    assert left == []
