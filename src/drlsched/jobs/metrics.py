"""Job-level run metrics: JCT (mean, P50, P99, by size tercile), makespan, executor utilisation and churn."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

# Keys every job-level run reports (beside the run keys), in this order.
JOB_METRIC_KEYS = ("jct_mean_s", "jct_p50_s", "jct_p99_s", "jct_mean_small_s", "jct_mean_medium_s",
                   "jct_mean_large_s", "makespan_s", "executor_util", "executor_starts", "cluster_util",
                   "jobs_finished", "jobs_unfinished", "tasks_done", "task_completions_per_s")
# Beside them where executors are pods on nodes (jobs/placed.py): the shuffle reads' bytes and wait.
NETWORK_KEYS = ("cross_node_traffic_gb", "cross_rack_traffic_gb", "network_wait_s", "transfer_slowdown_p99")


@dataclass
class JobAccumulator:
    jct: array = field(default_factory=lambda: array("d"))
    work: array = field(default_factory=lambda: array("d"))  # each finished job's size (task-seconds)
    first_arrival: float | None = None
    last_finish: float = 0.0
    busy_s: float = 0.0  # executor-seconds running tasks
    alloc_s: float = 0.0  # executor-seconds joined to a job (cold start and idle included)
    executor_starts: int = 0
    tasks_done: int = 0
    unfinished: int = 0
    wall_s: float = 0.0

    def arrived(self, t: float) -> None:
        if self.first_arrival is None:
            self.first_arrival = t

    def finished(self, arrival: float, t: float, work: float) -> None:
        self.jct.append(t - arrival)
        self.work.append(work)
        self.last_finish = max(self.last_finish, t)

    def summary(self, executors: int) -> dict[str, float | None]:
        """Statistics over an empty sample (no job finished) are None (JSON null), never 0.0 (NULLABLE_KEYS)."""
        jct = np.frombuffer(self.jct, dtype=np.float64) if len(self.jct) else np.zeros(0)
        work = np.frombuffer(self.work, dtype=np.float64) if len(self.work) else np.zeros(0)
        makespan = max(0.0, self.last_finish - (self.first_arrival or 0.0))
        out: dict[str, float | None] = {
            "jct_mean_s": float(jct.mean()) if jct.size else None,
            "jct_p50_s": float(np.percentile(jct, 50)) if jct.size else None,
            "jct_p99_s": float(np.percentile(jct, 99)) if jct.size else None,
        }
        out.update(tercile_means(jct, work))
        out.update({
            "makespan_s": makespan if jct.size else None,
            "executor_util": self.busy_s / self.alloc_s if self.alloc_s > 0 else 0.0,
            "executor_starts": self.executor_starts,
            "cluster_util": self.busy_s / (executors * makespan) if makespan > 0 else 0.0,
            "jobs_finished": int(jct.size),
            "jobs_unfinished": self.unfinished,
            "tasks_done": self.tasks_done,
            "task_completions_per_s": self.tasks_done / self.wall_s if self.wall_s > 0 else 0.0,
        })
        return out


def tercile_means(jct: np.ndarray, work: np.ndarray) -> dict[str, float | None]:
    """Mean JCT of the smallest, middle and largest third of the finished jobs by size (work); ties by order."""
    keys = ("jct_mean_small_s", "jct_mean_medium_s", "jct_mean_large_s")
    if jct.size == 0:
        return dict.fromkeys(keys, None)
    order = np.argsort(work, kind="stable")
    parts = np.array_split(jct[order], 3)
    return {k: float(p.mean()) if p.size else None for k, p in zip(keys, parts, strict=True)}
