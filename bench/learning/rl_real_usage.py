"""Issue 15 §3, held-out real usage: a policy trained on one part of the real usage series, evaluated on the rest.

The LS pods of `colocation` replay real CPU usage (`--usage-trace`, docs/simulator.md "Real usage series"); the
policy was trained on one part of the series (e.g. `drlsched train ... --usage-window 0:5d`), and the same entries
run on the held-out part (e.g. `5d:`) and, to show the generalisation gap, on the training part, evaluation seeds
0..n-1 (training draws seeds >= 1000). Entries: k8s-default without reclaim and under Koordinator's defaults, the
heuristics and the policy under the policy's own limit (`koordinator:cpu=1`). The best heuristic is picked on the
held-out part as in bench/learning/rl_targets.py without a tuned file (the highest mean CPU utilisation whose mean SLA
violation rate is within the batch preset's 5%, on these same seeds: this favours the heuristic); the target is
the batch preset's (utilisation >= 1.25x the best heuristic's, SLA violations <= 5%), held out.

Prints JSON: {"held_out_real_usage": {"measured", "target", "met"}, the tables of both parts, the training cost}.
With --out DIR each part's results.json and report.md are written there and reused on a later call with the same
entries, seeds and parts (so the JSON can be printed again without rerunning). Usage:
python bench/learning/rl_real_usage.py --policy runs/p/policy.pt --usage-trace machine_usage.csv --train-window 0:5d
    --held-out-window 5d: [--train-series A:B --held-out-series C:D] [--seeds 10] [--jobs 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from _targets import SLA_BOUND, UTIL_TARGET, diff, paired, train_cost

from drlsched.errors import UserError
from drlsched.machine import machine_info
from drlsched.rl.colocation import compare, parse_entry, table
from drlsched.source import WorkloadSource
from drlsched.usage_trace import load_usage, parse_usage_series, parse_usage_window

HEURISTICS = ("k8s-default@none", "k8s-default@koordinator", "k8s-default@koordinator:cpu=1",
              "first-fit@koordinator:cpu=1")
KEYS = ("cpu_util", "sla_violation_rate", "evictions", "jct_p99_s", "cross_node_traffic_gb")


def part_source(args: argparse.Namespace, window: str | None, series: str | None) -> WorkloadSource:
    w = parse_usage_window(window) if window else None
    s = parse_usage_series(series) if series else None
    load_usage(args.usage_trace, args.usage_format, w, s)  # an empty part fails here, before any run
    return WorkloadSource(scenario="colocation", nodes=args.nodes, duration=args.duration, load=args.load,
                          usage_trace=args.usage_trace, usage_format=args.usage_format, usage_window=w,
                          usage_series=s)


def run_part(name: str, source: WorkloadSource, labels: list[str], seeds: list[int], args: argparse.Namespace
             ) -> dict:
    """The part's results: reused from DIR/name/results.json when it holds these entries, seeds and part."""
    out = Path(args.out) / name if args.out else None
    if out and (out / "results.json").is_file():
        old = json.loads((out / "results.json").read_text())
        usage = old["meta"].get("usage", {})
        window = source.usage_window and [w if w != float("inf") else None for w in source.usage_window]
        if (old["meta"]["entries"], old["meta"]["seeds"], usage.get("trace"), usage.get("window_s"),
                usage.get("series")) == (labels, seeds, source.usage_trace, window,
                                         source.usage_series and list(source.usage_series)):
            print(f"{name}: reusing {out / 'results.json'}", file=sys.stderr)
            return old
    results, _ = compare([parse_entry(x) for x in labels], source, seeds, args.jobs)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        (out / "report.md").write_text(f"# colocation, {name} part of {args.usage_trace}: seeds {seeds[0]}.."
                                       f"{seeds[-1]}\n\n{table(results)}\n")
    return results


