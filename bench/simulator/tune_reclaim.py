"""Tuned heuristics on `colocation` (as Decima compared against tuned heuristics): placement heuristic × reclaim
model × (CPU threshold, suppress threshold), on VALIDATION seeds only, and the best setting per reward preset.

Seeds: 900, 901, ... (--seeds of them). Evaluation seeds are 0..n-1 and training seeds ≥ 1000
(drlsched.rl.env.TRAIN_SEED_BASE), so the tuned settings never see a held-out workload. Every point runs on the
same seeds (paired).

Search: stage 1 runs every policy (drlsched.policies.BASELINES, or --policies) with every model at the model's
default thresholds; stage 2 runs the grid --cpu × --suppress for each model with the --screen best policies of
stage 1 for that model (ranked by mean cpu_util among points with sla_violation_rate ≤ 5%, then by violations);
--screen 0 runs the grid for every policy (the full product). `k8s-default` with `--reclaim none` is the reference.
Choice per preset, over all points: `ecommerce` = the highest mean cpu_util with mean sla_violation_rate ≤ 2%,
`batch` = the highest mean cpu_util with mean sla_violation_rate ≤ 5% (null if no point meets the bound).

Prints JSON and writes it to --out (docs/simulator.md, "Tuned heuristics", gives the schema):
  {"presets": {"ecommerce": {"policy", "reclaim", "cpu_threshold", "suppress_threshold", "cpu_util",
               "sla_violation_rate", "cpu_util_ci95", "sla_violation_rate_ci95", "evictions", "be_pending_p99_s"},
               "batch": {...}},
   "points": [{"policy", "reclaim", "cpu_threshold", "suppress_threshold", "stage",
               "metrics": {key: {"mean", "ci95", "n"}}}], "reference": {...}, "settings": {...}, "machine": {...}}
Usage: python bench/simulator/tune_reclaim.py [--nodes 10] [--duration 1800] [--seeds 3] [--jobs 2] [--out tuned.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from multiprocessing.pool import Pool
from pathlib import Path

from drlsched.machine import machine_info

MODELS = ("koordinator", "borg", "peak", "forecast")
KEYS = ("cpu_util", "sla_violation_rate", "evictions", "be_pending_p99_s", "cpu_util_reclaimed", "ls_slowdown_p99",
        "jct_p99_s")
PRESET_SLA = {"ecommerce": 0.02, "batch": 0.05}
VALIDATION_SEED = 900

Setting = tuple[str, str, float | None, float | None]  # policy, model, cpu threshold, suppress threshold


def _run(job: tuple[Setting, int, argparse.Namespace]) -> dict[str, float]:
    from drlsched.policies import make_policy
    from drlsched.reclaim import ReclaimConfig
    from drlsched.scenarios import make_scenario
    from drlsched.simulator import SimConfig, Simulator

    (policy, model, cpu, suppress), seed, args = job
    rc = ReclaimConfig(model, cpu_threshold=cpu, suppress_threshold=suppress, ls_slowdown_target=args.ls_target)
    w = make_scenario("colocation", nodes=args.nodes, duration=args.duration, load=args.load, seed=seed)
    m = Simulator(w, make_policy(policy), seed, SimConfig(series=False, reclaim=rc)).run()
    return {k: float(m[k]) for k in KEYS}  # type: ignore[arg-type]


def _evaluate(settings: list[Setting], stage: str, args: argparse.Namespace, pool: Pool | None
              ) -> list[dict[str, object]]:
    """Every setting on every validation seed; mean ± 95% CI per metric."""
    from drlsched.evaluate import mean_ci
    from drlsched.reclaim import ReclaimConfig

    seeds = range(VALIDATION_SEED, VALIDATION_SEED + args.seeds)
    jobs = [(s, seed, args) for s in settings for seed in seeds]
    print(f"{stage}: {len(jobs)} runs", file=sys.stderr, flush=True)
    runs = pool.map(_run, jobs, chunksize=1) if pool else [_run(j) for j in jobs]
    points = []
    for i, (policy, model, cpu, suppress) in enumerate(settings):
        mine = runs[i * args.seeds:(i + 1) * args.seeds]
        rc = ReclaimConfig(model, cpu_threshold=cpu, suppress_threshold=suppress)
        points.append({"policy": policy, "reclaim": model, "cpu_threshold": rc.cpu, "suppress_threshold": rc.suppress,
                       "stage": stage, "metrics": {k: _rounded(mean_ci([r[k] for r in mine])) for k in KEYS}})
    return points


def _rounded(ci: dict[str, float]) -> dict[str, float]:
    return {"mean": round(ci["mean"], 5), "ci95": round(ci["ci95"], 5), "n": ci["n"]}


def _mean(p: dict[str, object], key: str) -> float:
    return float(p["metrics"][key]["mean"])  # type: ignore[index]


def best(points: list[dict[str, object]], sla: float) -> dict[str, object] | None:
    """The point with the highest mean cpu_util whose mean sla_violation_rate is at most `sla` (ties: fewer
    violations, then fewer evictions)."""
    ok = [p for p in points if _mean(p, "sla_violation_rate") <= sla]
    if not ok:
        return None
    p = max(ok, key=lambda p: (_mean(p, "cpu_util"), -_mean(p, "sla_violation_rate"), -_mean(p, "evictions")))
    out = {k: p[k] for k in ("policy", "reclaim", "cpu_threshold", "suppress_threshold")}
    for k in ("cpu_util", "sla_violation_rate"):
        out[k] = _mean(p, k)
        out[f"{k}_ci95"] = float(p["metrics"][k]["ci95"])  # type: ignore[index]
    out["evictions"] = _mean(p, "evictions")
    out["be_pending_p99_s"] = _mean(p, "be_pending_p99_s")
    return out


def _screened(stage1: list[dict[str, object]], model: str, k: int) -> list[str]:
    mine = [p for p in stage1 if p["reclaim"] == model]
    mine.sort(key=lambda p: (_mean(p, "sla_violation_rate") > PRESET_SLA["batch"], -_mean(p, "cpu_util"),
                             _mean(p, "sla_violation_rate")))
    return [str(p["policy"]) for p in mine[:k]]


def main() -> None:
    from drlsched.policies import BASELINES

    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--seeds", type=int, default=3, help="validation seeds 900, 901, ...")
    ap.add_argument("--policies", default=",".join(BASELINES))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--cpu", default="0.6,0.8,1.0", help="CPU thresholds of the grid")
    ap.add_argument("--suppress", default="0.65,0.75,1.0", help="suppress thresholds of the grid")
    ap.add_argument("--screen", type=int, default=2, help="policies per model in the grid (0: all)")
    ap.add_argument("--ls-target", type=float, default=4.0, help="LS slowdown target (ReclaimConfig)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("tuned.json"))
    args = ap.parse_args()
    if not 1 <= args.seeds <= 99:
        ap.error("--seeds must be between 1 and 99 (validation seeds 900..998)")
    policies, models = args.policies.split(","), args.models.split(",")
    cpus, sups = [float(x) for x in args.cpu.split(",")], [float(x) for x in args.suppress.split(",")]
    t0 = time.perf_counter()
    pool = Pool(args.jobs) if args.jobs > 1 else None
    try:
        reference = _evaluate([("k8s-default", "none", None, None)], "reference", args, pool)[0]
        stage1 = _evaluate([(p, m, None, None) for m in models for p in policies], "defaults", args, pool)
        grid: list[Setting] = []
        for m in models:
            for p in (policies if args.screen <= 0 else _screened(stage1, m, args.screen)):
                grid += [(p, m, c, s) for c in cpus for s in sups]
        stage2 = _evaluate(grid, "grid", args, pool)
    finally:
        if pool:
            pool.close()
            pool.join()
    points = stage1 + stage2
    result = {"benchmark": "tune_reclaim", "scenario": "colocation",
              "presets": {name: best(points, sla) for name, sla in PRESET_SLA.items()},
              "preset_sla_bounds": PRESET_SLA, "reference": reference, "points": points,
              "settings": {"nodes": args.nodes, "duration_s": args.duration, "load": args.load,
                           "seeds": list(range(VALIDATION_SEED, VALIDATION_SEED + args.seeds)),
                           "policies": policies, "models": models, "cpu_thresholds": cpus,
                           "suppress_thresholds": sups, "screen": args.screen, "ls_slowdown_target": args.ls_target,
                           "runs": len(points) * args.seeds + args.seeds},
              "wall_s": round(time.perf_counter() - t0, 1), "machine": machine_info()}
    text = json.dumps(result, indent=2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
