"""The testbed's build pins and the Karpenter objects it installs (no process is started here)."""

from __future__ import annotations

import json
import subprocess
import sys

from drlsched.autoscale.node_groups import node_templates
from drlsched.testbed import build, karpenter
from drlsched.testbed.kwok_config import kwok_config
from drlsched.workload import NodeSpec


def test_controller_manager_is_pinned_to_the_apiservers_kubernetes() -> None:
    core_k8s = next(c for c in build.COMPONENTS if c.module == "k8s")
    assert build.pinned_version(build.CONTROLLER_MANAGER) == build.pinned_version(core_k8s)
    kcm = (build.MODULES_DIR / "kube-controller-manager" / "go.mod").read_text()
    core = (build.MODULES_DIR / "k8s" / "go.mod").read_text()
    replaces = [line.strip() for line in core.splitlines() if "=> k8s.io/" in line]
    assert replaces and all(line in kcm for line in replaces)  # the same staging versions


def test_extras_have_keys_of_their_own() -> None:
    keys = {name: build.build_key((c,)) for name, c in build.EXTRAS.items()}
    assert len(set(keys.values()) | {build.build_key()}) == len(keys) + 1
    assert keys["karpenter"].startswith("karpenterv1.15.0-go1.26.9-")  # its module asks for a newer Go
    assert build.toolchain(build.CONTROLLER_MANAGER) == build.go_version()


def test_karpenter_pools_and_instance_types_come_from_node_templates() -> None:
    nodes = [NodeSpec("a", 32000, 131072), NodeSpec("g", 96000, 393216, 8, "V100")]
    pools = karpenter.pools_for(nodes)
    assert [(p.name, [t.name for t in p.templates]) for p in pools] == [
        ("pool-cpu", ["c32-m128"]), ("pool-v100", ["c96-m384-g8v100"])]
    types = karpenter.instance_types(pools)
    # Capacity is the template plus the provider's kube-reserved overhead: allocatable is the template.
    assert types[1]["resources"] == {"cpu": "96100m", "memory": "393226Mi", "pods": "110", "nvidia.com/gpu": "8"}
    assert types[0]["offerings"][0]["Price"] == node_templates(nodes)[0].price
    gpu_pool = karpenter.node_pool(pools[1])
    assert gpu_pool["spec"]["template"]["metadata"]["labels"] == {"drlsched.io/gpu-model": "V100"}
    assert gpu_pool["spec"]["disruption"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                              "consolidateAfter": "0s"}
    assert karpenter.node_class(90.0)["spec"] == {"nodeRegistrationDelay": "90s"}
    json.dumps(types)


def test_kwok_annotates_nodes_others_create() -> None:
    assert "name: node-metrics-path" in kwok_config()
    assert "/metrics/nodes/{{ .metadata.name }}/metrics/resource" in kwok_config()


def test_up_refuses_bad_autoscaler_options(tmp_path: object) -> None:
    for extra, says in ((["--node-autoscaler", "karpenter", "--scheduler", "none"], "needs the default scheduler"),
                        (["--hpa-sync-period", "0"], "must be a positive"),
                        (["--node-provision-s", "-5"], "must not be negative")):
        got = subprocess.run([sys.executable, "-m", "drlsched.cli", "testbed", "up", "--state-dir",
                              str(tmp_path), *extra], capture_output=True, text=True)
        assert got.returncode == 2 and says in got.stderr, (extra, got.stderr)


def test_the_scaler_replays_bed_has_the_simulators_nodes_or_its_karpenter_pool(tmp_path: object) -> None:
    from pathlib import Path

    from drlsched.autoscale.cli_replay import plan_from_args
    from drlsched.cli import build_parser
    from drlsched.testbed.scaler_bed import POOL, scaler_bed

    def plan(node_autoscaler: str):  # type: ignore[no-untyped-def]
        return plan_from_args(build_parser().parse_args([
            "replay", "--scenario", "flash-sale", "--scaler", "hpa", "--nodes", "6", "--speedup", "5",
            "--node-autoscaler", node_autoscaler, "--kubeconfig", "k", "--json", "-"]))

    static = scaler_bed(Path(str(tmp_path)), plan("none"))
    assert static.nodes == 6 and {(n.cpu_m, n.mem_mib) for n in static.node_specs or []} == {(8000, 32768)}
    assert static.node_autoscaler == "none" and static.hpa_sync_period_s == 3.0 and static.controller_manager
    pooled = scaler_bed(Path(str(tmp_path)), plan("karpenter"))
    assert pooled.nodes == 1 and pooled.node_autoscaler == "karpenter"
    (pool,) = pooled.node_pools or []
    assert pool.name == POOL and pool.max_size == 6 and [t.name for t in pool.templates] == ["c8-m32"]
    assert pooled.node_provision_s == 210.0 / 5  # registers as late in workload time as the simulator's node
    assert karpenter.node_pool(pool)["spec"]["limits"] == {"cpu": f"{6 * 8100}m"}  # six nodes with the overhead
