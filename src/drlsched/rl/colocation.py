"""Policies each under its own reclaim configuration, on the same colocation workloads (paired seeds).

`drlsched evaluate --reclaim A,B` runs every policy under every model with one set of thresholds; the learned
scheduler's comparison needs each entry with its own: a heuristic under its best (tuned) threshold, the learned
policy under the permissive threshold that is its hard safety limit. An entry is written
`POLICY@MODEL[:cpu=X][:suppress=Y]` (e.g. `k8s-default@koordinator:cpu=0.9`, `ppo:runs/p/policy.pt@koordinator:cpu=1`);
its label is the spec itself. Any model `drlsched.reclaim` knows is accepted by name (e.g. `forecast`).

Run as `python -m drlsched.rl.colocation --entries A,B,... --out DIR` (what `scripts/demo-colocation` does;
`--usage-trace` and its part, as in `drlsched evaluate`, replay real LS usage, e.g. the held-out part of a training
run's): writes DIR/results.json (`meta` names the scenario and the cluster), report.md and the plots of `drlsched
evaluate` (utilisation-vs-SLA among them) and prints the article-shaped table: P99 JCT, CPU utilisation, SLA violations,
evictions, cross-node traffic, each mean ± 95% CI, and each entry's paired per-seed ratio to the first entry.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from drlsched.cli_args import non_negative_int, positive_float, positive_int
from drlsched.cli_common import add_usage_arguments, usage_fields
from drlsched.errors import UserError
from drlsched.evaluate import RunSpec, aggregate, default_jobs, paired_ratios, run_all, to_jsonable
from drlsched.metrics import METRIC_KEYS
from drlsched.reclaim import ReclaimConfig
from drlsched.simulator import SimConfig
from drlsched.source import WorkloadSource

# (metric key, column title, scale); the article's table plus what colocation adds.
COLUMNS = (("jct_p99_s", "P99 JCT (s)", 1.0), ("cpu_util", "CPU util (%)", 100.0),
           ("sla_violation_rate", "SLA viol. (%)", 100.0), ("evictions", "Evictions", 1.0),
           ("cross_node_traffic_gb", "Traffic (GB)", 1.0), ("anomaly_rate", "Anomaly (%)", 100.0))


@dataclass(frozen=True)
class Entry:
    label: str
    policy: str
    reclaim: ReclaimConfig


def parse_entry(spec: str) -> Entry:
    """`POLICY@MODEL[:cpu=X][:suppress=Y]` → an entry (UserError naming the spec otherwise)."""
    policy, at, rest = spec.strip().rpartition("@")
    if not at or not policy:
        raise UserError(f"entry {spec!r}: expected POLICY@MODEL[:cpu=X][:suppress=Y]")
    model, *opts = rest.split(":")
    kw: dict[str, float] = {}
    for opt in opts:
        key, eq, value = opt.partition("=")
        name = {"cpu": "cpu_threshold", "suppress": "suppress_threshold", "mem": "mem_threshold"}.get(key)
        if not eq or name is None:
            raise UserError(f"entry {spec!r}: options are cpu=X, suppress=Y, mem=Z, got {opt!r}")
        try:
            kw[name] = float(value)
        except ValueError:
            raise UserError(f"entry {spec!r}: {key} must be a number, got {value!r}") from None
    return Entry(spec.strip(), policy, ReclaimConfig(model, **kw))


def entry_spec(policy: str, model: str, cpu: float | None = None, suppress: float | None = None) -> str:
    """The spec string of an entry (inverse of `parse_entry`)."""
    spec = f"{policy}@{model}"
    if cpu is not None:
        spec += f":cpu={cpu:g}"
    if suppress is not None:
        spec += f":suppress={suppress:g}"
    return spec


def compare(entries: list[Entry], source: WorkloadSource, seeds: list[int], jobs: int = 1
            ) -> tuple[dict[str, object], list[dict[str, object]]]:
    """Every entry on every seed; returns (results: meta, per-entry mean ± CI, paired ratios to the first entry,
    per-run metrics) and the raw runs (for plots)."""
    labels = [e.label for e in entries]
    if len(set(labels)) != len(labels):
        raise UserError("the same entry is given twice")
    source(seeds[0]).validate_nodes()
    specs = [RunSpec(e.policy, s, source, SimConfig(reclaim=e.reclaim), e.label) for s in seeds for e in entries]
    t0 = time.perf_counter()
    runs = run_all(specs, jobs)
    summary = aggregate(runs, labels)
    base = labels[0]
    ratios = paired_ratios(runs, labels, base, (*METRIC_KEYS, "evictions"))  # evictions: where the baseline has any
    meta = {"scenario": source.scenario, "nodes": source.nodes, "duration": source.duration, "load": source.load,
            "seeds": seeds, "entries": labels, "baseline": base, "wall_s": time.perf_counter() - t0}
    if source.usage_trace is not None:  # the real usage series and the part of them replayed
        window = source.usage_window
        meta["usage"] = {"trace": source.usage_trace, "format": source.usage_format, "series": source.usage_series,
                         "window_s": window and [w if math.isfinite(w) else None for w in window]}  # JSON: no inf
    results = {"meta": meta, "policies": summary, f"ratio_vs_{base}": ratios,
               "runs": [r["metrics"] for r in runs]}
    return to_jsonable(results), runs  # type: ignore[return-value]


def table(results: dict[str, object]) -> str:
    """The article-shaped table: mean ± 95% CI and, below the first row, the paired ratio to the first entry."""
    meta = results["meta"]
    assert isinstance(meta, dict)
    summary = results["policies"]
    ratios = results[f"ratio_vs_{meta['baseline']}"]
    assert isinstance(summary, dict) and isinstance(ratios, dict)
    head = "| Policy | " + " | ".join(t for _, t, _ in COLUMNS) + " |"
    rows = [head, "|---|" + "---|" * len(COLUMNS)]
    for label in meta["entries"]:
        cells = []
        for key, _, scale in COLUMNS:
            stat = summary[label][key]
            if not stat["n"]:  # null in every run: an empty sample, missing rather than 0
                cells.append("n/a")
                continue
            cell = f"{stat['mean'] * scale:.3g} ± {stat['ci95'] * scale:.2g}"
            r = ratios.get(label, {}).get(key)
            if r and r["n"]:
                cell += f" (×{r['mean']:.3f} ± {r['ci95']:.3f})"
            cells.append(cell)
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from drlsched.report import write_plots

    ap = argparse.ArgumentParser(prog="python -m drlsched.rl.colocation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", required=True, help="comma-separated POLICY@MODEL[:cpu=X][:suppress=Y]")
    ap.add_argument("--scenario", default="colocation")
    ap.add_argument("--nodes", type=positive_int)
    ap.add_argument("--duration", type=positive_float)
    ap.add_argument("--load", type=positive_float, default=1.0)
    ap.add_argument("--seeds", type=positive_int, default=10, help="number of seeds (default 10)")
    ap.add_argument("--seed", type=non_negative_int, default=0,
                    help="first seed (default 0: held-out evaluation seeds)")
    ap.add_argument("--jobs", type=positive_int, default=default_jobs())
    ap.add_argument("--out", required=True, metavar="DIR")
    add_usage_arguments(ap)
    args = ap.parse_args(argv)
    try:
        entries = [parse_entry(s) for s in args.entries.split(",")]
        source = WorkloadSource(scenario=args.scenario, nodes=args.nodes, duration=args.duration, load=args.load,
                                **usage_fields(args))
        results, runs = compare(entries, source, list(range(args.seed, args.seed + args.seeds)), args.jobs)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    plots = write_plots(out, runs, [e.label for e in entries])
    text = table(results)
    (out / "report.md").write_text(f"# {args.scenario}: seeds {args.seed}..{args.seed + args.seeds - 1}\n\n"
                                   + text + "\n\n" + "\n".join(f"![{p}]({p})" for p in plots) + "\n")
    print(text)
    print(f"\nresults: {out / 'results.json'}, plots: {', '.join(str(out / p) for p in plots)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
