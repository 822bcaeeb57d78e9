"""`drlsched replay --scenario flash-sale --scaler NAME`: the scaler replay of `drlsched.autoscale.replay`, beside the
simulator's run of the same window (docs/replay.md "Scalers")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import kubernetes

from drlsched.autoscale.cli_simulate import FLASH_SALE, check_scaled_arguments, scaled_inputs
from drlsched.autoscale.driver import LEARNED_PREFIX
from drlsched.autoscale.replay import LEAD_IN_S, SCALERS, Plan, compare, make_plan, replay_scaler, simulate_window
from drlsched.cli_common import emit_json
from drlsched.errors import UserError
from drlsched.evaluate import to_jsonable

DAYS = 2  # the first day is the forecast's history; the second day's sale is replayed


def wants_scaler_replay(args: argparse.Namespace) -> bool:
    """A service scenario (flash-sale or a --load-trace) or --scaler: the scaler replay. Bad combinations: exit 2."""
    service = args.scenario == FLASH_SALE or bool(getattr(args, "load_trace", None))
    if args.scaler and not service:
        raise UserError(f"replay --scaler needs a service scenario: --scenario {FLASH_SALE} or --load-trace FILE")
    if service and not args.scaler:
        raise UserError(f"replay of a service scenario needs --scaler {'|'.join(SCALERS)}|{LEARNED_PREFIX}PATH")
    if args.scaler and args.scaler not in SCALERS and not args.scaler.startswith(LEARNED_PREFIX):
        raise UserError(f"replay --scaler: unknown scaler {args.scaler!r}; choose one of {', '.join(SCALERS)} or "
                        f"{LEARNED_PREFIX}PATH")
    return service


def plan_from_args(args: argparse.Namespace, lead_in_s: float = LEAD_IN_S) -> Plan:
    """The replay `replay --scaler` options describe (UserError for bad ones)."""
    wants_scaler_replay(args)
    check_scaled_arguments(args)
    # The load is the whole two days (or trace); --duration is the replayed window's length.
    whole = argparse.Namespace(**{**vars(args), "duration": DAYS * 86_400.0 if args.scenario else None})
    spec, load, config = scaled_inputs(whole, args.scaler, args.seed)
    return make_plan(spec, load, config, args.speedup, args.seed, lead_in_s, args.duration)


def cmd_replay_scaler(args: argparse.Namespace,
                      connect: Callable[[argparse.Namespace], kubernetes.client.CoreV1Api]) -> int:
    """`connect(args)`: the cluster's API with --namespace there, asked once the options are known to be good."""
    plan = plan_from_args(args)
    core = connect(args)
    show = not args.quiet and sys.stderr.isatty()

    def progress(done: float, total: float) -> None:
        if show:
            print(f"\rreplay: {done:.0f}/{total:.0f} s of the window", end="", file=sys.stderr, flush=True)

    real, series = replay_scaler(core.api_client, plan, args.namespace, progress)
    if show:
        print(file=sys.stderr)
    sim = simulate_window(plan)
    out = {"scenario": args.scenario or args.load_trace, "scaler": args.scaler, "seed": args.seed,
           "real": real, "real_series": series, "sim": sim.metrics, "sim_series": sim.series,
           "sim_defaults": simulate_window(plan, as_replayed=False).metrics, "compare": compare(real, series, sim)}
    if emit_json(args.json, to_jsonable(out)):
        return 0
    print(f"real:{args.scaler} on {out['scenario']} (seed {args.seed}), window {real['window_s'][0]:.0f}-"
          f"{real['window_s'][1]:.0f} s at x{args.speedup:g}: real / simulated (as replayed)")
    for key, row in out["compare"].items():
        if isinstance(row, dict):
            print(f"  {key:24s} {row['real']:.4g} / {row['sim']:.4g}")
    print(f"  {'ready_curve_mard':24s} {out['compare']['ready_curve_mard']:.3g}")
    print(f"written to {args.json}")
    return 0
