"""The RL env on FGD's fill experiment (docs/fill.md): one episode is one fill of the cluster, one step per pod
that fits somewhere, in a random order drawn from the workload seed; no pod ever leaves.

The population (a trace's pod list, or a scenario's pods) and the cluster are loaded once per env, with
`population_seed`; the workload seed drawn at each reset orders the submissions (and inflates them past the
population as `drlsched fill` does). Observation and action are `SchedulingEnv`'s.

Reward: minus the GPUs requested by the pods that fail (fit nowhere, or the agent's choice is masked) between a
decision and the next, divided by `gpu_scale`. Every placement allocates what the pod asks for, so the return is
(allocated − submitted GPU demand) / `gpu_scale`: maximising it is leaving as few GPUs unallocated as possible at
the demand limit, the experiment's measure. The penalty falls on the decision right before the failure, which
is where fragmentation bites.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from drlsched.fill import Fill, values_at
from drlsched.policies.base import Decision, PodContext
from drlsched.rl.env import EnvConfig, SchedulingEnv
from drlsched.workload import GPU_MILLI, Workload


@dataclass
class FillEnvConfig(EnvConfig):
    max_demand: float = 1.3  # episode end: GPUs requested / cluster GPUs
    population_seed: int = 0  # the seed the population is generated (scenario) or sampled (trace) with
    gpu_scale: float = 1.0  # reward unit: this many failed GPUs cost 1

    def make_env(self) -> SchedulingEnv:
        return FillEnv(self)


class _FailedGPUs:
    """The reward tracker of a fill: the GPU demand that failed since the previous call, as a penalty."""

    def __init__(self, fill: Fill, scale: float) -> None:
        self.fill, self.scale = fill, scale
        self.last = 0

    def step(self, *_: object) -> tuple[float, dict[str, float]]:
        failed = (self.fill.failed_milli - self.last) / GPU_MILLI
        self.last = self.fill.failed_milli
        return -failed / self.scale, {"failed_gpus": failed}


class FillEnv(SchedulingEnv):
    cfg: FillEnvConfig

    def __init__(self, config: FillEnvConfig | None = None, **overrides: Any) -> None:
        self.population: Workload | None = None
        super().__init__(config or FillEnvConfig(), **overrides)

    def _workload(self, seed: int) -> Workload:
        del seed  # one population; the seed orders it
        if self.population is None:
            population = super()._workload(self.cfg.population_seed)
            population.pods = list(population.iter_pods())
            self.population = population
        return self.population

    def _start(self, wseed: int) -> None:
        self.workload_seed = wseed
        population = self._workload(wseed)
        self.fill = Fill(population.nodes, population.pods, wseed, self.cfg.max_demand)  # type: ignore[arg-type]
        self.tracker = _FailedGPUs(self.fill, self.cfg.gpu_scale)  # type: ignore[assignment]
        self.builder.reset(self.fill.cluster)
        if self.cfg.expert:
            from drlsched.policies import make_policy

            self.expert = make_policy(self.cfg.expert)
            self.expert.reset(self.fill.cluster, np.random.default_rng(wseed))
        self.gen = self.fill.decisions()  # type: ignore[assignment]
        self.metrics = None
        self.steps = 0
        self.ctx = self._advance(None, first=True)

    def _count_state(self) -> None:
        self.jobs_in_system = self.saturated_nodes = 0  # no jobs, no usage: the reward is the failed demand

    def _advance(self, decision: Decision | None, first: bool = False) -> PodContext | None:
        ctx = super()._advance(decision, first)
        if ctx is None:
            self.metrics = episode_metrics(self.metrics)  # type: ignore[arg-type]
        return ctx


def episode_metrics(curve: dict[str, np.ndarray]) -> dict[str, object]:
    """A finished fill's measures at 100% demand and at its end. `cpu_util` (the column the training curve logs)
    holds the GPU allocation share at the end, the fill's utilisation; the other logged keys have no sample in a
    fill (no job finishes, no LS pod runs, no anomaly is modelled): null, left out of the curve's means."""
    at_full = values_at(curve, 1.0)
    end = values_at(curve, float(curve["demand"][-1]))
    return {"gpu_unallocated_at_100": at_full["gpu_unallocated"], "gpu_fragmented_at_100": at_full["gpu_fragmented"],
            "gpu_unallocated": end["gpu_unallocated"], "pods_failed": end["pods_failed"],
            "cpu_util": end["gpu_allocated_share"], "jct_p99_s": None, "sla_violation_rate": None,
            "cross_node_traffic_gb": 0.0, "anomaly_rate": None}
