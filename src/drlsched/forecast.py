"""Exponential smoothing forecasts: Holt's linear trend method with prediction intervals, one independent series per
array element (every node's CPU and memory at once), for the `forecast` reclaim model; and Holt-Winters' additive
seasonal method (`HoltWinters`), for the predictive autoscaler's request rate.

Holt (1957) in the error-correction form of the additive-error, additive-trend ETS(A,A,N) model (Hyndman &
Athanasopoulos, "Forecasting: Principles and Practice", 3rd ed., §8.2 and §8.7; Hyndman et al. 2008):
    e_t = y_t − (ℓ_{t−1} + b_{t−1})            one-step forecast error
    ℓ_t = ℓ_{t−1} + b_{t−1} + α e_t            level
    b_t = b_{t−1} + β e_t                      trend (β = α β* in Holt's original form)
    ŷ_{t+h} = ℓ_t + h b_t
    σ_h² = σ² [1 + (h − 1)(α² + α β h + β² h (2h − 1) / 6)]   (FPP3 §8.7, the ETS(A,A,N) forecast variance)
σ² is the mean of e_t², exponentially weighted once there are 1/weight errors, so that it follows the series'
current noise (a burst widens the band; it narrows again after about 1/weight samples).
The upper bound over the next H steps is max_{h=1..H} ŷ_{t+h} + z σ_h. Winters' (1960) seasonal term is left
out there: estimating it needs several full seasons of history, and a simulated window holds one compressed day at
most.

Holt-Winters' additive method, ETS(A,A,A) in error-correction form (FPP3 §8.3), season length m:
    e_t = y_t − (ℓ_{t−1} + b_{t−1} + s_{t−m})
    ℓ_t = ℓ_{t−1} + b_{t−1} + α e_t,   b_t = b_{t−1} + β e_t,   s_t = s_{t−m} + γ e_t
    ŷ_{t+h} = ℓ_t + h b_t + s_{t+h−m(k+1)},  k = ⌊(h − 1)/m⌋
It starts as Holt's method (no seasonal term) and takes its seasonal indices from the first full season
(s_i = y_i − mean of that season, ℓ = that mean, b = 0: FPP3's classical initialisation), as the
predictive-horizontal-pod-autoscaler project's HoltWinters model does with `storedSeasons` of history.
"""

from __future__ import annotations

import numpy as np


class HoltForecast:
    """Holt's linear trend over arrays of series of one shape (e.g. (2, nodes): CPU and memory per node)."""

    def __init__(self, shape: tuple[int, ...], alpha: float, beta: float, var_weight: float) -> None:
        self.alpha, self.beta, self.var_weight = alpha, beta, var_weight
        self.level = np.zeros(shape)
        self.trend = np.zeros(shape)
        self.var = np.zeros(shape)
        self.count = np.zeros(shape)  # observations folded in, per series; 0 = not started

    @property
    def seen(self) -> bool:
        return bool(self.count.any())

    def update(self, y: np.ndarray) -> None:
        """Fold in one new observation of every series. A series starts at its first non-zero value (ℓ = y,
        b = 0): a node's usage is 0 until its first pod runs, and that step is no trend."""
        started = self.count > 0
        e = np.where(started, y - (self.level + self.trend), 0.0)
        self.level = np.where(started, self.level + self.trend + self.alpha * e, y)
        self.trend = self.trend + self.beta * e
        # σ² as a running mean of e² for the first 1/var_weight errors, then exponentially weighted.
        w = np.where(self.count > 1, np.maximum(1.0 / np.maximum(self.count - 1.0, 1.0), self.var_weight), 1.0)
        self.var = np.where(started, self.var + w * (e * e - self.var), 0.0)
        self.count = self.count + ((y != 0) | started)

    def upper(self, steps: int, sigmas: float) -> np.ndarray:
        """max over h = 1..steps of ŷ_{t+h} + sigmas · σ_h, per series."""
        a, b = self.alpha, self.beta
        h = np.arange(1, steps + 1, dtype=np.float64).reshape((steps,) + (1,) * self.level.ndim)
        factor = 1.0 + (h - 1.0) * (a * a + a * b * h + b * b * h * (2.0 * h - 1.0) / 6.0)
        bound = self.level + h * self.trend + sigmas * np.sqrt(self.var * factor)
        return bound.max(axis=0)


class HoltWinters:
    """Holt-Winters' additive seasonal method for one series, season length `season` steps."""

    def __init__(self, season: int, alpha: float, beta: float, gamma: float) -> None:
        if season < 2:
            raise ValueError("a season needs at least 2 steps")
        self.season, self.alpha, self.beta, self.gamma = season, alpha, beta, gamma
        self.level = self.trend = 0.0
        self.seasonal = np.zeros(season)
        self.count = 0  # observations folded in
        self._first = np.zeros(season)  # the first season's values, until it is complete

    @property
    def seasonal_ready(self) -> bool:
        return self.count >= self.season

    def update(self, y: float) -> None:
        m, i = self.season, self.count % self.season
        if self.count == 0:
            self.level = y
        elif self.count < m:
            e = y - (self.level + self.trend)
            self.level += self.trend + self.alpha * e
            self.trend += self.beta * e
        else:
            e = y - (self.level + self.trend + self.seasonal[i])
            self.level += self.trend + self.alpha * e
            self.trend += self.beta * e
            self.seasonal[i] += self.gamma * e
        if self.count < m:
            self._first[i] = y
            if self.count == m - 1:
                mean = float(self._first.mean())
                self.seasonal = self._first - mean
                self.level, self.trend = mean, 0.0
        self.count += 1

    def forecast(self, steps: int) -> float:
        """ŷ_{t+h} for h = `steps` ≥ 1 (before a full season: Holt's trend line)."""
        if steps < 1:
            raise ValueError("forecast at least one step ahead")
        seasonal = float(self.seasonal[(self.count + steps - 1) % self.season]) if self.seasonal_ready else 0.0
        return self.level + steps * self.trend + seasonal
