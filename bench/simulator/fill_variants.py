"""The fill experiment over several openb pod-list variants: one `drlsched fill` per variant directory, then one
table per quantity across variants. Prints JSON (per variant and policy, the points at the chosen levels) and
writes OUT/variants.md.

Each variant is a directory holding one pod list and the node list (upstream's csv/ folder split by variant).
Usage: python bench/simulator/fill_variants.py --root DIR --policies k8s-default,fgd --seeds 5 --out OUT [--nodes N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from drlsched.machine import machine_info

LEVELS = (0.8, 0.9, 1.0, 1.1, 1.3)


def run_variant(directory: Path, args: argparse.Namespace) -> dict[str, object]:
    out = Path(args.out) / directory.name
    cmd = [sys.executable, "-m", "drlsched.cli", "fill", "--trace", str(directory), "--trace-format",
           "alibaba-gpu-v2023", "--policies", args.policies, "--seeds", str(args.seeds), "--out", str(out),
           "--jobs", str(args.jobs)]
    if args.nodes:
        cmd += ["--nodes", str(args.nodes)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    results = json.loads((out / "results.json").read_text())
    entry: dict[str, object] = {"meta": results["meta"], "wall_s": round(time.perf_counter() - t0, 1)}
    for policy, data in results["policies"].items():
        points = {p["demand"]: p for p in data["points"]}
        paired = {p["demand"]: p["gpu_unallocated_ratio"] for p in data.get("paired_vs_k8s-default", [])}
        entry[policy] = {str(level): {"gpu_unallocated": points[level]["gpu_unallocated"],
                                      "gpu_fragmented": points[level]["gpu_fragmented"],
                                      "pods_failed": points[level]["pods_failed"],
                                      "ratio_vs_k8s_default": paired.get(level)}
                         for level in LEVELS if level in points}
    return entry


def _cell(stat: dict[str, float]) -> str:
    return f"{stat['mean']:.0f} ± {stat['ci95']:.0f}"


def markdown(summary: dict[str, dict], policies: list[str]) -> str:
    lines = []
    for level in LEVELS:
        key = str(level)
        lines += [f"### Unallocated GPUs at {level:.0%} demand (mean ± 95% CI over seeds)", "",
                  "| variant | GPUs | " + " | ".join(policies) + " | fgd / k8s-default |",
                  "|---|---|" + "---|" * (len(policies) + 1)]
        for variant, entry in summary.items():
            cells = [_cell(entry[p][key]["gpu_unallocated"]) if key in entry[p] else "-" for p in policies]
            ratio = entry.get("fgd", {}).get(key, {}).get("ratio_vs_k8s_default")
            ratio_text = f"{ratio['mean']:.3f} ± {ratio['ci95']:.3f}" if ratio and ratio["n"] else "n/a"
            lines.append(f"| {variant} | {entry['meta']['cluster_gpus']} | " + " | ".join(cells)
                         + f" | {ratio_text} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--policies", required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    policies = args.policies.split(",")
    summary = {}
    for directory in sorted(p for p in Path(args.root).iterdir() if p.is_dir()):
        summary[directory.name] = run_variant(directory, args)
        print(f"{directory.name}: {summary[directory.name]['wall_s']} s", file=sys.stderr)
    Path(args.out, "variants.md").write_text(markdown(summary, policies))
    print(json.dumps({"benchmark": "fill_variants", "root": args.root, "policies": policies, "seeds": args.seeds,
                      "nodes": args.nodes, "results": summary, "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()
