"""--usage-trace: real CPU usage series replayed onto LS pods, each form recognised by its header."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drlsched.errors import UserError
from drlsched.policies import make_policy
from drlsched.simulator import SimConfig, Simulator
from drlsched.usage_trace import load_usage
from drlsched.workload import NodeSpec, PodSpec, QoS, Workload

FIX = Path(__file__).parent / "fixtures" / "usage"


@pytest.mark.parametrize(("name", "form", "relative", "count"), [
    ("machine_usage.csv", "alibaba-machine", True, 2), ("container_usage.csv", "alibaba-container", False, 2),
    ("bitbrains", "bitbrains", False, 2), ("bitbrains/vm_1.csv", "bitbrains", False, 1),
    ("google_jobs.csv", "google-jobs", False, 1)])
def test_each_form_is_recognised_by_its_header(name, form, relative, count):
    u = load_usage(str(FIX / name))
    assert (u.form, u.relative, len(u.series)) == (form, relative, count)


def test_series_are_resampled_to_the_tick_and_shapes_normalised():
    grid, lengths = load_usage(str(FIX / "container_usage.csv")).grid(15.0)
    assert lengths.tolist() == [5, 5]
    assert grid[0].tolist() == pytest.approx([0.1, 0.3, 0.5, 0.3, 0.1])  # % of request, interpolated
    shape, _ = load_usage(str(FIX / "machine_usage.csv")).grid(60.0)
    assert shape[0].mean() == pytest.approx(1.0) and shape[0, 2] == pytest.approx(60 / 40)
    bb, _ = load_usage(str(FIX / "bitbrains")).grid(300.0)
    assert bb[0, :3].tolist() == pytest.approx([0.1, 0.3, 0.1])  # epoch seconds, 5-minute samples
    google, glen = load_usage(str(FIX / "google_jobs.csv")).grid(300.0)
    assert glen.tolist() == [3] and google[0].tolist() == pytest.approx([0.2, 0.4, 0.2])


@pytest.mark.parametrize(("name", "fmt", "message"), [
    ("wrong_columns.csv", None, "accepted forms"), ("bad_value.csv", None, "expected numbers"),
    ("container_usage.csv", "bitbrains", "not a bitbrains usage series"), ("missing.csv", None, "cannot read")])
def test_wrong_forms_are_refused_naming_the_accepted_ones(name, fmt, message):
    with pytest.raises(UserError, match=message):
        load_usage(str(FIX / name), fmt)


def test_ls_pods_follow_their_series_and_other_pods_do_not():
    u = load_usage(str(FIX / "container_usage.csv"))
    pods = [PodSpec("ls", "ls", 0.5, 10_000, 100, qos=QoS.LS, service=True, work_s=None, startup_s=0.5),
            PodSpec("b", "b", 0.5, 1000, 100, work_s=1000.0, startup_s=0.5, usage_cpu=0.5, usage_cv=0.0)]
    w = Workload("t", [NodeSpec("a", 20_000, 10_000)], pods, 90.0, drain_s=0.0, usage=u)
    sim = Simulator(w, make_policy("k8s-default"), 0, SimConfig(tick_s=15.0))
    seen = []
    tick = sim._tick

    def record(t):  # type: ignore[no-untyped-def]
        tick(t)
        if sim.slot_runs:
            seen.append((t, sim.s_use[:2, 0].copy()))

    sim._tick = record  # type: ignore[method-assign]
    sim.run()
    by_t = {t: use for t, use in seen}
    # Seed 0 hands series 0 (c_1: 10%, 50% at 30 s, 10% at 60 s) to the first LS pod; the batch pod keeps 0.5.
    assert by_t[30.0].tolist() == pytest.approx([5000.0, 500.0])
    assert by_t[60.0].tolist() == pytest.approx([1000.0, 500.0])
    assert np.isfinite(by_t[45.0]).all()


def test_the_cli_refuses_a_usage_trace_of_another_form():
    res = subprocess.run([sys.executable, "-m", "drlsched.cli", "simulate", "--scenario", "colocation", "--nodes", "2",
                          "--duration", "60", "--policy", "k8s-default", "--quiet", "--usage-trace",
                          str(FIX / "wrong_columns.csv")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "accepted forms" in res.stderr and "Traceback" not in res.stderr
    ok = subprocess.run([sys.executable, "-m", "drlsched.cli", "simulate", "--scenario", "colocation", "--nodes", "2",
                         "--duration", "120", "--policy", "k8s-default", "--quiet", "--reclaim", "koordinator",
                         "--usage-trace", str(FIX / "machine_usage.csv"), "--json", "-"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
