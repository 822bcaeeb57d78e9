"""Real CPU usage series replayed onto LS pods (`--usage-trace PATH`, docs/simulator.md).

Forms, recognised by their header (or named with `--usage-format`), as in ../shared/traces/usage/:
- `alibaba-machine`: Alibaba v2018 `machine_usage` rows (`machine_id,time_stamp,cpu_util_percent,...`), one series
  per machine. `cpu_util_percent` is % of the machine, not of a pod: only the series' shape is used (divided by its
  mean) and it multiplies the pod's own mean usage ratio.
- `alibaba-container`: Alibaba v2018 `container_usage` rows (`container_id,machine_id,time_stamp,cpu_util_percent,
  ...`), one series per container; `cpu_util_percent` is % of the container's request: used as usage / request.
- `bitbrains`: a Bitbrains GWA-T-12 VM file (`Timestamp [ms],...,CPU usage [%],...`; one series per file, or a
  folder of them); `CPU usage [%]` of the VM's provisioned CPU is used as usage / request. Its timestamps are epoch
  seconds despite the column's name (values above 10^11 are taken as milliseconds).
- `google-jobs`: Google 2011 per-job sums (`job_id,day,step_5min,cpu_pct,mem_pct`), one series per job;
  `cpu_pct` is used as usage / request, at time (day − 1) × 86,400 + step × 300 s.

A part of the series (`--usage-window START:END`, `--usage-series FROM:TO`) keeps training and held-out evaluation
apart: a time window of every series (from the trace's start) and/or a share of the series in file order. A run on
a part replays it from a point drawn from its seed, so that the seeds cover the part rather than its first minutes.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from drlsched.errors import UserError

# form -> (leading header columns that identify it, key column, time column(s), CPU column, shape only)
_FORMS: dict[str, tuple[tuple[str, ...], str, tuple[str, ...], str, bool]] = {
    "alibaba-machine": (("machine_id", "time_stamp", "cpu_util_percent"), "machine_id", ("time_stamp",),
                        "cpu_util_percent", True),
    "alibaba-container": (("container_id", "machine_id", "time_stamp", "cpu_util_percent"), "container_id",
                          ("time_stamp",), "cpu_util_percent", False),
    "bitbrains": (("Timestamp [ms]", "CPU cores"), "", ("Timestamp [ms]",), "CPU usage [%]", False),
    "google-jobs": (("job_id", "day", "step_5min", "cpu_pct"), "job_id", ("day", "step_5min"), "cpu_pct", False),
}
USAGE_FORMATS = tuple(_FORMS)
MAX_SERIES = 100_000
MAX_POINTS = 100_000  # per series, after resampling to the tick
_ACCEPTED = ("accepted forms: alibaba-machine (machine_id,time_stamp,cpu_util_percent,...), alibaba-container "
             "(container_id,machine_id,time_stamp,cpu_util_percent,...), bitbrains (Timestamp [ms],CPU cores,...,"
             "CPU usage [%],...), google-jobs (job_id,day,step_5min,cpu_pct,mem_pct)")


@dataclass(frozen=True)
class UsageSeries:
    """CPU usage series: times in seconds and values as usage / request (or a shape when `relative`)."""

    form: str
    relative: bool
    series: tuple[tuple[np.ndarray, np.ndarray], ...]
    drawn_start: bool = False  # a part: each run replays from a point drawn from its seed (else from the start)

    def grid(self, tick_s: float) -> tuple[np.ndarray, np.ndarray]:
        """The series resampled to the tick (linear interpolation from each series' first sample), as a padded
        [series, points] array and each series' length; relative series are divided by their mean."""
        rows = []
        for t, v in self.series:
            n = min(MAX_POINTS, int((t[-1] - t[0]) // tick_s) + 1)
            row = np.interp(t[0] + tick_s * np.arange(n), t, v)
            if self.relative:
                mean = float(row.mean())
                row = row / mean if mean > 0 else np.ones(n)
            rows.append(row)
        lengths = np.array([r.size for r in rows], dtype=np.int64)
        out = np.zeros((len(rows), int(lengths.max())))
        for i, r in enumerate(rows):
            out[i, : r.size] = r
        return out, lengths


def _form_of(header: list[str], path: Path, fmt: str | None) -> str:
    found = next((f for f, (cols, *_) in _FORMS.items() if tuple(header[: len(cols)]) == cols), None)
    if fmt is not None and fmt not in _FORMS:
        raise UserError(f"--usage-format {fmt!r} is not one of {', '.join(USAGE_FORMATS)}")
    if found is None or (fmt is not None and fmt != found):
        got = ",".join(header[:5])
        raise UserError(f"{path}: header {got!r} is not a{' ' + fmt if fmt else 'n accepted'} usage series; "
                        f"{_ACCEPTED}")
    if _FORMS[found][3] not in header:
        raise UserError(f"{path}: no {_FORMS[found][3]!r} column; {_ACCEPTED}")
    return found


def _read(path: Path, fmt: str | None) -> tuple[str, dict[str, list[tuple[float, float]]]]:
    try:
        with path.open(newline="") as fh:
            reader = csv.reader(fh)
            header = [h.strip() for h in next(reader, [])]
            form = _form_of(header, path, fmt)
            _, key, time_cols, cpu_col, _ = _FORMS[form]
            ki = header.index(key) if key else -1
            ti = [header.index(c) for c in time_cols]
            ci = header.index(cpu_col)
            out: dict[str, list[tuple[float, float]]] = {}
            for line, row in enumerate(reader, start=2):
                if not row:
                    continue
                try:
                    times = [float(row[i]) for i in ti]
                    cpu = float(row[ci])
                except (ValueError, IndexError):
                    raise UserError(f"{path}:{line}: expected numbers in {', '.join((*time_cols, cpu_col))}, got "
                                    f"{row[:6]}") from None
                t = (times[0] - 1) * 86_400.0 + times[1] * 300.0 if form == "google-jobs" else times[0]
                if not (math.isfinite(t) and math.isfinite(cpu)) or cpu < 0 or cpu > 10_000:
                    raise UserError(f"{path}:{line}: CPU usage {cpu} or time {t} out of range (a percentage "
                                    "0..10000 and a finite time)")
                series = out.setdefault(row[ki] if key else str(path), [])
                if len(series) < 10 * MAX_POINTS:
                    series.append((t, cpu / 100.0))
                if len(out) > MAX_SERIES:
                    raise UserError(f"{path}: more than {MAX_SERIES} series")
    except OSError as err:
        raise UserError(f"cannot read usage trace {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text CSV; {_ACCEPTED}") from None
    return form, out


def _header(path: Path) -> list[str]:
    try:
        with path.open(newline="") as fh:
            return [h.strip() for h in next(csv.reader(fh), [])]
    except (OSError, UnicodeDecodeError):
        return []


@functools.lru_cache(maxsize=4)
def load_usage(path: str, fmt: str | None = None, window: tuple[float, float] | None = None,
               share: tuple[float, float] | None = None) -> UsageSeries:
    """The usage series of a file (or of a folder of Bitbrains VM files, in name order), or a part of them: the
    samples in [start, end) seconds from the trace's start (`window`; the earliest sample of any series, so that
    two windows never share a moment) of the series whose index i of n has from <= i / n < to (`share`)."""
    whole = _load_whole(path, fmt)
    if window is None and share is None:
        return whole
    series = whole.series
    if share is not None:
        lo, hi = share
        series = tuple(s for i, s in enumerate(series) if lo <= i / len(series) < hi)
        if not series:
            raise UserError(f"--usage-series {lo:g}:{hi:g} keeps none of the {len(whole.series)} series of {path}")
    if window is not None:
        start, end = window
        origin = min(float(t[0]) for t, _ in whole.series)
        cut = []
        for t, v in series:
            keep = (t >= origin + start) & (t < origin + end)
            if keep.any():
                cut.append((t[keep], v[keep]))
        if not cut:
            last = max(float(t[-1]) for t, _ in series) - origin
            raise UserError(f"--usage-window {start:g}:{end:g} (seconds) holds no sample of {path}: its series "
                            f"end {last:g} s after its start")
        series = tuple(cut)
    return replace(whole, series=series, drawn_start=True)


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$")


def _seconds(text: str, empty: float) -> float:
    if not text.strip():
        return empty
    m = _DURATION.match(text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else math.nan


def parse_usage_window(text: str, option: str = "--usage-window") -> tuple[float, float]:
    """`START:END` in seconds from the trace's start, each with an optional unit s, m, h or d; an empty
    side means the trace's start or end (`:5d`, `5d:`)."""
    start_text, colon, end_text = text.partition(":")
    start, end = _seconds(start_text, 0.0), _seconds(end_text, math.inf)
    if not colon or not start < end:  # NaN fails too
        raise UserError(f"{option} expects START:END with START < END, each seconds from the trace's start "
                        f"with an optional unit s, m, h or d, either side empty (e.g. 0:5d, 5d:), got {text!r}")
    return start, end


def parse_usage_series(text: str) -> tuple[float, float]:
    """`FROM:TO`, a share of the series in file order as fractions with 0 <= FROM < TO <= 1 (e.g. 0:0.5)."""
    lo_s, colon, hi_s = text.partition(":")
    try:
        lo, hi = float(lo_s), float(hi_s)
    except ValueError:
        lo = hi = math.nan
    if not colon or not (0 <= lo < hi <= 1):  # NaN fails too
        raise UserError(f"--usage-series expects FROM:TO, fractions of the series in file order with "
                        f"0 <= FROM < TO <= 1 (e.g. 0:0.5, 0.5:1), got {text!r}")
    return lo, hi


@functools.lru_cache(maxsize=4)
def _load_whole(path: str, fmt: str | None) -> UsageSeries:
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix == ".csv" and _header(f)[:2] == ["Timestamp [ms]",
                                                                                              "CPU cores"])
        if not files:
            raise UserError(f"usage trace folder {p} has no Bitbrains VM file (.csv starting 'Timestamp [ms],CPU "
                            f"cores'); {_ACCEPTED}")
        forms = set()
        raw: dict[str, list[tuple[float, float]]] = {}
        for f in files:
            form, got = _read(f, fmt or "bitbrains")
            forms.add(form)
            raw.update(got)
        form = forms.pop()
    else:
        form, raw = _read(p, fmt)
    series = []
    for points in raw.values():
        arr = np.array(sorted(points))
        t, v = arr[:, 0], arr[:, 1]
        if form == "bitbrains" and t[0] > 1e11:
            t = t / 1000.0
        keep = np.concatenate([[True], np.diff(t) > 0])  # one value per time
        series.append((t[keep], v[keep]))
    if not series:
        raise UserError(f"{path}: no usage rows")
    return UsageSeries(form, _FORMS[form][4], tuple(series))
