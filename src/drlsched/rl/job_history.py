"""The learned job policy's optional history input (`drlsched train-jobs --history lstm`, issue 24 item 1): what
the recent load looked like, so the global summary can see the load shift that a decision's live jobs do not show.

The policy sees only the jobs in the system (no clock), so the history is built from arrivals, as the guard's is
(rl.job_guard): every job is taken in at the first decision that sees it, with the executors in use and the jobs
in the system at that decision. The window is the last `STEPS` blocks of `BLOCK` arrivals (newest last); each
block one row of `HISTORY_FEATURES`, every one dimensionless like the other features:
    offered_load  arrival rate × mean work / executors (the block's rate: BLOCK / time since the previous block's
                  last arrival), clipped to 4;
    log_work      log1p(mean work / executors / 10 s) of the block's jobs (their size);
    utilisation   executors in use / executors when the block's last job was first seen;
    log_jobs      log1p(jobs in the system then) / 5;
    filled        1 for a block with its arrivals, 0 for the padding before enough arrived.
Shape: float32[STEPS, HISTORY_WIDTH].
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from drlsched.jobs.model import Job

HISTORY_VERSION = 1  # bump on any change below: it is part of the checkpoint's feature spec
HISTORY_FEATURES = ("offered_load", "log_work", "utilisation", "log_jobs", "filled")
HISTORY_WIDTH = len(HISTORY_FEATURES)
STEPS = 8
BLOCK = 5
HISTORIES = ("none", "lstm")
MAX_LOAD = 4.0


def history_spec(kind: str) -> dict[str, object] | None:
    """What a checkpoint records of its history input (None: no history, the layout of checkpoints before it)."""
    if kind == "none":
        return None
    return {"kind": kind, "version": HISTORY_VERSION, "features": list(HISTORY_FEATURES), "steps": STEPS,
            "block": BLOCK}


class ArrivalHistory:
    """Arrivals seen so far (time, work, executors in use and jobs in the system at first sight)."""

    def __init__(self) -> None:
        keep = (STEPS + 1) * BLOCK
        self.rows: deque[tuple[float, float, float, float]] = deque(maxlen=keep)
        self.live: set[int] = set()

    def see(self, jobs: Sequence[Job], executors: int) -> None:
        new = sorted((j for j in jobs if j.ident not in self.live), key=lambda j: j.arrival_s)
        if new:
            e = float(max(executors, 1))
            used = sum(j.executors for j in jobs) / e
            for j in new:
                self.rows.append((j.arrival_s, j.work_s, used, float(len(jobs))))
        self.live = {j.ident for j in jobs}

    def window(self, executors: int) -> np.ndarray:
        """float32[STEPS, HISTORY_WIDTH] (see the module docstring)."""
        out = np.zeros((STEPS, HISTORY_WIDTH), dtype=np.float32)
        if len(self.rows) < BLOCK:
            return out
        a = np.array(self.rows, dtype=np.float64)
        e = float(max(executors, 1))
        n = a.shape[0]
        for b in range(STEPS):  # block b ends at arrival n − 1 − b·BLOCK (newest block in the last row)
            end = n - b * BLOCK
            start = end - BLOCK
            if start < 0:
                break
            block = a[start:end]
            work = float(block[:, 1].mean())
            t0 = a[start - 1, 0] if start > 0 else block[0, 0]
            arrivals = BLOCK if start > 0 else BLOCK - 1  # the first block's span starts at its own first job
            span = block[-1, 0] - t0
            load = MAX_LOAD if span <= 0 else min(MAX_LOAD, arrivals / span * work / e)
            out[STEPS - 1 - b] = (load, math.log1p(max(work, 0.0) / e / 10.0), block[-1, 2], math.log1p(block[-1, 3])
                                  / 5.0, 1.0)
        return out
