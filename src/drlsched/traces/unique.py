"""Pod and node names must be unique in a trace: a second pod of the same name would be a different pod to the
simulator but the same object to Kubernetes, and a second node of the same name would be counted twice.

Every format's output passes here (from `store.write`), so no reader needs its own check. Pods are checked in
bounded memory: their names are sorted externally (as the store itself is), then neighbours compared in Arrow.
A duplicate is a malformed row: an error, or with --skip-bad-rows the first in reading order is kept and the
others are counted (`info["duplicate_pod_names"]`, `info["duplicate_node_names"]`) and dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from drlsched.traces import extsort
from drlsched.traces.csvio import BadRows
from drlsched.workload import NodeSpec

_NAMES = pa.schema([("uid", pa.string()), ("seq", pa.int64())])
_BATCH = 262_144


def nodes(found: list[NodeSpec], bad: BadRows, where: str) -> list[NodeSpec]:
    """The nodes with each name once (the first kept)."""
    seen: set[str] = set()
    kept: list[NodeSpec] = []
    for node in found:
        if node.name in seen:
            bad.reject(f"{where}: duplicate node name {node.name!r}")
            bad.info["duplicate_node_names"] = int(bad.info.get("duplicate_node_names", 0)) + 1  # type: ignore[call-overload]
            continue
        seen.add(node.name)
        kept.append(node)
    return kept


def pods(pods_file: Path, bad: BadRows, where: str) -> None:
    """Checks the store's pod names; drops the later duplicates from `pods_file` in place when skipping."""
    by_name = extsort.sort(_names(pods_file), pods_file.with_name("names.parquet"),
                           [("uid", "ascending"), ("seq", "ascending")], _NAMES)
    try:
        dropped, example, count = _later_duplicates(by_name)
    finally:
        by_name.unlink()
    if not dropped.size:
        return
    bad.reject(f"{where}: duplicate pod name {example!r} ({count} pods share it; pod names must be unique)",
               rows=int(dropped.size))
    bad.info["duplicate_pod_names"] = int(dropped.size)
    _drop(pods_file, dropped)


def _names(pods_file: Path) -> Iterator[pa.Table]:
    for batch in pq.ParquetFile(pods_file).iter_batches(batch_size=_BATCH, columns=["uid", "seq"]):
        yield pa.Table.from_batches([batch])


def _later_duplicates(by_name: Path) -> tuple[np.ndarray, str, int]:
    """Reading positions (`seq`) of every pod whose name an earlier pod has; one repeated name and its count."""
    dropped: list[np.ndarray] = []
    example, count = "", 0
    previous = pa.nulls(1, pa.string())
    for batch in pq.ParquetFile(by_name).iter_batches(batch_size=_BATCH):
        names = batch.column("uid")
        if not len(names):
            continue
        before = pa.concat_arrays([previous, names.slice(0, len(names) - 1)])
        repeated = pc.fill_null(pc.equal(names, before), False).to_numpy(zero_copy_only=False)
        previous = names.slice(len(names) - 1)
        if not repeated.any():
            continue
        dropped.append(batch.column("seq").to_numpy()[repeated])
        if not example:
            example = names[int(np.flatnonzero(repeated)[0])].as_py()
        count += int(np.count_nonzero(repeated & pc.equal(names, example).to_numpy(zero_copy_only=False)))
    return (np.concatenate(dropped) if dropped else np.empty(0, np.int64)), example, count + 1


def _drop(pods_file: Path, seqs: np.ndarray) -> None:
    kept = pods_file.with_name("unique.parquet")
    source = pq.ParquetFile(pods_file)
    drop = pa.array(np.sort(seqs))
    with pq.ParquetWriter(kept, source.schema_arrow) as writer:
        for group in range(source.metadata.num_row_groups):
            table = source.read_row_group(group)
            writer.write_table(table.filter(pc.invert(pc.is_in(table.column("seq"), value_set=drop))),
                               row_group_size=extsort.ROW_GROUP_ROWS)
    kept.replace(pods_file)
