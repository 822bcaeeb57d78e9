"""Damaged files (truncated gzip, bytes that are not UTF-8, oversized CSV fields), a byte-order mark, and
duplicate pod or node names: one line naming file and place, exit 2, never a traceback."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from trace_helpers import FIXTURES, load

from drlsched.cli import main
from drlsched.errors import UserError

OPENB = FIXTURES / "alibaba-gpu-v2023"
OPENB_FMT = "alibaba-gpu-v2023"
PODS = "openb_pod_list_default.csv"
NODES = "openb_node_list_all_node.csv"


def _trace(tmp_path: Path) -> Path:
    trace = tmp_path / "trace"
    shutil.copytree(OPENB, trace)
    return trace


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _exits_2_with_one_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    return err


def test_truncated_gzip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path)
    data = gzip.compress((trace / PODS).read_bytes())
    (trace / PODS).unlink()
    (trace / f"{PODS}.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match=rf"{PODS}\.gz: compressed data damaged or truncated after line \d+"):
        load(trace, OPENB_FMT)
    err = _exits_2_with_one_line(["trace-info", str(trace), "--trace-format", OPENB_FMT, "--skip-bad-rows"],
                                 capsys)
    assert f"{PODS}.gz" in err


def test_corrupt_gzip_body(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    data = bytearray(gzip.compress((trace / PODS).read_bytes()))
    data[20:40] = b"\xff" * 20
    (trace / PODS).write_bytes(bytes(data))
    with pytest.raises(UserError, match=rf"{PODS}: compressed data damaged or truncated"):
        load(trace, OPENB_FMT)


def test_latin1_bytes_named_by_line_and_offset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path)
    lines = _lines(trace / PODS)
    lines[3] = lines[3].replace(b"openb-pod-0002", b"openb-pod-\xe92")
    (trace / PODS).write_bytes(b"".join(lines))
    offset = sum(len(line) for line in lines[:3]) + len(b"openb-pod-")
    with pytest.raises(UserError, match=rf"{PODS}:4: byte {offset} \(0xe9\) is not UTF-8"):
        load(trace, OPENB_FMT)
    err = _exits_2_with_one_line(["trace-info", str(trace), "--trace-format", OPENB_FMT, "--skip-bad-rows"],
                                 capsys)
    assert f"{PODS}:4: byte {offset}" in err


def test_latin1_inside_gzip_names_the_uncompressed_offset(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    lines = _lines(trace / NODES)
    lines[2] = lines[2].replace(b"G2", b"G\xb2")
    (trace / NODES).unlink()
    (trace / f"{NODES}.gz").write_bytes(gzip.compress(b"".join(lines)))
    offset = sum(len(line) for line in lines[:2]) + lines[2].index(b"\xb2")
    with pytest.raises(UserError, match=rf"{NODES}\.gz:3: uncompressed byte {offset} \(0xb2\)"):
        load(trace, OPENB_FMT)


def test_utf16_file(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    (trace / PODS).write_bytes((trace / PODS).read_text().encode("utf-16"))
    with pytest.raises(UserError, match=rf"{PODS}:1: byte 0 \(0xff\) is not UTF-8"):
        load(trace, OPENB_FMT)


def test_json_lines_reader_names_the_line(tmp_path: Path) -> None:
    trace = tmp_path / "google"
    shutil.copytree(FIXTURES / "google-2019", trace)
    events = next(trace.glob("instance_events-*.json"))
    lines = _lines(events)
    lines[1] = lines[1].rstrip(b"\n") + b" \xfe\n"
    events.write_bytes(b"".join(lines))
    with pytest.raises(UserError, match=rf"{events.name}:2: byte \d+ \(0xfe\) is not UTF-8"):
        load(trace, "google-2019")


def test_field_over_the_csv_limit_is_a_bad_row(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    lines = _lines(trace / PODS)
    lines.insert(3, b"x" * (200 << 10) + b",1,1,0,0,,BE,Running,0,1,0\n")
    (trace / PODS).write_bytes(b"".join(lines))
    with pytest.raises(UserError, match=rf"malformed row at .*{PODS}:4: column \?: field larger than field limit"):
        load(trace, OPENB_FMT)
    skipped = load(trace, OPENB_FMT, skip_bad_rows=True)
    assert skipped.info["bad_rows"] == 1 and skipped.info["pods"] == 6


def test_byte_order_mark_before_the_header(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    for name in (PODS, NODES):
        (trace / name).write_bytes(b"\xef\xbb\xbf" + (trace / name).read_bytes())
    workload = load(trace, OPENB_FMT)
    assert workload.info["pods"] == 6 and len(workload.nodes) == 4
    assert workload.info["bad_rows"] == 0


def test_duplicate_pod_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path)
    lines = _lines(trace / PODS)
    copy = lines[2].replace(b"6000,12288", b"7000,12288")  # openb-pod-0001 again, another request
    (trace / PODS).write_bytes(b"".join([*lines, copy, copy]))
    with pytest.raises(UserError, match=r"duplicate pod name 'openb-pod-0001' \(3 pods share it"):
        load(trace, OPENB_FMT)
    skipped = load(trace, OPENB_FMT, skip_bad_rows=True)
    assert skipped.info["bad_rows"] == 2 and skipped.info["duplicate_pod_names"] == 2
    pods = {pod.uid: pod for pod in skipped.iter_pods()}
    assert len(pods) == skipped.info["pods"] == 6
    assert pods["openb-pod-0001"].cpu_m == 6000  # the first in reading order is kept
    _exits_2_with_one_line(["trace-info", str(trace), "--trace-format", OPENB_FMT], capsys)
    assert main(["trace-info", str(trace), "--trace-format", OPENB_FMT, "--skip-bad-rows", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bad_rows"] == 2


def test_duplicate_pod_names_across_sort_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from drlsched.traces import unique

    monkeypatch.setattr(unique, "_BATCH", 2)  # every comparison crosses a batch border somewhere
    trace = _trace(tmp_path)
    lines = _lines(trace / PODS)
    (trace / PODS).write_bytes(b"".join([*lines, lines[4], lines[6], lines[4]]))
    skipped = load(trace, OPENB_FMT, skip_bad_rows=True)
    assert skipped.info["duplicate_pod_names"] == 3
    assert sorted(pod.uid for pod in skipped.iter_pods()) == [f"openb-pod-000{i}" for i in range(6)]


def test_duplicate_node_names(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    lines = _lines(trace / NODES)
    (trace / NODES).write_bytes(b"".join([*lines, lines[2].replace(b"393216", b"1024")]))
    with pytest.raises(UserError, match=r"duplicate node name 'openb-node-0001'"):
        load(trace, OPENB_FMT)
    skipped = load(trace, OPENB_FMT, skip_bad_rows=True)
    assert [n.name for n in skipped.nodes] == [f"openb-node-000{i}" for i in range(4)]
    assert next(n for n in skipped.nodes if n.name == "openb-node-0001").mem_mib == 393216
    assert skipped.info["duplicate_node_names"] == 1 and skipped.info["bad_rows"] == 1
