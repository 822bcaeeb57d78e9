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
