"""The learned job policy end to end: `train-jobs` on a small cluster, then `ppo:PATH` in simulate and evaluate;
checkpoints of other kinds or feature specs refused in one line; the reward's Little's-law identity, the
per-time baseline and the imitation recording."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from drlsched.cli import main
from drlsched.errors import UserError
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.workload import JobSource, run_jobs
from drlsched.rl.checkpoint import load_policy, save_policy, write_checkpoint
from drlsched.rl.job_features import feature_spec
from drlsched.rl.job_net import JobNet, JobNetSpec
from drlsched.rl.job_policy import FORMAT, FORMAT_VERSION, LearnedJobPolicy, Step, load_job_net
from drlsched.rl.job_train import Episode, job_seconds, run_episode, time_baseline
from drlsched.rl.network import NetConfig, SchedulerNet

SMALL = ["--nodes", "4", "--duration", "7200"]
SOURCE = JobSource(nodes=4, duration_s=7200.0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("jobs")
    assert main(["train-jobs", *SMALL, "--imitation-episodes", "1", "--imitation-epochs", "2", "--updates", "1",
                 "--rollouts", "2", "--validation-seeds", "1", "--out", str(out)]) == 0
    return out / "policy.pt"


def test_train_writes_its_artefacts(trained: Path) -> None:
    facts = json.loads((trained.parent / "train.json").read_text())
    for name in ("curve.csv", "curve.png"):
        assert (trained.parent / name).stat().st_size > 0
    assert facts["wall_s"] > 0 and facts["peak_rss_mib"] > 0
    assert facts["meta"]["reward_preset"] == "jct" and facts["meta"]["imitation"]["imitation_decisions"] > 0
    assert facts["best"]["update"] in (0, 1)
    _, header = load_job_net(trained)
    assert header["meta"]["best"] == facts["best"]


def test_served_in_simulate_and_evaluate(trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = f"ppo:{trained}"
    assert main(["simulate", "--scenario", "tpch", *SMALL, "--job-policy", policy, "--json", "-"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["job_policy"] == policy and m["jobs_unfinished"] == 0
    assert main(["evaluate", "--scenario", "tpch", *SMALL, "--job-policies", f"fifo,{policy}", "--seeds", "1",
                 "--out", str(tmp_path / "e")]) == 0
    results = json.loads((tmp_path / "e" / "results.json").read_text())
    assert policy in results["policies"]


def test_other_kinds_and_feature_specs_are_refused_in_one_line(trained: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    placement = tmp_path / "placement.pt"
    save_policy(placement, SchedulerNet(NetConfig()), "ppo", {})
    other_spec = tmp_path / "spec.pt"
    spec = {**feature_spec(), "version": 0}
    write_checkpoint(other_spec, {"format": FORMAT, "format_version": FORMAT_VERSION, "features": spec,
                                  "spec": JobNetSpec().to_dict(), "meta": {}}, JobNet(JobNetSpec()))
    edited = tmp_path / "edited.pt"
    data = torch.load(trained, weights_only=True)
    data["meta"] = {"edited": True}
    torch.save(data, edited)
    for bad, words in ((placement, "placement policy"), (other_spec, "feature spec"), (edited, "sha256"),
                       (tmp_path / "missing.pt", "does not exist")):
        assert main(["simulate", "--scenario", "tpch", *SMALL, "--job-policy", f"ppo:{bad}"]) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and "\n" not in err
    with pytest.raises(UserError, match="job policy"):
        load_policy(trained)  # and the reverse: a job policy is no placement policy
    with pytest.raises(UserError, match="checkpoint"):
        make_job_policy("ppo")


def test_a_preset_without_a_jct_term_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train-jobs", *SMALL, "--reward-preset", "batch", "--out", str(tmp_path)]) == 2
    assert "no JCT term" in capsys.readouterr().err


def test_jobs_times_seconds_sum_to_the_total_jct() -> None:
    """Little's law, exactly: decisions at every arrival and finish, so jobs in the system are constant between."""
    policy = LearnedJobPolicy(JobNet(JobNetSpec()), expert=make_job_policy("weighted-fair:-2"))
    ep = run_episode(SOURCE, policy, 3)
    assert ep.unfinished == 0 and len(ep.steps) > 5
    jobs = len(SOURCE.arrivals(3))
    assert job_seconds(ep).sum() == pytest.approx(ep.jct_mean_s * jobs, rel=1e-9)


def test_recording_the_expert_keeps_its_decisions() -> None:
    ep = run_episode(SOURCE, LearnedJobPolicy(JobNet(JobNetSpec()), expert=make_job_policy("weighted-fair:-2")), 4)
    assert ep.jct_mean_s == pytest.approx(run_jobs(SOURCE, "weighted-fair:-2", 4)["jct_mean_s"])


def _episode(times: list[float]) -> Episode:
    obs = None
    return Episode([Step(obs, np.zeros(0), np.zeros(0), 0.0, t, 1) for t in times], times[-1] + 1.0, 0.0, 0)  # type: ignore[arg-type]


def test_baseline_is_the_rollouts_mean_return_at_the_same_time() -> None:
    a, b = _episode([0.0, 10.0, 20.0]), _episode([0.0, 15.0])
    ga, gb = np.array([-3.0, -2.0, -1.0]), np.array([-5.0, -1.0])
    base_a, base_b = time_baseline([a, b], [ga, gb])
    # at t=10, b's next decision is at 15 (return −1); at t=20 b has none left (0)
    assert base_a.tolist() == [(-3 - 5) / 2, (-2 - 1) / 2, (-1 + 0) / 2]
    assert base_b.tolist() == [(-3 - 5) / 2, (-1 - 1) / 2]


def test_training_can_start_from_a_checkpoint_and_refuses_another_kind(trained: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "more"
    assert main(["train-jobs", *SMALL, "--load-policy", str(trained), "--updates", "1", "--rollouts", "2",
                 "--validation-seeds", "1", "--out", str(out)]) == 0
    facts = json.loads((out / "train.json").read_text())
    assert facts["meta"]["started_from"] == str(trained) and facts["meta"]["imitation"] == {}
    placement = tmp_path / "placement.pt"
    save_policy(placement, SchedulerNet(NetConfig()), "ppo", {})
    capsys.readouterr()
    assert main(["train-jobs", *SMALL, "--load-policy", str(placement), "--out", str(tmp_path / "x")]) == 2
    assert "placement policy" in capsys.readouterr().err
