"""The `flash-sale` load: an e-commerce day with a sale that multiplies the request rate ~10× within minutes (the seed
article's scenario), as a seeded function.

- **Day.** Trough at 04:00, peak at 21:00, peak/trough 2.5 (the diurnal ratio of ../shared/reference/traces.md:
  "peak/trough ≈ 2–2.5×"), rising for 17 h and falling for 7 h along half-cosines, times a slow multiplicative
  noise (log-AR(1), σ 5%, correlation 0.98 per minute).
- **Sale.** It opens on an announced hour drawn once per seed (10:00, 12:00, 15:00 or 20:00) and again each day
  at that hour, a few minutes late (0–2 min); the rate ramps linearly to 8–12× the day's rate over 2–5 min, holds
  15–30 min and decays back with a 20 min time constant. Each sale's ramp and hold is a burst window.
Every number is drawn from the seed; the curve is scaled so that its highest rate is `peak` requests per second.
"""

from __future__ import annotations

import numpy as np

from drlsched.autoscale.load import LoadCurve
from drlsched.errors import UserError

SALE_HOURS = (10, 12, 15, 20)
TROUGH_H, PEAK_H, PEAK_TROUGH = 4.0, 21.0, 2.5
DECAY_S = 1200.0


def diurnal(hour: np.ndarray) -> np.ndarray:
    """1 at 04:00, 2.5 at 21:00."""
    rise = PEAK_H - TROUGH_H
    since = (hour - TROUGH_H) % 24.0
    phase = np.where(since < rise, np.pi * since / rise, np.pi + np.pi * (since - rise) / (24.0 - rise))
    return 1.0 + (PEAK_TROUGH - 1.0) * (0.5 - 0.5 * np.cos(phase))


def flash_sale(seed: int, days: int = 1, step_s: float = 15.0, peak: float = 1.0) -> LoadCurve:
    if not 1 <= days <= 366:
        raise UserError(f"flash-sale: days must be between 1 and 366, got {days}")
    if not 0 < step_s <= 3600:
        raise UserError(f"flash-sale: the step must be in (0, 3600] seconds, got {step_s}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xF1A5]))
    n = round(days * 86_400.0 / step_s)
    t = np.arange(n) * step_s
    rate = diurnal((t % 86_400.0) / 3600.0)
    rho = 0.98 ** (step_s / 60.0)
    shocks = rng.normal(0.0, 0.05 * np.sqrt(1.0 - rho * rho), n)
    log_noise = np.empty(n)
    log_noise[0] = rng.normal(0.0, 0.05)
    for i in range(1, n):
        log_noise[i] = rho * log_noise[i - 1] + shocks[i]
    hour = SALE_HOURS[int(rng.integers(len(SALE_HOURS)))]
    extra = np.zeros(n)
    bursts = []
    for day in range(days):
        start = day * 86_400.0 + hour * 3600.0 + rng.uniform(0.0, 120.0)
        ramp, hold, factor = rng.uniform(120.0, 300.0), rng.uniform(900.0, 1800.0), rng.uniform(8.0, 12.0)
        dt = t - start
        shape = np.where(dt < 0, 0.0, np.where(dt < ramp, dt / ramp, np.where(
            dt < ramp + hold, 1.0, np.exp(-(dt - ramp - hold) / DECAY_S))))
        extra = np.maximum(extra, (factor - 1.0) * shape)
        bursts.append((start, start + ramp + hold))
    curve = LoadCurve(rate * (1.0 + extra) * np.exp(log_noise), step_s, 0.0, tuple(bursts))
    return curve.scaled(peak)
