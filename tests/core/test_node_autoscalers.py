"""Cluster Autoscaler and Karpenter emulations: the behaviours their documentation states (CA FAQ, Karpenter's
options and disruption controller), on small hand-checked clusters."""

from __future__ import annotations

import pytest

from drlsched.autoscale.cluster_autoscaler import CAConfig, ClusterAutoscaler
from drlsched.autoscale.karpenter import WHEN_EMPTY, Karpenter, KarpenterConfig
from drlsched.autoscale.node_groups import (
    NodeGroup,
    NodeTemplate,
    NodeView,
    PodRequest,
    Provision,
    Remove,
    node_templates,
    price_per_hour,
    template_name,
)
from drlsched.errors import UserError
from drlsched.workload import NodeSpec

C4 = NodeTemplate("c4-m16", 4000, 16384)
C16 = NodeTemplate("c16-m64", 16000, 65536)


def pod(name: str, cpu: int, mem: int = 1024, movable: bool = True, since: float = 0.0) -> PodRequest:
    return PodRequest(name, cpu, mem, movable=movable, since_s=since)


def node(name: str, t: NodeTemplate, pods: tuple[PodRequest, ...] = (), group: str | None = "g", ready: bool = True,
         created: float = 0.0) -> NodeView:
    return NodeView(name, group, t.cpu_m, t.mem_mib, pods=pods, ready=ready, created_s=created, template=t.name)


def test_templates_and_prices() -> None:
    specs = [NodeSpec("a", 32000, 131072), NodeSpec("b", 32000, 131072), NodeSpec("c", 96000, 524288, 8, "V100")]
    got = node_templates(specs)
    assert [t.name for t in got] == ["c32-m128", "c96-m512-g8v100"]
    assert template_name(500, 1536) == "c0p5-m1p5"
    assert price_per_hour(4000, 16384) == pytest.approx(0.1 + 0.001 * 16 * 2**30 / 1e9)
    assert got[1].node_spec("x").gpus == 8


# --- Cluster Autoscaler --------------------------------------------------------------------------------------

def test_ca_scales_up_by_binpacking_onto_templates() -> None:
    """Three 3-core pods need three 4-core nodes, or one 16-core node: the binpacking estimator."""
    pending = [pod(f"p{i}", 3000) for i in range(3)]
    ca = ClusterAutoscaler([NodeGroup("small", (C4,), max_size=10)])
    (up,) = ca.step(0.0, pending, [])
    assert isinstance(up, Provision) and (up.group, len(up.names)) == ("small", 3)
    ca = ClusterAutoscaler([NodeGroup("big", (C16,), max_size=10)])
    (up,) = ca.step(0.0, pending, [])
    assert isinstance(up, Provision) and len(up.names) == 1


def test_ca_counts_upcoming_nodes_and_existing_room() -> None:
    ca = ClusterAutoscaler([NodeGroup("g", (C4,), max_size=10)])
    pending = [pod("a", 3000)]
    assert ca.step(0.0, pending, [node("n0", C4, ready=False)]) == []  # fits the node still provisioning
    assert ca.step(10.0, pending, [node("n0", C4)]) == []  # room on a ready node: the scheduler's job
    assert ca.step(20.0, [pod("huge", 5000)], []) == []  # fits no template


def test_ca_respects_max_size_scan_interval_and_expander() -> None:
    ca = ClusterAutoscaler([NodeGroup("g", (C4,), max_size=2)])
    (up,) = ca.step(0.0, [pod(f"p{i}", 3000) for i in range(5)], [node("n0", C4, (pod("x", 3000),))])
    assert isinstance(up, Provision) and len(up.names) == 1  # one node left before max size 2
    assert not ca.due(9.9) and ca.due(10.0)
    least = ClusterAutoscaler([NodeGroup("small", (C4,)), NodeGroup("big", (C16,))],
                              CAConfig(expander="least-waste"))
    (up,) = least.step(0.0, [pod(f"p{i}", 3900) for i in range(4)], [])
    assert isinstance(up, Provision) and up.group == "small"  # 4 × 3.9 of 4 cores wastes less than of 16
    with pytest.raises(UserError, match="expander"):
        ClusterAutoscaler([NodeGroup("g", (C4,))], CAConfig(expander="nope"))


