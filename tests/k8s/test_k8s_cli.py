"""`drlsched serve`, `schedule` and `ab-report` as commands: clear errors, a served request, a clean SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import kubernetes
import pytest
import yaml

from drlsched.k8s.objects import pod_manifest
from drlsched.testbed import controlplane
from drlsched.testbed.nodes import node_manifests

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _drlsched(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drlsched.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--policy", "nope"], "unknown policy 'nope'"),
        (["serve", "--port", "70000"], "--port must be between 0 and 65535"),
        (["serve", "--kubelet-metrics", "http://127.0.0.1:1/metrics"], "must contain {node}"),
        (["serve", "--ab", "random", "--ab-fraction", "2"], "--ab-fraction must be between 0 and 1"),
        (["serve", "--kubeconfig", "/nonexistent/kubeconfig"], "kubeconfig /nonexistent/kubeconfig does not exist"),
        (["serve", "--tls-client-ca", "/x.crt"], "--tls-client-ca needs --tls-cert and --tls-key"),
        (["serve", "--tls-cert", "/x.crt"], "--tls-cert and --tls-key go together"),
        (["serve", "--tls-cert", "/nonexistent/x.crt", "--tls-key", "/nonexistent/x.key"],
         "cannot load the TLS files /nonexistent/x.crt, /nonexistent/x.key: No such file or directory"),
        (["serve", "--max-nodes", "0"], "--max-nodes and --workers must be at least 1"),
        (["schedule"], "needs --kubeconfig PATH or --in-cluster"),
        (["schedule", "--kubeconfig", "/x", "--rollout-state", "/tmp/s.json"], "--rollout-state needs --ab"),
    ],
)
def test_bad_options_are_one_line_errors(args: list[str], message: str) -> None:
    result = _drlsched(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("drlsched: error: ") and message in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_answers_prioritize_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "drlsched.cli", "serve", "--port", "0", "--policy", "first-fit"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        pod = pod_manifest("p", gpus=1)
        body = json.dumps({"Pod": pod, "Nodes": {"items": node_manifests(3, 2, "uniform")}}).encode()
        request = urllib.request.Request(f"{url}/prioritize", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read()) == [
                {"Host": "kwok-gpu-00000", "Score": 10}, {"Host": "kwok-gpu-00001", "Score": 0},
                {"Host": "kwok-cpu-00002", "Score": 0},
            ]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_ab_report_on_a_cluster_without_ab_pods_keeps_the_split(testbed: controlplane.Testbed) -> None:
    result = _drlsched("ab-report", "--kubeconfig", str(testbed.kubeconfig), "--namespace", "default")
    assert result.returncode == 0, result.stderr
    assert "decision: keep (too few pods" in result.stdout


def test_the_deploy_manifests_are_accepted_by_the_apiserver(testbed: controlplane.Testbed) -> None:
    """Server-side dry run of every object under deploy/ (validation and defaulting, nothing stored)."""
    api = testbed.api_client()
    try:
        for manifest in sorted(DEPLOY.glob("*.yaml")):
            if manifest.name == "scheduler-config.yaml":  # kube-scheduler's own file, used by the conftest
                continue
            for obj in yaml.safe_load_all(manifest.read_text()):
                kubernetes.utils.create_from_dict(api, obj, dry_run="All")
    finally:
        api.close()
