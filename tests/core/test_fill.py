"""The fill experiment: submission order, what is recorded after every pod, the points, the command end to end."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drlsched.errors import UserError
from drlsched.fill import FillRun, check_inputs, demand_levels, fill_once, submission_order, summarise, values_at
from drlsched.workload import NodeSpec, PodSpec

OPENB = Path(__file__).resolve().parents[1] / "traces" / "fixtures" / "alibaba-gpu-v2023"


def gpu_pod(uid, milli, gpus=1, cpu=1000):
    return PodSpec(uid, uid, 0.0, cpu, 1024, gpus=gpus, gpu_milli=milli if gpus == 1 else 1000)


def test_order_is_a_permutation_then_draws_with_replacement_until_the_limit():
    pods = [gpu_pod(f"p{i}", 500) for i in range(10)]  # 5 GPUs of demand
    order = [p.uid for p in submission_order(pods, 4000, 2.0, np.random.default_rng(3))]
    assert sorted(order[:10]) == sorted(p.uid for p in pods)  # every pod once, shuffled ...
    assert order[:10] != [p.uid for p in pods]
    assert len(order) == 16  # ... then 6 draws: 16 x 500m = 8 GPUs = 2 x 4 GPUs
    again = [p.uid for p in submission_order(pods, 4000, 2.0, np.random.default_rng(3))]
    assert again == order
    short = [p.uid for p in submission_order(pods, 4000, 0.5, np.random.default_rng(3))]
    assert short == order[:4]  # stops once 2 GPUs are requested


def test_one_fill_records_allocated_fragmented_and_failed_after_every_pod():
    # A 2-GPU node and 700m shares: two fit (300m left on each GPU, too little for the only shape: all of it
    # fragmented), the third fails.
    nodes = [NodeSpec("a", 64000, 262144, 2, "T4")]
    pods = [gpu_pod("x", 700), gpu_pod("y", 700)]
    curve = fill_once(FillRun("k8s-default", 0, nodes, pods, 1.0))
    assert curve["demand"].tolist() == pytest.approx([0.35, 0.7, 1.05])
    assert curve["allocated_milli"].tolist() == [700, 1400, 1400]
    assert curve["pods_failed"].tolist() == [0, 0, 1]
    # After one pod: GPU0 has 300m (fragmented for 700m), GPU1 is whole: 300m fragmented.
    assert curve["fragmented_milli"].tolist() == pytest.approx([300.0, 600.0, 600.0])
    at = values_at(curve, 0.5)  # the first pod that brought demand to 50% is the second
    assert at["gpu_unallocated"] == pytest.approx(0.6) and at["gpu_fragmented"] == pytest.approx(0.6)
    assert at["gpu_fragmentation"] == pytest.approx(1.0) and at["gpu_unallocated_share"] == pytest.approx(0.3)
    assert values_at(curve, 1.0)["pods_failed"] == 1


def test_fgd_leaves_fewer_gpus_unallocated_than_spreading():
    # Four 2-GPU nodes; half and whole GPUs. Spreading halves breaks whole GPUs that later whole pods need.
    nodes = [NodeSpec(f"n{i}", 64000, 262144, 2, "T4") for i in range(4)]
    pods = [gpu_pod(f"h{i}", 500) for i in range(8)] + [gpu_pod(f"w{i}", 1000) for i in range(4)]
    runs = {(p, s): fill_once(FillRun(p, s, nodes, pods, 1.0)) for p in ("k8s-default", "fgd") for s in range(5)}
    summary = summarise(runs, ["k8s-default", "fgd"], 1.0)
    last = {p: summary[p]["points"][-1] for p in ("k8s-default", "fgd")}
    assert last["fgd"]["gpu_unallocated"]["mean"] < last["k8s-default"]["gpu_unallocated"]["mean"]
    assert last["fgd"]["gpu_unallocated"]["mean"] == 0.0
    paired = summary["fgd"]["paired_vs_k8s-default"][-1]
    left = sum(values_at(runs[("k8s-default", s)], 1.0)["gpu_unallocated"] > 0 for s in range(5))
    assert left >= 1 and paired["demand"] == 1.0  # the ratio exists for the seeds where the baseline left GPUs
    assert paired["gpu_unallocated_ratio"]["n"] == left and paired["gpu_unallocated_ratio"]["mean"] == 0.0


def test_demand_levels():
    assert demand_levels(1.3) == [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3]
    assert demand_levels(1.25) == [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]
    assert demand_levels(0.3) == [0.3]


@pytest.mark.parametrize(("nodes", "pods", "limit", "message"), [
    ([NodeSpec("a", 4000, 8192)], [gpu_pod("p", 500)], 1.3, "the cluster has no GPUs"),
    ([NodeSpec("a", 4000, 8192, 2, "T4")], [PodSpec("p", "p", 0.0, 100, 100)], 1.3, "no GPU pods"),
    ([NodeSpec("a", 4000, 8192, 2, "T4")], [gpu_pod("p", 500)], 0.0, "--max-demand must be a positive"),
    ([NodeSpec("a", 4000, 8192, 2, "T4")], [gpu_pod("p", 500)], float("nan"), "--max-demand must be a positive"),
])
def test_bad_inputs(nodes, pods, limit, message):
    with pytest.raises(UserError, match=message):
        check_inputs(nodes, pods, limit)


def drlsched(*args):
    return subprocess.run([sys.executable, "-m", "drlsched.cli", *args], capture_output=True, text=True, timeout=300)


def test_fill_command_writes_results_report_and_plots(tmp_path):
    res = drlsched("fill", "--trace", str(OPENB), "--trace-format", "alibaba-gpu-v2023", "--policies",
                   "k8s-default,fgd,most-allocated", "--seeds", "3", "--out", str(tmp_path), "--jobs", "2")
    assert res.returncode == 0, res.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["meta"]["cluster_gpus"] == 18 and results["meta"]["seed_list"] == [0, 1, 2]
    for policy in ("k8s-default", "fgd", "most-allocated"):
        points = results["policies"][policy]["points"]
        assert [p["demand"] for p in points] == [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3]
        for point in points:
            for key in ("gpu_unallocated", "gpu_fragmented", "pods_failed"):
                assert set(point[key]) == {"mean", "ci95", "n"} and point[key]["n"] == 3
    report = (tmp_path / "report.md").read_text()
    assert "Unallocated GPUs" in report and "| fgd |" in report
    assert (tmp_path / "unallocated_gpus.png").stat().st_size > 0
    assert (tmp_path / "fragmented_gpus.png").stat().st_size > 0
    again = tmp_path / "again"
    drlsched("fill", "--trace", str(OPENB), "--trace-format", "alibaba-gpu-v2023", "--policies",
             "k8s-default,fgd,most-allocated", "--seeds", "3", "--out", str(again), "--jobs", "1")
    same = json.loads((again / "results.json").read_text())
    for policy, entry in results["policies"].items():  # seeded: the same numbers, whatever the worker count
        assert same["policies"][policy]["points"] == entry["points"]
        assert same["policies"][policy]["curve"] == entry["curve"]


@pytest.mark.parametrize(("args", "message"), [
    (["--scenario", "batch", "--nodes", "4", "--duration", "60"], "the cluster has no GPUs"),
    (["--scenario", "ml-gpu", "--nodes", "4", "--duration", "600", "--max-demand", "0"], "--max-demand must be"),
    (["--scenario", "ml-gpu", "--nodes", "4", "--duration", "600", "--max-demand", "-1"], "--max-demand must be"),
    (["--scenario", "ml-gpu", "--nodes", "4", "--policies", "k8s-default,nope"], "unknown policy 'nope'"),
])
def test_fill_command_refuses_bad_input_in_one_line(tmp_path, args, message):
    full = ["fill", "--out", str(tmp_path), *args]
    if "--policies" not in args:
        full += ["--policies", "k8s-default"]
    res = drlsched(*full)
    assert res.returncode == 2
    assert message in res.stderr and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_fill_on_a_scenario(tmp_path):
    res = drlsched("fill", "--scenario", "ml-gpu", "--nodes", "8", "--policies", "k8s-default,fgd", "--seeds", "2",
                   "--max-demand", "1.0", "--out", str(tmp_path), "--jobs", "1")
    assert res.returncode == 0, res.stderr
    points = json.loads((tmp_path / "results.json").read_text())["policies"]["fgd"]["points"]
    assert points[-1]["demand"] == 1.0
