"""google-2019: time offset, event lifecycles, normalised units, enums, usage, machines."""

from __future__ import annotations

import pytest
from trace_helpers import FIXTURES, by_uid, load

from drlsched.workload import QoS

TRACE = FIXTURES / "google-2019"
SCALE = {"machine_cpu_millis": 100_000, "machine_memory_mib": 100_000}


def test_lifecycles_and_times() -> None:
    workload = load(TRACE, "google-2019", **SCALE)
    pods = by_uid(workload)
    assert list(pods) == ["100-0", "600-0", "200-1", "200-1-1", "500-0"]
    before = pods["100-0"]
    assert before.arrival_s == 0.0 and before.work_s == 60.0  # submitted before the window
    first, retry = pods["200-1"], pods["200-1-1"]
    assert (first.arrival_s, first.work_s) == (10.0, 20.0)  # SUBMIT at 610 s, SCHEDULE 612, EVICT 632
    assert (retry.arrival_s, retry.work_s) == (40.0, None)  # finishes after the window
    assert pods["500-0"].work_s == 49.0  # events out of order in the file
    info = workload.info
    assert info["never_scheduled"] == 1 and info["alloc_instances"] == 1 and info["after_window"] == 1
    assert info["implicit_submit"] == 1


def test_units_and_enums() -> None:
    pods = by_uid(load(TRACE, "google-2019", **SCALE))
    prod = pods["100-0"]
    assert (prod.cpu_m, prod.mem_mib) == (25_000, 12_500)  # 0.25 NCU, 0.125 of the largest memory
    assert prod.qos == QoS.LS and prod.priority == 200 and prod.service
    assert pods["200-1"].qos == QoS.BURSTABLE and not pods["200-1"].service
    assert pods["500-0"].qos == QoS.BE and pods["500-0"].priority == 0
    assert pods["600-0"].cpu_m == 20_000  # request from UPDATE_PENDING before SCHEDULE


def test_usage() -> None:
    pods = by_uid(load(TRACE, "google-2019", **SCALE))
    assert pods["100-0"].usage_cpu == pytest.approx(0.6)
    assert pods["100-0"].usage_mem == pytest.approx(0.6)
    assert pods["100-0"].usage_cv == pytest.approx(1 / 3)
    assert pods["500-0"].usage_cpu == 0.6  # no usage rows: the default


def test_machines() -> None:
    nodes = {node.name: node for node in load(TRACE, "google-2019", **SCALE).nodes}
    assert set(nodes) == {"m1", "m2"}  # m3 has no capacity
    assert (nodes["m2"].cpu_m, nodes["m2"].mem_mib) == (100_000, 100_000)  # latest UPDATE
