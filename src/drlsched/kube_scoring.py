"""kube-scheduler's scoring formulas with Go's integer arithmetic (v1.30-v1.35), vectorised over nodes.

Sources: pkg/scheduler/framework/plugins/noderesources/{least_allocated,most_allocated,balanced_allocation}.go,
helper/normalize_score.go, schedule_one.go (numFeasibleNodesToFind), and the scheduling queue's pod backoff
(backend/queue/backoff_queue.go); fixtures in kubernetes-scheduling.md §7.
Inputs are int64 arrays; `//` on non-negative int64 equals Go's truncating division.
"""

from __future__ import annotations

import numpy as np

MAX_NODE_SCORE = 100
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
POD_INITIAL_BACKOFF_S = 1.0  # KubeSchedulerConfiguration podInitialBackoffSeconds
POD_MAX_BACKOFF_S = 10.0  # podMaxBackoffSeconds


def pod_backoff_s(attempts: int, initial_s: float = POD_INITIAL_BACKOFF_S, max_s: float = POD_MAX_BACKOFF_S) -> float:
    """A pod's backoff after `attempts` failed attempts (backend/queue/backoff_queue.go calculateBackoffDuration):
    initial, doubling per attempt, capped at max; none before the first failure or when max is 0."""
    if attempts <= 0 or max_s <= 0:
        return 0.0
    return min(initial_s * 2.0 ** min(attempts - 1, 62), max_s)


def pod_backoff_array(attempts: np.ndarray, initial_s: float = POD_INITIAL_BACKOFF_S,
                      max_s: float = POD_MAX_BACKOFF_S) -> np.ndarray:
    """`pod_backoff_s` for an array of attempt counts."""
    if max_s <= 0:
        return np.zeros(attempts.shape)
    backoff = np.minimum(initial_s * 2.0 ** np.clip(attempts - 1, 0, 62), max_s)
    return np.where(attempts <= 0, 0.0, backoff)


def least_requested(req: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """((cap - req) * 100) // cap, and 0 where cap == 0 or req > cap."""
    safe = np.where(cap == 0, 1, cap)
    score = ((safe - req) * MAX_NODE_SCORE) // safe
    return np.where((cap == 0) | (req > cap), 0, score)


def most_requested(req: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """(min(req, cap) * 100) // cap, and 0 where cap == 0."""
    safe = np.where(cap == 0, 1, cap)
    score = (np.minimum(req, safe) * MAX_NODE_SCORE) // safe
    return np.where(cap == 0, 0, score)


def weighted_node_score(scores: list[np.ndarray], caps: list[np.ndarray], weights: list[int]) -> np.ndarray:
    """(Σ score_i * w_i) // Σ w_i over the resources a node has (allocatable 0 is skipped entirely)."""
    total = np.zeros_like(scores[0])
    wsum = np.zeros_like(scores[0])
    for s, c, w in zip(scores, caps, weights, strict=True):
        has = c != 0
        total += np.where(has, s * w, 0)
        wsum += np.where(has, w, 0)
    return np.where(wsum == 0, 0, total // np.where(wsum == 0, 1, wsum))


def balanced_allocation(req_cpu: np.ndarray, cap_cpu: np.ndarray, req_mem: np.ndarray,
                        cap_mem: np.ndarray) -> np.ndarray:
    """int((1 - std) * 100) of the cpu and memory request fractions (actual requests, not NonZero)."""
    f_cpu = np.minimum(req_cpu / np.where(cap_cpu == 0, 1, cap_cpu), 1.0)
    f_mem = np.minimum(req_mem / np.where(cap_mem == 0, 1, cap_mem), 1.0)
    both = (cap_cpu != 0) & (cap_mem != 0)
    std = np.where(both, np.abs(f_cpu - f_mem) / 2, 0.0)
    return ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)


def balanced_allocation_v136(req_cpu: np.ndarray, alloc_cpu: np.ndarray, cap_cpu: np.ndarray, req_mem: np.ndarray,
                             alloc_mem: np.ndarray, cap_mem: np.ndarray) -> np.ndarray:
    """BalancedAllocation from v1.36 (PR #135573): the change in balance the pod brings,
    50 + (50 + scoreWithPod - scoreWithoutPod) // 2, where each score is the 1.30-1.35 formula on the node with
    (`req_*`) and without (`alloc_*`) the pod. The difference lies in [-50, 50], so Go's division is a floor."""
    with_pod = balanced_allocation(req_cpu, cap_cpu, req_mem, cap_mem)
    without_pod = balanced_allocation(alloc_cpu, cap_cpu, alloc_mem, cap_mem)
    half = MAX_NODE_SCORE // 2
    return half + (half + with_pod - without_pod) // 2


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler looks for before it stops filtering (percentageOfNodesToScore)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def default_normalize(scores: np.ndarray, reverse: bool) -> np.ndarray:
    """helper.DefaultNormalizeScore with MaxNodeScore."""
    top = int(scores.max(initial=0))
    if top == 0:
        return np.full_like(scores, MAX_NODE_SCORE) if reverse else scores.copy()
    out = MAX_NODE_SCORE * scores // top
    return MAX_NODE_SCORE - out if reverse else out


def go_round(x: np.ndarray | float) -> np.ndarray:
    """Go's math.Round (half away from zero), unlike Python's banker's rounding."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def target_load_packing(util_pct: np.ndarray, target: float) -> np.ndarray:
    """Trimaran TargetLoadPacking score from the predicted utilisation U (percent) and target X."""
    u = np.asarray(util_pct, dtype=np.float64)
    above = np.where(u > 100, 0.0, go_round(target * (100 - u) / (100 - target)))
    below = go_round((100 - target) * u / target + target)
    return np.where(u > target, above, below).astype(np.int64)
