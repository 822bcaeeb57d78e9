"""`drlsched fill`: FGD's fill experiment over policies and paired seeds; writes results.json, report.md, plots."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from drlsched.cli_args import make_output_dir, non_negative_int, positive_int
from drlsched.cli_common import parse_policies, workload_source
from drlsched.errors import UserError
from drlsched.evaluate import default_jobs, to_jsonable
from drlsched.fill import (
    BASELINE,
    PAPER_LEVELS,
    PROTOCOLS,
    FillRun,
    check_inputs,
    demand_levels,
    gpu_milli,
    never_fit,
    paper_summary,
    run_all,
    summarise,
)
from drlsched.scenarios import SCENARIOS
from drlsched.traces import add_trace_arguments
from drlsched.traces.csvio import BadRows
from drlsched.traces.openb_v2023 import NAME as OPENB
from drlsched.traces.openb_v2023 import PAPER_NODES, read_node_list
from drlsched.workload import NodeSpec

MAX_SEEDS = 1000
# (point key, title, scale, format) of the report's tables
TABLES = (("gpu_unallocated", "Unallocated GPUs", 1.0, "{:.0f}"),
          ("gpu_fragmented", "Fragmented GPUs (FGD's measure)", 1.0, "{:.0f}"),
          ("pods_failed", "Pods that did not fit", 1.0, "{:.0f}"),
          ("gpu_fragmentation", "Fragmented share of idle GPUs, % (misleading across policies)", 100.0, "{:.1f}"))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("fill", help="FGD's fill experiment: GPUs left unallocated as seeded random pods fill the "
                                    "cluster",
                       description="Submit the workload's pods one at a time in a seeded random order (none "
                                   "leaves) under each policy; record unallocated and fragmented GPUs against the "
                                   "GPU demand submitted; write results.json, report.md and plots to --out.")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), metavar="NAME",
                   help=f"synthetic scenario whose pods are the population: {', '.join(SCENARIOS)}")
    add_trace_arguments(p)
    p.add_argument("--nodes", type=positive_int, help="cluster size (default: the scenario's or the trace's)")
    p.add_argument("--duration", type=float, metavar="SECONDS",
                   help="arrival window that generates (scenario) or selects (trace) the population")
    p.add_argument("--policies", required=True, metavar="A,B,C", help="comma-separated policy names")
    p.add_argument("--seeds", type=positive_int, default=5, help="number of submission orders (default 5)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="first seed (default 0)")
    p.add_argument("--max-demand", type=float, default=1.3, metavar="D",
                   help="stop when the GPUs requested reach D x the cluster's GPUs (default 1.3)")
    p.add_argument("--protocol", default="default", metavar="NAME",
                   help="default: a permutation of the population, then draws with replacement to --max-demand; "
                        "paper: the FGD paper's (population plus draws to --max-demand, all shuffled; the table "
                        "and plot by arrived workload, median and 25-75%% band; on an openb directory holding "
                        "openb_node_list_gpu_node.csv its 1,213 GPU nodes are the cluster)")
    p.add_argument("--score-all-nodes", action="store_true",
                   help="k8s-default scores every feasible node (percentageOfNodesToScore 100) instead of "
                        "kube-scheduler's adaptive sample (50 - nodes/125 %%, at least 100 nodes)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--jobs", type=positive_int, default=default_jobs(), help="parallel worker processes (default: "
                                                                              "up to 2)")
    p.set_defaults(func=cmd_fill, load=1.0, usage_trace=None, usage_format=None, usage_window=None,
                   usage_series=None)  # no usage: nothing runs


def cmd_fill(args: argparse.Namespace) -> int:
    policies = parse_policies(args.policies)
    if args.seeds > MAX_SEEDS:
        raise UserError(f"--seeds must be at most {MAX_SEEDS}, got {args.seeds}")
    if args.protocol not in PROTOCOLS:
        raise UserError(f"unknown --protocol {args.protocol!r}; known: {', '.join(PROTOCOLS)}")
    workload = workload_source(args)(args.seed)
    workload.validate_nodes()
    pods = list(workload.iter_pods())
    nodes = paper_nodes(args) if args.protocol == "paper" else None
    if nodes is not None:
        workload.nodes[:] = nodes
    check_inputs(workload.nodes, pods, args.max_demand)
    out = make_output_dir(args.out)
    seeds = [args.seed + i for i in range(args.seeds)]
    specs = [FillRun(p, s, workload.nodes, pods, args.max_demand, args.protocol, args.score_all_nodes)
             for s in seeds for p in policies]
    t0 = time.perf_counter()
    curves = run_all(specs, args.jobs)
    wall = time.perf_counter() - t0
    runs = {(spec.policy, spec.seed): curve for spec, curve in zip(specs, curves, strict=True)}
    summary = summarise(runs, policies, args.max_demand)
    for policy in policies:
        mine = [c for (p, _), c in runs.items() if p == policy]
        summary[policy]["wall_s"] = float(np.mean([float(c["wall_s"]) for c in mine]))
        summary[policy]["placements_per_s"] = float(np.mean([float(c["placed"]) / max(float(c["wall_s"]), 1e-9)
                                                             for c in mine]))
    total_gpus = sum(n.gpus for n in workload.nodes)
    meta = {"workload": workload.name, "nodes": len(workload.nodes), "cluster_gpus": total_gpus,
            "population_pods": len(pods),
            "population_gpu_demand": sum(gpu_milli(p) for p in pods) / 1000 / total_gpus,
            "population_pods_fitting_no_node": never_fit(workload.nodes, pods),
            "policies": policies, "seeds": len(seeds), "seed_list": seeds, "max_demand": args.max_demand,
            "demand_levels": demand_levels(args.max_demand), "wall_s": wall, "protocol": args.protocol,
            "node_list": "openb_node_list_gpu_node.csv" if nodes is not None else None,
            "k8s_default_nodes_scored": "all" if args.score_all_nodes else "adaptive sample"}
    results: dict[str, object] = {"meta": meta, "policies": summary}
    paper = paper_summary(runs, policies) if args.protocol == "paper" else None
    if paper is not None:
        results["paper"] = paper
    try:
        (out / "results.json").write_text(json.dumps(to_jsonable(results), indent=2) + "\n")
        plots = write_plots(out, summary, policies)
        if paper is not None:
            plots.append(write_paper_plot(out, paper, policies))
        report = write_report(out, summary, policies, meta, plots, paper)
    except OSError as err:
        raise UserError(f"cannot write to {out}: {err.strerror}") from None
    print(paper_table(paper, policies) if paper is not None else
          table(summary, policies, "gpu_unallocated", 1.0, "{:.0f}"))
    print(f"\n{len(specs)} fills in {wall:.1f} s; results: {out / 'results.json'}, report: {report}")
    return 0


def _cell(stat: dict[str, float], scale: float, fmt: str) -> str:
    text = fmt.format(stat["mean"] * scale)
    return text + (" ± " + fmt.format(stat["ci95"] * scale) if stat["n"] > 1 else "")


def table(summary: dict[str, dict], policies: list[str], key: str, scale: float, fmt: str) -> str:
    levels = [p["demand"] for p in summary[policies[0]]["points"]]
    rows = ["| Policy | " + " | ".join(f"{d:.0%}" for d in levels) + " |", "|---|" + "---|" * len(levels)]
    for policy in policies:
        cells = [_cell(p[key], scale, fmt) for p in summary[policy]["points"]]
        rows.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _paired_table(summary: dict[str, dict], policies: list[str]) -> str:
    others = [p for p in policies if f"paired_vs_{BASELINE}" in summary[p]]
    if not others:
        return ""
    levels = [p["demand"] for p in summary[others[0]][f"paired_vs_{BASELINE}"]]
    rows = ["| Policy | " + " | ".join(f"{d:.0%}" for d in levels) + " |", "|---|" + "---|" * len(levels)]
    for policy in others:
        cells = [f"{e['gpu_unallocated_ratio']['mean']:.3f} ± {e['gpu_unallocated_ratio']['ci95']:.3f}"
                 if e["gpu_unallocated_ratio"]["n"] else "n/a" for e in summary[policy][f"paired_vs_{BASELINE}"]]
        rows.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def paper_nodes(args: argparse.Namespace) -> list[NodeSpec] | None:
    """The FGD paper's cluster when the trace is an openb directory holding its GPU node list (and --nodes does not
    ask for another size), else None (the workload's own nodes)."""
    if args.trace is None or args.trace_format != OPENB or args.nodes is not None:
        return None
    path = Path(args.trace) / PAPER_NODES
    if not path.is_file():
        return None
    return read_node_list(path, BadRows(skip=args.skip_bad_rows))


def paper_table(paper: dict[str, dict], policies: list[str]) -> str:
    """Unallocated GPU % by arrived workload: median [25-75%] over the seeds, the paper's table."""
    rows = ["| Policy | " + " | ".join(f"{level}%" for level in PAPER_LEVELS) + " |",
            "|---|" + "---|" * len(PAPER_LEVELS)]
    for policy in policies:
        cells = []
        for entry in paper[policy]["table"]:
            q = entry["gpu_unallocated_pct"]
            cells.append(f"{q['median']:.2f} [{q['q25']:.2f}–{q['q75']:.2f}]" if q["n"] else "n/a")
        rows.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def write_paper_plot(out: Path, paper: dict[str, dict], policies: list[str]) -> str:
    """The paper's figure: unallocated GPU % against the arrived workload, median and 25-75% band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for policy in policies:
        pts = [(e["arrived"], e["gpu_unallocated_pct"]) for e in paper[policy]["curve"]
               if e["gpu_unallocated_pct"]["n"]]
        x = np.array([a for a, _ in pts])
        ax.plot(x, [q["median"] for _, q in pts], label=policy, linewidth=1)
        ax.fill_between(x, [q["q25"] for _, q in pts], [q["q75"] for _, q in pts], alpha=0.2)
    ax.set_xlabel("Arrived workload (% of cluster GPU capacity)")
    ax.set_ylabel("Unallocated GPU (%)")
    ax.set_title("Unallocated GPUs (median, 25-75% band over seeds)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    name = "paper_unallocated_gpu_pct.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def write_report(out: Path, summary: dict[str, dict], policies: list[str], meta: dict[str, object],
                 plots: list[str], paper: dict[str, dict] | None = None) -> Path:
    lines = [f"# drlsched fill: {meta['workload']}", "",
             f"{meta['nodes']} nodes, {meta['cluster_gpus']} GPUs; population of {meta['population_pods']} pods "
             f"requesting {meta['population_gpu_demand']:.1%} of the GPUs "
             f"({meta['population_pods_fitting_no_node']} of them fit no node even empty). {meta['seeds']} seeded "
             "submission "
             f"orders ({', '.join(map(str, meta['seed_list']))}), the same for every policy; no pod leaves. "
             "Columns: GPU demand submitted so far (GPUs requested / cluster GPUs). Values: mean ± half-width of "
             "the 95% confidence interval over the seeds (Student t). Definitions: docs/fill.md.", ""]
    if paper is not None:
        lines += ["## Unallocated GPU % by arrived workload (the FGD paper's protocol and table)", "",
                  "Median [25–75%] over the seeds; arrived = GPU milli submitted / cluster's; a level's value is "
                  "100 − the mean allocated % over the pods whose arrived % rounds to it.", "",
                  paper_table(paper, policies), ""]
    for key, title, scale, fmt in TABLES:
        lines += [f"## {title}", "", table(summary, policies, key, scale, fmt), ""]
    paired = _paired_table(summary, policies)
    if paired:
        lines += [f"## Unallocated GPUs, paired ratio to `{BASELINE}` (same seed; mean ± 95% CI)", "", paired, ""]
    lines += ["| Policy | wall per fill (s) | placements/s |", "|---|---|---|"]
    lines += [f"| {p} | {summary[p]['wall_s']:.1f} | {summary[p]['placements_per_s']:.0f} |" for p in policies]
    lines += [""] + [f"![{name}]({name})" for name in plots]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_plots(out: Path, summary: dict[str, dict], policies: list[str]) -> list[str]:
    """The paper's figures: unallocated and fragmented GPUs against the demand, a 95% CI band over the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for key, title, name in (("gpu_unallocated", "Unallocated GPUs", "unallocated_gpus.png"),
                             ("gpu_fragmented", "Fragmented GPUs", "fragmented_gpus.png")):
        fig, ax = plt.subplots(figsize=(7, 4))
        for policy in policies:
            curve = summary[policy]["curve"]
            x = 100 * np.array([c["demand"] for c in curve])
            mean = np.array([c[key]["mean"] for c in curve])
            half = np.array([c[key]["ci95"] for c in curve])
            ax.plot(x, mean, label=policy, linewidth=1)
            ax.fill_between(x, mean - half, mean + half, alpha=0.2)
        ax.set_xlabel("GPU demand submitted (% of cluster GPUs)")
        ax.set_ylabel("GPUs")
        ax.set_title(f"{title} (mean, 95% CI over seeds)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        names.append(name)
    return names

