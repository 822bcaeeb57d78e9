"""What `drlsched admit` decides, without the API: the job state rebuilt from a list of pods (gated, released, by
job label), the executor pool from the nodes, and the release plan a job policy (`drlsched.jobs.policies`) makes
of them. Pure functions of their inputs: a controller restarted, or one whose apiserver restarted, rebuilds the
same state from the same pods.

A *job* is (namespace, value of the `drlsched.io/job` label). Its *gated* pods carry the scheduling gate
`drlsched.io/admission`; its *released* pods are its other pods that are neither finished nor being deleted
(released by this controller, or created without the gate: either way they hold an executor). A gated pod
whose job label is missing or not a label value is *unattributed*: never part of a job, never released.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from drlsched.errors import UserError
from drlsched.jobs.model import Job, JobSpec
from drlsched.jobs.policies import JobPolicy
from drlsched.k8s import quantity
from drlsched.k8s.objects import JOB_LABEL, TERMINAL_PHASES, ObjectError, node_spec, pod_spec, rfc3339_seconds

GATE = "drlsched.io/admission"
ADMITTED_ANNOTATION = "drlsched.io/admitted"  # "<RFC 3339 time> by <replica identity>": set with the release
_JOB_VALUE = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")  # a non-empty label value
# What each policy needs per job beyond what the pods say (policy-file keys).
NEEDS = {"weighted-fair": "remaining_work_s", "srpt-oracle": "remaining_work_s", "sjf-cp": "critical_path_s",
         "ppo": "remaining_work_s"}  # ppo: a learned job policy (its jobs here are one stage each, rl.job_features)
_META_KEYS = ("remaining_work_s", "critical_path_s")


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str
    created_s: float
    gates: tuple[str, ...]  # every scheduling gate the pod carries, in order
    annotated: bool = False  # it has metadata.annotations (a JSON patch adds to the map, or the map itself)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class JobState:
    namespace: str
    name: str
    arrival_s: float  # the creation of its oldest pod listed
    gated: list[PodRef] = field(default_factory=list)  # oldest first
    released: int = 0
    cpu_m: int = 0  # one executor's request (its first pod's)
    mem_mib: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Snapshot:
    jobs: list[JobState]  # by arrival, then key
    unattributed: list[tuple[PodRef, str]]  # gated pods without a valid job label, and why
    released: int  # released executors of all jobs together


def _gates(pod: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(g.get("name", "")) for g in (pod.get("spec") or {}).get("schedulingGates") or []
                 if isinstance(g, dict))


def _ref(pod: dict[str, Any]) -> PodRef:
    meta = pod.get("metadata") or {}
    try:
        created = rfc3339_seconds(str(meta.get("creationTimestamp")))
    except ValueError:
        created = math.inf  # a pod built by hand: after every timed one
    return PodRef(str(meta.get("namespace") or "default"), str(meta.get("name") or ""), str(meta.get("uid") or ""),
                  created, _gates(pod), bool(meta.get("annotations")))


def job_label_problem(labels: Mapping[str, Any]) -> str | None:
    """Why a gated pod cannot be attributed to a job (None: it can)."""
    if JOB_LABEL not in labels:
        return f"no {JOB_LABEL} label"
    value = labels[JOB_LABEL]
    if not isinstance(value, str) or not _JOB_VALUE.fullmatch(value):
        return f"malformed {JOB_LABEL} label {value!r} (a job is named by a non-empty label value)"
    return None


def snapshot(pods: Sequence[dict[str, Any]]) -> Snapshot:
    """The job state of a pod list (see the module doc)."""
    jobs: dict[tuple[str, str], JobState] = {}
    unattributed: list[tuple[PodRef, str]] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        ref = _ref(pod)
        gated = GATE in ref.gates
        problem = job_label_problem(labels)
        if problem is not None:
            if gated:
                unattributed.append((ref, problem))
            continue
        job = jobs.setdefault((ref.namespace, labels[JOB_LABEL]),
                              JobState(ref.namespace, labels[JOB_LABEL], ref.created_s))
        job.arrival_s = min(job.arrival_s, ref.created_s)  # a finished pod still dates its job's arrival
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue  # finished or leaving: holds no executor, and a leaving gated pod is not released
        if not job.cpu_m:
            try:
                spec = pod_spec(pod)
                job.cpu_m, job.mem_mib = spec.cpu_m, spec.mem_mib
            except ObjectError:
                pass  # the apiserver validated its requests; a hand-built one counts as 1 core / 1 GiB below
        if gated:
            job.gated.append(ref)
        else:
            job.released += 1
    live = [j for j in jobs.values() if j.gated or j.released]
    for job in live:
        job.gated.sort(key=lambda r: (r.created_s, r.name))
    live.sort(key=lambda j: (j.arrival_s, j.key))
    unattributed.sort(key=lambda item: item[0].key)
    return Snapshot(live, unattributed, sum(j.released for j in live))


def executor_slots(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]], cpu_m: int,
                   mem_mib: int) -> int:
    """Executors of `cpu_m`/`mem_mib` that fit the schedulable nodes beside the pods bound there that belong to no
    job (services and system pods keep their share): the pool a job policy divides when none is given."""
    used: dict[str, list[int]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or JOB_LABEL in (meta.get("labels") or {}) or (pod.get("status") or {}).get("phase") in \
                TERMINAL_PHASES:
            continue
        try:
            spec = pod_spec(pod)
        except ObjectError:
            continue
        acc = used.setdefault(node, [0, 0])
        acc[0] += spec.cpu_m
        acc[1] += spec.mem_mib
    slots = 0
    for node in nodes:
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        try:
            spec = node_spec(node)
        except (ObjectError, quantity.QuantityError):
            continue
        cpu_used, mem_used = used.get(spec.name, (0, 0))
        slots += max(0, min((spec.cpu_m - cpu_used) // max(cpu_m, 1), (spec.mem_mib - mem_used) // max(mem_mib, 1)))
    return int(slots)


@dataclass(frozen=True)
class PolicyFile:
    """`--policy-file`: the executor pool and per-job metadata a policy may need (docs/kubernetes.md)."""

    executors: int | None = None
    jobs: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # "ns/job" or "job" -> key -> value

    def meta(self, job: JobState) -> Mapping[str, float]:
        return self.jobs.get(job.key) or self.jobs.get(job.name) or {}


def _number(value: Any, where: str, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise UserError(f"policy file {path}: {where} must be a non-negative number, got {value!r}")
    return float(value)


def load_policy_file(path: Path) -> PolicyFile:
    """Reads and checks a policy file (UserError naming the file and the entry)."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise UserError(f"cannot read policy file {path}: {err.strerror or err}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise UserError(f"policy file {path} is not valid YAML or JSON: {str(err).splitlines()[0]}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"policy file {path} must be a mapping with executors and jobs")
    unknown = sorted(set(data) - {"executors", "jobs"})
    if unknown:
        raise UserError(f"policy file {path}: unknown key {unknown[0]!r} (known: executors, jobs)")
    executors = data.get("executors")
    if executors is not None and (isinstance(executors, bool) or not isinstance(executors, int) or executors < 1):
        raise UserError(f"policy file {path}: executors must be a whole number of at least 1, got {executors!r}")
    jobs_in = data.get("jobs") or {}
    if not isinstance(jobs_in, dict):
        raise UserError(f"policy file {path}: jobs must be a mapping of job name to its metadata")
    jobs: dict[str, dict[str, float]] = {}
    for name, meta in jobs_in.items():
        job = str(name)
        namespace, _, label = job.rpartition("/")
        if not _JOB_VALUE.fullmatch(label) or (namespace and "/" in namespace):
            raise UserError(f"policy file {path}: job {job!r} is not JOB or NAMESPACE/JOB (JOB a label value)")
        if not isinstance(meta, dict):
            raise UserError(f"policy file {path}: job {job!r} must map {' / '.join(_META_KEYS)} to numbers")
        bad = sorted(set(map(str, meta)) - set(_META_KEYS))
        if bad:
            raise UserError(f"policy file {path}: job {job!r}: unknown key {bad[0]!r} "
                            f"(known: {', '.join(_META_KEYS)})")
        jobs[job] = {k: _number(v, f"job {job!r} {k}", path) for k, v in meta.items()}
    return PolicyFile(executors, jobs)


@dataclass(frozen=True)
class Grant:
    job: JobState
    limit: float
    release: list[PodRef]  # what to release now, in order
    held: list[tuple[PodRef, str]]  # what stays gated, and why


def plan(snap: Snapshot, policy: JobPolicy, executors: int, meta: PolicyFile) -> tuple[list[Grant],
                                                                                       list[tuple[PodRef, str]]]:
    """The policy's decision on the snapshot: jobs in its order, each released up to its limit and the pool's free
    executors (`executors` less all jobs' released ones); and the gated pods held for want of the metadata the
    policy needs (never decided by guess)."""
    need = NEEDS.get(policy.name.partition(":")[0])
    missing: list[tuple[PodRef, str]] = []
    eligible: list[JobState] = []
    for job in snap.jobs:
        if need is not None and need not in meta.meta(job):
            why = f"job {job.key}: job policy {policy.name} needs its {need} in the policy file"
            missing += [(ref, why) for ref in job.gated]
        else:
            eligible.append(job)
    by_id: dict[int, JobState] = {}
    models: list[Job] = []
    for ident, job in enumerate(eligible):
        m = meta.meta(job)
        spec = JobSpec(name=job.key, query="", size_gb=0, stages=(), profile_cores=0,
                       executor_cpu_m=job.cpu_m or 1000, executor_mem_mib=job.mem_mib or 1024)
        remaining = float(m.get("remaining_work_s", 0.0))
        models.append(Job(ident=ident, arrival_s=job.arrival_s, spec=spec, stages=[], children=[],
                          work_s=remaining, pending=len(job.gated), running=job.released, executors=job.released,
                          remaining_work_s=remaining))
        by_id[ident] = job
    paths = {ident: float(meta.meta(job).get("critical_path_s", 0.0)) for ident, job in by_id.items()}
    critical_path: Callable[[Job], float] = lambda j: paths[j.ident]  # noqa: E731
    free = max(0, executors - snap.released)
    grants: list[Grant] = []
    for model, limit in policy.decide(models, executors, critical_path):
        job = by_id[model.ident]
        room = job_room(job.released, limit)
        take = min(len(job.gated), room, free)
        free -= take
        held_why = (f"job {job.key} holds {job.released + take} of its limit {limit:g} executors"
                    if take == room else
                    f"no free executor: jobs hold {executors - free} of {executors}")
        grants.append(Grant(job, limit, job.gated[:take], [(ref, held_why) for ref in job.gated[take:]]))
    return grants, missing


def job_room(released: int, limit: float) -> int:
    """Executors a job holding `released` may still be given under `limit` (a lowered limit gives none; nothing
    already released is taken back)."""
    if math.isinf(limit):
        return 1 << 62
    return max(0, math.floor(limit + 1e-9) - released)
