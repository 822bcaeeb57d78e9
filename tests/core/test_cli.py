"""The CLI end to end, in a subprocess as a user runs it: outputs, exit codes, no tracebacks."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from drlsched.metrics import METRIC_KEYS, RUN_KEYS


def drlsched(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "drlsched.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_simulate_json_to_stdout_has_every_key():
    res = drlsched("simulate", "--scenario", "spark-tpcds", "--policy", "k8s-default", "--nodes", "6",
                   "--duration", "120", "--seed", "4", "--json", "-")
    assert res.returncode == 0, res.stderr
    metrics = json.loads(res.stdout)
    for key in (*METRIC_KEYS, *RUN_KEYS):
        assert key in metrics
    assert metrics["policy"] == "k8s-default" and metrics["scenario"] == "spark-tpcds" and metrics["seed"] == 4


def test_simulate_summary_and_file(tmp_path):
    out = tmp_path / "m.json"
    res = drlsched("simulate", "--scenario", "batch", "--policy", "fgd", "--nodes", "5", "--duration", "60",
                   "--json", str(out))
    assert res.returncode == 0, res.stderr
    assert "jct_p99_s" in res.stdout and json.loads(out.read_text())["policy"] == "fgd"


def test_evaluate_writes_results_report_and_plots(tmp_path):
    res = drlsched("evaluate", "--scenario", "ml-gpu", "--policies", "k8s-default,fgd,most-allocated",
                   "--nodes", "10", "--duration", "1800", "--seeds", "2", "--out", str(tmp_path), "--jobs", "1",
                   "--quiet", "--allow-unschedulable")
    assert res.returncode == 0, res.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["policies"]) == {"k8s-default", "fgd", "most-allocated"}
    stat = results["policies"]["fgd"]["jct_p99_s"]
    assert set(stat) == {"mean", "ci95", "n"} and stat["n"] == 2
    paired = results["ratio_vs_k8s-default"]
    assert set(paired) == {"fgd", "most-allocated"} and paired["fgd"]["pods_scheduled"]["n"] == 2
    report = (tmp_path / "report.md").read_text()
    assert "P99 JCT" in report and "Cross-node traffic" in report and "GPU frag" in report
    assert "%)" in report  # changes relative to k8s-default
    assert "Paired ratio to `k8s-default`" in report
    for png in ("utilisation.png", "jct_cdf.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    assert "| k8s-default |" in res.stdout


def test_paired_seeds_give_every_policy_the_same_workload(tmp_path):
    res = drlsched("evaluate", "--scenario", "batch", "--policies", "k8s-default,random", "--nodes", "5",
                   "--duration", "60", "--seeds", "2", "--out", str(tmp_path), "--quiet")
    assert res.returncode == 0, res.stderr
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    by_seed = {}
    for r in runs:
        by_seed.setdefault(r["seed"], set()).add(r["pods"])
    assert all(len(v) == 1 for v in by_seed.values())


@pytest.mark.parametrize("args", [
    ["simulate", "--scenario", "nope", "--policy", "k8s-default"],
    ["simulate", "--scenario", "batch", "--policy", "nope"],
    ["simulate", "--scenario", "batch", "--policy", "fgd", "--nodes", "-4"],
    ["simulate", "--scenario", "batch", "--policy", "fgd", "--nodes", "abc"],
    ["simulate", "--scenario", "batch", "--policy", "fgd", "--duration", "inf"],
    ["simulate", "--scenario", "batch", "--policy", "fgd", "--nodes", "99999999"],
    ["simulate", "--policy", "fgd"],
    ["evaluate", "--scenario", "batch", "--policies", "k8s-default,,", "--out", "x"],
    ["evaluate", "--scenario", "batch", "--policies", "fgd,fgd", "--out", "x"],
    ["evaluate", "--scenario", "batch", "--policies", "fgd", "--seeds", "0", "--out", "x"],
])
def test_bad_input_is_a_clear_error_without_traceback(args, tmp_path):
    res = drlsched(*args, cwd=tmp_path)
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    assert "error" in res.stderr


def test_pod_that_fits_nowhere_fails_clearly():
    # The openb fixture scaled to 1 node keeps its CPU-only shape: no GPU pod fits.
    fixture = Path(__file__).parent.parent / "traces" / "fixtures" / "alibaba-gpu-v2023"
    res = drlsched("simulate", "--trace", str(fixture), "--trace-format", "alibaba-gpu-v2023", "--nodes", "1",
                   "--policy", "k8s-default", "--quiet")
    assert res.returncode == 2
    assert "fits no node even on an empty cluster" in res.stderr and "Traceback" not in res.stderr


def test_paired_ratios_pair_by_seed():
    from drlsched.evaluate import paired_ratios

    def run(policy, seed, jct):
        return {"metrics": {"policy": policy, "seed": seed, **{k: 1.0 for k in METRIC_KEYS}, "jct_p99_s": jct}}

    runs = [run("k8s-default", 0, 100.0), run("k8s-default", 1, 200.0), run("ppo", 0, 50.0), run("ppo", 1, 100.0)]
    ratio = paired_ratios(runs, ["k8s-default", "ppo"], "k8s-default")["ppo"]["jct_p99_s"]
    assert ratio == {"mean": 0.5, "ci95": 0.0, "n": 2}


def test_evaluate_reports_included_replay_results(tmp_path):
    common = ["--scenario", "batch", "--nodes", "5", "--duration", "60"]
    sim = drlsched("simulate", *common, "--policy", "k8s-default", "--seed", "0", "--json", "-", "--quiet")
    real = json.loads(sim.stdout)
    real["policy"], real["source"] = "real:default", "replay"
    path = tmp_path / "real.json"
    path.write_text(json.dumps(real))
    out = tmp_path / "out"
    res = drlsched("evaluate", *common, "--policies", "k8s-default", "--seeds", "1", "--out", str(out), "--quiet",
                   "--include", str(path))
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    assert set(results["policies"]) == {"k8s-default", "real:default"}
    assert results["ratio_vs_k8s-default"]["real:default"]["jct_p99_s"]["mean"] == pytest.approx(1.0)
    assert "| real:default |" in (out / "report.md").read_text()
    bad = tmp_path / "bad.json"
    bad.write_text('{"policy": "x"}')
    res = drlsched("evaluate", *common, "--policies", "k8s-default", "--seeds", "1", "--out", str(out), "--quiet",
                   "--include", str(bad))
    assert res.returncode == 2 and "not a drlsched metrics file" in res.stderr


def test_evaluate_include_names_the_missing_anomaly_key(tmp_path):
    common = ["--scenario", "batch", "--nodes", "5", "--duration", "60"]
    sim = drlsched("simulate", *common, "--policy", "k8s-default", "--seed", "0", "--json", "-", "--quiet")
    old = json.loads(sim.stdout)
    del old["anomaly_rate"], old["anomalies"]  # a metrics file written before the anomaly metric
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    res = drlsched("evaluate", *common, "--policies", "k8s-default", "--seeds", "1", "--out", str(tmp_path / "out"),
                   "--quiet", "--include", str(path))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "missing anomaly_rate, anomalies" in res.stderr
    old["anomaly_rate"], old["anomalies"] = 0.0, {"evicted": 0}  # parts missing: named one by one
    path.write_text(json.dumps(old))
    res = drlsched("evaluate", *common, "--policies", "k8s-default", "--seeds", "1", "--out", str(tmp_path / "out"),
                   "--quiet", "--include", str(path))
    assert res.returncode == 2 and "missing anomalies.unschedulable_60s" in res.stderr


def test_empty_samples_are_null_with_one_warning_line_and_na_in_the_report(tmp_path):
    common = ["--scenario", "batch", "--nodes", "5", "--duration", "60"]  # no LS pods: no SLA sample
    sim = drlsched("simulate", *common, "--policy", "k8s-default", "--json", "-", "--quiet")
    assert sim.returncode == 0, sim.stderr
    metrics = json.loads(sim.stdout)
    assert metrics["sla_violation_rate"] is None and metrics["ls_slowdown_p99"] is None
    assert 0.0 <= metrics["anomaly_rate"] <= 1.0 and set(metrics["anomalies"]) >= {"unschedulable_60s", "evicted"}
    warning = [line for line in sim.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and "sla_violation_rate" in warning[0] and "no LS pod ran" in warning[0]
    res = drlsched("evaluate", *common, "--policies", "k8s-default,fgd", "--seeds", "2", "--out", str(tmp_path),
                   "--quiet", "--jobs", "1")
    assert res.returncode == 0, res.stderr
    assert len([line for line in res.stderr.splitlines() if "warning" in line]) == 1
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["policies"]["fgd"]["sla_violation_rate"] == {"mean": None, "ci95": None, "n": 0}
    assert results["policies"]["fgd"]["anomaly_rate"]["n"] == 2
    report = (tmp_path / "report.md").read_text()
    assert "n/a" in report and "Anomaly rate (%)" in report and "startup_slow" in report