def test_ca_scale_down_after_unneeded_time_and_delay_after_add() -> None:
    """A node under 50% whose pods fit elsewhere is removed after 10 min unneeded, and not within 10 min of a
    scale-up; a node at 60% stays."""
    ca = ClusterAutoscaler([NodeGroup("g", (C4,))])
    busy = node("busy", C4, (pod("b1", 2400),))  # 60%: needed
    light = node("light", C4, (pod("l1", 800),))  # 20%: its pod fits on busy
    ca.step(0.0, [pod("new", 3000)], [busy])  # a scale-up at t=0
    t = 10.0
    while t < 600.0:
        assert ca.step(t, [], [busy, light]) == [], t
        t += 10.0
    assert ca.step(610.0, [], [busy, light]) == [Remove("light", "underutilized and its pods fit elsewhere")]


def test_ca_scale_down_rules() -> None:
    """Empty nodes go in bulk (up to 10), at most one non-empty per scan; min size, unmovable pods and memorised
    placements hold nodes back."""
    ca = ClusterAutoscaler([NodeGroup("g", (C4,), min_size=1)], CAConfig(scale_down_delay_after_add_s=0.0))
    nodes = [node("anchor", C4, (pod("a", 2400),)), node("e1", C4), node("e2", C4),
             node("l1", C4, (pod("x1", 1000),)), node("l2", C4, (pod("x2", 1000),)),
             node("full", C4, (pod("f", 3500),))]
    ca.step(0.0, [], nodes)
    removed = [a.node for a in ca.step(600.0, [], nodes) if isinstance(a, Remove)]
    assert removed == ["e1", "e2", "l1"]
    # l1 and l2 each fit on the anchor, but not both: placements are memorised.
    assert ca._unneeded(nodes) == ["e1", "e2", "l1"]
    pinned = [node("anchor", C4, (pod("a", 2400),)), node("pinned", C4, (pod("bare", 100, movable=False),))]
    assert ca._unneeded(pinned) == []  # a pod no controller owns keeps its node
    lone = ClusterAutoscaler([NodeGroup("g", (C4,), min_size=1)], CAConfig(scale_down_delay_after_add_s=0.0))
    lone.step(0.0, [], [node("only", C4)])
    assert lone.step(600.0, [], [node("only", C4)]) == []  # min size


def test_ca_drops_nodes_that_never_became_ready() -> None:
    ca = ClusterAutoscaler([NodeGroup("g", (C4,))])
    late = node("late", C4, ready=False, created=0.0)
    assert ca.step(899.0, [], [late]) == []
    assert Remove("late", "not ready within max-node-provision-time") in ca.step(900.0, [], [late])


# --- Karpenter -----------------------------------------------------------------------------------------------

def test_karpenter_batches_idle_and_max() -> None:
    """A batch closes 1 s after the last new pod, or 10 s after it opened."""
    k = Karpenter(NodeGroup("pool", (C4, C16)))
    assert k.step(0.0, [pod("a", 1000)], []) == []
    assert k.step(0.5, [pod("a", 1000)], []) == []
    (claim,) = k.step(1.0, [pod("a", 1000)], [])
    assert isinstance(claim, Provision) and claim.template == C4
    k = Karpenter(NodeGroup("pool", (C4, C16)))
    arrivals: list[PodRequest] = []
    launched = []
    for i in range(25):  # a new pod every 0.5 s keeps the window open until 10 s
        arrivals.append(pod(f"p{i}", 500))
        launched += k.step(0.5 * i, list(arrivals), [])
        if launched:
            break
    assert 0.5 * i == 10.0 and launched


def test_karpenter_packs_onto_the_cheapest_fitting_instance() -> None:
    """Four 3-core pods: one 16-core claim (a 4-core one fits only one of them); one pod alone: a 4-core one."""
    k = Karpenter(NodeGroup("pool", (C4, C16)), KarpenterConfig(batch_idle_s=0.1))
    k.step(0.0, [pod(f"p{i}", 3000) for i in range(4)], [])
    got = k.step(0.1, [pod(f"p{i}", 3000) for i in range(4)], [])
    assert [(a.template, len(a.names)) for a in got if isinstance(a, Provision)] == [(C16, 1)]
    limited = Karpenter(NodeGroup("pool", (C16,)), KarpenterConfig(batch_idle_s=0.1, limit_cpu_m=20000))
    limited.step(0.0, [pod(f"q{i}", 15000) for i in range(2)], [])
    assert len(limited.step(0.1, [pod(f"q{i}", 15000) for i in range(2)], [])) == 1  # the CPU limit: one node


