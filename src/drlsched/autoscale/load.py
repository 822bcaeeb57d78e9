"""A service's request rate over time: from a load trace (`--load-trace FILE`, the worldcup98 form `minute,requests`,
or any CPU usage series form of drlsched.usage_trace, whose shape is taken as the load), or the seeded `flash-sale`
pattern (drlsched.autoscale.flash_sale); scaled to a chosen peak.

Trace form: a header `minute,requests`, then one row per minute in increasing order; `minute` is a whole number of
minutes from the trace's start or a timestamp at a whole minute (`1998-04-30 21:30:00`, ISO 8601), `requests` the
requests received in that minute (a non-negative number). Minutes without a row received none. Anything else (a
non-numeric or negative value, minutes out of order or repeated, a timestamp off the minute, an empty file, another
header, whose units cannot be told) is refused with one line naming file:line.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np

from drlsched.errors import UserError

TRACE_HEADER = ("minute", "requests")
MAX_TRACE_MINUTES = 60 * 24 * 366


@dataclass(frozen=True)
class LoadCurve:
    """Requests per second, piecewise constant: `rate[i]` holds over [start_s + i·step_s, start_s + (i+1)·step_s)."""

    rate: np.ndarray
    step_s: float
    start_s: float = 0.0
    bursts: tuple[tuple[float, float], ...] = ()  # known burst windows (start, end) in seconds, if any

    @property
    def duration_s(self) -> float:
        return self.rate.size * self.step_s

    @property
    def peak(self) -> float:
        return float(self.rate.max()) if self.rate.size else 0.0

    def at(self, t_s: float | np.ndarray) -> np.ndarray:
        """The rate at time(s) t (0 before the start and after the end)."""
        i = np.floor((np.asarray(t_s, dtype=np.float64) - self.start_s) / self.step_s).astype(np.int64)
        inside = (i >= 0) & (i < self.rate.size)
        return np.where(inside, self.rate[np.clip(i, 0, max(self.rate.size - 1, 0))], 0.0)

    def scaled(self, peak: float) -> LoadCurve:
        """The same shape with its highest rate at `peak` requests per second."""
        if not (math.isfinite(peak) and peak > 0):
            raise UserError(f"the load's peak must be a positive number of requests per second, got {peak}")
        top = self.peak
        if top <= 0:
            raise UserError("the load is zero throughout: it cannot be scaled to a peak")
        return replace(self, rate=self.rate * (peak / top))

    def window(self, start_s: float, end_s: float) -> LoadCurve:
        """The part in [start_s, end_s) seconds from the curve's start, restarting at time 0."""
        lo = max(0, int(start_s // self.step_s))
        hi = self.rate.size if math.isinf(end_s) else min(self.rate.size, math.ceil(end_s / self.step_s))
        if hi <= lo:
            raise UserError(f"the load window {start_s:g}:{end_s:g} s holds none of the load "
                            f"({self.duration_s:g} s long)")
        shift = lo * self.step_s
        bursts = tuple((max(0.0, a - shift), b - shift) for a, b in self.bursts if b > shift and a < hi * self.step_s)
        return LoadCurve(self.rate[lo:hi].copy(), self.step_s, 0.0, bursts)


def read_load_trace(path: str | Path) -> LoadCurve:
    """A `minute,requests` trace as requests per second, one value per minute."""
    p = Path(path)
    try:
        with p.open(newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise UserError(f"{p}:1: empty load trace; expected a header {','.join(TRACE_HEADER)} and rows")
            if tuple(h.strip().lower() for h in header[:2]) != TRACE_HEADER or len(header) != 2:
                raise UserError(f"{p}:1: header {','.join(header)!r} does not say its units; expected "
                                f"{','.join(TRACE_HEADER)} (requests received in each minute)")
            minutes, counts = _rows(p, reader)
    except OSError as err:
        raise UserError(f"cannot read load trace {p}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text CSV; expected a header {','.join(TRACE_HEADER)}") from None
    per_minute = np.zeros(minutes[-1] - minutes[0] + 1)
    per_minute[np.asarray(minutes) - minutes[0]] = counts
    return LoadCurve(per_minute / 60.0, 60.0)


def _rows(p: Path, reader: csv._reader) -> tuple[list[int], list[float]]:
    minutes: list[int] = []
    counts: list[float] = []
    origin: datetime | None = None
    for line, row in enumerate(reader, start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 2:
            raise UserError(f"{p}:{line}: expected 2 fields (minute,requests), got {len(row)}")
        text, value = row[0].strip(), row[1].strip()
        if text.lstrip("-").isdigit():
            minute = int(text)
            if minute < 0:
                raise UserError(f"{p}:{line}: negative minute {minute}")
        else:
            try:
                stamp = datetime.fromisoformat(text)
            except ValueError:
                raise UserError(f"{p}:{line}: minute {text!r} is neither a whole number of minutes nor a "
                                "timestamp (1998-04-30 21:30:00)") from None
            if stamp.second or stamp.microsecond:
                raise UserError(f"{p}:{line}: timestamp {text!r} is not at a whole minute: rows must be minutes")
            origin = origin or stamp
            if origin is not None and (stamp.tzinfo is None) != (origin.tzinfo is None):
                raise UserError(f"{p}:{line}: timestamps mix time zones")
            minute = int((stamp - origin).total_seconds() // 60)
            if minute < 0:
                raise UserError(f"{p}:{line}: minute {text!r} is out of order (before the first row)")
        try:
            count = float(value)
        except ValueError:
            raise UserError(f"{p}:{line}: requests {value!r} is not a number") from None
        if not math.isfinite(count) or count < 0:
            raise UserError(f"{p}:{line}: requests {value!r} must be a non-negative number")
        if minutes and minute <= minutes[-1]:
            raise UserError(f"{p}:{line}: minute {text!r} is out of order (not after the previous row's)")
        if minutes and minute - minutes[0] > MAX_TRACE_MINUTES:
            raise UserError(f"{p}:{line}: the trace spans more than {MAX_TRACE_MINUTES} minutes")
        minutes.append(minute)
        counts.append(count)
    if not minutes:
        raise UserError(f"{p}:2: the load trace has a header but no rows")
    return minutes, counts


def read_load(path: str | Path, usage_format: str | None = None, series: int = 0) -> LoadCurve:
    """`--load-trace PATH`: a `minute,requests` trace, or a usage series (recognised by its header, or named by
    `usage_format`; a folder of Bitbrains VM files) whose `series`-th series is the load's shape."""
    p = Path(path)
    if p.is_file() and usage_format is None:
        try:
            with p.open(newline="") as fh:
                first = next(csv.reader(fh), None)
        except (OSError, UnicodeDecodeError):
            first = None
        if first is None or tuple(h.strip().lower() for h in first[:2]) == TRACE_HEADER or not _usage_header(first):
            return read_load_trace(p)
    return load_from_usage(str(p), usage_format, series)


def _usage_header(header: list[str]) -> bool:
    from drlsched.usage_trace import _FORMS

    cells = tuple(h.strip() for h in header)
    return any(cells[: len(cols)] == cols for cols, *_ in _FORMS.values())


def load_from_usage(path: str, fmt: str | None = None, series: int = 0, step_s: float = 60.0) -> LoadCurve:
    """A CPU usage series (`--usage-trace` forms, drlsched.usage_trace) read as load: its shape, resampled to the
    step, becomes the request rate (scale it with `scaled`)."""
    from drlsched.usage_trace import load_usage

    usage = load_usage(path, fmt)
    if not 0 <= series < len(usage.series):
        raise UserError(f"{path}: usage series {series} does not exist; it has {len(usage.series)}")
    t, v = usage.series[series]
    n = int((t[-1] - t[0]) // step_s) + 1
    return LoadCurve(np.interp(t[0] + step_s * np.arange(n), t, v), step_s)


def detect_bursts(curve: LoadCurve, factor: float = 3.0,
                  baseline_s: float = 6 * 3600.0) -> tuple[tuple[float, float], ...]:
    """Windows where the rate exceeds `factor` × the median of the preceding `baseline_s` (at least one step)."""
    k = max(1, int(baseline_s // curve.step_s))
    out: list[tuple[float, float]] = []
    start: int | None = None
    base = 0.0
    for i in range(1, curve.rate.size):
        if start is None:
            base = float(np.median(curve.rate[max(0, i - k):i]))
        high = curve.rate[i] > factor * base and base > 0
        if high and start is None:
            start = i
        elif not high and start is not None:
            out.append((curve.start_s + start * curve.step_s, curve.start_s + i * curve.step_s))
            start = None
    if start is not None:
        out.append((curve.start_s + start * curve.step_s, curve.start_s + curve.rate.size * curve.step_s))
    return tuple(out)
