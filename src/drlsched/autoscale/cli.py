"""`drlsched load-curve`: a service's load as the autoscalers will see it (a `--load-trace` or the `flash-sale`
pattern, scaled to `--load-peak`), summarised as JSON or written as CSV; and the `--load-*` options the workload
commands share."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from drlsched.autoscale.flash_sale import flash_sale
from drlsched.autoscale.load import LoadCurve, detect_bursts, read_load
from drlsched.cli_args import non_negative_int, positive_float, positive_int
from drlsched.errors import UserError
from drlsched.usage_trace import USAGE_FORMATS, parse_usage_window

PATTERNS = ("flash-sale",)


def add_load_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("service load")
    g.add_argument("--load-trace", metavar="PATH",
                   help="requests per minute as `minute,requests` rows (the worldcup98 form), or a CPU usage series "
                        "(any --usage-trace form) whose shape is taken as the load")
    g.add_argument("--load-format", choices=USAGE_FORMATS, metavar="FMT",
                   help="read --load-trace as this usage-series form (default: recognised by its header)")
    g.add_argument("--load-series", type=non_negative_int, default=0, metavar="N",
                   help="which series of a usage-series --load-trace (default 0, the first)")
    g.add_argument("--load-peak", type=positive_float, metavar="RPS",
                   help="scale the load so that its highest rate is RPS requests per second (default: as read)")
    g.add_argument("--load-window", metavar="START:END",
                   help="only this part of the load, from its start, units s/m/h/d (e.g. 0:3d)")


def load_curve(args: argparse.Namespace, pattern: LoadCurve | None = None) -> LoadCurve:
    """The load the `--load-*` options describe (or `pattern`, when no trace is given); bad input fails here."""
    if args.load_trace:
        curve = read_load(args.load_trace, args.load_format, args.load_series)
    elif pattern is not None:
        curve = pattern
    else:
        raise UserError("no load: give --load-trace PATH" + (" or --pattern" if hasattr(args, "pattern") else ""))
    if args.load_window:
        curve = curve.window(*parse_usage_window(args.load_window, "--load-window"))
    if args.load_peak:
        curve = curve.scaled(args.load_peak)
    if not curve.bursts:
        curve = LoadCurve(curve.rate, curve.step_s, curve.start_s, detect_bursts(curve))
    return curve


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from drlsched.autoscale import train_cli

    train_cli.register(sub)
    p = sub.add_parser("load-curve", help="read a load trace or make the flash-sale load; summarise it or write CSV")
    add_load_arguments(p)
    p.add_argument("--pattern", choices=PATTERNS, help="a synthetic load instead of --load-trace")
    p.add_argument("--seed", type=int, default=0, help="seed of --pattern (default 0)")
    p.add_argument("--days", type=positive_int, default=1, help="days of --pattern (default 1)")
    p.add_argument("--step", type=positive_float, default=15.0, metavar="SECONDS",
                   help="sample period of --pattern (default 15 s)")
    p.add_argument("--csv", type=Path, metavar="OUT", help="write `second,requests_per_second` rows to OUT")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.load_trace and args.pattern:
        raise UserError("give --load-trace or --pattern, not both")
    pattern = flash_sale(args.seed, args.days, args.step) if args.pattern == "flash-sale" else None
    curve = load_curve(args, pattern)
    if args.csv:
        try:
            with args.csv.open("w", newline="") as fh:
                out = csv.writer(fh)
                out.writerow(["second", "requests_per_second"])
                out.writerows(zip((curve.start_s + curve.step_s * np.arange(curve.rate.size)).tolist(),
                                  np.round(curve.rate, 6).tolist(), strict=True))
        except OSError as err:
            raise UserError(f"cannot write {args.csv}: {err.strerror}") from None
    summary = {
        "source": args.load_trace or args.pattern,
        "step_s": curve.step_s,
        "duration_s": curve.duration_s,
        "peak_rps": round(curve.peak, 6),
        "mean_rps": round(float(curve.rate.mean()), 6),
        "bursts": [[round(a, 1), round(b, 1)] for a, b in curve.bursts],
    }
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0
