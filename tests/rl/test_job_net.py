"""The learned job policy's features and network: permutation and size independence, masks, seeded sampling."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from drlsched.jobs.engine import EngineConfig, JobEngine
from drlsched.jobs.model import JobArrival, JobSpec, StageSpec
from drlsched.rl.job_features import JOB_WIDTH, STAGE_WIDTH, limit_levels, observe
from drlsched.rl.job_net import JobNet, JobNetSpec, collate, ranking_log_prob
from drlsched.rl.job_policy import LearnedJobPolicy


def _dag(name: str, tasks: int, cpu: float) -> JobSpec:
    """A diamond: 0 → 1, 0 → 2, (1, 2) → 3."""
    parents: list[tuple[int, ...]] = [(), (0,), (0,), (1, 2)]
    st = tuple(StageSpec(i, tasks, cpu, 0.1, parents=p) for i, p in enumerate(parents))
    return JobSpec(name, "0", 1, st, profile_cores=1)


def _arrivals(n: int, seed: int = 0) -> list[JobArrival]:
    rng = np.random.default_rng(seed)
    return [JobArrival(i, float(i) * 3.0, _dag(f"j{i}", int(rng.integers(1, 12)), float(rng.uniform(0.5, 5.0))))
            for i in range(n)]


def _cfg(executors: int) -> EngineConfig:
    return EngineConfig(executors=executors, startup_std_s=0.0)


class _Snapshot:
    """A policy that runs another and keeps the live jobs of one decision with several jobs in it."""

    def __init__(self, inner: LearnedJobPolicy) -> None:
        self.inner, self.name, self.jobs = inner, "snap", None
        self.args: tuple | None = None

    def decide(self, jobs, executors, critical_path):  # type: ignore[no-untyped-def]
        if self.args is None and len(jobs) >= 3 and any(j.running for j in jobs):
            self.args = (list(jobs), executors, {j.ident: critical_path(j) for j in jobs})
        return self.inner.decide(jobs, executors, critical_path)


def _decision_state() -> tuple[list, int, dict]:
    torch.manual_seed(0)
    snap = _Snapshot(LearnedJobPolicy(JobNet(JobNetSpec())))
    JobEngine(_arrivals(6), snap, _cfg(8)).run()  # type: ignore[arg-type]
    assert snap.args is not None
    return snap.args


def test_shapes_and_edges_cover_unfinished_stages() -> None:
    jobs, e, cp = _decision_state()
    obs = observe(jobs, e, lambda j: cp[j.ident])
    assert obs.stage_x.shape[1] == STAGE_WIDTH and obs.job_x.shape == (len(jobs), JOB_WIDTH)
    assert obs.stage_job.shape == (obs.stage_x.shape[0],)
    assert set(obs.stage_job.tolist()) <= set(range(len(jobs)))
    assert obs.edges.shape[0] == 2 and (obs.stage_job[obs.edges[0]] == obs.stage_job[obs.edges[1]]).all()
    fresh = [k for k, j in enumerate(jobs) if all(st.done == 0 for st in j.stages)]
    for k in fresh:  # an untouched diamond: 4 stages, 4 edges
        assert (obs.stage_job == k).sum() == 4
        assert (obs.stage_job[obs.edges[0]] == k).sum() == 4


def test_scores_follow_the_jobs_when_they_are_permuted() -> None:
    jobs, e, cp = _decision_state()
    net = JobNet(JobNetSpec())
    ref_s, ref_l = net(collate([observe(jobs, e, lambda j: cp[j.ident])]))
    perm = list(reversed(range(len(jobs))))
    s, lim = net(collate([observe([jobs[k] for k in perm], e, lambda j: cp[j.ident])]))
    # arrival-rank and size-rank features follow the job, not its row, so every output moves with its job
    assert torch.allclose(s, ref_s[perm], atol=1e-5)
    assert torch.allclose(lim, ref_l[perm], atol=1e-5)


@pytest.mark.parametrize(("executors", "jobs"), [(2, 1), (8, 5), (64, 30)])
def test_any_cluster_and_job_count_runs_every_task(executors: int, jobs: int) -> None:
    torch.manual_seed(1)
    arrivals = _arrivals(jobs, seed=jobs)
    m = JobEngine(arrivals, LearnedJobPolicy(JobNet(JobNetSpec())), _cfg(executors)).run()
    assert m["tasks_done"] == sum(a.spec.tasks for a in arrivals)
    assert m["jobs_unfinished"] == 0


def test_sampled_actions_respect_both_masks() -> None:
    torch.manual_seed(2)
    policy = LearnedJobPolicy(JobNet(JobNetSpec()), sample=True, seed=3)
    policy.record = []
    JobEngine(_arrivals(8), policy, _cfg(4)).run()
    assert len(policy.record) > 10
    values, mask = limit_levels(4)
    assert values.tolist()[:3] == [4.0, 2.0, 1.0] and mask.tolist()[:4] == [True, True, True, False]
    for st in policy.record:
        elig = st.obs.eligible
        assert (st.ranks[~elig] == -1).all()
        assert sorted(st.ranks[elig].tolist()) == list(range(int(elig.sum())))
        assert st.obs.limit_mask[st.levels[elig]].all()


def test_ranking_probabilities_sum_to_one() -> None:
    jobs, e, cp = _decision_state()
    obs = observe(jobs, e, lambda j: cp[j.ident])
    obs.eligible[:] = False
    obs.eligible[:3] = True
    b = collate([obs])
    scores, _ = JobNet(JobNetSpec())(b)
    total = 0.0
    for order in itertools.permutations(range(3)):
        ranks = torch.full((obs.jobs,), -1, dtype=torch.long)
        ranks[list(order)] = torch.arange(3)
        total += float(ranking_log_prob(scores.detach(), b, ranks).exp())
    assert total == pytest.approx(1.0, abs=1e-5)


def _sampled_run(seed: int) -> tuple[float, list[list[int]]]:
    torch.manual_seed(0)
    policy = LearnedJobPolicy(JobNet(JobNetSpec()), sample=True, seed=seed)
    policy.record = []
    m = JobEngine(_arrivals(8), policy, _cfg(4), seed=0).run()
    return float(m["jct_mean_s"]), [st.levels.tolist() + st.ranks.tolist() for st in policy.record]


def test_sampling_is_deterministic_given_its_seed() -> None:
    a, b, c = _sampled_run(5), _sampled_run(5), _sampled_run(6)
    assert a == b
    assert a[1] != c[1]
