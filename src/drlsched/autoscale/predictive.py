"""The `predictive` replica recommender: Holt-Winters' additive seasonal forecast of the request rate (as the
predictive-horizontal-pod-autoscaler project forecasts with its HoltWinters model, there on replica counts), and
the decision rule max(reactive, forecast at lead time): the replicas the forecast rate will need `lead_s` ahead, at
the HPA's own target, never fewer than the reactive HPA asks for now.

    replicas(rate) = ⌈rate × cpu_per_rps_m × 100 / (target % × request_m)⌉

The rate is averaged over `step_s` buckets before it is folded into the forecast (one season = `season_s`). The
smoothing weights are parameters to tune on validation data; the defaults are our starting point, not upstream's
(the project has none: its users set alpha, beta, gamma).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from drlsched.errors import UserError
from drlsched.forecast import HoltWinters


@dataclass(frozen=True)
class PredictiveConfig:
    request_m: int  # a replica's CPU request
    cpu_per_rps_m: float  # CPU one request per second costs, millicores
    max_replicas: int
    min_replicas: int = 1
    target_utilization: int = 80  # % of the request, as the HPA's
    step_s: float = 60.0
    season_s: float = 86_400.0
    lead_s: float = 180.0  # a new replica's start-up and warm-up, plus a sync
    alpha: float = 0.5
    beta: float = 0.01
    gamma: float = 0.3

    def validate(self) -> None:
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise UserError(f"predictive: min replicas {self.min_replicas} must be within 1..max {self.max_replicas}")
        if self.request_m <= 0 or self.cpu_per_rps_m <= 0 or not 0 < self.target_utilization:
            raise UserError("predictive: request, cost per request and target must be positive")
        if not (0 < self.step_s <= self.season_s / 2 and self.lead_s >= 0):
            raise UserError("predictive: the step must be positive and at most half a season, the lead time >= 0")
        if not all(0 <= w <= 1 for w in (self.alpha, self.beta, self.gamma)):
            raise UserError("predictive: alpha, beta and gamma must be within [0, 1]")


@dataclass
class PredictiveScaler:
    config: PredictiveConfig
    model: HoltWinters = field(init=False)
    bucket: int | None = None
    total: float = 0.0
    samples: int = 0
    last_mean: float = 0.0
    now_s: float = 0.0

    def __post_init__(self) -> None:
        c = self.config
        c.validate()
        self.model = HoltWinters(max(2, round(c.season_s / c.step_s)), c.alpha, c.beta, c.gamma)

    def observe(self, now_s: float, rate: float) -> None:
        """A sample of the request rate (requests per second) at `now_s`; samples come in time order."""
        bucket = int(now_s // self.config.step_s)
        if self.bucket is None:
            self.bucket = bucket
        while bucket > self.bucket:  # fold the finished bucket (a bucket without samples repeats the last mean)
            if self.samples:
                self.last_mean = self.total / self.samples
            self.model.update(self.last_mean)
            self.bucket += 1
            self.total, self.samples = 0.0, 0
        self.total += rate
        self.samples += 1
        self.now_s = now_s

    def forecast_rate(self) -> float:
        """The rate forecast for the bucket `lead_s` after the latest sample (0 before any full bucket)."""
        if self.model.count == 0 or self.bucket is None:
            return 0.0
        target = int((self.now_s + self.config.lead_s) // self.config.step_s)
        return max(0.0, self.model.forecast(max(1, target - (self.bucket - 1))))

    def replicas_for(self, rate: float) -> int:
        c = self.config
        return math.ceil(rate * c.cpu_per_rps_m * 100 / (c.target_utilization * c.request_m))

    def desired(self, reactive: int) -> int:
        """max(reactive, forecast at lead time), within [min, max]."""
        c = self.config
        return min(c.max_replicas, max(c.min_replicas, reactive, self.replicas_for(self.forecast_rate())))
