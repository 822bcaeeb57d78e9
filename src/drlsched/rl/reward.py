"""The training reward, per decision step:
R = α·utilisation − β·violation − γ·migration (− δ·jobs-in-system − ε·cross-node traffic − ζ·saturation, optional
terms, 0 by default).

Each step covers the simulated interval (t_prev, t_now] between two consecutive decisions (the last step runs to
the end of the simulation), and reads the simulator's running sums:
- utilisation: Δ(time-integrated effective CPU usage) / (cluster CPU · τ), averaged with the same GPU term when
  the cluster has GPUs; over an episode it sums to mean utilisation × elapsed time / τ;
- violation: latency-sensitive pods that finished in the interval having breached their SLA (`acc.ls_violations`);
- migration: migrations and BE evictions in the interval (`acc.migrations + acc.evictions`; zero unless rebalancing
  is on or a reclaim model evicts);
- jobs-in-system (the optional JCT/slowdown term): Δt / τ × jobs submitted and not finished, divided by the
  node count; by Little's law its episode sum is proportional to the mean job completion time;
- traffic (optional): cross-node traffic in the interval in GB (`acc.cross_node_mb` / 1000): shuffle reads from
  parent tasks' pods on other nodes and service traffic with the job's pods on other nodes;
- saturation (a dense stand-in for SLA violations): Δt / τ × CPU-saturated nodes at the interval start / N:
  without reclaim, nodes whose measured usage is above capacity (where services accumulate the saturated time that
  makes them violate); with a reclaim model, nodes whose LS pods are slowed past their latency target
  (`ls_slowdown_target`), which is what makes them violate there.
τ (`time_scale_s`) only sets the scale of the time-integrated terms against the per-event ones.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from drlsched.errors import UserError

if TYPE_CHECKING:
    from drlsched.simulator import Simulator


@dataclass(frozen=True)
class RewardWeights:
    utilization: float = 0.8
    violation: float = 0.1
    migration: float = 0.1
    jct: float = 0.0
    traffic: float = 0.0
    saturation: float = 0.0
    time_scale_s: float = 10.0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


# The saturation term is the dense form of the violation term: in `colocation` services live to the end of the
# episode, so their SLA outcome arrives only at the last step, while saturated nodes (with reclaim: nodes whose LS
# pods are slowed past their latency target) are counted at every step. Each preset gives it the violation weight.
PRESETS: dict[str, RewardWeights] = {
    "ecommerce": RewardWeights(utilization=0.3, violation=0.6, migration=0.1, saturation=0.6),
    "batch": RewardWeights(utilization=0.8, violation=0.1, migration=0.1, saturation=0.1),
    # Shuffle-heavy DAG jobs (spark-tpcds): cross-node traffic is what placement changes most; utilisation is set
    # mostly by the workload there, so it gets a small weight.
    "traffic": RewardWeights(utilization=0.1, violation=0.1, migration=0.1, traffic=1.0),
    # Job workloads (`drlsched train-jobs`): −jobs in the system × time, whose sum is −Σ JCT (Little's law).
    "jct": RewardWeights(utilization=0.0, violation=0.0, migration=0.0, jct=1.0),
}
SCENARIO_PRESETS = {"ecommerce": "ecommerce", "batch": "batch", "spark-tpcds": "traffic"}


def load_reward(path: str | Path) -> RewardWeights:
    """Weights from a YAML mapping with any of the fields of `RewardWeights` (unknown keys are an error)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as err:
        raise UserError(f"cannot read reward file {p}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise UserError(f"reward file {p} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise UserError(f"reward file {p} must be a mapping such as 'utilization: 0.8'")
    known = set(RewardWeights.__dataclass_fields__)
    unknown = sorted(set(map(str, data)) - known)
    if unknown:
        raise UserError(f"reward file {p}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    try:
        weights = RewardWeights(**{k: float(v) for k, v in data.items()})
    except (TypeError, ValueError):
        raise UserError(f"reward file {p}: every weight must be a number") from None
    if weights.time_scale_s <= 0:
        raise UserError(f"reward file {p}: time_scale_s must be positive")
    return weights


class RewardTracker:
    """Per-step reward terms from the deltas of a simulator's running sums."""

    def __init__(self, sim: Simulator, weights: RewardWeights) -> None:
        self.sim = sim
        self.w = weights
        c = sim.cluster
        self.total_cpu = float(c.total_cpu)
        self.total_gpu = float(c.total_gpu_milli)
        self.nodes = c.size
        self._last = self._read()

    def _read(self) -> tuple[float, float, int, int, float, float]:
        a = self.sim.acc
        return a.cpu_use_s, a.gpu_use_s, a.ls_violations, a.migrations + a.evictions, self.sim.now, a.cross_node_mb

    def step(self, jobs_in_system: int, saturated_nodes: int = 0) -> tuple[float, dict[str, float]]:
        """The reward since the previous call and its terms; the counts are taken at the interval start."""
        cpu, gpu, viol, mig, now, mb = self._read()
        cpu0, gpu0, viol0, mig0, t0, mb0 = self._last
        self._last = (cpu, gpu, viol, mig, now, mb)
        tau = self.w.time_scale_s
        util = (cpu - cpu0) / self.total_cpu
        if self.total_gpu:
            util = 0.5 * (util + (gpu - gpu0) / self.total_gpu)
        util /= tau
        terms = {"utilization": util, "violation": float(viol - viol0), "migration": float(mig - mig0),
                 "jct": (now - t0) / tau * jobs_in_system / self.nodes, "traffic": (mb - mb0) / 1000.0,
                 "saturation": (now - t0) / tau * saturated_nodes / self.nodes}
        w = self.w
        reward = (w.utilization * terms["utilization"] - w.violation * terms["violation"]
                  - w.migration * terms["migration"] - w.jct * terms["jct"] - w.traffic * terms["traffic"]
                  - w.saturation * terms["saturation"])
        return reward, terms
