"""The learned GPU packer against FGD on openb pod lists it never saw (issue 26's held-out target), paper mode.

For each `openb_pod_list_*.csv` in --lists other than `default` (the training list is never counted): the list
with the node lists beside it (in --lists, else --node-lists; `openb_node_list_gpu_node.csv`, the paper's
cluster, when present, as `drlsched fill --protocol paper` picks it), `fill` in paper mode (draws with
replacement to 130% of the GPUs, docs/fill.md) for the packer and `fgd` on the same seeds, and the unallocated GPU %
at arrived workload 95/100/130% (`drlsched.fill.paper_value`). Per list and level: the paired ratio packer / fgd
per seed and its mean over seeds. Per level, the issue's criteria: the packer leaves fewer unallocated GPUs than
FGD (mean paired ratio < 1) on >= 18 of 23 lists (scaled to the lists present), >= 5% fewer on average (mean over
lists of the paired ratio <= 0.95), and never > 2% worse on any list (every list's ratio <= 1.02).
Prints JSON. Usage: python bench/learning/packer_heldout.py --lists DIR --policy PATH [--seeds 10] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from drlsched.cli import build_parser
from drlsched.cli_common import workload_source
from drlsched.cli_fill import paper_nodes
from drlsched.errors import UserError
from drlsched.evaluate import mean_ci
from drlsched.fill import FillRun, check_inputs, paper_value, run_all
from drlsched.machine import machine_info
from drlsched.policies import make_policy
from drlsched.traces.openb_v2023 import NAME as OPENB
from drlsched.workload import NodeSpec, PodSpec

LEVELS = (95, 100, 130)
NODE_LISTS = ("openb_node_list_all_node.csv", "openb_node_list_gpu_node.csv")
TRAINING_LIST = "openb_pod_list_default.csv"
ISSUE_LISTS, ISSUE_WINS = 23, 18  # fewer unallocated than FGD on >= 18 of the 23 held-out lists
MEAN_RATIO, WORST_RATIO = 0.95, 1.02


def held_out_lists(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise UserError(f"--lists {directory} is not a directory")
    lists = sorted(p for p in directory.glob("openb_pod_list_*.csv") if p.name != TRAINING_LIST)
    if not lists:
        raise UserError(f"no held-out openb pod lists (openb_pod_list_*.csv other than default) in {directory}")
    return lists


def population(pod_list: Path, node_dir: Path, seed: int) -> tuple[list[NodeSpec], list[PodSpec]]:
    """The list's pods and the cluster paper mode runs it on (the directory holds one pod list at a time)."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp)
        (trace / pod_list.name).symlink_to(pod_list.resolve())
        for name in NODE_LISTS:
            if (node_dir / name).is_file():
                (trace / name).symlink_to((node_dir / name).resolve())
        args = build_parser().parse_args(["fill", "--trace", str(trace), "--trace-format", OPENB, "--protocol",
                                          "paper", "--policies", "fgd", "--out", "unused"])
        workload = workload_source(args)(seed)
        workload.validate_nodes()
        pods = list(workload.iter_pods())
        nodes = paper_nodes(args)
    if nodes is not None:
        workload.nodes[:] = nodes
    check_inputs(workload.nodes, pods, 1.3)
    return workload.nodes, pods


def compare(pod_list: Path, node_dir: Path, packer: str, seeds: list[int], jobs: int) -> dict[str, object]:
    nodes, pods = population(pod_list, node_dir, seeds[0])
    specs = [FillRun(p, s, nodes, pods, 1.3, "paper") for s in seeds for p in (packer, "fgd")]
    curves = dict(zip(((r.policy, r.seed) for r in specs), run_all(specs, jobs), strict=True))
    out: dict[str, object] = {"list": pod_list.name, "nodes": len(nodes), "pods": len(pods)}
    for level in LEVELS:
        rows = []
        for s in seeds:
            mine, fgd = paper_value(curves[(packer, s)], level), paper_value(curves[("fgd", s)], level)
            ratio = None  # n/a: a level the run jumped past, or FGD left nothing and the packer something
            if mine is not None and fgd is not None:
                ratio = mine / fgd if fgd > 0 else (1.0 if mine == 0 else None)  # both full: equal
            rows.append({"seed": s, "packer_pct": mine, "fgd_pct": fgd, "ratio": ratio})
        ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
        out[str(level)] = {"per_seed": rows, "paired_ratio": mean_ci(ratios) if ratios else None}
    return out


def criteria(per_list: list[dict[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    n = len(per_list)
    needed = math.ceil(ISSUE_WINS * n / ISSUE_LISTS)
    for level in LEVELS:
        ratios = {str(e["list"]): e[str(level)]["paired_ratio"]["mean"]  # type: ignore[index]
                  for e in per_list if e[str(level)]["paired_ratio"] is not None}  # type: ignore[index]
        values = np.array(list(ratios.values()))
        wins = int(np.count_nonzero(values < 1.0))
        mean = float(values.mean()) if values.size else None
        worst = max(ratios, key=ratios.__getitem__) if ratios else None
        met = bool(values.size and wins >= needed and mean is not None and mean <= MEAN_RATIO
                   and values.max() <= WORST_RATIO)
        out[str(level)] = {"lists_compared": int(values.size), "lists_fewer_than_fgd": wins, "wins_needed": needed,
                           "mean_paired_ratio": mean, "worst_list": worst,
                           "worst_ratio": ratios[worst] if worst else None, "met": met}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lists", type=Path, required=True, metavar="DIR", help="held-out openb pod lists")
    ap.add_argument("--node-lists", type=Path, metavar="DIR",
                    help="where the openb node lists are when --lists lacks them")
    ap.add_argument("--policy", required=True, metavar="PATH", help="the packer's policy.pt (or packer:PATH)")
    ap.add_argument("--seeds", type=int, default=10, help="paired seeds per list (default 10)")
    ap.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel fills (default 2)")
    args = ap.parse_args(argv)
    try:
        if args.seeds < 1 or args.jobs < 1:
            raise UserError("--seeds and --jobs must be at least 1")
        lists = held_out_lists(args.lists)
        packer = args.policy if args.policy.startswith("packer:") else f"packer:{args.policy}"
        make_policy(packer)  # a bad checkpoint is one line now, not after the first list
        node_dir = args.lists if any((args.lists / n).is_file() for n in NODE_LISTS) else args.node_lists
        if node_dir is None:
            raise UserError(f"no openb node list in {args.lists}: pass --node-lists DIR")
        seeds = list(range(args.seed, args.seed + args.seeds))
        t0 = time.perf_counter()
        per_list = [compare(p, node_dir, packer, seeds, args.jobs) for p in lists]
    except UserError as err:
        print(f"packer_heldout: {err}", file=sys.stderr)
        return 2
    print(json.dumps({"bench": "packer_heldout", "policy": packer, "lists": [p.name for p in lists],
                      "complete": len(lists) == ISSUE_LISTS, "seeds": seeds, "protocol": "paper", "levels": LEVELS,
                      "criteria": criteria(per_list), "per_list": per_list,
                      "wall_s": round(time.perf_counter() - t0, 1), "machine": machine_info()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
