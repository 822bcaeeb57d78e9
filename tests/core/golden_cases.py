"""The golden matrix of issue 22: scenarios × baselines × reclaim models, with and without link sharing, real usage
series and rebalancing, whose metrics dicts must stay identical when the simulator's internals change.

`python tests/core/golden_cases.py --write` regenerates the fixture (only from code whose results are the
reference); `--full` runs the medium matrix and prints one digest per case as JSON, to compare two checkouts
(PYTHONPATH=.../src of each)."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from drlsched.policies import make_policy
from drlsched.policies.base import Migration
from drlsched.reclaim import RECLAIM_MODELS, ReclaimConfig
from drlsched.scenarios import SCENARIOS, make_scenario
from drlsched.simulator import SimConfig, Simulator
from drlsched.usage_trace import load_usage
from drlsched.workload import PodSpec, QoS

FIXTURE = Path(__file__).parent / "fixtures" / "golden_metrics.json"
USAGE = Path(__file__).parent / "fixtures" / "usage" / "container_usage.csv"
VOLATILE = ("wall_s", "placements_per_s")  # wall-clock measurements, not results
BE_SCENARIOS = ("batch", "spark-tpcds", "ml-gpu", "mixed", "colocation")
LS_SCENARIOS = ("ecommerce", "mixed", "colocation")
# Eviction thresholds that fire on small clusters (the defaults rarely do there).
EAGER = {"evict_mem_threshold": 0.3, "evict_cpu_satisfaction": 0.99, "evict_cpu_window_s": 15.0}
FEW = ("k8s-default", "most-allocated", "fgd", "random", "data-local")


def _migrating(name: str, specs: dict[str, PodSpec]) -> Any:
    """A baseline that, at each rebalancing tick, moves the first running CPU-only pod (by uid) to the first other node
    where they fit (exercises migration: stop, restart, re-bind)."""
    policy = make_policy(name)

    def rebalance(cluster: Any, running: list[tuple[str, int]], now: float) -> list[Migration]:
        del now
        moves = []
        for uid, node in sorted(running)[:1]:
            spec = specs[uid]
            if spec.gpus or spec.gpu_options:
                continue
            ok = cluster.feasible(cluster.request(spec)).nonzero()[0]
            target = next((int(n) for n in ok if n != node), None)
            if target is not None:
                moves.append(Migration(uid, target))
        return moves

    policy.rebalance = rebalance
    return policy


def _recorded(pods: Any, specs: dict[str, PodSpec]) -> Iterator[PodSpec]:
    for p in pods:
        specs[p.uid] = p
        yield p


def cases(full: bool = False) -> list[dict[str, Any]]:
    """The matrix: every case is a dict of plain values (scenario, policy, reclaim, links, usage, rebalance)."""
    out: list[dict[str, Any]] = []
    policies = ("k8s-default", "k8s-default-1.32", "most-allocated", "tetris", "fgd", "trimaran", "first-fit",
                "random", "data-local") if full else FEW
    for scen in SCENARIOS:
        for pol in policies:
            out.append({"scenario": scen, "policy": pol})
        extra_pols = policies if full else ("k8s-default", "fgd")
        for pol in extra_pols:
            out.append({"scenario": scen, "policy": pol, "links": True})
            out.append({"scenario": scen, "policy": pol, "rebalance": True})
            if scen in LS_SCENARIOS:
                out.append({"scenario": scen, "policy": pol, "usage": True})
        if scen in BE_SCENARIOS:
            for model in RECLAIM_MODELS[1:]:
                for pol in policies if full else ("k8s-default", "random"):
                    out.append({"scenario": scen, "policy": pol, "reclaim": model})
                out.append({"scenario": scen, "policy": "k8s-default", "reclaim": model, "links": True,
                            "usage": scen in LS_SCENARIOS, "rebalance": True})
                out.append({"scenario": scen, "policy": "k8s-default", "reclaim": model, "evict": True})
    # Evictions under the default thresholds need a crowded cluster.
    out.append({"scenario": "batch", "policy": "k8s-default", "reclaim": "koordinator", "load": 4.0})
    return out


def key(case: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(case.items()))


def run_case(case: dict[str, Any], nodes: int, duration: float, seed: int = 1) -> dict[str, Any]:
    """The metrics dict of one case (wall-clock keys dropped) and a digest of its sampled series."""
    w = make_scenario(case["scenario"], nodes=nodes, duration=duration, seed=seed, load=case.get("load", 1.0))
    specs: dict[str, PodSpec] = {}
    w.pods = _recorded(w.pods, specs)
    if case.get("usage"):
        w.usage = load_usage(str(USAGE))
    policy = _migrating(case["policy"], specs) if case.get("rebalance") else make_policy(case["policy"])
    cfg = SimConfig(allow_unschedulable=True, rebalance_s=60.0 if case.get("rebalance") else None,
                    reclaim=ReclaimConfig(model=case.get("reclaim", "none"), **(EAGER if case.get("evict") else {})),
                    **({"nic_gbps": 1.0, "rack_oversubscription": 4.0} if case.get("links") else {}))
    sim = Simulator(w, policy, seed, cfg)
    metrics = sim.run()
    out = {k: v for k, v in metrics.items() if k not in VOLATILE}
    out["series_sha"] = hashlib.sha256(repr(sim.series).encode()).hexdigest()[:16]
    out["has_be"] = any(s.qos == QoS.BE for s in specs.values())
    return json.loads(json.dumps(out))


SMALL = {"nodes": 6, "duration": 60.0}
MEDIUM = {"nodes": 20, "duration": 600.0}
MEDIUM_DURATION = {"colocation": 300.0}  # 18k pods in 600 s: the slowest by far


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Cases and keys that differ between two runs of the matrix, with the largest relative float difference."""
    differ: dict[str, dict[str, Any]] = {}
    worst = 0.0
    for case in sorted(set(a) | set(b)):
        x, y = a.get(case, {}), b.get(case, {})
        for k in sorted(set(x) | set(y)):
            if x.get(k) != y.get(k):
                differ.setdefault(case, {})[k] = [x.get(k), y.get(k)]
                if isinstance(x.get(k), float) and isinstance(y.get(k), float):
                    worst = max(worst, abs(x[k] - y[k]) / max(abs(x[k]), abs(y[k]), 1e-300))
    return {"cases": len(set(a) | set(b)), "cases_differing": len(differ), "max_rel_float_diff": worst,
            "differ": differ}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--write", action="store_true", help="regenerate the small fixture")
    p.add_argument("--full", action="store_true", help="the medium full matrix, digests on stdout")
    p.add_argument("--compare", nargs=2, metavar="JSON", help="two --full outputs: cases that differ, and how much")
    args = p.parse_args()
    if args.compare:
        print(json.dumps(compare(*(json.loads(Path(f).read_text()) for f in args.compare)), indent=1))
    if args.write:
        data = {key(c): run_case(c, **SMALL) for c in cases()}
        FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{len(data)} cases written to {FIXTURE}")
    elif args.full:
        out = {}
        for i, c in enumerate(cases(full=True)):
            size = {**MEDIUM, "duration": MEDIUM_DURATION.get(c["scenario"], MEDIUM["duration"])}
            out[key(c)] = run_case(c, **size)
            print(f"{i} {key(c)}", file=sys.stderr, flush=True)
        json.dump(out, sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