def versus(results: dict, mine: str, ref: str, same_limit: str) -> dict[str, object]:
    runs, summary = results["runs"], results["policies"]
    return {"cpu_util_ratio": paired(runs, mine, ref, "cpu_util"),
            "sla_violation_rate": summary[mine]["sla_violation_rate"]["mean"],
            "best_heuristic_sla": summary[ref]["sla_violation_rate"]["mean"],
            "evictions_minus_best": diff(runs, mine, ref, "evictions"),
            "jct_p99_ratio": paired(runs, mine, ref, "jct_p99_s"),
            "cpu_util_ratio_vs_k8s_default_same_limit": paired(runs, mine, same_limit, "cpu_util")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", required=True, metavar="PATH", help="PPO policy.pt trained on the training part")
    ap.add_argument("--usage-trace", required=True, metavar="PATH")
    ap.add_argument("--usage-format")
    ap.add_argument("--train-window", help="the training part's --usage-window (e.g. 0:5d)")
    ap.add_argument("--train-series", help="the training part's --usage-series (e.g. 0:0.5)")
    ap.add_argument("--held-out-window", help="the held-out part's --usage-window (e.g. 5d:)")
    ap.add_argument("--held-out-series", help="the held-out part's --usage-series (e.g. 0.5:1)")
    ap.add_argument("--ppo-reclaim", default="koordinator:cpu=1", help="the policy's reclaim configuration")
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--load", type=float, default=2.0)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", metavar="DIR", help="write (and reuse) each part's results.json and report.md here")
    args = ap.parse_args()
    try:
        if not (args.train_window or args.train_series) or not (args.held_out_window or args.held_out_series):
            raise UserError("give the training part and the held-out part (--train-window/--train-series and "
                            "--held-out-window/--held-out-series)")
        parts = {"held_out": part_source(args, args.held_out_window, args.held_out_series),
                 "training_part": part_source(args, args.train_window, args.train_series)}
        mine = f"ppo:{args.policy}@{args.ppo_reclaim}"
        same_limit = f"k8s-default@{args.ppo_reclaim}"
        labels = list(dict.fromkeys([*HEURISTICS, same_limit, mine]))
        seeds = list(range(args.seeds))
        results = {name: run_part(name, source, labels, seeds, args) for name, source in parts.items()}
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    heuristics = [x for x in labels if x != mine]
    held = results["held_out"]["policies"]
    ok = [h for h in heuristics if held[h]["sla_violation_rate"]["mean"] <= SLA_BOUND["batch"]] or heuristics
    best = max(ok, key=lambda h: held[h]["cpu_util"]["mean"])
    measured = {name: versus(r, mine, best, same_limit) for name, r in results.items()}
    util = measured["held_out"]["cpu_util_ratio"]
    gap = {f"{key}_held_out_minus_training_part": measured["held_out"][key]["mean"]  # type: ignore[index]
           - measured["training_part"][key]["mean"]  # type: ignore[index]
           for key in ("cpu_util_ratio", "cpu_util_ratio_vs_k8s_default_same_limit")}
    sla = measured["held_out"]["sla_violation_rate"]
    report = {
        "held_out_real_usage": {
            "measured": {**measured, "best_heuristic": best, **gap},
            "target": f"held-out part: CPU utilisation >= {UTIL_TARGET['batch']}x the best heuristic's with SLA "
                      f"violations <= {SLA_BOUND['batch']:.0%} (the batch preset's target of issue 15 §3)",
            "met": util["mean"] >= UTIL_TARGET["batch"] and sla <= SLA_BOUND["batch"]},
        "parts": {"held_out": {"window": args.held_out_window, "series": args.held_out_series},
                  "training_part": {"window": args.train_window, "series": args.train_series},
                  "usage_trace": args.usage_trace},
        "cluster": {"scenario": "colocation", "nodes": args.nodes, "duration": args.duration, "load": args.load},
        "seeds": seeds, "training": train_cost(args.policy), "machine": machine_info(),
        "wall_s": {name: r["meta"]["wall_s"] for name, r in results.items()},
        "table": {name: {p: {k: r["policies"][p][k] for k in KEYS} for p in labels} for name, r in results.items()},
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
