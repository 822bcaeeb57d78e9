"""bench/learning/packer_heldout.py on two tiny generated pod lists (never the real held-out lists): the training
list beside them is not counted, every list gets the paired ratios at 95/100/130% and the criteria; no lists, or
a checkpoint that is not a packer's, is one line and exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drlsched.rl.checkpoint import save_policy
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.packer_checkpoint import save_packer
from drlsched.rl.packer_net import PackerNet, PackerSpec

ROOT = Path(__file__).resolve().parents[2]
OPENB = ROOT / "tests" / "traces" / "fixtures" / "alibaba-gpu-v2023"
BENCH = ROOT / "bench" / "learning" / "packer_heldout.py"


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"})


def _pod_list(path: Path, seed: int, pods: int = 30) -> None:
    rng = np.random.default_rng(seed)
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli"]
    for i in range(pods):
        gpus = int(rng.choice([1, 1, 1, 2]))
        milli = int(rng.choice([250, 500, 1000])) if gpus == 1 else 1000
        rows.append(f"p{i},{int(rng.integers(1, 8)) * 1000},{int(rng.integers(1, 16)) * 1024},{gpus},{milli}")
    path.write_text("\n".join(rows) + "\n")


@pytest.fixture
def lists(tmp_path: Path) -> Path:
    d = tmp_path / "lists"
    d.mkdir()
    shutil.copy(OPENB / "openb_node_list_all_node.csv", d)
    shutil.copy(OPENB / "openb_pod_list_default.csv", d)  # the training list: never counted
    _pod_list(d / "openb_pod_list_tiny_a.csv", 1)
    _pod_list(d / "openb_pod_list_tiny_b.csv", 2)
    return d


@pytest.fixture
def packer(tmp_path: Path) -> Path:
    path = tmp_path / "packer.pt"
    save_packer(path, PackerNet(PackerSpec(slots=8, models=("G2", "T4"))), {})
    return path


def test_every_held_out_list_gets_paired_ratios_and_the_criteria(lists: Path, packer: Path) -> None:
    res = _bench("--lists", str(lists), "--policy", str(packer), "--seeds", "2", "--jobs", "1")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["lists"] == ["openb_pod_list_tiny_a.csv", "openb_pod_list_tiny_b.csv"] and not out["complete"]
    assert [e["list"] for e in out["per_list"]] == out["lists"]
    for entry in out["per_list"]:
        for level in ("95", "100", "130"):
            seeds = entry[level]["per_seed"]
            assert [s["seed"] for s in seeds] == [0, 1]
            for s in seeds:
                if s["fgd_pct"]:
                    assert s["ratio"] == pytest.approx(s["packer_pct"] / s["fgd_pct"])
                elif s["fgd_pct"] == 0 and s["packer_pct"] == 0:
                    assert s["ratio"] == 1.0  # both filled the cluster: equal
    for level in ("95", "100", "130"):
        c = out["criteria"][level]
        assert c["wins_needed"] == 2 and c["lists_compared"] <= 2 and isinstance(c["met"], bool)


def test_no_lists_or_a_wrong_checkpoint_is_one_line(lists: Path, packer: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(OPENB / "openb_pod_list_default.csv", empty)
    placement = tmp_path / "placement.pt"
    save_policy(placement, SchedulerNet(NetConfig()), "ppo", {})
    for args, words in ((["--lists", str(empty), "--policy", str(packer)], "no held-out openb pod lists"),
                        (["--lists", str(tmp_path / "missing"), "--policy", str(packer)], "is not a directory"),
                        (["--lists", str(lists), "--policy", str(placement)], "placement policy")):
        res = _bench(*args)
        assert res.returncode == 2 and res.stdout == ""
        assert len(res.stderr.strip().splitlines()) == 1 and words in res.stderr, res.stderr
