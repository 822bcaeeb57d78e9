"""The job book: a job's tasks, the DAG gate that releases a pod once its parent tasks have finished, and where
the finished pods ran (data locality). The simulator and the replayer keep their jobs here.

A pod waits on its first unfinished parent task; when that task finishes, it is looked at again (at the end of
the instant, so parents arriving together with a child count) and either released or set to wait on its next
unfinished parent. A parent task absent from the workload does not block.
"""

from __future__ import annotations

from collections import Counter
from typing import Generic, TypeVar

from drlsched.workload import PodSpec

T = TypeVar("T")


class Task:
    __slots__ = ("finished", "nodes", "pods")

    def __init__(self) -> None:
        self.pods = 0  # arrived so far
        self.finished = 0
        self.nodes: list[int] = []  # where its finished pods ran (node rows)

    @property
    def done(self) -> bool:
        return self.finished >= self.pods


class Job(Generic[T]):
    __slots__ = ("n_waiting", "tasks", "waiting")

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self.waiting: dict[str, list[tuple[PodSpec, T]]] = {}  # parent task -> pods waiting on it
        self.n_waiting = 0

    def count(self, task_name: str) -> Task:
        """One more pod of the task has arrived."""
        task = self.tasks.get(task_name)
        if task is None:
            task = self.tasks[task_name] = Task()
        task.pods += 1
        return task

    def task_done(self, task: str) -> bool:
        info = self.tasks.get(task)
        return info is None or info.done

    def data_nodes(self, parents: tuple[str, ...]) -> Counter[int]:
        """Node -> finished pods of the parent tasks there: where the pod's shuffle input lives."""
        return Counter(n for p in parents if (info := self.tasks.get(p)) is not None for n in info.nodes)


class JobBook(Generic[T]):
    """Jobs by id. `arrive` counts a pod and gates it; `finish` records a finished pod; `release` returns the
    pods whose parents have all finished since, in a deterministic order."""

    def __init__(self) -> None:
        self._dirty: list[tuple[Job[T], str]] = []  # (job, task) whose waiting pods need a look

    def arrive(self, job: Job[T], spec: PodSpec, item: T) -> bool:
        """Counts the pod in its task; True if it may be queued now, else it waits for its parents."""
        job.count(spec.task)
        if not spec.parents:
            return True
        # Waits on its first parent; re-checked at the end of the instant, when parents arriving with it count.
        job.n_waiting += 1
        job.waiting.setdefault(spec.parents[0], []).append((spec, item))
        self._dirty.append((job, spec.parents[0]))
        return False

    def finish(self, job: Job[T], task_name: str, node: int | None = None) -> None:
        """One pod of the task finished (on `node`, remembered for data locality)."""
        task = job.tasks[task_name]
        task.finished += 1
        if node is not None:
            task.nodes.append(node)
        if task.done and task_name in job.waiting:
            self._dirty.append((job, task_name))

    @property
    def pending_release(self) -> bool:
        return bool(self._dirty)

    def release(self) -> list[T]:
        """The waiting pods whose parent tasks have now all finished."""
        out: list[T] = []
        while self._dirty:
            todo, self._dirty = self._dirty, []
            for job, task in dict.fromkeys(todo):  # ordered de-duplication keeps runs deterministic
                if not job.task_done(task):
                    continue
                for spec, item in job.waiting.pop(task, ()):
                    blocker = next((p for p in spec.parents if not job.task_done(p)), None)
                    if blocker is None:
                        job.n_waiting -= 1
                        out.append(item)
                    else:
                        job.waiting.setdefault(blocker, []).append((spec, item))
                        self._dirty.append((job, blocker))
        return out