def test_karpenter_deletes_empty_nodes_after_validation() -> None:
    k = Karpenter(NodeGroup("pool", (C4,)))
    nodes = [node(f"n{i}", C4, (pod(f"x{i}", 3000),), group="pool") for i in range(19)] + [node("e", C4, group="pool")]
    assert k.step(0.0, [], nodes) == []  # the poll finds it; the command waits 15 s
    assert k.step(15.0, [], nodes) == [Remove("e", "empty")]


def test_karpenter_replaces_a_node_by_a_cheaper_one() -> None:
    """A 16-core node with one 1-core pod and no room elsewhere: a 4-core replacement, then the old one goes."""
    k = Karpenter(NodeGroup("pool", (C4, C16)))
    big = node("big", C16, (pod("a", 1000),), group="pool")
    k.step(0.0, [], [big])
    (launch,) = k.step(15.0, [], [big])
    assert isinstance(launch, Provision) and launch.template == C4
    assert k.step(20.0, [], [big, node(launch.names[0], C4, group="pool", ready=False)]) == []
    assert k.step(60.0, [], [big, node(launch.names[0], C4, group="pool")]) == [Remove("big", f"replaced by "
                                                                                             f"{launch.names[0]}")]


def test_karpenter_multi_node_consolidation_and_policy() -> None:
    """Two light nodes whose pods fit on a third go in one command; WhenEmpty pools keep them."""
    nodes = [node("anchor", C16, (pod("a", 8000),), group="pool"), node("l1", C4, (pod("x", 1000),), group="pool"),
             node("l2", C4, (pod("y", 1000),), group="pool")] + [
        node(f"f{i}", C4, (pod(f"z{i}", 3900),), group="pool") for i in range(17)]
    k = Karpenter(NodeGroup("pool", (C4, C16)))
    k.step(0.0, [], nodes)
    assert sorted(a.node for a in k.step(15.0, [], nodes) if isinstance(a, Remove)) == ["l1", "l2"]
    keep = Karpenter(NodeGroup("pool", (C4, C16)), KarpenterConfig(consolidation_policy=WHEN_EMPTY))
    keep.step(0.0, [], nodes)
    assert keep.step(15.0, [], nodes) == []


def test_karpenter_abandons_a_command_that_is_no_longer_valid() -> None:
    k = Karpenter(NodeGroup("pool", (C4,)))
    nodes = [node("e", C4, group="pool")] + [node(f"n{i}", C4, (pod(f"x{i}", 3000),), group="pool")
                                               for i in range(9)]
    k.step(0.0, [], nodes)
    nodes[0] = node("e", C4, (pod("arrived", 500),), group="pool")
    assert k.step(15.0, [], nodes) == []


def test_karpenter_never_consolidates_onto_a_node_still_launching() -> None:
    """A full node and an empty in-flight one (launched for pending pods): moving the full node's pods onto the
    in-flight node would void the command upstream ("would schedule against uninitialized nodeclaim"), and
    deleting it would leave its pods and the new one's pending pods without room."""
    k = Karpenter(NodeGroup("pool", (C4,)))
    full = node("full", C4, tuple(pod(f"x{i}", 1000) for i in range(4)), group="pool")
    launching = node("new", C4, group="pool", ready=False)
    for t in (0.0, 15.0, 30.0, 45.0):
        assert not [a for a in k.step(t, [pod("p", 1000)], [full, launching]) if isinstance(a, Remove)], t
    # Once the new node is up and holds the pending pod, the full one still stays: its pods fit nowhere else.
    ready = node("new", C4, (pod("p", 1000),), group="pool")
    for t in (60.0, 75.0, 90.0):
        assert not [a for a in k.step(t, [], [full, ready]) if isinstance(a, Remove)], t


def test_karpenter_pending_pods_take_the_room_a_consolidation_would_use() -> None:
    """A light node's pod fits on the other node only if the pending pod does not get that room first."""
    light = node("light", C4, (pod("a", 1000),), group="pool")
    other = node("other", C4, (pod("b", 2000),), group="pool")
    k = Karpenter(NodeGroup("pool", (C4,)), KarpenterConfig(batch_idle_s=100.0, batch_max_s=100.0))
    k.step(0.0, [pod("p", 2000)], [light, other])
    assert not [a for a in k.step(15.0, [pod("p", 2000)], [light, other]) if isinstance(a, Remove)]
    free = Karpenter(NodeGroup("pool", (C4,)))
    free.step(0.0, [], [light, other])
    assert Remove("light", "underutilized") in free.step(15.0, [], [light, other])
