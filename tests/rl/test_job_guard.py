"""The learned job policy's distribution-shift guard (issue 24 §4) and a query the policy never saw.

Guard: a stream of arrivals like training's keeps the learned policy; a burst far beyond the training rate, or jobs
far larger than training's, hands decisions to the fallback, logged once per switch, and back when the window
returns. End to end: a batch (all jobs at once) under a guarded policy decides exactly as its fallback does.
Unseen query: a hand-made profile in the tpch format (a DAG shape and task times none of the 18 queries has) runs
under the trained policy with every decision valid."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest
import torch

from drlsched.cli import main
from drlsched.errors import UserError
from drlsched.jobs.engine import JobEngine
from drlsched.jobs.model import Job
from drlsched.jobs.policies import Decision, make_job_policy
from drlsched.jobs.workload import JobSource, run_jobs
from drlsched.rl.job_guard import GuardedJobPolicy, TrainRange, range_for
from drlsched.rl.job_net import JobNet, JobNetSpec
from drlsched.rl.job_policy import LearnedJobPolicy, load_job_net, save_job_policy

POLICY = Path(__file__).resolve().parents[2] / "bench" / "results" / "job_policy" / "policy.pt"
BOUNDS = TrainRange(rate_per_s=(0.003, 0.007), work_s=(20_000.0, 60_000.0), window=10)


class Tag:
    """A stand-in policy that says who decided."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        self.calls += 1
        return []


def _stream(guard: GuardedJobPolicy, gaps: Sequence[float], work: float, start: int = 0, t0: float = 0.0
            ) -> float:
    """Arrivals `gaps` apart, each seen by a decision (a few jobs stay live, as in a loaded system)."""
    live: list[Job] = []
    t = t0
    for k, gap in enumerate(gaps):
        t += gap
        live = [*live[-3:], cast(Job, SimpleNamespace(ident=start + k, arrival_s=t, work_s=work))]
        guard.decide(live, 100, lambda j: 0.0)
    return t


def _guard() -> tuple[GuardedJobPolicy, Tag, Tag]:
    learned, fallback = Tag("ppo:x"), Tag("weighted-fair:-2")
    return GuardedJobPolicy(learned, fallback, BOUNDS), learned, fallback


def test_arrivals_like_training_keep_the_learned_policy() -> None:
    guard, learned, fallback = _guard()
    _stream(guard, np.random.default_rng(0).uniform(0.8, 1.2, 200) / 0.0045, 40_000.0)
    assert fallback.calls == 0 and learned.calls == 200 and guard.switches == 0


def test_a_burst_beyond_the_range_delegates_and_comes_back(caplog: pytest.LogCaptureFixture) -> None:
    guard, _, fallback = _guard()
    caplog.set_level(logging.WARNING, logger="drlsched.jobs")
    t = _stream(guard, [1 / 0.0045] * 30, 40_000.0)
    assert fallback.calls == 0
    t = _stream(guard, [1.0] * 20, 40_000.0, start=30, t0=t)  # 1 job/s, ~200× the training rate
    assert fallback.calls >= 10 and guard.delegating
    _stream(guard, [1 / 0.0045] * 30, 40_000.0, start=50, t0=t)
    assert not guard.delegating and guard.switches == 2
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2 and "delegating to weighted-fair:-2" in msgs[0] and "back" in msgs[1]


def test_jobs_far_larger_than_training_delegate() -> None:
    guard, _, fallback = _guard()
    _stream(guard, [1 / 0.0045] * 30, 400_000.0)
    assert fallback.calls > 0 and guard.delegating


def _small_checkpoint(path: Path, meta: dict[str, object]) -> Path:
    torch.manual_seed(0)
    save_job_policy(path, JobNet(JobNetSpec(8, 2)), meta)
    return path


