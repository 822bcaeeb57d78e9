"""`drlsched/Scheduling-v0`: a Gymnasium env with one step per pod placement, over the simulator.

An episode replays one workload window (a scenario drawn with a workload seed) to the end of the simulation.
Each step places one pod: the action is a flattened (node, GPU-count option) index with a joint feasibility mask,
given in the observation and in `info["action_mask"]`; under a reclaim model a BE pod may also be held (the last
action: it stays pending and the simulator retries it after the next cluster event, with backoff). The hard
safety limit is the mask: a BE pod goes only where the reclaim model's batch allocatable has room, so a policy can
be more aggressive than a reclaim model only when that model runs with a more permissive threshold
(`--reclaim-cpu-threshold`), and CPU suppression still protects LS pods at run time. Pods that fit nowhere right
now are left pending without asking the agent (there is nothing to choose). The reward is documented in
`drlsched.rl.reward`.

Held-out evaluation: unless told otherwise, workload seeds for training are drawn from [TRAIN_SEED_BASE, 2**31);
evaluation seeds are below TRAIN_SEED_BASE, so training never sees an evaluation workload.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from drlsched.errors import UserError
from drlsched.policies.base import Decision, PodContext, Policy
from drlsched.rl.features import (
    F_HIST,
    F_NODE,
    F_OPT,
    F_POD,
    HISTORY,
    MAX_OPTIONS,
    ObsBuilder,
    action_for,
    decision_for,
)
from drlsched.rl.reward import RewardTracker, RewardWeights
from drlsched.scenarios import make_scenario
from drlsched.sched.cycle import fits_somewhere
from drlsched.simulator import SimConfig, Simulator
from drlsched.workload import Workload

TRAIN_SEED_BASE = 1000


@dataclass
class EnvConfig:
    scenario: str = "batch"
    nodes: int | None = 10
    duration_s: float | None = 120.0
    load: float = 1.0
    reward: RewardWeights = field(default_factory=RewardWeights)
    max_steps: int | None = None  # truncate an episode after this many decisions
    history: int = HISTORY
    expert: str | None = None  # a baseline whose choice is put in info["expert_action"] (behaviour cloning)
    workload_seeds: tuple[int, int] = (TRAIN_SEED_BASE, 2**31)  # [low, high) of the drawn workload seeds
    invalid_penalty: float = 1.0  # reward cost of a masked action (the pod is left pending)
    workload_fn: Callable[[int], Workload] | None = None  # a custom workload for a seed (overrides the scenario)
    # The simulator's settings for every episode (reclaim model, links, ...). The env always counts pods that fit
    # no empty node instead of stopping, and turns the per-tick series off (it reads the running sums).
    sim: SimConfig = field(default_factory=SimConfig)

    def make_env(self) -> SchedulingEnv:
        """The env this config describes (a subclass's config, such as the fill env's, makes its own)."""
        return SchedulingEnv(self)


class _Driven(Policy):
    """Stands in for the policy inside the simulator: the env makes every decision through `decisions()`."""

    name = "rl-env"
    wants_data_nodes = True  # the observation's data-locality features
    wants_reclaim_signals = True  # and its reclaim features


class SchedulingEnv(gym.Env[dict[str, np.ndarray], int]):
    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, config: EnvConfig | None = None, **overrides: Any) -> None:
        cfg = config or EnvConfig()
        for k, v in overrides.items():
            setattr(cfg, k, v)
        self.cfg = cfg
        self.sim_cfg = replace(cfg.sim, allow_unschedulable=True, series=False)
        probe = self._workload(cfg.workload_seeds[0])
        self.n_nodes = len(probe.nodes)
        n, g, t = self.n_nodes, MAX_OPTIONS, cfg.history
        inf = np.float32(np.inf)
        self.observation_space = spaces.Dict({
            "history": spaces.Box(-inf, inf, (t, F_HIST), np.float32),
            "nodes": spaces.Box(-inf, inf, (n, F_NODE), np.float32),
            "options": spaces.Box(-inf, inf, (n, g, F_OPT), np.float32),
            "pod": spaces.Box(-inf, inf, (F_POD,), np.float32),
            "action_mask": spaces.Box(0, 1, (n * g + 1,), np.int8),
        })
        self.action_space = spaces.Discrete(n * g + 1)  # the last: hold (BE pods under a reclaim model)
        self.builder = ObsBuilder(cfg.history)
        self.sim: Simulator | None = None
        self.gen: Generator[PodContext, Decision | None, dict[str, object]] | None = None
        self.ctx: PodContext | None = None
        self.metrics: dict[str, object] | None = None
        self.expert: Policy | None = None

    def _workload(self, seed: int) -> Workload:
        c = self.cfg
        if c.workload_fn is not None:
            return c.workload_fn(seed)
        return make_scenario(c.scenario, nodes=c.nodes, duration=c.duration_s, load=c.load, seed=seed)

    # --- Gymnasium API ----------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        lo, hi = self.cfg.workload_seeds
        chosen = "workload_seed" in options
        # A drawn window with nothing to place (a quiet stretch of a trace) is skipped for the next draw.
        for _ in range(1 if chosen else 100):
            wseed = int(options["workload_seed"]) if chosen else int(self.np_random.integers(lo, hi))
            self._start(wseed)
            if self.ctx is not None:
                break
        if self.ctx is None:
            raise UserError(f"workload seed {wseed} asks for no decision at all" if chosen else
                            "100 drawn workload windows in a row ask for no decision: the workload is too sparse "
                            "(for a trace, use a longer --duration window)")
        self.tracker.step(0)  # rewards count from the first decision on
        self._count_state()
        self.obs = self.builder.observe(self.ctx)
        return self.obs, self._info()

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self.ctx is None:
            raise RuntimeError("step() called on a finished episode; call reset()")
        a = int(action)
        # A masked action is what a failed bind is in Kubernetes: the pod goes back to the queue (and the agent
        # pays `invalid_penalty`). Masked agents never take one; the Gymnasium checker's random actions do.
        invalid = not (0 <= a < self.obs["action_mask"].size) or not self.obs["action_mask"][a]
        self.ctx = self._advance(None if invalid else decision_for(a, self.ctx))
        self.steps += 1
        reward, terms = self.tracker.step(self.jobs_in_system, self.saturated_nodes)
        if invalid:
            reward -= self.cfg.invalid_penalty
        self._count_state()
        terminated = self.ctx is None
        truncated = not terminated and self.cfg.max_steps is not None and self.steps >= self.cfg.max_steps
        if terminated:
            self.obs = {k: np.zeros_like(v) for k, v in self.obs.items()}
        else:
            self.obs = self.builder.observe(self.ctx)  # type: ignore[arg-type]
        info = self._info()
        info["reward_terms"] = terms
        info["invalid_action"] = invalid
        if terminated:
            info["metrics"] = self.metrics
        return self.obs, float(reward), terminated, truncated, info

    # --- helpers ----------------------------------------------------------------------------------------------

    def _start(self, wseed: int) -> None:
        """A fresh simulation of workload `wseed`, advanced to its first decision (`self.ctx`, None if none)."""
        self.workload_seed = wseed
        self.sim = Simulator(self._workload(wseed), _Driven(), wseed, self.sim_cfg)
        self.tracker = RewardTracker(self.sim, self.cfg.reward)
        self.builder.reset(self.sim.cluster)
        if self.cfg.expert:
            from drlsched.policies import make_policy

            self.expert = make_policy(self.cfg.expert)
            self.expert.reset(self.sim.cluster, np.random.default_rng(wseed))
        self.gen = self.sim.decisions()
        self.metrics = None
        self.steps = 0
        self.jobs_in_system = 0
        self.ctx = self._advance(None, first=True)

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"action_mask": self.obs["action_mask"], "workload_seed": self.workload_seed}
        if self.expert is not None and self.ctx is not None:
            d = self.expert.select(self.ctx)
            info["expert_action"] = action_for(d, self.ctx) if d is not None else -1
        return info

    def _count_state(self) -> None:
        """Counts the next reward interval starts from (jobs in the system, CPU-saturated nodes)."""
        sim = self.sim
        assert sim is not None
        self.jobs_in_system = len(sim.jobs)
        c = sim.cluster
        if sim.reclaim:  # LS pods slowed past their latency target (CPU suppression keeps usage under capacity)
            self.saturated_nodes = sum(sim.saturated[:c.size])
        else:
            self.saturated_nodes = int(np.count_nonzero(c.use_cpu > c.cap_cpu))

    def action_mask(self) -> np.ndarray:
        """int8[N * G + 1]: the current joint (node, GPU option) mask, then the hold's."""
        return self.obs["action_mask"]

    def _advance(self, decision: Decision | None, first: bool = False) -> PodContext | None:
        """Apply a decision and run the simulator to the next pod that fits somewhere; None at the end."""
        gen = self.gen
        assert gen is not None
        try:
            ctx = next(gen) if first else gen.send(decision)
            while not fits_somewhere(ctx, MAX_OPTIONS):  # the agent sees its first MAX_OPTIONS options only
                ctx = gen.send(None)
        except StopIteration as stop:
            self.metrics = stop.value
            return None
        return ctx

