"""Small pieces: DAG names, node scaling, column parsers."""

from __future__ import annotations

import pytest

from drlsched.errors import UserError
from drlsched.traces import csvio, dag, extsort
from drlsched.traces.nodes import scale
from drlsched.workload import NodeSpec


def test_dag_names() -> None:
    assert dag.parse("M5_3_4") == ("5", ["3", "4"])
    assert dag.parse("M1") == ("1", [])
    assert dag.parse("task_Nzg3ODAw==") is None and dag.parse("MergeTask") is None
    parents, dangling = dag.job_parents(["M1", "R2_1", "J3_1_2", "M4_8", "task_x"])
    assert parents == {"M1": "", "R2_1": "M1", "J3_1_2": "M1|R2_1", "M4_8": "", "task_x": ""}
    assert dangling == 1


def test_scaling_keeps_the_shape_mix() -> None:
    nodes = [NodeSpec(f"a{i}", 1000, 1000) for i in range(6)] + [NodeSpec("g0", 2000, 2000, 8, "T4")] * 1 + \
            [NodeSpec(f"g{i}", 2000, 2000, 8, "T4") for i in range(1, 3)]
    ten = scale(nodes, 12)
    assert sum(n.gpus > 0 for n in ten) == 4 and len(ten) == 12
    assert scale(nodes, 1)[0].gpus == 0  # the larger shape wins a single slot
    assert scale(nodes, None) is nodes
    with pytest.raises(UserError):
        scale(nodes, 0)


def test_parsers() -> None:
    assert csvio.integer("12846.0") == 12846
    with pytest.raises(ValueError):
        csvio.integer("1.5")
    with pytest.raises(ValueError):
        csvio.number("nan")
    assert csvio.optional_number("NaN") is None and csvio.optional_number("") is None


def test_external_sort_keeps_equal_keys_together(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setattr(extsort, "MIN_BATCH_ROWS", 1)
    monkeypatch.setattr(extsort, "MERGE_BUDGET_ROWS", 4)
    monkeypatch.setattr(extsort, "FAN_IN", 3)
    rng = random.Random(1)
    rows = [(rng.randrange(6), f"j{rng.randrange(3)}", i) for i in range(300)]
    schema = pa.schema([("key", pa.int64()), ("job", pa.string()), ("seq", pa.int64())])
    chunks = [pa.table(list(zip(*rows[i:i + 7], strict=True)), schema=schema) for i in range(0, 300, 7)]
    order = [("key", "ascending"), ("job", "ascending"), ("seq", "ascending")]
    out = extsort.sort(chunks, tmp_path / "sorted.parquet", order, schema)
    assert [tuple(r.values()) for r in pq.read_table(out).to_pylist()] == sorted(rows)
    assert [p.name for p in tmp_path.iterdir()] == ["sorted.parquet"]
    groups = list(extsort.groups(out, ["key", "job"], ["seq"]))
    assert [g for g, _ in groups] == sorted({(k, j) for k, j, _ in rows})
    assert sum(len(cols["seq"]) for _, cols in groups) == 300
