"""The event timeline: a heap of (time, sequence, kind, data), apart from the things the events are about
(spark-sched-sim's core/timeline.py). Ties at one time keep push order."""

from __future__ import annotations

import heapq
import itertools

from drlsched.sim.config import INF

# Event kinds.
START, NODE_DONE, SERVICE_END, TICK, REBALANCE = range(5)


class Timeline:
    def __init__(self) -> None:
        self.events: list[tuple] = []  # type: ignore[type-arg]
        self.seq = itertools.count()

    def push(self, t: float, kind: int, data: object) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, data))

    def next_time(self) -> float:
        return self.events[0][0] if self.events else INF

    def pop_due(self, t: float) -> tuple[int, object] | None:
        """The next event at or before t (kind, data), or None."""
        if self.events and self.events[0][0] <= t:
            _, _, kind, data = heapq.heappop(self.events)
            return kind, data
        return None
