"""Link sharing: remote shuffle reads share NICs and rack uplinks max-min fairly (drlsched.network)."""

import subprocess
import sys

import numpy as np
import pytest

from drlsched.errors import UserError
from drlsched.network import Network
from drlsched.policies import make_policy
from drlsched.simulator import SimConfig, Simulator
from drlsched.workload import NodeSpec, PodSpec, Workload

GB = 1250.0  # MB: one second at 10 Gbit/s


def test_concurrent_reads_on_one_nic_share_it():
    net = Network(np.array([0, 0, 0]), 10.0, 1.0)
    alone, remote, cross = net.read(0.0, 0, [1], GB)
    assert alone == pytest.approx(1.0) and remote == GB and cross == 0.0
    # Same reader NIC, another source: the newcomer gets half of the reader's NIC.
    assert net.read(0.5, 0, [2], GB)[0] == pytest.approx(2.0)
    # Once both have ended the NIC is whole again.
    assert net.read(10.0, 0, [1], GB)[0] == pytest.approx(1.0)
    # Another reader, but node 1's NIC out still serves the read that started at t = 10: half of it.
    assert net.read(10.0, 2, [1], GB)[0] == pytest.approx(2.0)  # node 1's NIC out is busy with the read above
    summary = net.summary()
    assert summary["network_wait_s"] == pytest.approx(2.0) and summary["transfer_slowdown_p99"] > 1.9


def test_max_min_share_leaves_a_transfer_slowed_elsewhere_its_rate():
    # Racks of two nodes, uplinks at 2 × 1250 / 8 = 312.5 MB/s. A cross-rack read into node 2 is held to that by
    # its uplink; a same-rack read into node 2 then gets the rest of node 2's NIC (937.5 MB/s), not half of it.
    net = Network(np.array([0, 0, 1, 1]), 10.0, 8.0)
    assert net.read(0.0, 2, [0], GB)[0] == pytest.approx(4.0)
    assert net.read(0.0, 2, [3], GB)[0] == pytest.approx(GB / 937.5)


def test_same_node_reads_are_free_and_mixed_reads_pay_for_their_remote_share():
    net = Network(np.array([0, 0]), 10.0, 1.0)
    assert net.read(0.0, 0, [0, 0], GB) == (0.0, 0.0, 0.0)
    seconds, remote, _ = net.read(0.0, 0, [0, 1], GB)
    assert remote == pytest.approx(GB / 2) and seconds == pytest.approx(0.5)
    assert net.summary()["network_wait_s"] == 0.0


def test_oversubscription_slows_cross_rack_reads_only():
    racks = np.array([0, 0, 1, 1])  # racks of two nodes: uplink 2 × 1250 MB/s / oversubscription
    for ratio, cross_s in ((1.0, 1.0), (4.0, 2.0)):
        net = Network(racks, 10.0, ratio)
        assert net.read(0.0, 0, [1], GB)[0] == pytest.approx(1.0)  # same rack
        seconds, remote, cross = net.read(0.0, 2, [0], GB)
        assert seconds == pytest.approx(cross_s) and cross == remote == GB


def test_dedicated_links_give_every_read_the_whole_nic():
    net = Network(np.array([0, 0]), 10.0, 8.0, shared=False)
    assert [net.read(0.0, 0, [1], GB)[0] for _ in range(3)] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("nic, ratio", [(0.0, 1.0), (-1.0, 1.0), (float("nan"), 1.0), (10.0, float("inf")),
                                        (10.0, 0.0)])
def test_bad_link_options_are_refused(nic, ratio):
    with pytest.raises(UserError, match="positive finite"):
        Network(np.array([0]), nic, ratio)


@pytest.mark.parametrize("option, value", [("--nic-gbps", "0"), ("--nic-gbps", "nan"),
                                           ("--rack-oversubscription", "-2"), ("--rack-oversubscription", "x")])
