"""Per-running-pod arrays owned by a room, one row per slot (drlsched.sim.slots moves rows, never reads them)."""

from __future__ import annotations

import numpy as np


class SlotColumns:
    """A room's per-slot arrays, named in `slot_arrays`: the slot table grows them together and moves the last
    row into a freed one, so every room's row i is the same pod."""

    slot_arrays: list[str]

    def grow_slots(self) -> None:
        for name in self.slot_arrays:
            arr = getattr(self, name)
            new = np.zeros((arr.shape[0] * 2, *arr.shape[1:]), dtype=arr.dtype)
            new[: arr.shape[0]] = arr
            setattr(self, name, new)

    def move_slot(self, i: int, last: int) -> None:
        for name in self.slot_arrays:
            arr = getattr(self, name)
            arr[i] = arr[last]
