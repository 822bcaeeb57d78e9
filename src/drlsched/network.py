"""Network links shared by concurrent transfers: each node's NIC and each rack's uplink (docs/simulator.md,
"Network").

Links, one per direction (full duplex): a node's NIC out and in, `nic_gbps` each; a rack's uplink up and down,
(nodes in the rack × `nic_gbps`) / `rack_oversubscription` each (1 = non-blocking). A remote read is one
transfer from its source nodes to the reader: it crosses the reader's NIC in, each remote source's NIC out and,
for the sources on other racks, their racks' uplinks up and the reader's rack's uplink down; on each link it puts
the share of its bytes that crosses it. Same-node reads cross nothing and are free. A source node (or source rack)
holding less than 1/8 of the read's remote bytes is not charged on its NIC out (or uplink): a wide fan-in (up to
64 parent instances in `batch`) would otherwise touch ~100 links per read, each carrying a sliver; the reader's NIC
in and its rack's downlink still carry all of it, and sources that many readers share heavily stay charged. On
`batch` and `spark-tpcds` this changes `network_wait_s` by under 1% (docs/simulator.md) and cuts a read's cost 3×.

Sharing is max-min fair, approximated at transfer start ("snapshot max-min"): a transfer gets, on every link it
crosses, the max-min fair share left by the transfers active there (water-filling over their loads: it gets y
with Σ min(load_i, y) + y = capacity), its rate is the smallest of those over its links (weighted by the share of
its bytes on each), and it keeps that rate to its end. Transfers already running are neither slowed by a newcomer
nor sped up when others end. So k reads starting together on one NIC take 1/C, 2/C, …, k/C of their size: the
last ends when a fluid max-min model ends it, the earlier ones sooner; a read never waits for a link's backlog.
This costs one pass over the links a read crosses (pure Python on short heaps; a link whose equal split could not
lower the rate is not sorted), where a fluid model would recompute every active transfer's rate and re-plan the
completions of the pods that read at each start and end.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter
from collections.abc import Iterable

import numpy as np

from drlsched.errors import UserError

MB_PER_GBIT = 1000.0 / 8.0
# A source node (or rack) sending less than 1 / this of a read's remote bytes is not charged on its NIC out (or
# uplink): a read touches at most this many of each, whatever its fan-in (module doc).
MAX_SOURCE_LINKS = 8


def check_link_options(nic_gbps: float, rack_oversubscription: float) -> None:
    for name, value in (("--nic-gbps", nic_gbps), ("--rack-oversubscription", rack_oversubscription)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise UserError(f"{name} must be a positive finite number, got {value}")


class Network:
    """Active transfers per link and the reads' times; `shared=False` gives every read the whole NIC."""

    def __init__(self, rack: np.ndarray, nic_gbps: float, rack_oversubscription: float, shared: bool = True) -> None:
        check_link_options(nic_gbps, rack_oversubscription)
        self.rack = rack.tolist()
        self.nodes = len(self.rack)
        per_rack = np.bincount(rack, minlength=int(rack.max(initial=-1)) + 1)
        self.racks = len(per_rack)
        self.nic = nic_gbps * MB_PER_GBIT  # MB/s
        self.shared = shared
        n = self.nodes
        # Link ids: NIC out = node, NIC in = n + node, rack up = 2n + rack, rack down = 2n + racks + rack.
        uplink = (per_rack * self.nic / rack_oversubscription).tolist()
        self.capacity = [self.nic] * (2 * n) + uplink + uplink
        # Per link, a heap of (end time, load in MB/s) of the transfers on it.
        self.heaps: list[list[tuple[float, float]]] = [[] for _ in self.capacity]
        self.wait_s = 0.0  # Σ (duration − duration at the full NIC) over remote reads
        self.slowdowns = array("d")  # per remote read: duration / duration at the full NIC

    def read(self, t: float, dst: int, sources: Iterable[int], mb: float) -> tuple[float, float, float]:
        """A read of `mb` at time t by a pod on `dst`, spread evenly over `sources` (node rows, with repeats): its
        duration in seconds, and the MB crossing nodes and crossing racks."""
        counts = Counter(sources)
        total = sum(counts.values())
        remote = total - counts.pop(dst, 0)
        if not remote:
            return 0.0, 0.0, 0.0
        rack, my_rack, n = self.rack, self.rack[dst], self.nodes
        if not self.shared:
            cross = sum(k for node, k in counts.items() if rack[node] != my_rack)
            remote_mb = mb * remote / total
            return remote_mb / self.nic, remote_mb, mb * cross / total
        # The reader's NIC in carries all of the read's bytes: its share bounds the rate first. Another link (a
        # share w / remote of the bytes) can only lower it if even an equal split there would: most reads fan in
        # from many sources, each carrying a small part, so most links are skipped without sorting their loads.
        # Ended transfers still counted make the split look worse, so the test stays safe; they are popped when the
        # link is evaluated, which a long stale heap forces.
        heaps, nic = self.heaps, self.nic
        nic_in = n + dst
        rate = self._fair_share(self._live(nic_in, t), nic)
        links, weights = [nic_in], [remote]
        ups: dict[int, int] = {}
        cross = 0
        thin = remote / MAX_SOURCE_LINKS
        for node, k in counts.items():
            r = rack[node]
            if r != my_rack:
                cross += k
                ups[r] = ups.get(r, 0) + k
            if k < thin:
                continue
            if nic * remote < rate * k * (len(heaps[node]) + 1):
                rate = min(rate, self._fair_share(self._live(node, t), nic) * remote / k)
            links.append(node)
            weights.append(k)
        if cross:
            ups_base, down = 2 * n, 2 * n + self.racks + my_rack
            for link, w in ((down, cross), *((ups_base + r, w) for r, w in ups.items() if w >= thin)):
                cap = self.capacity[link]
                if cap * remote < rate * w * (len(heaps[link]) + 1):
                    rate = min(rate, self._fair_share(self._live(link, t), cap) * remote / w)
                links.append(link)
                weights.append(w)
        remote_mb = mb * remote / total
        full = remote_mb / nic
        duration = remote_mb / rate
        end = t + duration
        per = rate / remote
        for link, w in zip(links, weights, strict=True):
            heapq.heappush(heaps[link], (end, per * w))
        self.wait_s += duration - full
        self.slowdowns.append(duration / full)
        return duration, remote_mb, mb * cross / total

    def _live(self, link: int, t: float) -> list[tuple[float, float]]:
        """The transfers still active on a link at t (a heap by end time: the ended ones are popped)."""
        entries = self.heaps[link]
        while entries and entries[0][0] <= t:
            heapq.heappop(entries)
        return entries

    @staticmethod
    def _fair_share(entries: list[tuple[float, float]], cap: float) -> float:
        """The max-min fair share of a new transfer on a link of capacity `cap`, given the loads of the transfers
        active there (water-filling)."""
        if not entries:
            return cap
        k = len(entries) + 1  # the transfers still to be served, the newcomer included
        for load in sorted(e[1] for e in entries):
            if load * k >= cap:
                break
            cap -= load
            k -= 1
        return cap / k

    def summary(self) -> dict[str, float]:
        """`network_wait_s` and `transfer_slowdown_p99` (docs/simulator.md, "Metrics")."""
        slow = np.frombuffer(self.slowdowns, dtype=np.float64)
        return {"network_wait_s": self.wait_s,
                "transfer_slowdown_p99": float(np.percentile(slow, 99)) if slow.size else 1.0}
