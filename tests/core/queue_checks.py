"""A check shared by the queue and colocation tests (a module with a unique name, not a conftest)."""

from __future__ import annotations

from drlsched.simulator import Simulator


def run_checking_parked_pods(sim: Simulator) -> tuple[dict[str, object], int]:
    """Runs the simulation, asserting after every scheduling pass that each parked pod carries a hint row and
    fits no node (the queueing hint lost no placement); returns the metrics and the most pods parked at once."""
    schedule = sim._schedule
    parked = [0]

    def checked(t: float):  # type: ignore[no-untyped-def]
        yield from schedule(t)
        for entry, has_row in sim.queue.parked_entries():
            assert has_row and not sim.cluster.feasible(entry.pod.req).any(), entry.pod.spec.uid
        parked[0] = max(parked[0], sim.queue.parked)

    sim._schedule = checked  # type: ignore[method-assign]
    return sim.run(), parked[0]
