"""Why the packing policies have a longer P99 JCT than first-fit on `ml-gpu` at load 1 (issue 26): a per-job
decomposition of JCT into queueing (arrival → last worker bound) and run time, by pod class, and what blocks the
pods that wait.

Each (policy, seed) is one `ml-gpu` simulation as `drlsched evaluate` runs it (40 nodes, 7,200 s), with a probe
(`TailProbe`, a `Simulator` subclass that changes no decision) recording every pod's bind, start and finish, and at
every usage tick, for every pending pod, why it fits no node now:
- `fits`: some node takes it now (it waits for its backoff or the next pass);
- `cpu_mem`: some node has the GPUs it needs free (whole GPUs, or a share on one GPU, of an allowed model) but no
  such node has its CPU or memory (node-level fragmentation: GPUs stranded by CPU/memory);
- `gpus_scattered`: the allowed nodes hold enough free whole GPUs (or enough share) in all, but no node alone;
- `gpus_shared`: enough GPU share is free in all, but on GPUs that fractional pods hold part of (whole-GPU pods);
- `capacity`: not enough GPU (or, for CPU-only pods, CPU/memory) free in all.
Classes: `cpu` (no GPU), `share` (part of one GPU), `gpu1` (one whole GPU), `gpu2`/`gpu4`/`gpu8` (one pod of that
many GPUs), `dist` (a job of 2 or 4 8-GPU workers). The tail is each seed's jobs with JCT ≥ its P99.
`p99_without_wait[c]` is the P99 JCT with class c's queueing removed (its jobs' JCT = their run time): the class
whose queueing makes the tail lowers it most. Per model constraint (`by_model`) also the load its pods offer to
the GPUs they may use (GPUs × work over those GPUs × the window) and the share of them asking more than half the
CPU of their largest allowed node. `gpu_share_held` / `cpu_share_held`: each node model's GPU-time (CPU-time) in
the window held by constrained pods, pods with no constraint, and CPU-only pods. Policies may be wrapped:
`reserve+POLICY` (a proposal: pods with no model constraint avoid oversubscribed models' nodes, `ModelReserve`)
and `avoid-M1/M2+POLICY` (they avoid those models' nodes: a causal check). Validation seeds (900+) by default,
never the bench's 0–19.
Usage: python bench/simulator/mlgpu_tail.py [--policies first-fit,fgd,fgd-lookahead,packer:PATH]
       [--seeds 900,901,902,903,904] [--nodes 40] [--duration 7200] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from drlsched.cli import build_parser
from drlsched.cli_common import sim_config, workload_source
from drlsched.cluster import GPU_MILLI
from drlsched.errors import UserError
from drlsched.evaluate import mean_ci
from drlsched.fragmentation import TypicalPods
from drlsched.machine import machine_info
from drlsched.policies import make_policy
from drlsched.policies.base import Decision, Option, PodContext, Policy
from drlsched.sim.entities import Run
from drlsched.simulator import Simulator

CLASSES = ("cpu", "share", "gpu1", "gpu2", "gpu4", "gpu8", "dist")
REASONS = ("fits", "cpu_mem", "gpus_scattered", "gpus_shared", "capacity")
DEFAULT_POLICIES = "first-fit,fgd,fgd-lookahead,packer:bench/results/packer/policy.pt"


def pod_class(gpus: int, milli: int, workers: int) -> str:
    if workers > 1:
        return "dist"
    if gpus == 0:
        return "cpu"
    if gpus == 1:
        return "share" if milli < GPU_MILLI else "gpu1"
    return f"gpu{gpus}"


def model_tag(models: tuple[str, ...]) -> str:
    """A pod's GPU model constraint as one word: `any` when it has none."""
    return "+".join(models) if models else "any"


