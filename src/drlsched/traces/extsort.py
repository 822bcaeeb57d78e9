"""External merge sort of Arrow chunks into one sorted Parquet file, in bounded memory.

Each chunk is sorted and written as a run; runs are merged `FAN_IN` at a time (so the number of open files
stays small however long the trace) until one file remains. A merge round cuts at the smallest of the
buffers' last keys, after reading on in every run that ends exactly at that key, so all rows with a key up to
the cut are merged in one round: equal keys come out contiguous and in the full sort order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FAN_IN = 64
MERGE_BUDGET_ROWS = 262_144  # rows buffered across the runs of one merge (memory, not speed, bound)
MIN_BATCH_ROWS = 1024
ROW_GROUP_ROWS = 65_536
Order = list[tuple[str, str]]  # pyarrow sort keys; the first is ascending (numbers or strings): merges cut on it


def tables(schema: pa.Schema, rows: Iterable[tuple[Any, ...]], chunk_rows: int = 262_144) -> Iterator[pa.Table]:
    """Row tuples (in schema order) as Arrow tables of `chunk_rows` rows: the input `sort` takes."""
    block: list[tuple[Any, ...]] = []
    for row in rows:
        block.append(row)
        if len(block) >= chunk_rows:
            yield _table(schema, block)
            block = []
    yield _table(schema, block)


def _table(schema: pa.Schema, rows: list[tuple[Any, ...]]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema.names]
    return pa.table([pa.array(column, type=field.type) for column, field in zip(columns, schema, strict=True)],
                    schema=schema)


def sort(chunks: Iterable[pa.Table], out: Path, order: Order, schema: pa.Schema) -> Path:
    """Writes the rows of `chunks` to `out` sorted by `order`; temporary runs live beside `out`."""
    runs: list[Path] = []
    for chunk in chunks:
        if chunk.num_rows:
            runs.append(out.with_name(f"{out.stem}-run{len(runs):06d}.parquet"))
            pq.write_table(chunk.sort_by(order), runs[-1], row_group_size=ROW_GROUP_ROWS)
    level = 0
    while len(runs) > FAN_IN:
        level += 1
        merged = []
        for start in range(0, len(runs), FAN_IN):
            merged.append(out.with_name(f"{out.stem}-l{level}-{len(merged):06d}.parquet"))
            _merge(runs[start:start + FAN_IN], merged[-1], order, schema)
        runs = merged
    _merge(runs, out, order, schema)
    return out


def _merge(runs: list[Path], out: Path, order: Order, schema: pa.Schema) -> None:
    key = order[0][0]
    batch = max(MIN_BATCH_ROWS, MERGE_BUDGET_ROWS // max(1, len(runs)))
    readers = [pq.ParquetFile(run).iter_batches(batch_size=batch) for run in runs]
    buffers: list[pa.Table | None] = [_next(reader) for reader in readers]
    with pq.ParquetWriter(out, schema) as writer:
        while any(buffer is not None for buffer in buffers):
            cutoff = min(_last(buffer, key) for buffer in buffers if buffer is not None)
            parts = []
            for k, buffer in enumerate(buffers):
                if buffer is None:
                    continue
                while _last(buffer, key) == cutoff:  # the run may hold more rows at the cut: read them too
                    more = _next(readers[k])
                    if more is None:
                        break
                    buffer = pa.concat_tables([buffer, more])
                # Strings compare alike in Arrow (UTF-8 bytes) and Python (code points), so one cut serves both.
                keys = buffer.column(key).to_numpy(zero_copy_only=False)
                take = int(np.searchsorted(keys, cutoff, side="right"))
                parts.append(buffer.slice(0, take))
                rest = buffer.slice(take)
                buffers[k] = rest if rest.num_rows else _next(readers[k])
            writer.write_table(pa.concat_tables(parts).sort_by(order), row_group_size=ROW_GROUP_ROWS)
    for run in runs:
        run.unlink()


def _last(table: pa.Table, key: str) -> object:
    return table.column(key)[-1].as_py()


def _next(reader: Iterator[pa.RecordBatch]) -> pa.Table | None:
    for batch in reader:
        if batch.num_rows:
            return pa.Table.from_batches([batch])
    return None


Columns = dict[str, list[Any]]


def groups(path: Path, by: list[str], columns: list[str]) -> Iterator[tuple[tuple[Any, ...], Columns]]:
    """Consecutive rows of a sorted file with equal `by` values, as column lists, across batch borders."""
    current: tuple[Any, ...] | None = None
    rows: Columns = {name: [] for name in columns}
    for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_GROUP_ROWS, columns=sorted({*by, *columns})):
        values = {name: batch.column(name).to_pylist() for name in {*by, *columns}}
        keys = list(zip(*(values[name] for name in by), strict=True))
        start = 0
        for i in range(1, len(keys) + 1):
            if i < len(keys) and keys[i] == keys[start]:
                continue
            if keys[start] != current:
                if current is not None:
                    yield current, rows
                current, rows = keys[start], {name: [] for name in columns}
            for name in columns:
                rows[name].extend(values[name][start:i])
            start = i
    if current is not None:
        yield current, rows


class Cursor:
    """Walks the groups of one sorted file in step with another's: `at(key)` skips smaller keys (counting
    their rows in `skipped`) and consumes and returns the group with that key, if any. Keys must rise."""

    def __init__(self, grouped: Iterator[tuple[tuple[Any, ...], Columns]]) -> None:
        self._groups = grouped
        self._head = next(grouped, None)
        self.skipped = 0

    def at(self, key: tuple[Any, ...]) -> Columns | None:
        while self._head is not None and self._head[0] < key:
            self.skipped += len(next(iter(self._head[1].values()), ()))
            self._head = next(self._groups, None)
        if self._head is None or self._head[0] != key:
            return None
        found = self._head[1]
        self._head = next(self._groups, None)
        return found

    def rest(self) -> int:
        """Skips to the end; the total of rows never matched."""
        while self._head is not None:
            self.skipped += len(next(iter(self._head[1].values()), ()))
            self._head = next(self._groups, None)
        return self.skipped
