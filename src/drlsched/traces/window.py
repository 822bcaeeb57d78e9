"""Selecting a window of a stored trace: start, duration, job sampling, pod cap; arrivals shifted to 0.

The window is [first arrival + start, that + duration). Sampling keeps or drops whole jobs (a DAG is never cut
in half), decided by a hash of the job id mixed with the seed, so the same seed keeps the same jobs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from drlsched.traces.podtable import job_hash

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True, slots=True)
class Window:
    lo: float  # absolute trace time of the window start; arrivals are shifted by it
    hi: float  # absolute end (exclusive), inf = to the end of the trace
    sample_rate: float = 1.0
    seed: int = 0
    max_pods: int | None = None
    speedup: float = 1.0  # arrivals after the window start are compressed by this factor; durations are not


def _keep_jobs(hashes: np.ndarray, rate: float, seed: int) -> np.ndarray:
    """splitmix64 finaliser over (job hash + seed): a uniform draw per job, the same for all its pods."""
    with np.errstate(over="ignore"):
        z = hashes.astype(np.uint64) + np.uint64(seed % 2**64) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2**53) < rate


def keeps_job(job_id: str, rate: float, seed: int) -> bool:
    """The sampling decision for one job, identical to the one `batches` makes for its pods."""
    return rate >= 1.0 or bool(_keep_jobs(np.array([job_hash(job_id)], dtype=np.uint32), rate, seed)[0])


def batches(source: Path | pa.NativeFile, window: Window, columns: list[str] | None = None) -> Iterator[pa.Table]:
    """Selected pods of a store (path or open file), row group by row group, arrival_s shifted to the window."""
    reader = pq.ParquetFile(source)
    metadata = reader.metadata
    arrival_index = reader.schema_arrow.get_field_index("arrival_s")
    wanted = None if columns is None else sorted({*columns, "arrival_s", "job_hash"})
    left = window.max_pods
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(arrival_index).statistics
        if stats is not None and stats.has_min_max:
            if stats.max < window.lo:
                continue
            if stats.min >= window.hi:
                break
        table = reader.read_row_group(group, columns=wanted)
        arrivals = table.column("arrival_s").to_numpy()
        mask = (arrivals >= window.lo) & (arrivals < window.hi)
        if window.sample_rate < 1.0:
            mask &= _keep_jobs(table.column("job_hash").to_numpy(), window.sample_rate, window.seed)
        table = table.filter(pa.array(mask))
        if left is not None:
            table = table.slice(0, left)
            left -= table.num_rows
        if table.num_rows:
            shifted = pc.subtract(table.column("arrival_s"), window.lo)
            if window.speedup != 1.0:
                shifted = pc.divide(shifted, window.speedup)
            yield table.set_column(table.schema.get_field_index("arrival_s"), "arrival_s", shifted)
        if left == 0 or (arrivals.size and arrivals[-1] >= window.hi):
            break


def extent(source: Path | pa.NativeFile, window: Window) -> tuple[int, float]:
    """(selected pods, last selected arrival after the shift); -inf when nothing is selected."""
    count, last = 0, -math.inf
    for table in batches(source, window, columns=[]):
        count += table.num_rows
        last = table.column("arrival_s")[-1].as_py()
    return count, last
