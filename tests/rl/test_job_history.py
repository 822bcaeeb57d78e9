"""The job policy's optional history input (`--history lstm`, rl.job_history): the window's contents, the net's
permutation independence and masks with it, its checkpoint round trip and refusals, and the committed checkpoint
without history still loading."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from drlsched.cli import main
from drlsched.jobs.engine import JobEngine
from drlsched.jobs.model import Job
from drlsched.rl.checkpoint import write_checkpoint
from drlsched.rl.job_features import feature_spec, observe
from drlsched.rl.job_history import BLOCK, HISTORY_WIDTH, STEPS, ArrivalHistory
from drlsched.rl.job_net import JobNet, JobNetSpec, collate
from drlsched.rl.job_policy import FORMAT, FORMAT_VERSION, LearnedJobPolicy, load_job_net

from .test_job_net import _arrivals, _cfg, _decision_state

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "bench" / "results" / "job_policy" / "policy.pt"
SMALL = ["--nodes", "4", "--duration", "7200"]


def _live_net(seed: int = 0) -> JobNet:
    """A history net whose branch reaches the heads (its output layer starts at zero, which would hide it)."""
    torch.manual_seed(seed)
    net = JobNet(JobNetSpec(history="lstm"))
    torch.nn.init.normal_(net.history_out.weight, std=0.5)
    return net


def _job(ident: int, t: float, work: float, executors: int = 0) -> Job:
    return Job(ident, t, None, [], [], work, executors=executors)  # type: ignore[arg-type]


def test_window_reads_the_arrival_rate_and_pads_until_a_block_is_full() -> None:
    h = ArrivalHistory()
    assert not h.window(10).any()
    # one arrival every 2 s, each 40 executor-seconds on 10 executors: offered load 0.5 · 40 / 10 = 2
    for k in range(BLOCK * 3):
        h.see([_job(i, 2.0 * i, 40.0, executors=1) for i in range(k + 1)], 10)
    w = h.window(10)
    assert w.shape == (STEPS, HISTORY_WIDTH)
    assert w[-3:, 4].tolist() == [1.0, 1.0, 1.0] and not w[:-3].any()
    assert w[-2:, 0] == pytest.approx([2.0, 2.0])
    # the newest block's last job was first seen with 15 jobs each on one executor
    assert w[-1, 2] == pytest.approx(1.5) and w[-1, 3] == pytest.approx(np.log1p(15) / 5)


def test_a_job_is_taken_in_once_whatever_order_the_decision_lists_it() -> None:
    a, b = ArrivalHistory(), ArrivalHistory()
    jobs = [_job(i, float(i), 10.0 + i) for i in range(2 * BLOCK)]
    for k in range(1, len(jobs) + 1):
        a.see(jobs[:k], 4)
        b.see(list(reversed(jobs[:k])), 4)
        b.see(jobs[:k], 4)  # seen again: not a new arrival
    assert np.array_equal(a.window(4), b.window(4))


def test_scores_follow_the_jobs_when_permuted_and_the_history_changes_them() -> None:
    jobs, e, cp = _decision_state()
    net = _live_net()
    hist = np.random.default_rng(0).uniform(0, 1, (STEPS, HISTORY_WIDTH)).astype(np.float32)

    def run(order: list[int], history: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        obs = observe([jobs[k] for k in order], e, lambda j: cp[j.ident])
        obs.history = history
        return net(collate([obs]))

    ref_s, ref_l = run(list(range(len(jobs))), hist)
    perm = list(reversed(range(len(jobs))))
    s, lim = run(perm, hist)
    assert torch.allclose(s, ref_s[perm], atol=1e-5) and torch.allclose(lim, ref_l[perm], atol=1e-5)
    _, other = run(list(range(len(jobs))), hist * 0.0)  # the limit logits: every job has them
    assert not torch.allclose(other, ref_l, atol=1e-4)


def test_the_zero_branch_starts_as_the_policy_without_history() -> None:
    jobs, e, cp = _decision_state()
    torch.manual_seed(3)
    plain = JobNet(JobNetSpec())
    grown = JobNet(JobNetSpec(history="lstm"))
    missing = grown.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing and all(k.startswith("history") for k in missing)
    obs = observe(jobs, e, lambda j: cp[j.ident])
    obs.history = np.ones((STEPS, HISTORY_WIDTH), dtype=np.float32)
    for x, y in zip(plain(collate([obs])), grown(collate([obs])), strict=True):
        assert torch.equal(x, y)


def test_sampled_actions_with_history_respect_both_masks() -> None:
    policy = LearnedJobPolicy(_live_net(2), sample=True, seed=3)
    policy.record = []
    JobEngine(_arrivals(12), policy, _cfg(4)).run()
    assert len(policy.record) > 10 and policy.record[-1].obs.history is not None
    assert policy.record[-1].obs.history[:, 4].sum() >= 2  # 12 arrivals: two full blocks
    for st in policy.record:
        elig = st.obs.eligible
        assert (st.ranks[~elig] == -1).all()
        assert sorted(st.ranks[elig].tolist()) == list(range(int(elig.sum())))
        assert st.obs.limit_mask[st.levels[elig]].all()


def test_history_checkpoint_round_trip_and_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h"
    assert main(["train-jobs", *SMALL, "--imitation-episodes", "1", "--imitation-epochs", "2", "--updates", "1",
                 "--rollouts", "2", "--validation-seeds", "1", "--history", "lstm", "--out", str(out)]) == 0
    net, header = load_job_net(out / "policy.pt")
    assert net.spec.history == "lstm" and header["spec"]["history"] == "lstm"
    assert header["features"] == feature_spec("lstm") and header["meta"]["history"] == "lstm"
    last, last_header = load_job_net(out / "last.pt")  # the final weights beside the best on validation
    assert last.spec.history == "lstm" and last_header["meta"]["last_update"] == 1
    capsys.readouterr()
    policy = f"ppo:{out / 'policy.pt'}"
    for guard in ("", ":fallback=none"):
        assert main(["simulate", "--scenario", "tpch", *SMALL, "--job-policy", policy + guard, "--json", "-"]) == 0
        assert json.loads(capsys.readouterr().out)["jobs_unfinished"] == 0
    assert main(["evaluate", "--scenario", "tpch", *SMALL, "--job-policies", f"fifo,{policy}", "--seeds", "1",
                 "--out", str(tmp_path / "e")]) == 0
    # a history checkpoint cannot drop its branch when trained further
    capsys.readouterr()
    assert main(["train-jobs", *SMALL, "--load-policy", str(out / "policy.pt"), "--history", "none",
                 "--out", str(tmp_path / "x")]) == 2
    assert "cannot be dropped" in capsys.readouterr().err


def test_a_history_spec_that_differs_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    net = JobNet(JobNetSpec(history="lstm"))
    cases = {"old-history": {**feature_spec("lstm"), "history": {**feature_spec("lstm")["history"],  # type: ignore[dict-item]
                                                                  "version": 0}},
             "no-history": feature_spec()}
    for name, features in cases.items():
        path = tmp_path / f"{name}.pt"
        write_checkpoint(path, {"format": FORMAT, "format_version": FORMAT_VERSION, "features": features,
                                "spec": net.spec.to_dict(), "meta": {}}, net)
        assert main(["simulate", "--scenario", "tpch", *SMALL, "--job-policy", f"ppo:{path}"]) == 2
        err = capsys.readouterr().err.strip()
        assert "feature spec" in err and "history lstm" in err and "\n" not in err
    bad = tmp_path / "bad-kind.pt"
    write_checkpoint(bad, {"format": FORMAT, "format_version": FORMAT_VERSION, "features": feature_spec(),
                           "spec": {**net.spec.to_dict(), "history": "gru"}, "meta": {}}, net)
    assert main(["simulate", "--scenario", "tpch", *SMALL, "--job-policy", f"ppo:{bad}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "spec.history" in err and "\n" not in err


def test_the_committed_checkpoint_without_history_still_loads() -> None:
    net, header = load_job_net(COMMITTED)
    assert net.spec.history == "none" and set(header["spec"]) == {"hidden", "rounds"}
    assert header["features"] == feature_spec() and "history" not in header["features"]