def test_a_batch_under_the_guard_delegates_once_the_window_fills(tmp_path: Path) -> None:
    meta = {"guard_range": {"rate_per_s": [0.003, 0.007], "work_s": [1.0, 1e9], "window": 10}}
    ckpt = _small_checkpoint(tmp_path / "policy.pt", meta)
    source = JobSource(nodes=4, batch=12)
    guard = make_job_policy(f"ppo:{ckpt}:fallback=fifo")
    assert isinstance(guard, GuardedJobPolicy) and guard.name == f"ppo:{ckpt}:fallback=fifo"
    guarded = JobEngine(source.arrivals(3), guard, source.config(), 3).run()
    # all 12 arrive at t=0: from the 10th on the window's rate is infinite, and it never comes back
    assert guard.switches == 1 and guard.delegating and guard.delegated >= guard.decisions - 9 > 0
    unguarded = run_jobs(source, f"ppo:{ckpt}:fallback=none", 3)
    assert isinstance(make_job_policy(f"ppo:{ckpt}:fallback=none"), LearnedJobPolicy)
    assert guarded["jct_mean_s"] != unguarded["jct_mean_s"]  # the untrained net is not fifo


def test_a_checkpoint_without_a_range_gets_its_training_settings_range(tmp_path: Path) -> None:
    meta = {"workload": "tpch", "nodes": 25, "load": 0.85, "duration_s": 21600.0, "settings": {"seed": 0}}
    bounds = range_for(tmp_path / "p.pt", meta)
    assert bounds is not None and bounds.rate_per_s[0] < 0.0045 < bounds.rate_per_s[1]  # the load's Poisson rate
    assert 0 < bounds.work_s[0] < bounds.work_s[1]
    with pytest.raises(UserError, match="fallback=none"):
        range_for(tmp_path / "p.pt", {"workload": "spark-profiles:/x", "settings": {"seed": 0}})
    with pytest.raises(UserError, match="guard_range"):
        range_for(tmp_path / "p.pt", {"guard_range": {"rate_per_s": [1, -1]}})
    with pytest.raises(UserError, match="heuristic"):
        make_job_policy(f"ppo:{_small_checkpoint(tmp_path / 'q.pt', meta)}:fallback=ppo:x")


# --- a query never seen ------------------------------------------------------------------------------------------
def _unseen_query(root: Path) -> Path:
    """Q99: a diamond of two scans joined, then a wide shuffle and a one-task result (5 stages; task times and
    counts unlike the 18 queries), profiled at two sizes and two core limits."""
    root.mkdir()
    dag = [{"name": 0, "children": [2]}, {"name": 1, "children": [2, 3]}, {"name": 2, "children": [4]},
           {"name": 3, "children": [4]}, {"name": 4, "children": []}]
    (root / "queries.yaml").write_text(json.dumps({"graphs": [{"name": "Q99", "graph": dag}]}))
    cells = {}
    for size, scale in ((2, 1.0), (50, 6.0)):
        for cores, slow in ((50, 1.6), (200, 1.0)):
            cells[f"tpch_q99_{size}g_maxCores_{cores}"] = [
                {"stage_id": s, "stage_name": f"s{s}", "num_tasks": int(n * scale),
                 "average_runtime_ms": ms * slow} for s, n, ms in ((0, 40, 900), (1, 7, 5200), (2, 333, 410),
                                                                  (3, 3, 12000), (4, 1, 150))]
    (root / "q99.json").write_text(json.dumps(cells))
    return root


def test_the_trained_policy_runs_a_query_it_never_saw(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    net, _ = load_job_net(POLICY)
    learned = LearnedJobPolicy(net)
    learned.record = []
    profiles = str(_unseen_query(tmp_path / "q99"))
    source = JobSource(profiles=profiles, nodes=4, duration_s=7200.0)
    summary = JobEngine(source.arrivals(0), learned, source.config(), 0).run()
    assert summary["jobs_finished"] > 5 and summary["jobs_unfinished"] == 0
    decided = [s for s in learned.record if s.obs.eligible.any()]
    assert decided  # the net, not the no-choice shortcut, took decisions
    for s in decided:  # a rank for exactly the eligible jobs, 0…n−1, and only limit levels the mask allows
        ranked = s.ranks >= 0
        assert np.array_equal(ranked, s.obs.eligible)
        assert sorted(s.ranks[ranked]) == list(range(int(ranked.sum())))
        assert s.obs.limit_mask[s.levels[ranked]].all()
    assert main(["simulate", "--trace", profiles, "--trace-format", "spark-profiles", "--nodes", "4",
                 "--duration", "7200", "--job-policy", f"ppo:{POLICY}", "--json", "-"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["job_policy"] == f"ppo:{POLICY}" and m["jobs_unfinished"] == 0 and m["jobs_finished"] > 5