class TailProbe(Simulator):
    """The simulator plus a record of every pod and the blocking reason of every pending pod at every tick."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.pending: dict[Run, None] = {}
        self.done: list[Run] = []
        self.finish: dict[Run, float] = {}
        self.blocked: defaultdict[tuple[str, str], float] = defaultdict(float)  # pod-seconds, by class
        self.blocked_model: defaultdict[tuple[str, str], float] = defaultdict(float)  # by model constraint
        self.workers: dict[str, int] = defaultdict(int)
        self.offered: defaultdict[str, float] = defaultdict(float)  # model tag -> GPU-seconds of work arrived
        self.asked: defaultdict[str, int] = defaultdict(int)  # model tag -> GPU pods arrived
        self.big: defaultdict[str, int] = defaultdict(int)  # ... of which ask > half their largest node's CPU
        self.stranded_s = 0.0  # ∫ free whole GPUs on nodes with < 4 cores or < 12 GiB free dt, in the window
        self.free_gpu_s = 0.0  # ∫ free whole GPUs dt, in the window
        # ∫ GPU milli held dt in the window, per node model, by pods with no model constraint / with one
        self.held_s: defaultdict[tuple[str, str], float] = defaultdict(float)
        self.held_cpu_s: defaultdict[tuple[str, str], float] = defaultdict(float)  # the same for CPU (millicores)

    def _arrive(self, spec) -> None:  # type: ignore[no-untyped-def]
        self.workers[spec.job_id] += 1
        if spec.gpus:
            tag = model_tag(spec.gpu_models)
            self.offered[tag] += spec.gpus * (spec.gpu_milli or GPU_MILLI) / GPU_MILLI * float(spec.work_s or 0.0)
            self.asked[tag] += 1
            allowed = [x for x in self.workload.nodes if x.gpus and (not spec.gpu_models
                                                                     or x.gpu_model in spec.gpu_models)]
            self.big[tag] += bool(allowed) and spec.cpu_m > 0.5 * max(x.cpu_m for x in allowed)
        super()._arrive(spec)

    def _enqueue(self, run: Run, t: float) -> None:
        super()._enqueue(run, t)
        self.pending[run] = None

    def _bind(self, run, d, options, t) -> None:  # type: ignore[no-untyped-def]
        super()._bind(run, d, options, t)
        self.pending.pop(run, None)

    def _complete(self, run: Run, t: float, replan: bool = True) -> None:
        self.done.append(run)
        self.finish[run] = t
        super()._complete(run, t, replan)

    def _tick(self, t: float) -> None:
        super()._tick(t)
        c, dt = self.cluster, self.tick_s
        free_cpu, free_mem = c.cap_cpu - c.req_cpu, c.cap_mem - c.req_mem
        if t < self.workload.duration_s:  # the arrival window: the drain's idle GPUs would dilute the means
            self.free_gpu_s += float(c.full_free_gpus.sum()) * dt
            self.stranded_s += float(c.full_free_gpus[(free_cpu < 4000) | (free_mem < 12000)].sum()) * dt
            for run in self.slots.runs:
                r = run.req
                if r is None:
                    continue
                who = "constrained" if run.spec.gpu_models else ("any" if r.gpus else "cpu_only")
                key = (self.workload.nodes[run.node].gpu_model or "", who)
                self.held_s[key] += r.gpus * r.gpu_milli / GPU_MILLI * dt
                self.held_cpu_s[key] += r.cpu * dt
        for run in self.pending:
            cls = pod_class(run.spec.gpus, run.spec.gpu_milli, self.workers[run.spec.job_id])
            reason = self._reason(run, free_cpu, free_mem)
            self.blocked[(cls, reason)] += dt
            self.blocked_model[(model_tag(run.spec.gpu_models), reason)] += dt

    def _reason(self, run: Run, free_cpu: np.ndarray, free_mem: np.ndarray) -> str:
        c, r = self.cluster, run.req
        if r is None or c.feasible(r).any():
            return "fits"
        if not r.gpus:  # enough CPU and memory free in all, on no one node: fragmented; else not enough
            enough = int(free_cpu.sum()) >= r.cpu and int(free_mem.sum()) >= r.mem
            return "cpu_mem" if enough else "capacity"
        allowed = np.ones(c.size, dtype=bool) if not r.model_mask else (c.node_model_bit & r.model_mask) != 0
        whole = r.gpu_milli >= GPU_MILLI
        gpu_ok = allowed & ((c.full_free_gpus >= r.gpus) if whole else (c.max_gpu_free >= r.gpu_milli))
        if gpu_ok.any():
            return "cpu_mem"
        if whole and int(c.full_free_gpus[allowed].sum()) >= r.gpus:
            return "gpus_scattered"
        share_free = int(c.gpu_free[allowed].sum())
        if share_free >= r.gpus * r.gpu_milli:
            return "gpus_shared" if whole else "gpus_scattered"
        return "capacity"


class ModelReserve(Policy):
    """A proposal, measured here only (`reserve+POLICY`): a pod without a GPU model constraint avoids the nodes
    of an oversubscribed model unless nothing else fits. A model is oversubscribed when the GPU demand of the pods
    constrained to it (a set's demand split over its models by capacity), as a share of all GPU demand, exceeds
    the model's share of the cluster's GPUs. No parameter: the demand is the typical pod shapes' (counted at
    arrival, every policy's `PodContext.typical`; the shapes covering 95% of the pods, as `fgd-paper` takes)."""

    def __init__(self, inner: Policy, fixed: tuple[str, ...] = ()) -> None:
        """`fixed`: reserve these models' nodes always instead (`avoid-P100+POLICY`, the causal check only: it
        names the model from this investigation, so it is no proposal)."""
        self.inner = inner
        self.fixed = fixed
        self.name = f"avoid-{'/'.join(fixed)}+{inner.name}" if fixed else f"reserve+{inner.name}"
        self.needs_gpus = inner.needs_gpus

    def reset(self, cluster, rng) -> None:  # type: ignore[no-untyped-def]
        super().reset(cluster, rng)
        self.inner.reset(cluster, rng)
        bits = cluster.node_model_bit
        self.bits = sorted({int(b) for b in bits[cluster.gpu_count > 0]})
        self.cap = {b: float(cluster.gpu_count[bits == b].sum()) for b in self.bits}
        self.typical: object = None
        self.mask = np.zeros(cluster.size, dtype=bool)

    def reserved(self, typical: TypicalPods) -> np.ndarray:
        """bool[N]: the nodes of oversubscribed models (recomputed when the typical shapes change)."""
        if typical is self.typical:
            return self.mask
        if self.fixed:
            self.typical = typical
            self.mask = np.isin(np.array([s.gpu_model or "" for s in self.cluster.specs]), self.fixed)
            return self.mask
        # The demand from the shapes covering 95% of the pods (`typical.paper`): the 64 most common shapes alone
        # drop the constrained pods' many rare shapes (P100's share of demand 2.7% there against 5.1%, seed 903).
        shapes = typical.paper if typical.paper is not None else typical
        c, cap_all = self.cluster, sum(self.cap.values())
        demand = shapes.freq * shapes.gpus * shapes.gpu_milli
        total = float(demand.sum())
        self.typical, self.mask = typical, np.zeros(c.size, dtype=bool)
        for b in self.bits:
            mine = 0.0
            for mask, d in zip(shapes.model_mask.tolist(), demand.tolist(), strict=True):
                if mask & b:
                    mine += d * self.cap[b] / sum(self.cap[x] for x in self.bits if mask & x)
            if total > 0 and cap_all > 0 and mine / total > self.cap[b] / cap_all:
                self.mask |= c.node_model_bit == b
        return self.mask

    def select(self, ctx: PodContext) -> Decision | None:
        if not ctx.options[0].request.model_mask and ctx.typical is not None:
            keep = ~self.reserved(ctx.typical)
            options = [Option(o.gpus, o.request, o.feasible & keep) if (o.feasible & keep).any() else o
                       for o in ctx.options]
            ctx = PodContext(ctx.pod, options, ctx.cluster, ctx.now, ctx.job_nodes, ctx.typical, ctx.data_nodes,
                             ctx.reclaim)
        return self.inner.select(ctx)


def probe_policy(name: str) -> Policy:
    """A policy name, or `reserve+NAME` / `avoid-M1/M2+NAME` (ModelReserve around it)."""
    if name.startswith("reserve+"):
        return ModelReserve(make_policy(name[len("reserve+"):]))
    if name.startswith("avoid-") and "+" in name:
        models, inner = name[len("avoid-"):].split("+", 1)
        return ModelReserve(make_policy(inner), tuple(models.split("/")))
    return make_policy(name)


def _p99(x: np.ndarray) -> float:
    return float(np.percentile(x, 99)) if x.size else float("nan")


def one(policy: str, seed: int, nodes: int, duration: float) -> dict[str, object]:
    ev = build_parser().parse_args(["evaluate", "--scenario", "ml-gpu", "--load", "1", "--nodes", str(nodes),
                                    "--duration", str(duration), "--policies", policy, "--out", "unused"])
    sim = TailProbe(workload_source(ev)(seed), probe_policy(policy), seed, sim_config(ev, ev.reclaim[0]))
    metrics = sim.run()
    jobs: dict[str, dict] = {}  # type: ignore[type-arg]
    for run in sim.done:
        spec = run.spec
        j = jobs.setdefault(spec.job_id, {"arrival": spec.arrival_s, "bound": -1.0, "end": -1.0, "work": 0.0,
                                          "cls": pod_class(spec.gpus, spec.gpu_milli, sim.workers[spec.job_id]),
                                          "model": model_tag(spec.gpu_models), "n": 0})
        j["n"] += 1
        j["bound"] = max(j["bound"], run.bind_t)
        j["end"] = max(j["end"], sim.finish[run])
        j["work"] = max(j["work"], float(spec.work_s or 0.0))
    done = [j for job_id, j in jobs.items() if j["n"] == sim.workers[job_id]]  # every worker finished
    cls = np.array([j["cls"] for j in done])
    jct = np.array([j["end"] - j["arrival"] for j in done])
    wait = np.array([j["bound"] - j["arrival"] for j in done])
    run_s = jct - wait
    work = np.array([j["work"] for j in done])
    model = np.array([j["model"] for j in done])
    p99 = _p99(jct)
    tail = jct >= p99
    window = sim.workload.duration_s
    gpus_of: dict[str, float] = {tag: float(sum(x.gpus for x in sim.workload.nodes if x.gpus and (
        tag == "any" or x.gpu_model in tag.split("+")))) for tag in sim.asked}
    by_model: dict[str, object] = {}
    for tag in sorted(set(model.tolist())):
        m = model == tag
        by_model[tag] = {"offered_load": sim.offered[tag] / (gpus_of[tag] * window) if gpus_of.get(tag) else 0.0,
                         "over_half_node_cpu": sim.big[tag] / sim.asked[tag] if sim.asked.get(tag) else 0.0,
                         "jobs": int(m.sum()), "wait_mean_s": float(wait[m].mean()), "wait_p99_s": _p99(wait[m]),
                         "tail_jobs": int((m & tail).sum()), "p99_without_wait_s": _p99(np.where(m, run_s, jct)),
                         "blocked_pod_s": {r: sim.blocked_model.get((tag, r), 0.0) for r in REASONS}}
    gpus_by_model: dict[str, float] = defaultdict(float)
    cpu_by_model: dict[str, float] = defaultdict(float)
    for x in sim.workload.nodes:
        gpus_by_model[x.gpu_model or ""] += x.gpus
        cpu_by_model[x.gpu_model or ""] += x.cpu_m
    held = {f"{mdl}:{who}": v / window / gpus_by_model[mdl] for (mdl, who), v in sorted(sim.held_s.items()) if v}
    held_cpu = {f"{mdl or 'cpu-node'}:{who}": v / window / cpu_by_model[mdl]
                for (mdl, who), v in sorted(sim.held_cpu_s.items())}
    by_class: dict[str, object] = {}
    for c in CLASSES:
        m = cls == c
        if not m.any():
            continue
        without = np.where(m, run_s, jct)
        by_class[c] = {"jobs": int(m.sum()), "wait_mean_s": float(wait[m].mean()), "wait_p99_s": _p99(wait[m]),
                       "run_over_work_mean": float((run_s[m] / np.maximum(work[m], 1e-9)).mean()),
                       "tail_jobs": int((m & tail).sum()), "p99_without_wait_s": _p99(without),
                       "blocked_pod_s": {r: sim.blocked.get((c, r), 0.0) for r in REASONS}}
    return {"policy": policy, "seed": seed, "jct_p99_s": p99, "metric_jct_p99_s": metrics["jct_p99_s"],
            "jct_p99_if_no_wait_s": _p99(run_s), "jobs": len(done), "tail_jobs": int(tail.sum()),
            "tail_wait_mean_s": float(wait[tail].mean()), "tail_run_mean_s": float(run_s[tail].mean()),
            "wait_mean_s": float(wait.mean()), "run_over_work_mean": float((run_s / np.maximum(work, 1e-9)).mean()),
            "free_whole_gpus_mean": sim.free_gpu_s / window, "stranded_whole_gpus_mean": sim.stranded_s / window,
            "gpu_share_held": held, "cpu_share_held": held_cpu, "by_class": by_class, "by_model": by_model}


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def summarize(runs: list[dict[str, object]], policies: list[str]) -> dict[str, object]:
    """Per policy, the means over seeds (pod-seconds summed over seeds); its P99 JCT's mean ± 95% CI and its paired
    P99 ratio over every other policy (mean ± 95% CI, Student t, over the seeds)."""
    out: dict[str, object] = {}
    for p in policies:
        mine = [r for r in runs if r["policy"] == p]
        entry: dict[str, object] = {k: _mean([float(r[k]) for r in mine])  # type: ignore[arg-type]
                                    for k in ("jct_p99_s", "jct_p99_if_no_wait_s", "tail_wait_mean_s",
                                              "tail_run_mean_s", "wait_mean_s", "run_over_work_mean",
                                              "free_whole_gpus_mean", "stranded_whole_gpus_mean")}
        entry["jct_p99_ci"] = mean_ci([float(r["jct_p99_s"]) for r in mine])  # type: ignore[arg-type]
        p99 = {r["seed"]: float(r["jct_p99_s"]) for r in mine}  # type: ignore[arg-type]
        entry["p99_paired_over"] = {q: mean_ci([p99[r["seed"]] / float(r["jct_p99_s"])  # type: ignore
                                                for r in runs if r["policy"] == q and r["seed"] in p99])
                                    for q in policies if q != p}
        classes: dict[str, object] = {}
        for c in CLASSES:
            rows = [r["by_class"][c] for r in mine if c in r["by_class"]]  # type: ignore[index,operator]
            if not rows:
                continue
            classes[c] = {k: _mean([float(x[k]) for x in rows])  # type: ignore[index]
                          for k in ("jobs", "wait_mean_s", "wait_p99_s", "run_over_work_mean", "p99_without_wait_s")}
            classes[c]["tail_jobs"] = int(sum(int(x["tail_jobs"]) for x in rows))  # type: ignore[index]
            classes[c]["blocked_pod_s"] = {reason: round(sum(float(x["blocked_pod_s"][reason])  # type: ignore
                                                             for x in rows), 1) for reason in REASONS}
        entry["by_class"] = classes
        models: dict[str, object] = {}
        for tag in sorted({t for r in mine for t in r["by_model"]}):  # type: ignore[attr-defined]
            rows = [r["by_model"][tag] for r in mine if tag in r["by_model"]]  # type: ignore[index,operator]
            models[tag] = {k: _mean([float(x[k]) for x in rows])  # type: ignore[index]
                           for k in ("jobs", "wait_mean_s", "wait_p99_s", "p99_without_wait_s", "offered_load",
                           "over_half_node_cpu")}
            models[tag]["tail_jobs"] = int(sum(int(x["tail_jobs"]) for x in rows))  # type: ignore[index]
            models[tag]["blocked_pod_s"] = {reason: round(sum(float(x["blocked_pod_s"][reason])  # type: ignore
                                                              for x in rows), 1) for reason in REASONS}
        entry["by_model"] = models
        for field in ("gpu_share_held", "cpu_share_held"):
            keys = sorted({k for r in mine for k in r[field]})  # type: ignore[attr-defined]
            entry[field] = {k: _mean([float(r[field].get(k, 0.0)) for r in mine]) for k in keys}  # type: ignore
        out[p] = entry
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", default=DEFAULT_POLICIES)
    ap.add_argument("--seeds", default="900,901,902,903,904")
    ap.add_argument("--nodes", type=int, default=40)
    ap.add_argument("--duration", type=float, default=7200.0)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        print(f"--seeds: not a comma-separated list of integers: {args.seeds!r}", file=sys.stderr)
        sys.exit(2)
    policies = [p for p in args.policies.split(",") if p]
    try:
        for p in policies:
            probe_policy(p)
    except UserError as err:
        print(str(err), file=sys.stderr)
        sys.exit(2)
    t0 = time.perf_counter()
    tasks = [(p, s, args.nodes, args.duration) for s in seeds for p in policies]
    if args.jobs <= 1:
        runs = [one(*t) for t in tasks]
    else:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            runs = list(pool.map(one, *zip(*tasks, strict=True)))
    print(json.dumps({"bench": "mlgpu_tail", "scenario": "ml-gpu", "load": 1.0, "nodes": args.nodes,
                      "duration_s": args.duration, "seeds": seeds, "policies": policies,
                      "summary": summarize(runs, policies), "per_run": runs,
                      "wall_s": round(time.perf_counter() - t0, 1), "machine": machine_info()}, indent=2))


if __name__ == "__main__":
    main()
