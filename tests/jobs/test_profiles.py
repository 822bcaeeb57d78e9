"""The tpch profile reader's refusals and the model's fidelity on a few cells (the full table: docs/simulator.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from drlsched.errors import UserError
from drlsched.jobs.bandwidth import fit_split, profile_runtime
from drlsched.jobs.fidelity import TOLERANCE, alone
from drlsched.jobs.profiles import embedded_dir, load_profiles


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


def test_embedded_set_has_18_queries_4_sizes_4_limits(profiles) -> None:
    assert len(profiles.cells) == 72
    assert all(sorted(c) == [50, 75, 100, 200] for c in profiles.cells.values())


@pytest.mark.parametrize(("query", "size", "cores"), [("1", 50, 50), ("3", 500, 100), ("5", 100, 200),
                                                        ("18", 250, 75)])
def test_query_alone_reproduces_its_profile(profiles, query: str, size: int, cores: int) -> None:
    model = alone(profiles, query, size, cores)
    assert abs(model / profile_runtime(profiles, query, size, cores) - 1) <= TOLERANCE


def test_fit_split_recovers_both_parts() -> None:
    a, b = fit_split([50, 100, 200], [2000 / 50 + 30, 2000 / 100 + 30, 2000 / 200 + 30])
    assert a == pytest.approx(2000) and b == pytest.approx(30)
    assert fit_split([50, 100], [10.0, 20.0])[0] == 0.0  # slower with more cores: no parallel part


def _copy(tmp_path: Path, entries: dict[str, object], dag: str | None = None) -> Path:
    d = tmp_path / "p"
    d.mkdir()
    (d / "p.json").write_text(json.dumps(entries))
    if dag is None:
        shutil.copy(embedded_dir() / "queries.yaml", d / "queries.yaml")
    else:
        (d / "queries.yaml").write_text(dag)
    return d


Q1 = [{"stage_id": 0, "num_tasks": 10, "average_runtime_ms": 1000}, {"stage_id": 1, "num_tasks": 1,
      "average_runtime_ms": 500}, {"stage_id": 2, "num_tasks": 1, "average_runtime_ms": 500}]


def test_a_subset_reads(tmp_path: Path) -> None:
    p = load_profiles(_copy(tmp_path, {"tpch_q1_50g_maxCores_50": Q1}))
    assert list(p.cells) == [("1", 50)]


@pytest.mark.parametrize(("entries", "dag", "message"), [
    ({"tpch_q1_50g": Q1}, None, "no core limit"),
    ({"tpch_q1_50g_maxCores_50": [*Q1, {"stage_id": 9, "num_tasks": 1, "average_runtime_ms": 1}]}, None,
     "stage 9 is missing from Q1's DAG"),
    ({"tpch_q1_50g_maxCores_50": [{**Q1[0], "num_tasks": 0}, *Q1[1:]]}, None, "num_tasks must be a positive"),
    ({"tpch_q1_50g_maxCores_50": [{**Q1[0], "average_runtime_ms": -3}, *Q1[1:]]}, None,
     "average_runtime_ms must be positive"),
    ({"tpch_q1_50g_maxCores_50": Q1}, "graphs:\n  - name: Q1\n    graph:\n      - name: 0\n        children: [1]\n"
     "      - name: 1\n        children: [2]\n      - name: 2\n        children: [0]\n", "cycle"),
])
def test_bad_profiles_are_one_line_naming_file_and_entry(tmp_path: Path, entries, dag, message: str) -> None:
    d = _copy(tmp_path, entries, dag)
    with pytest.raises(UserError, match=message) as err:
        load_profiles(d)
    assert "\n" not in str(err.value)
    assert str(d) in str(err.value)
