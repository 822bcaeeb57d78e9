"""The learned GPU packer end to end: `train-packer` on a small synthetic population, then `packer:PATH` in fill,
simulate (scenario and openb trace), the extender and the second scheduler; its checkpoint refused when it is not
a packer's or was edited, and a packer refused as a placement policy; its mask never picks a node the pod does not
fit."""

import json
from pathlib import Path

import pytest
import torch

from drlsched.cli import main
from drlsched.errors import UserError
from drlsched.k8s.extender import Extender
from drlsched.k8s.objects import pod_manifest, pod_spec
from drlsched.k8s.second_scheduler import SecondScheduler
from drlsched.policies import make_policy
from drlsched.rl.checkpoint import save_policy
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.packer_checkpoint import load_packer_net
from drlsched.rl.packer_policy import load_packer
from drlsched.testbed.nodes import node_manifests

SMALL = ["--scenario", "ml-gpu", "--nodes", "30", "--duration", "600"]
OPENB = Path(__file__).resolve().parents[1] / "traces" / "fixtures" / "alibaba-gpu-v2023"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("packer")
    assert main(["train-packer", *SMALL, "--imitation-fills", "1", "--imitation-epochs", "2", "--rl-updates", "2",
                 "--out", str(out)]) == 0
    return out / "policy.pt"


def test_train_writes_its_artefacts(trained: Path) -> None:
    facts = json.loads((trained.parent / "train.json").read_text())
    assert (trained.parent / "curve.csv").stat().st_size > 0
    assert facts["policy"] == str(trained) and facts["wall_s"] > 0 and facts["peak_rss_mib"] > 0
    assert len(facts["sha256"]) == 64


def test_packer_runs_in_fill_and_simulate(trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = f"packer:{trained}"
    assert main(["fill", *SMALL, "--policies", f"fgd,{policy}", "--seeds", "1", "--out", str(tmp_path / "f")]) == 0
    results = json.loads((tmp_path / "f" / "results.json").read_text())
    assert policy in json.dumps(results)
    capsys.readouterr()
    assert main(["simulate", *SMALL, "--policy", policy, "--json", "-", "--quiet"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["policy"] == policy and metrics["pods_scheduled"] > 0


def test_packer_runs_in_simulate_on_an_openb_trace(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = f"packer:{trained}"
    assert main(["simulate", "--trace", str(OPENB), "--trace-format", "alibaba-gpu-v2023", "--policy", policy,
                 "--json", "-", "--quiet"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["policy"] == policy and metrics["pods_scheduled"] > 0


def _gpu_pod(uid: str) -> dict:
    pod = pod_manifest(uid, cpu="1", memory="1Gi", gpus=1)
    pod["metadata"].update(namespace="default", uid=uid)
    return pod


def test_packer_answers_the_extender_and_the_second_scheduler(trained: Path) -> None:
    policy = f"packer:{trained}"
    nodes = node_manifests(6, 3, "openb")
    gpu_nodes = {n["metadata"]["name"] for n in nodes[:3]}
    extender = Extender(make_policy(policy), policy)
    pod = _gpu_pod("a")
    for verb in ("filter", "prioritize"):  # kube-scheduler asks both for one pod: its shape counts once
        status, payload = extender.handle(verb, json.dumps({"Pod": pod, "Nodes": {"items": nodes}}).encode())
        assert status == 200
    best = [hp["Host"] for hp in json.loads(payload) if hp["Score"] == 10]
    assert len(best) == 1 and best[0] in gpu_nodes
    assert sum(extender.placer.shapes.counts.values()) == 1 and extender.placer.shapes.current is not None

    import kubernetes

    scheduler = SecondScheduler(kubernetes.client.ApiClient(), make_policy(policy), "drl-scheduler")
    try:
        for node in nodes:
            scheduler.state.set_node(node)
        choice = scheduler.placer.choose(scheduler.state, pod_spec(_gpu_pod("b")))
    finally:
        scheduler._pool.shutdown(wait=True)
    assert choice.node in gpu_nodes and scheduler.placer.shapes.current is not None


def test_a_packer_and_a_placement_policy_are_not_taken_for_each_other(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    placement = tmp_path / "placement.pt"
    save_policy(placement, SchedulerNet(NetConfig()), "ppo", {})
    for argv, words in ((["simulate", *SMALL, "--policy", f"packer:{placement}"], "placement policy"),
                        (["simulate", *SMALL, "--policy", f"ppo:{trained}"], "learned packer"),
                        (["fill", *SMALL, "--policies", f"fgd,packer:{placement}", "--out", str(tmp_path / "f")],
                         "placement policy"),
                        (["serve", "--policy", f"ppo:{trained}"], "learned packer"),
                        (["schedule", "--policy", f"packer:{placement}", "--kubeconfig", str(tmp_path / "k")],
                         "placement policy")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, (argv, err)


def test_bad_checkpoints_are_one_line(trained: Path, tmp_path: Path) -> None:
    placement = tmp_path / "placement.pt"
    save_policy(placement, SchedulerNet(NetConfig()), "ppo", {})
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"junk")
    edited = tmp_path / "edited.pt"
    data = torch.load(trained, weights_only=True)
    data["meta"] = {"edited": True}
    torch.save(data, edited)
    for bad in (placement, junk, edited, tmp_path / "missing.pt"):
        with pytest.raises(UserError):
            load_packer(f"packer:{bad}")
    net, _ = load_packer_net(trained)
    assert net is not None


COMMITTED = Path(__file__).resolve().parents[2] / "bench" / "results" / "packer" / "policy.pt"


def test_the_committed_packer_loads_and_packs_an_openb_trace(capsys: pytest.CaptureFixture[str]) -> None:
    # the checkpoint the docs' packer numbers come from: from a clean clone it must load and place pods
    facts = json.loads((COMMITTED.parent / "train_committed.json").read_text())
    net, _ = load_packer_net(COMMITTED)
    assert facts["policy"].endswith("policy.pt") and net is not None
    policy = f"packer:{COMMITTED}"
    assert main(["simulate", "--trace", str(OPENB), "--trace-format", "alibaba-gpu-v2023", "--policy", policy,
                 "--json", "-", "--quiet"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["policy"] == policy and metrics["pods_scheduled"] > 0
