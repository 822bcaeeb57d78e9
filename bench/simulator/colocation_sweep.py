"""Reclaim models and Koordinator's threshold on the `colocation` scenario: utilisation, SLA violations, evictions.

Runs `none`, `borg`, `peak` and `forecast` at their defaults and `koordinator` over a sweep of its CPU threshold
(the BE suppression threshold follows it at +5 points, as Koordinator's defaults 60/65 do), then at the default CPU
threshold over a sweep of the suppression threshold alone (suppressing below what was admitted starves BE pods:
the CPU-satisfaction evictions), each on --seeds seeds, one policy. Prints JSON (per point: the mean over seeds
of cpu_util, cpu_util_reclaimed, sla_violation_rate, ls_slowdown_p99, evictions, be_pending_p99_s, jct_p99_s, and
the gain in utilisation over `none`) and writes a plot (utilisation, SLA violations and evictions against the
threshold; utilisation against SLA violations) to --plot.
Usage: python bench/simulator/colocation_sweep.py [--nodes 10] [--duration 1800] [--seeds 2] [--plot
  colocation_sweep.png]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from drlsched.machine import machine_info

KEYS = ("cpu_util", "cpu_util_reclaimed", "sla_violation_rate", "ls_slowdown_p99", "evictions", "be_pending_p99_s",
        "jct_p99_s", "pods_unschedulable")


def point(model: str, threshold: float | None, args: argparse.Namespace, suppress: float | None = None
          ) -> dict[str, object]:
    from drlsched.policies import make_policy
    from drlsched.reclaim import ReclaimConfig
    from drlsched.scenarios import make_scenario
    from drlsched.simulator import SimConfig, Simulator

    if suppress is None and threshold is not None:
        suppress = min(1.0, threshold + 0.05)
    cfg = SimConfig(series=False, reclaim=ReclaimConfig(model, cpu_threshold=threshold, suppress_threshold=suppress))
    runs = []
    for seed in range(args.seed, args.seed + args.seeds):
        w = make_scenario("colocation", nodes=args.nodes, duration=args.duration, seed=seed)
        runs.append(Simulator(w, make_policy(args.policy), seed, cfg).run())
    out: dict[str, object] = {"model": model, "cpu_threshold": threshold, "suppress_threshold": suppress}
    out.update({k: round(statistics.fmean(float(m[k]) for m in runs), 4) for k in KEYS})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--policy", default="k8s-default")
    ap.add_argument("--thresholds", default="0.4,0.5,0.6,0.7,0.8,0.9,0.95")
    ap.add_argument("--suppress", default="0.65,0.55,0.45,0.35", help="suppress thresholds at CPU threshold 0.6")
    ap.add_argument("--plot", default="colocation_sweep.png")
    args = ap.parse_args()
    t0 = time.perf_counter()
    points = [point(m, None, args) for m in ("none", "borg", "peak", "forecast")]
    sweep = [point("koordinator", float(x), args) for x in args.thresholds.split(",")]
    suppress = [point("koordinator", 0.6, args, float(x)) for x in args.suppress.split(",")]
    base = float(points[0]["cpu_util"])  # type: ignore[arg-type]
    for p in points + sweep + suppress:
        p["util_over_none"] = round(float(p["cpu_util"]) / base, 3) if base else None  # type: ignore[arg-type]
    _plot(args.plot, points, sweep, suppress)
    best = max(points[1:] + sweep, key=lambda p: float(p["cpu_util"]))  # type: ignore[arg-type]
    print(json.dumps({"benchmark": "colocation_sweep", "scenario": "colocation", "policy": args.policy,
                      "nodes": args.nodes, "duration_s": args.duration, "seeds": args.seeds,
                      "best_over_none": best["util_over_none"], "defaults": points, "koordinator_sweep": sweep,
                      "koordinator_suppress_sweep": suppress,
                      "plot": args.plot, "wall_s": round(time.perf_counter() - t0, 1), "machine": machine_info()},
                     indent=2))


def _plot(path: str, points: list[dict[str, object]], sweep: list[dict[str, object]],
          suppress: list[dict[str, object]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, c, b) = plt.subplots(1, 3, figsize=(15, 4))
    x = [p["cpu_threshold"] for p in sweep]
    a.plot(x, [100 * float(p["cpu_util"]) for p in sweep], "o-", label="CPU utilisation")  # type: ignore[arg-type]
    a.plot(x, [100 * float(p["sla_violation_rate"]) for p in sweep], "s-",  # type: ignore[arg-type]
           label="LS pods violating SLA")
    a.axhline(100 * float(points[0]["cpu_util"]), color="grey", linestyle=":",  # type: ignore[arg-type]
              label="CPU utilisation, --reclaim none")
    a.set_xlabel("koordinator CPU threshold (suppress = threshold + 0.05)")
    a.set_ylabel("%")
    a.legend(fontsize=7)
    xs = [p["suppress_threshold"] for p in suppress]
    c.plot(xs, [100 * float(p["cpu_util"]) for p in suppress], "o-", label="CPU utilisation (%)")  # type: ignore[arg-type]
    c.set_xlabel("koordinator suppress threshold (CPU threshold 0.6)")
    c.set_ylabel("%")
    c2 = c.twinx()
    c2.bar(xs, [float(p["evictions"]) for p in suppress], width=0.03, alpha=0.3, color="red")  # type: ignore[arg-type]
    c2.set_ylabel("evictions (bars)")
    c.legend(fontsize=7)
    for p in points + sweep:
        label = p["model"] if p["cpu_threshold"] is None else f"k{p['cpu_threshold']}"
        b.plot(100 * float(p["sla_violation_rate"]), 100 * float(p["cpu_util"]), "o")  # type: ignore[arg-type]
        b.annotate(str(label), (100 * float(p["sla_violation_rate"]), 100 * float(p["cpu_util"])),  # type: ignore[arg-type]
                   fontsize=7)
    b.axvline(5.0, color="grey", linestyle=":")
    b.set_xlabel("LS pods violating their SLA (%)")
    b.set_ylabel("CPU utilisation (%)")
    fig.suptitle("colocation: reclaim models and Koordinator's threshold")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
