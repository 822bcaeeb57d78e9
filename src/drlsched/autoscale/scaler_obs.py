"""What the learned replica scaler sees and what it can do (docs/autoscaling.md "The learned scaler").

Observation: the last `HISTORY` syncs (15 s apart), `F_SCALER` features each, oldest first:
    0 log(1 + need) / log(1 + max replicas)   need = the replicas the current rate fills at 100% of request
    1 ready replicas / need                   (need at least 1; ratios capped at 4)
    2 replicas (bound or starting) / need
    3 forecast need 300 s ahead / need       (Holt-Winters, as `predictive`; 0 until it has a season)
    4 1 once the forecast has a season of history, else 0
    5 change of log need since the previous sync (clipped to ±1)
    6, 7 sin and cos of the hour of day
    8 share of the last interval's requests that violated the SLA
    9 (step actions only) the multiplier level in force: its index in `MULTIPLIERS` / 10
Action (`absolute`, spec 2): one of `MULTIPLIERS`; the replica target is ⌈m × max(need, forecast need)⌉ within
[min, max] — m = 1.25 is the HPA's 80% target on the larger of now and the forecast, so the policy trades
violation (small m, or trusting the present over the forecast) against replica-hours (large m). The base max(need,
forecast need) is held at its highest over `hold_s` (the HPA's scale-down stabilisation window, 300 s), so the count
follows a falling load as slowly as the HPA lets it, while each action still sets the count at once: without the
hold a forecast that dipped mid-burst deleted ready replicas the next minute needed again. (Holding the target
itself instead makes every action but the highest of the last 20 moot, and PPO's sampled behaviour — the max of 20
draws — unlike its greedy one.)
Action (`step`, spec 3): down, keep or up one level of `MULTIPLIERS` from the level in force (it opens at 1.5), the
target then as above. An absolute action sets the count for one sync, so a high multiplier sampled ahead of a burst
is undone by the next sync and PPO never sees raising early pay; a step persists until undone (docs/autoscaling.md).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from drlsched.autoscale.predictive import PredictiveConfig, PredictiveScaler
from drlsched.autoscale.services import ServiceSpec

HISTORY = 16
F_SCALER = 9
MULTIPLIERS = (0.9, 1.0, 1.1, 1.25, 1.4, 1.5, 1.6, 1.8, 2.0, 2.5, 3.0)
ACTIONS = ("absolute", "step")
SPEC_VERSIONS = {"absolute": 2, "step": 3}  # 2: m = 1.5 added, the target's base held over HOLD_S; 3: step actions
STEPS = (-1, 0, 1)
OPENING_LEVEL = MULTIPLIERS.index(1.5)  # a step scaler's first level, and a primed run's: the middle of the safe ones
LEAD_S = 300.0  # the forecast's lead: start-up, warm-up and a node's provisioning, about (the tuned predictive's)
HOLD_S = 300.0  # the HPA's --horizontal-pod-autoscaler-downscale-stabilization
_CAP = 4.0


class ScalerObserver:
    """The history window of one service, updated at every sync; also turns an action into a replica target."""

    def __init__(self, spec: ServiceSpec, hold_s: float = HOLD_S, actions: str = "absolute") -> None:
        if actions not in ACTIONS:
            raise ValueError(f"unknown action space {actions!r}")
        self.spec, self.hold_s, self.actions = spec, hold_s, actions
        self.level = OPENING_LEVEL
        self.forecast = PredictiveScaler(PredictiveConfig(spec.request_m, spec.cpu_per_rps_m, spec.max_replicas,
                                                          spec.min_replicas, 100, lead_s=LEAD_S))
        self.window = np.zeros((HISTORY, features(actions)), dtype=np.float32)
        if actions == "step":
            self.window[:, F_SCALER] = self._level_feature()
        self.need = 1.0
        self.forecast_need = 0.0
        self._log_need = 0.0
        self._log_max = math.log1p(spec.max_replicas)
        self.base = 0.0
        self._bases: deque[tuple[float, float]] = deque()
        self.syncs = 0

    def observe(self, now: float, rate: float, ready: int, replicas: int, violating: float) -> np.ndarray:
        """Fold one sync into the window; returns the window (a view: copy it to keep it)."""
        self.forecast.observe(now, rate)
        need = rate * self.spec.cpu_per_rps_m / self.spec.request_m
        seasoned = self.forecast.model.count >= self.forecast.model.season
        self.forecast_need = (self.forecast.forecast_rate() * self.spec.cpu_per_rps_m / self.spec.request_m
                              if seasoned else 0.0)
        self.need = need
        # upstream's stabilizeRecommendation keeps what is not older than the window (at the cutoff counts)
        while self._bases and self._bases[0][0] < now - self.hold_s:
            self._bases.popleft()
        while self._bases and self._bases[-1][1] <= max(need, self.forecast_need):
            self._bases.pop()  # a later base as high makes it moot: the deque falls from oldest to newest
        self._bases.append((now, max(need, self.forecast_need)))
        self.base = self._bases[0][1]
        base = max(need, 1.0)
        log_need = math.log1p(need)
        hour = 2.0 * math.pi * ((now % 86_400.0) / 86_400.0)
        row = (log_need / self._log_max, min(ready / base, _CAP), min(replicas / base, _CAP),
               min(self.forecast_need / base, _CAP), float(seasoned),
               max(-1.0, min(1.0, log_need - self._log_need)), math.sin(hour), math.cos(hour), violating,
               *((self._level_feature(),) if self.actions == "step" else ()))
        self._log_need = log_need
        self.syncs += 1
        self.window[:-1] = self.window[1:]
        self.window[-1] = row
        return self.window

    def resume(self, level: int) -> None:
        """Continue from `level` (a step scaler's level another process had in force: a restart, a new leader).
        Before the first sync the whole window shows it, as a fresh window shows the opening level."""
        if not 0 <= level < len(MULTIPLIERS):
            raise ValueError(f"no multiplier level {level}")
        self.level = level
        if self.actions == "step" and self.syncs == 0:
            self.window[:, F_SCALER] = self._level_feature()

    def _level_feature(self) -> float:
        return self.level / (len(MULTIPLIERS) - 1)

    def target(self, level: int) -> int:
        """The replica target of a level for the latest observation: ⌈m × the held base⌉ within [min, max]."""
        m = MULTIPLIERS[level]
        return min(self.spec.max_replicas, max(self.spec.min_replicas, math.ceil(m * self.base - 1e-9)))

    def nearest(self, replicas: int) -> int:
        """The level whose target is closest to `replicas` (the larger multiplier on a tie), or with step actions the
        step toward it: how a non-learned scaler's decision reads in this action space, for imitation."""
        gaps = [abs(self.target(a) - replicas) for a in range(len(MULTIPLIERS))]
        best = min(gaps)
        level = max(a for a, g in enumerate(gaps) if g == best)
        return level if self.actions == "absolute" else 1 + (level > self.level) - (level < self.level)

    def apply(self, action: int) -> int:
        """The replica target of a decision: `action` is a level (absolute) or an index into `STEPS` (step), which
        moves the level in force first."""
        if self.actions == "absolute":
            self.level = action
        else:
            self.level = min(len(MULTIPLIERS) - 1, max(0, self.level + STEPS[action]))
        return self.target(self.level)


def features(actions: str) -> int:
    """Features per sync of an action space's window."""
    return F_SCALER + (actions == "step")


def action_count(actions: str) -> int:
    return len(MULTIPLIERS) if actions == "absolute" else len(STEPS)
