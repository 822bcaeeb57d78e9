"""Arrival-sorted Parquet store of a trace's pods: an external merge sort, kept as the `--cache`.

Trace files are not all sorted by time (raw v2018 instances, PAI instances, Google event shards), so every
reader's output goes through the same path: each chunk of `CHUNK_ROWS` pods is sorted and written as a run,
then the runs are merged batch-wise into one file with row groups in arrival order. Memory stays bounded by
the runs' read batches, never by the trace. A cache entry is keyed by format, paths and options and is
rebuilt when any source file's size or modification time changes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from drlsched.errors import UserError
from drlsched.traces.podtable import SCHEMA
from drlsched.workload import NodeSpec

STORE_VERSION = 1  # bump when readers change what they produce, so old cache entries are rebuilt
PODS_FILE = "pods.parquet"
META_FILE = "meta.json"
ROW_GROUP_ROWS = 65_536
MERGE_BUDGET_ROWS = 262_144  # rows buffered across all runs while merging (memory, not speed, bound)
_ORDER = [("arrival_s", "ascending"), ("seq", "ascending")]


def stamp(files: Iterable[Path]) -> list[list[object]]:
    """What invalidates a cache entry: each source's resolved path, size and modification time."""
    rows: list[list[object]] = []
    for path in sorted(set(files)):
        status = path.stat()
        rows.append([str(path.resolve()), status.st_size, status.st_mtime_ns])
    return rows


def entry_dir(cache: Path, key: dict[str, object]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return cache / f"trace-{digest}"


def load_meta(directory: Path, source_stamp: list[list[object]]) -> dict[str, Any] | None:
    """The meta of a valid entry, or None (missing, written by another version, or sources changed)."""
    try:
        meta = json.loads((directory / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    if meta.get("version") != STORE_VERSION or meta.get("stamp") != source_stamp:
        return None
    if not (directory / PODS_FILE).is_file():
        return None
    return dict(meta)


def write(chunks: Iterable[pa.Table], directory: Path, nodes: list[NodeSpec], info: dict[str, object],
          source_stamp: list[list[object]]) -> dict[str, Any]:
    """Sorts `chunks` into `directory` (replaced atomically) and returns the meta written beside them.

    `nodes` and `info` are read only after the chunks are exhausted: readers fill them while streaming.
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=directory.parent))
    try:
        runs: list[Path] = []
        for chunk in chunks:
            if chunk.num_rows:
                run = work / f"run-{len(runs):06d}.parquet"
                pq.write_table(chunk.sort_by(_ORDER), run, row_group_size=ROW_GROUP_ROWS)
                runs.append(run)
        first, last, count = _merge(runs, work / PODS_FILE)
        for run in runs:
            run.unlink()
        meta = {"version": STORE_VERSION, "stamp": source_stamp, "pods": count, "first_arrival": first,
                "last_arrival": last, "nodes": [asdict(node) for node in nodes], "info": info}
        (work / META_FILE).write_text(json.dumps(meta))
        # Several processes (evaluate --jobs) may build the same entry at once: the first valid one wins and
        # is never removed under a reader; only a stale entry is replaced.
        existing = load_meta(directory, source_stamp)
        if existing is not None:
            shutil.rmtree(work)
            return existing
        if directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
        try:
            work.rename(directory)
        except OSError:
            existing = load_meta(directory, source_stamp)
            if existing is None:
                raise
            shutil.rmtree(work)
            return existing
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return meta


def _merge(runs: list[Path], out: Path) -> tuple[float, float, int]:
    """k-way merge of sorted runs, a batch at a time.

    Each round takes, from every run's buffer, the rows not later than the smallest of the buffers' last
    arrivals: no row still unread in any run can come before them.
    """
    batch = max(1024, MERGE_BUDGET_ROWS // max(1, len(runs)))
    readers = [pq.ParquetFile(run).iter_batches(batch_size=batch) for run in runs]
    buffers: list[pa.Table | None] = [_next(reader) for reader in readers]
    first, last, count = 0.0, 0.0, 0
    with pq.ParquetWriter(out, SCHEMA) as writer:
        while any(buffer is not None for buffer in buffers):
            cutoff = min(buffer.column("arrival_s")[-1].as_py() for buffer in buffers if buffer is not None)
            parts = []
            for k, buffer in enumerate(buffers):
                if buffer is None:
                    continue
                arrivals = buffer.column("arrival_s").to_numpy()
                take = int(np.searchsorted(arrivals, cutoff, side="right"))
                parts.append(buffer.slice(0, take))
                rest = buffer.slice(take)
                buffers[k] = rest if rest.num_rows else _next(readers[k])
            merged = pa.concat_tables(parts).sort_by(_ORDER)
            if not count:
                first = merged.column("arrival_s")[0].as_py()
            count += merged.num_rows
            last = merged.column("arrival_s")[-1].as_py()
            writer.write_table(merged, row_group_size=ROW_GROUP_ROWS)
    return first, last, count


def _next(reader: Iterable[pa.RecordBatch]) -> pa.Table | None:
    for batch in reader:
        if batch.num_rows:
            return pa.Table.from_batches([batch])
    return None


def nodes_from_meta(meta: dict[str, Any]) -> list[NodeSpec]:
    try:
        return [NodeSpec(**{**node, "taints": tuple(node["taints"])}) for node in meta["nodes"]]
    except (KeyError, TypeError) as err:
        raise UserError(f"trace cache entry is corrupt ({err}); delete it and retry") from err
