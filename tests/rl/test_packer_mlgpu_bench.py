"""The ml-gpu tail benches at tiny sizes: bench/simulator/mlgpu_tail.py's probe changes no decision (its P99 JCT
is the simulator's own) and decomposes every run; bench/learning/packer_mlgpu.py --select-seeds picks the best
heuristic on the validation seeds only and refuses seeds that overlap the held-out ones (one line, exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "bench" / "results" / "packer" / "policy.pt"
TINY = ["--nodes", "10", "--duration", "900", "--jobs", "1"]


def _bench(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], capture_output=True, text=True,
                          timeout=600, env={"PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"})


def test_the_tail_probe_matches_the_simulator_and_decomposes_every_run() -> None:
    res = _bench("simulator/mlgpu_tail.py", "--policies", "first-fit,reserve+fgd,avoid-P100+fgd", "--seeds", "900",
                 *TINY)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [r["policy"] for r in out["per_run"]] == ["first-fit", "reserve+fgd", "avoid-P100+fgd"]
    for run in out["per_run"]:
        assert run["jct_p99_s"] == pytest.approx(run["metric_jct_p99_s"])  # the probe changes no decision
        assert run["jct_p99_if_no_wait_s"] <= run["jct_p99_s"] + 1e-6
        assert sum(c["jobs"] for c in run["by_class"].values()) == run["jobs"]
        assert sum(m["jobs"] for m in run["by_model"].values()) == run["jobs"]
        assert sum(c["tail_jobs"] for c in run["by_class"].values()) == run["tail_jobs"] >= 1
    assert set(out["summary"]) == {"first-fit", "reserve+fgd", "avoid-P100+fgd"}


def test_a_bad_policy_or_seed_list_is_one_line() -> None:
    for args, words in ((["--policies", "nope"], "unknown policy"), (["--seeds", "a,b"], "--seeds")):
        res = _bench("simulator/mlgpu_tail.py", *args, *TINY)
        assert res.returncode == 2 and res.stdout == "" and words in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_select_seeds_picks_on_validation_and_runs_only_the_pick_on_held_out_seeds() -> None:
    res = _bench("learning/packer_mlgpu.py", "--policy", f"packer:{COMMITTED}", "--baselines", "first-fit,fgd",
                 "--seeds", "1", "--select-seeds", "900:901", *TINY)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    sel = out["selection"]
    assert sel["seeds"] == [900] and set(sel["per_policy"]) == {"first-fit", "fgd"}
    best = min(sel["per_policy"], key=lambda b: sel["per_policy"][b]["jct_p99_s"]["mean"])
    assert out["best_heuristic"] == sel["picked"] == best and out["best_picked_on"] == "validation seeds"
    assert set(out["per_policy"]) == {f"packer:{COMMITTED}", best} and out["seeds"] == [0]
    assert out["nodes"] == 10


def test_select_seeds_that_overlap_the_held_out_ones_are_refused() -> None:
    for sel, words in (("0:3", "overlaps the held-out seeds"), ("9:2", "want A:B")):
        res = _bench("learning/packer_mlgpu.py", "--policy", f"packer:{COMMITTED}", "--baselines", "first-fit",
                     "--seeds", "2", "--select-seeds", sel, *TINY)
        assert res.returncode == 2 and res.stdout == "" and words in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
