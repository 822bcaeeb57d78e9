"""The columnar form of pods between a trace reader and `PodSpec`: what the cache stores and the sort orders.

Readers append converted rows to a `PodBuffer`, which hands out Arrow tables of `CHUNK_ROWS` pods. Null usage
means the trace has no measurement for that pod; `PodSpec`'s defaults then apply (counted in `info`).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from drlsched.workload import PodSpec, QoS

CHUNK_ROWS = 262_144

SCHEMA = pa.schema([
    ("uid", pa.string()),
    ("job_id", pa.string()),
    ("task", pa.string()),
    ("arrival_s", pa.float64()),
    ("cpu_m", pa.int64()),
    ("mem_mib", pa.int64()),
    ("gpus", pa.int32()),
    ("gpu_milli", pa.int32()),
    ("gpu_models", pa.string()),  # '|'-separated allowed models; '' = any
    ("qos", pa.int8()),
    ("priority", pa.int32()),
    ("work_s", pa.float64()),  # null: runs until the horizon (still running when the trace ended)
    ("service", pa.bool_()),
    ("usage_cpu", pa.float64()),
    ("usage_mem", pa.float64()),
    ("usage_gpu", pa.float64()),
    ("usage_cv", pa.float64()),
    ("parents", pa.string()),  # '|'-separated parent task names in the same job
    ("job_hash", pa.uint32()),  # seed-independent hash of job_id, for job-level sampling
    ("seq", pa.int64()),  # reading order: ties in arrival keep it, so the order is deterministic
])
NAMES = SCHEMA.names
_USAGE = ("usage_cpu", "usage_mem", "usage_gpu", "usage_cv")


def job_hash(job_id: str) -> int:
    return zlib.crc32(job_id.encode())


class PodBuffer:
    """Collects pod rows column-wise and emits full chunks; `seq` numbers rows in the order added."""

    def __init__(self) -> None:
        self._columns: dict[str, list[Any]] = {name: [] for name in NAMES}
        self._hashes: dict[str, int] = {}
        self.seq = 0
        self.without_usage = 0

    def __len__(self) -> int:
        return len(self._columns["uid"])

    def add(self, uid: str, job_id: str, arrival_s: float, cpu_m: int, mem_mib: int, *, task: str = "",
            gpus: int = 0, gpu_milli: int = 0, gpu_models: str = "", qos: QoS = QoS.BURSTABLE,
            priority: int = 0, work_s: float | None = None, service: bool = False,
            usage_cpu: float | None = None, usage_mem: float | None = None, usage_gpu: float | None = None,
            usage_cv: float | None = None, parents: str = "") -> None:
        c = self._columns
        c["uid"].append(uid)
        c["job_id"].append(job_id)
        c["task"].append(task)
        c["arrival_s"].append(arrival_s)
        c["cpu_m"].append(cpu_m)
        c["mem_mib"].append(mem_mib)
        c["gpus"].append(gpus)
        c["gpu_milli"].append(gpu_milli)
        c["gpu_models"].append(gpu_models)
        c["qos"].append(int(qos))
        c["priority"].append(priority)
        c["work_s"].append(work_s)
        c["service"].append(service)
        c["usage_cpu"].append(usage_cpu)
        c["usage_mem"].append(usage_mem)
        c["usage_gpu"].append(usage_gpu)
        c["usage_cv"].append(usage_cv)
        c["parents"].append(parents)
        hashed = self._hashes.get(job_id)
        if hashed is None:
            if len(self._hashes) > 100_000:
                self._hashes.clear()
            hashed = self._hashes[job_id] = job_hash(job_id)
        c["job_hash"].append(hashed)
        c["seq"].append(self.seq)
        self.seq += 1
        if usage_cpu is None and usage_mem is None:
            self.without_usage += 1

    def full(self) -> bool:
        return len(self) >= CHUNK_ROWS

    def take(self) -> pa.Table:
        table = pa.table(self._columns, schema=SCHEMA)
        self._columns = {name: [] for name in NAMES}
        return table


def to_specs(batch: pa.RecordBatch | pa.Table) -> Iterator[PodSpec]:
    """Pods of a batch as `PodSpec`s; null usage keeps the `PodSpec` default."""
    cols = {name: batch.column(name).to_pylist() for name in NAMES if name not in ("job_hash", "seq")}
    defaults = PodSpec("", "", 0.0, 0, 0)
    qos_values = list(QoS)
    for i in range(batch.num_rows):
        models = cols["gpu_models"][i]
        parents = cols["parents"][i]
        usage = [cols[name][i] for name in _USAGE]
        yield PodSpec(
            uid=cols["uid"][i], job_id=cols["job_id"][i], arrival_s=cols["arrival_s"][i],
            cpu_m=cols["cpu_m"][i], mem_mib=cols["mem_mib"][i], task=cols["task"][i], gpus=cols["gpus"][i],
            gpu_milli=cols["gpu_milli"][i], gpu_models=tuple(models.split("|")) if models else (),
            qos=qos_values[cols["qos"][i]], priority=cols["priority"][i], work_s=cols["work_s"][i],
            service=cols["service"][i],
            usage_cpu=defaults.usage_cpu if usage[0] is None else usage[0],
            usage_mem=defaults.usage_mem if usage[1] is None else usage[1],
            usage_gpu=defaults.usage_gpu if usage[2] is None else usage[2],
            usage_cv=defaults.usage_cv if usage[3] is None else usage[3],
            parents=tuple(parents.split("|")) if parents else (),
        )
