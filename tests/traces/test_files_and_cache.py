"""gzip, the Parquet cache (hit, invalidation), malformed rows (location, skipping, counting)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from trace_helpers import FIXTURES, load

from drlsched.errors import UserError
from drlsched.traces.csvio import BadRows

OPENB = FIXTURES / "alibaba-gpu-v2023"
V2018 = FIXTURES / "alibaba-v2018"
GOOGLE = FIXTURES / "google-2019"


def _gzip_tree(source: Path, target: Path) -> None:
    target.mkdir()
    for path in source.iterdir():
        (target / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))


@pytest.mark.parametrize("fmt", ["alibaba-v2018", "alibaba-v2018-spar", "alibaba-gpu-v2020",
                                 "alibaba-gpu-v2023", "google-2019"])
def test_gzip_reads_like_plain(tmp_path: Path, fmt: str) -> None:
    _gzip_tree(FIXTURES / fmt, tmp_path / "gz")
    plain = [(p.uid, p.arrival_s, p.cpu_m, p.work_s) for p in load(FIXTURES / fmt, fmt).iter_pods()]
    zipped = [(p.uid, p.arrival_s, p.cpu_m, p.work_s) for p in load(tmp_path / "gz", fmt).iter_pods()]
    assert plain == zipped and plain


def test_gzip_detected_by_content_not_name(tmp_path: Path) -> None:
    pods = tmp_path / "openb_pod_list_default.csv"
    pods.write_bytes(gzip.compress((OPENB / "openb_pod_list_default.csv").read_bytes()))
    assert load(pods, "alibaba-gpu-v2023").info["pods"] == 6


def test_cache_hit_and_invalidation(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    shutil.copytree(OPENB, trace)
    cache = tmp_path / "cache"
    first = load(trace, "alibaba-gpu-v2023", cache=str(cache))
    assert first.info["cache"] == "built"
    second = load(trace, "alibaba-gpu-v2023", cache=str(cache))
    assert second.info["cache"] == "hit"
    assert [p.uid for p in second.iter_pods()] == [p.uid for p in first.iter_pods()]
    assert [n.name for n in second.nodes] == [n.name for n in first.nodes]
    pods = trace / "openb_pod_list_default.csv"
    with pods.open("a") as handle:
        handle.write("openb-pod-0006,1000,1024,0,0,,BE,Running,900000,900100,900000\n")
    third = load(trace, "alibaba-gpu-v2023", cache=str(cache))
    assert third.info["cache"] == "built" and third.info["pods"] == 7
    stat = pods.stat()
    os.utime(pods, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # touched, same size
    assert load(trace, "alibaba-gpu-v2023", cache=str(cache)).info["cache"] == "built"
    assert len(list(cache.iterdir())) == 1  # one entry per trace, replaced in place


def _with_bad_row(source: Path, target: Path, name: str, line: int, row: str) -> Path:
    shutil.copytree(source, target)
    lines = (target / name).read_text().splitlines()
    lines.insert(line - 1, row)
    (target / name).write_text("\n".join(lines) + "\n")
    return target


@pytest.mark.parametrize(("fmt", "name", "line", "row", "where"), [
    ("alibaba-v2018", "batch_task.csv", 3, "M9,1.0,j_1,1,Terminated,abc,160,100.0,0.5",
     r"batch_task.csv:3: column 6 \(start_time\)"),
    ("alibaba-v2018", "batch_task.csv", 3, "M1,2.0,j_1,1,Terminated,100,160,100.0,0.5",
     r"batch_task.csv:3: column 1 \(task_name\): task M1 of this job listed twice"),
    ("alibaba-v2018", "batch_instance.csv", 2, "ins_x,M1,j_1,1,Terminated,100", r"batch_instance.csv:2: column 7"),
    ("alibaba-v2018-spar", "sample_tasks.csv", 2, "0,j_10,M5,ten,100.0,0.5,2",
     r"sample_tasks.csv:2: column 4 \(duration\)"),
    ("alibaba-gpu-v2020", "pai_task_table.csv", 1, "job_z,worker,1.0,Terminated,1,2,inf,1,1,T4",
     r"pai_task_table.csv:1: column 7 \(plan_cpu\)"),
    ("alibaba-gpu-v2023", "openb_pod_list_default.csv", 3, "openb-pod-9,1000,1,1,1500,,LS,Running,5,9,5",
     r"openb_pod_list_default.csv:3: column 5 \(gpu_milli\)"),
    ("alibaba-gpu-v2023", "openb_pod_list_default.csv", 4, "openb-pod-9,1000,1,0,0,,XX,Running,5,9,5",
     r"openb_pod_list_default.csv:4: column 7 \(qos\)"),
    ("google-2019", "instance_events-000000000000.json", 2, '{"time": "1", "type": ',
     r"events-000000000000.json:2: column 23"),
    ("google-2019", "instance_events-000000000000.json", 5, '{"time": "1", "type": "0", "instance_index": "0"}',
     r"events-000000000000.json:5: column collection_id"),
])
def test_bad_row_names_file_line_column_and_can_be_skipped(tmp_path: Path, fmt: str, name: str, line: int,
                                                           row: str, where: str) -> None:
    trace = _with_bad_row(FIXTURES / fmt, tmp_path / "trace", name, line, row)
    with pytest.raises(UserError, match=where):
        list(load(trace, fmt).iter_pods())
    clean = [pod.uid for pod in load(FIXTURES / fmt, fmt).iter_pods()]
    skipped = load(trace, fmt, skip_bad_rows=True)
    assert skipped.info["bad_rows"] == 1
    assert [pod.uid for pod in skipped.iter_pods()] == clean


def test_cached_bad_rows_still_need_skip(tmp_path: Path) -> None:
    trace = _with_bad_row(OPENB, tmp_path / "trace", "openb_pod_list_default.csv", 2, "broken")
    cache = str(tmp_path / "cache")
    assert load(trace, "alibaba-gpu-v2023", cache=cache, skip_bad_rows=True).info["bad_rows"] == 1
    hit = load(trace, "alibaba-gpu-v2023", cache=cache, skip_bad_rows=True)
    assert hit.info["cache"] == "hit" and hit.info["bad_rows"] == 1
    with pytest.raises(UserError, match=r"openb_pod_list_default\.csv:2"):
        load(trace, "alibaba-gpu-v2023", cache=cache)


def test_header_mismatch(tmp_path: Path) -> None:
    pods = tmp_path / "openb_pod_list_x.csv"
    pods.write_text("name,cpu_milli\nopenb-pod-1,1000\n")
    with pytest.raises(UserError, match=r"openb_pod_list_x.csv:1: header lacks column\(s\) memory_mib"):
        load(pods, "alibaba-gpu-v2023")


def test_a_concurrent_build_keeps_the_first_valid_entry(tmp_path: Path) -> None:
    from drlsched.traces import store

    cache = str(tmp_path / "cache")
    first = load(OPENB, "alibaba-gpu-v2023", cache=cache)
    entry = first.pods.source.parent  # type: ignore[attr-defined]
    before = (entry / store.META_FILE).stat().st_mtime_ns
    stamp = json.loads((entry / store.META_FILE).read_text())["stamp"]
    meta = store.write(iter(()), entry, [], BadRows(skip=False), stamp)  # a second builder finishing later
    assert meta["pods"] == 6  # the other process's entry, not our empty build
    assert (entry / store.META_FILE).stat().st_mtime_ns == before
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".build-")]


def test_temporary_store_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    workload = load(OPENB, "alibaba-gpu-v2023")
    assert list(tmp_path.iterdir()) == []  # deleted at once; the open file keeps the pods readable
    assert len(list(workload.iter_pods())) == len(list(workload.iter_pods())) == 6
