"""Arrival-sorted Parquet store of a trace's pods: an external merge sort, kept as the `--cache`.

Trace files are not all sorted by time (raw v2018 instances, PAI instances, Google event shards), so every
reader's output goes through the same external sort (`extsort`) into one file with row groups in arrival
order (ties keep reading order). Memory stays bounded by the merge buffers, never by the trace. A cache
entry is keyed by format, paths and options and is rebuilt when any source file's size or modification time
changes.
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

import pyarrow as pa
import pyarrow.parquet as pq

from drlsched.errors import UserError
from drlsched.traces import extsort, unique
from drlsched.traces.csvio import BadRows
from drlsched.traces.podtable import SCHEMA
from drlsched.workload import NodeSpec

STORE_VERSION = 3  # bump when readers change what they produce, so old cache entries are rebuilt
PODS_FILE = "pods.parquet"
META_FILE = "meta.json"
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


def write(chunks: Iterable[pa.Table], directory: Path, nodes: list[NodeSpec], bad: BadRows,
          source_stamp: list[list[object]]) -> dict[str, Any]:
    """Sorts `chunks` into `directory` (replaced atomically) and returns the meta written beside them.

    `nodes` and `bad.info` are read only after the chunks are exhausted: readers fill them while streaming.
    Duplicate pod and node names are bad rows (`unique`).
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=directory.parent))
    try:
        pods = extsort.sort(chunks, work / PODS_FILE, _ORDER, SCHEMA)
        where = ", ".join(sorted(Path(str(row[0])).name for row in source_stamp)) or str(directory)
        nodes = unique.nodes(nodes, bad, where)
        unique.pods(pods, bad, where)
        info = bad.info
        metadata = pq.ParquetFile(pods).metadata
        first = last = 0.0
        if metadata.num_rows:
            column = metadata.schema.names.index("arrival_s")
            first = metadata.row_group(0).column(column).statistics.min + 0.0  # Parquet keeps 0 as -0.0
            last = metadata.row_group(metadata.num_row_groups - 1).column(column).statistics.max
        meta = {"version": STORE_VERSION, "stamp": source_stamp, "pods": metadata.num_rows,
                "first_arrival": first, "last_arrival": last, "nodes": [asdict(node) for node in nodes],
                "info": info}
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


def nodes_from_meta(meta: dict[str, Any]) -> list[NodeSpec]:
    try:
        return [NodeSpec(**{**node, "taints": tuple(node["taints"])}) for node in meta["nodes"]]
    except (KeyError, TypeError) as err:
        raise UserError(f"trace cache entry is corrupt ({err}); delete it and retry") from err
