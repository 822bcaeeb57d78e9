"""Small pieces: DAG names, node scaling, column parsers."""

from __future__ import annotations

import pytest

from drlsched.errors import UserError
from drlsched.traces import csvio, dag
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
