"""--usage-trace: real CPU usage series replayed onto LS pods, each form recognised by its header."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drlsched.errors import UserError
from drlsched.policies import make_policy
from drlsched.simulator import SimConfig, Simulator
from drlsched.usage_trace import load_usage, parse_usage_series, parse_usage_window
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


@pytest.mark.parametrize(("text", "window"), [
    ("0:5d", (0.0, 432_000.0)), ("5d:", (432_000.0, math.inf)), (":90", (0.0, 90.0)), ("1.5h:2h", (5400.0, 7200.0)),
    ("30m:3600s", (1800.0, 3600.0)), (":", (0.0, math.inf))])
def test_usage_windows_parse_with_units_and_open_sides(text, window):
    assert parse_usage_window(text) == window


@pytest.mark.parametrize("text", ["5d", "x:1", "2:1", "-1:5", "1:1", "5w:", "nan:1", "1:2:3"])
def test_bad_usage_windows_are_refused(text):
    with pytest.raises(UserError, match="--usage-window expects START:END"):
        parse_usage_window(text)


@pytest.mark.parametrize("text", ["0.5", "0.5:0.5", "0:1.5", "a:b", "-0.1:0.5", "0.6:0.2"])
def test_bad_usage_series_shares_are_refused(text):
    with pytest.raises(UserError, match="--usage-series expects FROM:TO"):
        parse_usage_series(text)


def test_a_share_of_the_series_keeps_them_in_file_order_and_the_halves_partition_them():
    path = str(FIX / "bitbrains")
    first, second = load_usage(path, None, None, (0.0, 0.5)), load_usage(path, None, None, parse_usage_series("0.5:1"))
    whole = load_usage(path)
    assert [s[1].tolist() for s in first.series + second.series] == [s[1].tolist() for s in whole.series]
    assert len(first.series) == len(second.series) == 1 and first.series[0][1][0] == pytest.approx(0.1)  # vm_1
    assert first.drawn_start and not whole.drawn_start
    with pytest.raises(UserError, match="keeps none of the 2 series"):
        load_usage(path, None, None, (0.1, 0.2))


def test_a_window_is_cut_from_the_traces_start_for_every_series(tmp_path):
    # m_2 starts 120 s after m_1: its window is measured from m_1's start (the trace's), not from its own.
    rows = [f"m_1,{t},{10 + t // 60},50" for t in range(0, 600, 60)] + [f"m_2,{t},{t // 60},50"
                                                                           for t in range(120, 600, 60)]
    f = tmp_path / "m.csv"
    f.write_text("machine_id,time_stamp,cpu_util_percent,mem_util_percent\n" + "\n".join(rows) + "\n")
    early, late = load_usage(str(f), None, (0.0, 180.0)), load_usage(str(f), None, parse_usage_window("180:"))
    assert [t.tolist() for t, _ in early.series] == [[0, 60, 120], [120]]
    assert [t.tolist() for t, _ in late.series] == [list(range(180, 600, 60))] * 2
    with pytest.raises(UserError, match="holds no sample"):
        load_usage(str(f), None, (600.0, math.inf))


def _ls_use(usage, seed):  # type: ignore[no-untyped-def]
    """The CPU use of one LS pod (request 1 core) at each usage tick of a 600 s run."""
    pods = [PodSpec("ls", "ls", 0.5, 1000, 100, qos=QoS.LS, service=True, work_s=None, startup_s=0.5)]
    w = Workload("t", [NodeSpec("a", 20_000, 10_000)], pods, 600.0, drain_s=0.0, usage=usage)
    sim = Simulator(w, make_policy("k8s-default"), seed, SimConfig(tick_s=60.0))
    seen = {}
    tick = sim._tick

    def record(t):  # type: ignore[no-untyped-def]
        tick(t)
        if sim.slot_runs:
            seen[t] = float(sim.s_use[0, 0])

    sim._tick = record  # type: ignore[method-assign]
    sim.run()
    return seen


def test_a_part_is_replayed_from_a_seeded_point_inside_it(tmp_path):
    # One series, a minute per sample for 100 minutes: 10% of request for the first 50, 90% after.
    f = tmp_path / "c.csv"
    f.write_text("container_id,machine_id,time_stamp,cpu_util_percent,mem_util_percent\n"
                 + "".join(f"c,m,{60 * k},{10 if k < 50 else 90},5\n" for k in range(100)))
    whole = load_usage(str(f))
    assert set(_ls_use(whole, 3).values()) == {100.0}  # the whole series: replayed from its start, as before
    starts = set()
    for seed in range(8):
        early = _ls_use(load_usage(str(f), None, (0.0, 3000.0)), seed)
        late = _ls_use(load_usage(str(f), None, (3000.0, math.inf)), seed)
        assert set(early.values()) == {100.0} and set(late.values()) == {900.0}  # never the other part's usage
        mixed = _ls_use(load_usage(str(f), None, None, (0.0, 1.0)), seed)
        starts.add(tuple(mixed.values()))
    assert len(starts) > 1  # the seeds start at different points of the series


def test_the_cli_refuses_a_bad_usage_part_in_one_line():
    base = [sys.executable, "-m", "drlsched.cli", "simulate", "--scenario", "colocation", "--nodes", "2",
            "--duration", "60", "--policy", "k8s-default", "--quiet"]
    for extra, message in ((["--usage-trace", str(FIX / "machine_usage.csv"), "--usage-window", "5d"],
                            "--usage-window expects START:END"),
                           (["--usage-window", "0:5d"], "--usage-window needs --usage-trace PATH"),
                           (["--usage-trace", str(FIX / "machine_usage.csv"), "--usage-window", "1d:"],
                            "holds no sample")):
        res = subprocess.run(base + extra, capture_output=True, text=True, timeout=300)
        assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
