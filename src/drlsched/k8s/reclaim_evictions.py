"""How many BE pods the reclaim controller evicts, and what it remembers of the pods it evicted.

Koordinator's koordlet evicts "until the node is back under the threshold": the excess is measured on the
node's latest usage sample (not the window mean, which still holds minutes of the burst and of the pods
already evicted), less the usage of the BE pods evicted earlier that the metrics may still count. A pod evicted
stays in the `EvictionLedger` until a node sample taken after the pod left the API (it is no longer listed)
arrives, or for `max_age_s` at most; until then its usage is subtracted from its node's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def pick_victims(amount: np.ndarray, need: float) -> int:
    """How many of the pods (sorted largest first, `amount` each) to evict to free `need`: the fewest whose sum
    reaches it (all of them if none does) — the simulator's rule."""
    if need <= 0 or not amount.size:
        return 0
    return min(int(np.searchsorted(np.cumsum(amount), need)) + 1, amount.size)


def memory_excess(latest_mem: np.ndarray, evicted_mem: np.ndarray, cap_mem: np.ndarray,
                  threshold: float) -> np.ndarray:
    """Per node, MiB above `threshold` × capacity of the latest usage less what was evicted and may still be
    counted (≤ 0: nothing to evict; NaN usage: nothing either)."""
    over = latest_mem - evicted_mem - threshold * cap_mem
    return np.where(np.isfinite(over), over, 0.0)


@dataclass
class _Evicted:
    node: str
    cpu_m: float
    mem_mib: float
    at: float
    gone_at: float | None = None  # when the pod was first seen no longer listed


class EvictionLedger:
    def __init__(self, max_age_s: float = 300.0) -> None:
        self.max_age_s = max_age_s
        self._pods: dict[str, _Evicted] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def add(self, key: str, node: str, cpu_m: float, mem_mib: float, now: float) -> None:
        self._pods[key] = _Evicted(node, cpu_m, mem_mib, now)

    def update(self, listed: set[str], newest_sample: dict[str, float], now: float) -> None:
        """Forgets the pods that are gone from the API and from a node sample since (`newest_sample`: node →
        timestamp of its newest usage sample), and those evicted longer than `max_age_s` ago."""
        for key, pod in list(self._pods.items()):
            if pod.gone_at is None and key not in listed:
                pod.gone_at = now
            measured_after = pod.gone_at is not None and newest_sample.get(pod.node, -np.inf) > pod.gone_at
            if measured_after or now - pod.at > self.max_age_s:
                del self._pods[key]

    def pending(self, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Per node (in `names` order): CPU (millicores) and memory (MiB) of evicted pods still counted."""
        index = {n: i for i, n in enumerate(names)}
        cpu, mem = np.zeros(len(names)), np.zeros(len(names))
        for pod in self._pods.values():
            i = index.get(pod.node)
            if i is not None:
                cpu[i] += pod.cpu_m
                mem[i] += pod.mem_mib
        return cpu, mem
