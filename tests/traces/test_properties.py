"""Property tests: the external sort orders any input, node scaling keeps counts and shapes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drlsched.traces import extsort
from drlsched.traces.nodes import scale
from drlsched.workload import NodeSpec

SCHEMA = pa.schema([("key", pa.string()), ("seq", pa.int64())])


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.sampled_from(["a", "b", "bb", "c", "é", "z"]), max_size=60),
       chunk=st.integers(1, 9), fan_in=st.integers(2, 4))
def test_external_sort_matches_sorted(keys: list[str], chunk: int, fan_in: int) -> None:
    rows = [(key, i) for i, key in enumerate(keys)]
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as tmp:
        patch.setattr(extsort, "FAN_IN", fan_in)
        patch.setattr(extsort, "MIN_BATCH_ROWS", 1)
        patch.setattr(extsort, "MERGE_BUDGET_ROWS", 3)
        out = extsort.sort(extsort.tables(SCHEMA, rows, chunk), Path(tmp) / "s.parquet",
                           [("key", "ascending"), ("seq", "ascending")], SCHEMA)
        result = [(r["key"], r["seq"]) for r in pq.read_table(out).to_pylist()]
    assert result == sorted(rows, key=lambda r: (r[0].encode(), r[1]))


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(1, 20), min_size=1, max_size=5), target=st.integers(1, 200))
def test_scaling_keeps_count_and_shapes(counts: list[int], target: int) -> None:
    nodes = [NodeSpec(f"s{s}-{i}", 1000 * (s + 1), 1000, s) for s, count in enumerate(counts) for i in range(count)]
    scaled = scale(nodes, target)
    assert len(scaled) == target and len({node.name for node in scaled}) == target
    shapes = {node.gpus for node in scaled}
    assert shapes <= set(range(len(counts)))
    if target >= len(counts):
        assert shapes == set(range(len(counts)))
    for gpus, count in enumerate(counts):
        share = sum(node.gpus == gpus for node in scaled)
        assert abs(share - count * target / len(nodes)) <= max(1.0, len(counts))