def test_bad_link_options_on_the_cli_are_one_line_and_exit_2(option, value, tmp_path):
    res = subprocess.run([sys.executable, "-m", "drlsched.cli", "simulate", "--scenario", "batch", "--policy",
                          "k8s-default", "--nodes", "2", "--duration", "10", option, value], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert option in res.stderr and ("positive finite" in res.stderr or "expected a number" in res.stderr)


def _shuffle_job(children: int, child_cpu: int = 1500) -> list[PodSpec]:
    # The parent fills node 0, so the children (too big for node 0) land together on node 1 and read from node 0.
    spec = {"startup_s": 1.0, "usage_cv": 0.0}
    parent = PodSpec("m", "j", 0.0, 1000, 512, task="M1", work_s=10.0, **spec)
    kids = [PodSpec(f"r{i}", "j", 0.0, child_cpu, 512, task="R2", work_s=5.0, parents=("M1",), shuffle_in_mb=GB,
                    **spec) for i in range(children)]
    return [parent, *kids]


def _makespan(pods: list[PodSpec], nodes: list[NodeSpec], **cfg: object) -> dict[str, object]:
    sim = Simulator(Workload("t", nodes, pods, 100.0), make_policy("first-fit"), 0, SimConfig(**cfg))  # type: ignore[arg-type]
    return sim.run()


def test_two_concurrent_remote_reads_on_one_nic_take_longer_than_one():
    nodes = [NodeSpec("a", 1000, 8192), NodeSpec("b", 4000, 8192)]
    one = _makespan(_shuffle_job(1), nodes)
    two = _makespan(_shuffle_job(2), nodes)
    # Parent: 1 s start + 10 s; child: 1 s start + 1 s read + 5 s. The second child's read shares node 1's NIC in
    # and node 0's NIC out with the first: 2 s.
    assert one["makespan_s"] == pytest.approx(18.0)
    assert two["makespan_s"] == pytest.approx(19.0)
    assert two["network_wait_s"] == pytest.approx(1.0) and two["transfer_slowdown_p99"] > 1.9
    dedicated = _makespan(_shuffle_job(2), nodes, share_links=False)
    assert dedicated["makespan_s"] == pytest.approx(18.0) and dedicated["network_wait_s"] == 0.0


def test_a_read_from_the_same_node_is_free():
    nodes = [NodeSpec("a", 4000, 8192)]
    m = _makespan(_shuffle_job(2), nodes)
    assert m["makespan_s"] == pytest.approx(17.0)  # 11 s parent + 1 s start + 5 s, no read time
    assert m["cross_node_traffic_gb"] == 0.0 and m["network_wait_s"] == 0.0


def test_rack_oversubscription_slows_the_cross_rack_read():
    nodes = [NodeSpec("a", 1000, 8192, rack="r0"), NodeSpec("b", 4000, 8192, rack="r1")]
    flat = _makespan(_shuffle_job(1), nodes)
    over = _makespan(_shuffle_job(1), nodes, rack_oversubscription=4.0)
    assert flat["makespan_s"] == pytest.approx(18.0)
    assert over["makespan_s"] == pytest.approx(21.0)  # a one-node rack's uplink at 1/4 of the NIC: 4 s read
    same_rack = [NodeSpec("a", 1000, 8192, rack="r0"), NodeSpec("b", 4000, 8192, rack="r0")]
    assert _makespan(_shuffle_job(1), same_rack, rack_oversubscription=4.0)["makespan_s"] == pytest.approx(18.0)


def test_a_source_holding_a_sliver_of_a_wide_read_is_not_charged():
    net = Network(np.zeros(20, dtype=np.int64), 10.0, 1.0)
    net.read(0.0, 0, [1], 100 * GB)  # holds node 1's NIC out
    # 16 sources, node 1 among them with 1/16 (< 1/8) of the bytes: only the reader's NIC in limits it.
    assert net.read(0.0, 2, [1, *range(3, 18)], GB)[0] == pytest.approx(1.0)
    # Node 1's NIC out then serves one whole read and the uncharged sliver: a newcomer gets half.
    assert net.read(0.0, 18, [1], GB)[0] == pytest.approx(2.0)
    # A source with half of a read is charged: a third of node 1's NIC out (two reads there) is half the read's rate.
    assert net.read(0.0, 19, [1, 3], GB)[0] == pytest.approx(1.5)
