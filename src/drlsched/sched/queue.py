"""kube-scheduler's scheduling queue (pkg/scheduler/backend/queue), shared by the simulator and the second scheduler.

Three places a pending pod can be, as upstream:
- activeQ: tried next, by priority (higher first), then by when the pod last entered the queue;
- backoffQ: pods that failed and whose backoff (1 s doubling to 10 s per failed attempt, `pod_backoff_s`) has not
  expired, by expiry. With SchedulerPopFromBackoffQ (on by default since v1.33) a pod woken from the
  unschedulable set is tried from here when activeQ is empty, before its backoff ends; a pod whose bind failed
  (`requeue_error`) waits out its backoff;
- unschedulable pods ("parked"): pods that fit nowhere. They leave only on a cluster event whose queueing hint
  says the pod may fit now (`wake`), or after 5 minutes there (podMaxInUnschedulablePodsDuration, `flush`).

Time is passed in by the caller (simulated seconds or the monotonic clock), so both sides use one queue.

Queueing hints: NodeResourcesFit's hint for a deleted assigned pod is Queue, so upstream retries every parked
pod on every pod that ends; most fail again, each such failure resetting the pod's queue time and lengthening its
backoff. `wake` without a predicate does exactly that. A caller that can tell which pods would fail (the
simulator: only pods that fit a node whose room grew can fit anywhere) passes a vectorised predicate over the
parked pods' hint rows instead: the pods it rejects fail in place at once — the same attempt, queue time and
backoff as upstream's retry, computed for all of them in a few array operations — and the pods it accepts become
candidates, tried in queue order, each checked again when its turn comes (a candidate whose room a pod before it
took fails in place too). The outcome is upstream's; the Python work per event no longer grows with the parked
pods (the array operations still do, at a small fraction of the cost). A pod parked without a row is accepted by
every event. Parked pods at the backoff cap that keep failing together are kept lazily (`_Parked`, "the lazy
group"): their rows are not rewritten per event, their bookkeeping is derived when they leave.

An event that arrives while a pod is being tried (between `pop` and `park`) sends that pod straight back to the
queue, as upstream's in-flight events do.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np

from drlsched.kube_scoring import POD_INITIAL_BACKOFF_S, POD_MAX_BACKOFF_S, pod_backoff_array, pod_backoff_s

MAX_UNSCHEDULABLE_S = 300.0  # podMaxInUnschedulablePodsDuration
T = TypeVar("T")
Hint = Callable[[np.ndarray], np.ndarray]

# Where an entry is.
_ACTIVE, _BACKOFF, _HELD, _PARKED, _OUT, _GONE = range(6)


class Entry(Generic[T]):
    """One pending pod in the queue: the caller's object and the queue's bookkeeping for it."""

    __slots__ = ("attempts", "backoff_t", "events_seen", "pod", "priority", "queue_t", "seq", "slot", "where")

    def __init__(self, pod: T, priority: int, t: float, seq: int) -> None:
        self.pod = pod
        self.priority = priority
        self.queue_t = t  # when it last entered the queue: the order within a priority
        self.attempts = 0  # failed attempts
        self.backoff_t = 0.0  # its backoff ends here
        self.events_seen = 0
        self.seq = seq
        self.slot = -1  # row in the parked store
        self.where = _ACTIVE


class _Parked(Generic[T]):
    """The unschedulable pods as rows of arrays (append order = park time order), so a hint is checked against
    all of them at once. Rows of pods that left are dead until the next compaction.

    The lazy group: parked pods at the backoff cap that failed together at the last wake share their queue time
    (that wake's), their backoff end (+ the cap) and their priority, and hold consecutive seqs in a block in their
    fixed order; at the next wake they fail together again, keeping that order among themselves, and the block as a
    whole takes one place among the other failing pods (`before_group`). So their rows are not rewritten per event:
    a member's queue time, backoff end, seq (block start + its place in the block) and attempts (its count when it
    joined + the group's failures since) are derived when it leaves (`leave`: it becomes a candidate, is flushed or
    removed). Only the relative order of seqs is ever used (heap keys and the failure order compare them), so a
    block may keep the places of members that left as gaps."""

    lazy = True  # False: no group ever forms, every failure is written per row (the reference a test compares)

    def __init__(self, width: int, capped_attempts: int, capped_backoff: float) -> None:
        self.entries: list[Entry[T] | None] = []
        self.rows = np.zeros((16, width), dtype=np.int64)
        self.hinted = np.zeros(16, dtype=bool)
        self.alive = np.zeros(16, dtype=bool)
        self.num = np.zeros((16, 5))  # queue time (its last failure), backoff end, -priority, seq, attempts
        self.live = 0
        # Parked pods share few distinct hint rows (request shapes): each row is stored once, as a shape id, and a
        # row-wise hint is evaluated once per distinct shape (`accepts`), not once per parked pod.
        self.shape = np.zeros(16, dtype=np.int64)
        self._shape_ids: dict[tuple[int, ...], int] = {}
        self.shapes = np.zeros((16, width), dtype=np.int64)
        # The lazy group. Per row: its place in `g_buf` (-1: not a member) and the group's failures when it joined
        # (its `num` row is as of then). `g_buf[g_lo:g_hi]` are the members' rows in seq order, -1 where one left.
        self.capped_attempts = capped_attempts  # from this many failed attempts on, the backoff is the cap
        self.capped_backoff = capped_backoff
        self.gpos = np.full(16, -1, dtype=np.int64)
        self.gjoin = np.zeros(16, dtype=np.int64)
        self._g_reset()

    def _g_reset(self) -> None:
        self.g_buf = np.full(128, -1, dtype=np.int64)
        self.g_lo = self.g_hi = 64
        self.g_live = 0
        self.g_t = 0.0  # the members' queue time (the last wake's); backoff end: + capped_backoff
        self.g_seq0 = 0  # seq of the member at g_lo
        self.g_fails = 0
        self.g_prio = 0.0  # -priority, as in `num`

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry: Entry[T], t: float, hint: Sequence[int] | None) -> None:
        i = len(self.entries)
        if i == self.alive.size:
            self._grow()
        entry.slot = i
        self.entries.append(entry)
        self.alive[i] = True
        self.hinted[i] = hint is not None
        if hint is not None:
            self.rows[i] = hint
            self.shape[i] = self._shape_id(hint)
        self.num[i] = (t, entry.backoff_t, -entry.priority, entry.seq, entry.attempts)
        self.gpos[i] = -1
        self.live += 1

    def take(self, i: int) -> Entry[T]:
        entry = self.entries[i]
        assert entry is not None
        if self.gpos[i] >= 0:
            self.leave(np.array([i], dtype=np.int64))
        queue_t, backoff_t, _, seq, attempts = self.num[i].tolist()
        entry.queue_t, entry.backoff_t, entry.seq, entry.attempts = queue_t, backoff_t, int(seq), int(attempts)
        self.entries[i] = None
        self.alive[i] = False
        self.live -= 1
        entry.slot = -1
        return entry

    def compact(self) -> None:
        n = len(self.entries)
        keep = np.flatnonzero(self.alive[:n])
        m = keep.size
        self.entries = [self.entries[i] for i in keep.tolist()]
        for j, entry in enumerate(self.entries):
            entry.slot = j  # type: ignore[union-attr]
        for name in ("rows", "hinted", "alive", "num", "shape", "gpos", "gjoin"):
            arr = getattr(self, name)
            arr[:m] = arr[keep]
        self.alive[m:n] = False
        if self.g_live:
            renumber = np.full(n, -1, dtype=np.int64)
            renumber[keep] = np.arange(m)
            buf = self.g_buf[self.g_lo:self.g_hi]
            member = buf >= 0
            buf[member] = renumber[buf[member]]

    def members(self, rows: np.ndarray) -> np.ndarray:
        """The rows in `rows` that are members of the lazy group."""
        return rows[self.gpos[rows] >= 0] if self.g_live else rows[:0]

    def queue_times(self, n: int) -> np.ndarray:
        """The first n rows' queue times, derived for the group's members."""
        out = self.num[:n, 0]
        return np.where(self.gpos[:n] >= 0, self.g_t, out) if self.g_live else out

    def leave(self, rows: np.ndarray) -> None:
        """Members (rows) leave the group: their bookkeeping is derived and written to their rows."""
        pos = self.gpos[rows]
        num = self.num
        num[rows, 0] = self.g_t
        num[rows, 1] = self.g_t + self.capped_backoff
        num[rows, 3] = self.g_seq0 + (pos - self.g_lo)
        num[rows, 4] += self.g_fails - self.gjoin[rows]
        self.g_buf[pos] = -1
        self.gpos[rows] = -1
        self.g_live -= int(rows.size)
        if not self.g_live:
            self._g_reset()

    def tidy(self) -> None:
        """Drops the gaps of members that left once they are most of the block (at a wake, before the block gets
        new seqs: the members' order is kept, and no other pod's seq lies inside the block)."""
        span = self.g_hi - self.g_lo
        if span > 64 and self.g_live * 2 < span:
            buf = self.g_buf[self.g_lo:self.g_hi]
            self._g_relay(buf[buf >= 0], 0, 0)

    def before_group(self, rows: np.ndarray, t: float) -> int:
        """How many of `rows` (non-members, in queue order at t) the queue would try before the group's members."""
        num = self.num[rows]
        backoff = num[:, 1]
        key = np.where(backoff > t, backoff, -np.inf)
        g_backoff = self.g_t + self.capped_backoff
        g_key = g_backoff if g_backoff > t else -np.inf
        prio = num[:, 2]
        gp = self.g_prio
        less = (key < g_key) | ((key == g_key) & ((prio < gp) | ((prio == gp) & (num[:, 3] < self.g_seq0))))
        return int(np.count_nonzero(less))

    def join(self, rows: np.ndarray, capped: np.ndarray, split: int, t: float) -> None:
        """After a wake's failures: `rows` failed at t in this order (the group's block, if any, goes between
        rows[:split] and rows[split:]) and hold consecutive seqs around the block; `capped` says which are now at
        the cap. Capped rows of the group's priority next to the block join it (their state is now the members'),
        or without a group the longest run of capped rows of one priority forms one."""
        if not self.lazy:
            return
        prio = self.num[rows, 2]
        if self.g_live:
            ok = capped & (prio == self.g_prio)
            no = np.flatnonzero(~ok[:split])
            i0 = int(no[-1]) + 1 if no.size else 0
            no = np.flatnonzero(~ok[split:])
            j1 = split + (int(no[0]) if no.size else rows.size - split)
            if i0 < split or j1 > split:
                self._g_add(rows[i0:split], rows[split:j1])
            return
        if not capped.any():
            return
        start = capped.copy()
        start[1:] &= ~capped[:-1] | (prio[1:] != prio[:-1])
        run = np.cumsum(start)
        run[~capped] = 0
        length = np.bincount(run)
        length[0] = 0
        best = np.flatnonzero(run == int(np.argmax(length)))
        i0, j1 = int(best[0]), int(best[-1]) + 1
        self.g_t = t
        self.g_seq0 = int(self.num[rows[i0], 3])
        self.g_prio = float(prio[i0])
        self._g_add(rows[:0], rows[i0:j1])

    def _g_add(self, front: np.ndarray, back: np.ndarray) -> None:
        k, m = int(front.size), int(back.size)
        if self.g_lo < k or self.g_buf.size - self.g_hi < m:
            self._g_relay(self.g_buf[self.g_lo:self.g_hi], k, m)
        lo, hi = self.g_lo - k, self.g_hi
        self.g_buf[lo:self.g_lo] = front
        self.g_buf[hi:hi + m] = back
        self.gpos[front] = np.arange(lo, self.g_lo)
        self.gpos[back] = np.arange(hi, hi + m)
        self.gjoin[front] = self.g_fails
        self.gjoin[back] = self.g_fails
        self.g_lo, self.g_hi = lo, hi + m
        self.g_live += k + m
        self.g_seq0 -= k

    def _g_relay(self, buf: np.ndarray, front: int, back: int) -> None:
        """The block's rows `buf` (gaps included or not) laid out afresh with room for `front` and `back` more."""
        span = int(buf.size)
        head = front + span // 2 + 64
        new = np.full(head + span + back + span // 2 + 64, -1, dtype=np.int64)
        new[head:head + span] = buf
        member = buf >= 0
        self.gpos[buf[member]] = head + np.flatnonzero(member)
        self.g_buf, self.g_lo, self.g_hi = new, head, head + span

    def in_queue_order_few(self, rows: np.ndarray, t: float) -> np.ndarray:
        """The rows (not members of the group) in the order the queue would try them at t: done backing off by
        (priority, seq), then the others by (backoff end, priority, seq) — seqs are handed out in time order
        whenever a pod enters the queue or fails, so seq order is also queue-time order."""
        if rows.size < 2:
            return rows
        return self.seq_sorted_in_queue_order(rows[np.argsort(self.num[rows, 3])], t)

    def seq_sorted_in_queue_order(self, rows: np.ndarray, t: float) -> np.ndarray:
        """Rows given in seq order, in queue order at t."""
        if rows.size < 2:
            return rows
        num = self.num[rows]
        backoff = num[:, 1]
        key = np.where(backoff > t, backoff, -np.inf)
        prio = num[:, 2]
        if prio.min() == prio.max():
            return rows[np.argsort(key, kind="stable")]
        return rows[np.lexsort((prio, key))]

    def accepts(self, hint: Hint, rows: np.ndarray) -> np.ndarray:
        """bool per parked row in `rows` (all hinted): the row-wise hint's answer, evaluated once per shape."""
        ids = self.shape[rows]
        if ids.size < 64:
            return hint(self.rows[rows])
        used = np.zeros(len(self._shape_ids), dtype=bool)
        used[ids] = True
        uniq = np.flatnonzero(used)
        if uniq.size * 2 > ids.size:
            return hint(self.rows[rows])
        table = np.zeros(used.size, dtype=bool)
        table[uniq] = hint(self.shapes[uniq])
        return table[ids]

    def _shape_id(self, hint: Sequence[int]) -> int:
        key = tuple(int(v) for v in hint)
        sid = self._shape_ids.get(key)
        if sid is None:
            sid = self._shape_ids[key] = len(self._shape_ids)
            if sid == self.shapes.shape[0]:
                new = np.zeros((sid * 2, self.shapes.shape[1]), dtype=np.int64)
                new[:sid] = self.shapes
                self.shapes = new
            self.shapes[sid] = key
        return sid

    def _grow(self) -> None:
        for name in ("rows", "hinted", "alive", "num", "shape", "gpos", "gjoin"):
            arr = getattr(self, name)
            new = np.full((arr.shape[0] * 2, *arr.shape[1:]), -1 if name == "gpos" else 0, dtype=arr.dtype)
            new[: arr.shape[0]] = arr
            setattr(self, name, new)


class SchedulingQueue(Generic[T]):
    def __init__(self, backoff_initial_s: float = POD_INITIAL_BACKOFF_S, backoff_max_s: float = POD_MAX_BACKOFF_S,
                 max_unschedulable_s: float = MAX_UNSCHEDULABLE_S, hint_width: int = 0) -> None:
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.max_unschedulable_s = max_unschedulable_s
        self._seq = 0
        self._active: list[tuple[int, float, int, Entry[T]]] = []
        self._backoff: list[tuple[float, int, float, int, Entry[T]]] = []  # woken while backing off
        self._held: list[tuple[float, int, float, int, Entry[T]]] = []  # failed binds, until their backoff ends
        self._cand = np.zeros(0, dtype=np.int64)  # parked rows a hint accepted at the last wake
        self._cand_t = np.nan  # `_cand` is in queue order at this time (nan: not sorted)
        self._hint: Hint | None = None
        self._stale = False  # room may have shrunk since the candidates were last checked against the hint
        self._checked_t = np.nan  # the candidates were last checked against the hint at this time
        self._oldest = np.inf  # no parked pod was parked before this (a lower bound, made exact by `flush`)
        self._events = 0  # wake events so far
        self._count = 0  # entries in activeQ, backoffQ or parked
        self.failed_attempts = 0
        # The backoff per failed attempts, up to the first count whose backoff is the cap (all later ones are).
        capped = 1
        while capped < 64 and pod_backoff_s(capped, backoff_initial_s, backoff_max_s) < backoff_max_s:
            capped += 1
        self._backoffs = pod_backoff_array(np.arange(capped + 1, dtype=float), backoff_initial_s, backoff_max_s)
        self._hint_width = hint_width
        self._parked: _Parked[T] = self._new_parked()

    def __len__(self) -> int:
        return self._count

    @property
    def parked(self) -> int:
        return self._parked.live

    def parked_entries(self) -> list[tuple[Entry[T], bool]]:
        """The parked pods, each with whether it carries a hint row."""
        p = self._parked
        return [(e, bool(p.hinted[e.slot])) for e in p.entries if e is not None]

    def has_ready(self) -> bool:
        """Whether a pod may be in activeQ or backoffQ or a candidate (`pop` may still find none)."""
        return bool(self._active or self._backoff or self._held or self._cand.size)

    def add(self, pod: T, priority: int, t: float) -> Entry[T]:
        """A new pod (or one released by its job's DAG) enters activeQ."""
        entry = Entry(pod, priority, t, self._new_seq())
        self._count += 1
        self._push_active(entry)
        return entry

    def pop(self, t: float) -> Entry[T] | None:
        """The next pod to try at time t, or None if none may be tried now."""
        for heap, where in ((self._backoff, _BACKOFF), (self._held, _HELD)):
            while heap and heap[0][0] <= t:  # backoff over: back into activeQ (flushBackoffQCompleted)
                entry = heapq.heappop(heap)[-1]
                if entry.where == where:
                    self._push_active(entry)
        for heap, where in ((self._active, _ACTIVE), (self._backoff, _BACKOFF)):
            while heap and heap[0][-1].where != where:
                heapq.heappop(heap)
        while self._cand.size:
            key = self._best_candidate(t)
            if key is None:
                break
            if key[0] == 0:  # not backing off: merged with activeQ
                if self._active and self._active[0][:3] < key[1:]:
                    break
            elif self._active or (self._backoff and self._backoff[0][:4] < key[1:]):
                break
            i = int(self._cand[0])
            if self._accepted_now(t):
                return self._taken(self._parked.take(i))
        for heap in (self._active, self._backoff):
            if heap:
                return self._taken(heapq.heappop(heap)[-1])
        return None

    def park(self, entry: Entry[T], t: float, hint: Sequence[int] | None = None) -> bool:
        """The pod fits nowhere: it waits among the unschedulable pods for an event that may let it fit. `hint`
        is its row for `wake`'s predicate (None: any event wakes it). False if the pod was removed meanwhile."""
        if entry.where == _GONE:
            return False
        self._failed(entry, t)
        if self._events != entry.events_seen:  # something changed while it was being tried: retry
            self._requeue(entry, t)
            return True
        entry.where = _PARKED
        self._compact()
        self._parked.add(entry, t, hint)
        self._oldest = min(self._oldest, t)
        return True

    def requeue_error(self, entry: Entry[T], t: float) -> bool:
        """An attempt failed for another reason than fit (a bind error): retried once its backoff is over. False
        if the pod was removed meanwhile."""
        if entry.where == _GONE:
            return False
        self._stale = True
        self._failed(entry, t)
        entry.where = _HELD
        heapq.heappush(self._held, (entry.backoff_t, -entry.priority, entry.queue_t, entry.seq, entry))
        return True

    def done(self, entry: Entry[T], took_hinted_room: bool = True) -> None:
        """The pod popped last was placed (or needs no more scheduling). `took_hinted_room`: whether it may have
        taken room the last wake's hint looks at (the caller knows where; the simulator's hint looks only at the
        nodes whose room grew): if not, the candidates need no new check against the hint."""
        entry.where = _GONE
        if took_hinted_room:
            self._stale = True

    def remove(self, entry: Entry[T]) -> None:
        """The pod is gone (deleted, or bound by someone else) wherever it is."""
        self._stale = True
        if entry.where in (_ACTIVE, _BACKOFF, _HELD):  # left in its heap, skipped when popped
            self._count -= 1
        elif entry.where == _PARKED:
            self._count -= 1
            self._parked.take(entry.slot)
        entry.where = _GONE

    def wake(self, t: float, accept: Hint | None = None) -> int:
        """A cluster event (capacity freed, a node added or changed). Without `accept`, every parked pod goes back
        to activeQ (backoffQ while backing off); with it (row-wise: each row's answer depends on that row alone,
        so it is asked once per distinct row), the pods whose row it accepts (bool per row) become
        candidates, tried in queue order while it still accepts them, and the others fail in place (see the
        module doc). Returns how many may be tried."""
        self._events += 1
        p = self._parked
        if self._cand.size:  # candidates of an earlier event not tried yet: requeue them for real
            self._unpark(self._cand, t)
        if not p.live:
            return 0
        n = len(p)
        if accept is None:
            return self._unpark(np.flatnonzero(p.alive[:n]), t)
        ok = p.alive[:n] & ~p.hinted[:n]
        hinted = np.flatnonzero(p.alive[:n] & p.hinted[:n])
        if hinted.size:
            ok[hinted] = p.accepts(accept, hinted)
        self._cand = np.flatnonzero(ok)
        if p.g_live:  # accepted members leave the group: their bookkeeping as of before this event
            members = p.members(self._cand)
            if members.size:
                p.leave(members)
        self._cand_t = np.nan
        self._hint = accept
        # The hint has just answered for the cluster as it is: until a pod is placed where it looks (`done`), or
        # the time moves on, asking it again for the candidates would give the same answers.
        self._stale = False
        self._checked_t = t
        failing = p.alive[:n] & ~ok
        if p.g_live:
            failing &= p.gpos[:n] < 0
        self._fail_in_place(np.flatnonzero(failing), t, with_group=True)
        return int(self._cand.size)

    def flush(self, t: float) -> int:
        """Pods parked for `max_unschedulable_s` or longer go back to the queue (flushUnschedulablePodsLeftover)."""
        if self._oldest > t - self.max_unschedulable_s:
            return 0
        p = self._parked
        n = len(p)
        due = p.alive[:n] & (p.queue_times(n) <= t - self.max_unschedulable_s)
        woken = self._unpark(np.flatnonzero(due), t) if due.any() else 0
        n = len(p)
        alive = p.alive[:n]
        self._oldest = float(p.queue_times(n)[alive].min()) if alive.any() else np.inf
        return woken

    def next_change(self) -> float:
        """The earliest time at which `pop` or `flush` may have more to give without an event (inf: none; it may
        be early, never late)."""
        out = self._held[0][0] if self._held else np.inf
        if self._parked.live:
            out = min(out, self._oldest + self.max_unschedulable_s)
        return float(out)

    def clear(self) -> None:
        for heap in (self._active, self._backoff, self._held):
            for item in heap:
                item[-1].where = _GONE
        for entry in self._parked.entries:
            if entry is not None:
                entry.where = _GONE
        self._active, self._backoff, self._held = [], [], []
        self._parked = self._new_parked()
        self._cand = np.zeros(0, dtype=np.int64)
        self._oldest = np.inf
        self._count = 0

    # --- internals ---------------------------------------------------------------------------------------

    def _best_candidate(self, t: float) -> tuple | None:  # type: ignore[type-arg]
        """The key of the candidate that comes first (`_cand[0]`) in the heaps' terms, led by 0 if it is done
        backing off (merged with activeQ) or 1 (ordered with backoffQ); None if no candidate is left. Candidates
        are sorted once per time: until a candidate leaves or fails in place, their order does not change."""
        p = self._parked
        if self._cand_t != t:
            cand = self._cand[p.alive[self._cand]]
            self._cand = p.in_queue_order_few(cand, t)
            self._cand_t = t
            if self._checked_t != t:
                self._stale = True  # the cluster may have changed since the last time
        cand = self._cand
        if cand.size and not p.alive[cand[0]]:  # removed meanwhile
            cand = self._cand = cand[p.alive[cand]]
        if not cand.size:
            return None
        queue_t, backoff_t, neg_prio, seq, _ = p.num[cand[0]].tolist()
        if backoff_t > t:
            return 1, backoff_t, int(neg_prio), queue_t, int(seq)
        return 0, int(neg_prio), queue_t, int(seq)

    def _fail_in_place(self, rows: np.ndarray, t: float, with_group: bool = False, ordered: bool = False) -> None:
        """Parked pods (`rows`, none a member of the lazy group) that a retry at t would find fitting nowhere: one
        more failed attempt each, as if popped and parked again (queue time t, a longer backoff, a new seq in the
        order they would have been tried: pods that keep failing fall behind the others that share their queue
        time, as upstream). `with_group` (a wake): the group's members fail too, as one block placed among the
        rows by its queue order, and capped rows next to it join it. `ordered`: `rows` are in queue order at t."""
        p = self._parked
        group = with_group and p.g_live > 0
        if not rows.size and not group:
            return
        if not ordered:
            rows = p.in_queue_order_few(rows, t)
        n = int(rows.size)
        split, span = n, 0
        if group:
            p.tidy()
            span = p.g_hi - p.g_lo
            if n:
                split = p.before_group(rows, t)
        seq = self._seq
        seqs = np.arange(seq, seq + n)
        if span and split < n:
            seqs[split:] += span
        sub = p.num[rows]  # one gather and one scatter of whole rows: cheaper than a write per column
        attempts = sub[:, 4] + 1
        table = self._backoffs
        sub[:, 0] = t
        sub[:, 1] = t + table[np.minimum(attempts, table.size - 1).astype(np.int64)]
        sub[:, 3] = seqs
        sub[:, 4] = attempts
        p.num[rows] = sub
        self._seq += n + span
        self.failed_attempts += n
        if group:
            self.failed_attempts += p.g_live
            p.g_t, p.g_seq0 = t, seq + split
            p.g_fails += 1
        if with_group and n:
            p.join(rows, attempts >= table.size - 1, split, t)

    def _accepted_now(self, t: float) -> bool:
        """Whether the hint still accepts the first candidate against the cluster as it is now; takes it out of
        the candidates either way. Every other candidate the hint no longer accepts fails in place (room only
        shrinks until the next event, so its turn would find no room). Room shrinks only when a pod is placed
        (`done`) where the hint looks: until then every candidate left is still accepted, and the hint is not asked
        again."""
        cand = self._cand
        if not self._stale:
            self._cand = cand[1:]
            return True
        self._stale = False
        self._checked_t = t
        p = self._parked
        cand = cand[p.alive[cand]]
        ok = ~p.hinted[cand]
        hinted = np.flatnonzero(p.hinted[cand])
        if hinted.size and self._hint is not None:
            ok[hinted] = p.accepts(self._hint, cand[hinted])
        accepted = bool(ok[0])
        if not ok.all():  # most checks drop none: no pass over the parked store then
            self._fail_in_place(cand[~ok], t, ordered=True)  # candidates are kept in queue order at t
        ok[0] = False
        self._cand = cand[ok]
        return accepted

    def _taken(self, entry: Entry[T]) -> Entry[T]:
        entry.where = _OUT
        entry.events_seen = self._events
        self._count -= 1
        return entry

    def _new_seq(self) -> int:
        self._seq += 1
        return self._seq - 1

    def _failed(self, entry: Entry[T], t: float) -> None:
        self.failed_attempts += 1
        entry.attempts += 1
        entry.seq = self._new_seq()  # ties at one queue time go by order of failure
        entry.queue_t = t
        entry.backoff_t = t + pod_backoff_s(entry.attempts, self.backoff_initial_s, self.backoff_max_s)
        self._count += 1

    def _push_active(self, entry: Entry[T]) -> None:
        entry.where = _ACTIVE
        heapq.heappush(self._active, (-entry.priority, entry.queue_t, entry.seq, entry))

    def _requeue(self, entry: Entry[T], t: float) -> None:
        if entry.backoff_t > t:
            entry.where = _BACKOFF
            heapq.heappush(self._backoff, (entry.backoff_t, -entry.priority, entry.queue_t, entry.seq, entry))
        else:
            self._push_active(entry)

    def _unpark(self, rows: np.ndarray, t: float) -> int:
        p = self._parked
        if p.g_live:
            members = p.members(rows[p.alive[rows]])
            if members.size:
                p.leave(members)
        for i in rows.tolist():
            if p.alive[i]:
                self._requeue(p.take(i), t)
        if self._cand.size:
            self._cand = self._cand[p.alive[self._cand]]
        self._compact()
        return int(rows.size)

    def _new_parked(self) -> _Parked[T]:
        table = self._backoffs
        return _Parked(self._hint_width, table.size - 1, float(table[-1]))

    def _compact(self) -> None:
        """Drops the dead rows of the parked store once they are half of it; rows are renumbered, so only while no
        candidate refers to them."""
        p = self._parked
        if not self._cand.size and p.live * 2 < len(p):
            p.compact()
