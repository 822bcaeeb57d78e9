"""The vectorised, cached FGD score equals FGD's formula written plainly, node by node and GPU by GPU."""

import numpy as np
import pytest

from drlsched.cluster import Cluster
from drlsched.fragmentation import TypicalPods
from drlsched.policies import make_policy
from drlsched.policies.base import Option, PodContext
from drlsched.policies.fgd import fgd_delta
from drlsched.workload import NodeSpec, PodSpec

MODELS = ("T4", "G2", "V100M32")


# --- reference: FGD (Weng et al., ATC'23, §4) for one node, in plain Python ------------------------------------

def ref_fragmentation(free, cpu_left, bit, typical):
    """Σ_k freq_k · F_n(m_k): the free share of GPUs too small for m_k if the node can host m_k, else all of it."""
    total = 0.0
    for k in range(typical.freq.size):
        m, g, mask = int(typical.gpu_milli[k]), int(typical.gpus[k]), int(typical.model_mask[k])
        can = (sum(1 for f in free if f >= m) >= g and (mask == 0 or bit & mask != 0)
               and cpu_left >= typical.cpu[k])
        total += typical.freq[k] * (sum(f for f in free if f < m) if can else sum(free))
    return total


def ref_delta(free, cpu_left, bit, cpu, gpus, milli, typical):
    """(growth, GPU) of the best placement on the node: a share tried on every GPU (first best), whole GPUs
    taken from the lowest free indices."""
    before = ref_fragmentation(free, cpu_left, bit, typical)
    if gpus == 1 and milli < 1000:
        best = None
        for g, f in enumerate(free):
            if f >= milli:
                trial = list(free)
                trial[g] -= milli
                d = ref_fragmentation(trial, cpu_left - cpu, bit, typical) - before
                if best is None or d < best[0] - 1e-12:
                    best = (d, g)
        return best
    trial, left = list(free), gpus
    for g, f in enumerate(trial):
        if left and f == 1000:
            trial[g], left = 0, left - 1
    return ref_fragmentation(trial, cpu_left - cpu, bit, typical) - before, -1


# --- random states ------------------------------------------------------------------------------------------

def random_typical(rng, bits):
    k = int(rng.integers(1, 12))
    gpus = rng.choice([1, 1, 1, 2, 4, 8], size=k)
    milli = np.where(gpus == 1, rng.choice([100, 250, 460, 500, 810, 1000], size=k), 1000)
    mask = np.where(rng.random(k) < 0.3, rng.choice(bits, size=k), 0)
    freq = rng.random(k)
    return TypicalPods(cpu=rng.choice([0, 2000, 8000, 16000, 40000], size=k).astype(np.int64),
                       gpus=gpus.astype(np.int64), gpu_milli=milli.astype(np.int64),
                       model_mask=mask.astype(np.int64), freq=freq / freq.sum())


def random_cluster(rng, n=12):
    nodes = [NodeSpec(f"n{i:02d}", int(rng.choice([16000, 64000, 96000])), 262144,
                      int(rng.choice([0, 1, 2, 4, 8])), str(rng.choice(MODELS))) for i in range(n)]
    c = Cluster(nodes)
    for _ in range(int(rng.integers(0, 40))):  # random shares, whole GPUs and CPU taken
        pod = random_pod(rng, "fill")
        r = c.request(pod)
        fits = np.flatnonzero(c.feasible(r))
        if fits.size:
            node = int(fits[rng.integers(fits.size)])
            c.allocate(node, r, c.pick_gpus(node, r))
    return c


def random_pod(rng, uid):
    gpus = int(rng.choice([0, 1, 1, 1, 2, 4]))
    milli = int(rng.choice([130, 250, 500, 700, 1000])) if gpus == 1 else (1000 if gpus else 0)
    return PodSpec(uid, uid, 0.0, int(rng.choice([1000, 4000, 12000])), 1024, gpus=gpus, gpu_milli=milli)


@pytest.mark.parametrize("seed", range(40))
def test_vectorised_score_equals_the_reference_on_random_states(seed):
    rng = np.random.default_rng(seed)
    c = random_cluster(rng)
    typical = random_typical(rng, list(c.model_bit.values()))
    for trial in range(5):
        r = c.request(random_pod(rng, f"p{trial}"))
        nodes = np.flatnonzero(c.feasible(r))
        if not nodes.size:
            continue
        cpu_left = c.cap_cpu - c.req_cpu
        delta, choice = fgd_delta(c.gpu_free[nodes], cpu_left[nodes], c.node_model_bit[nodes], r.cpu, r.gpus,
                                  r.gpu_milli, typical)
        for i, node in enumerate(nodes):
            free = [int(f) for f, e in zip(c.gpu_free[node], c.gpu_exists[node], strict=True) if e]
            want, gpu = ref_delta(free, int(cpu_left[node]), int(c.node_model_bit[node]), r.cpu, r.gpus,
                                  r.gpu_milli, typical)
            assert delta[i] == pytest.approx(want, abs=1e-6)
            assert choice[i] == gpu


@pytest.mark.parametrize("seed", range(6))
def test_the_cached_policy_decides_as_the_reference_while_the_cluster_fills(seed):
    # The cache must notice every node a placement changed, and a new typical-shape set.
    rng = np.random.default_rng(100 + seed)
    c = random_cluster(rng, n=10)
    policy = make_policy("fgd")
    policy.reset(c, np.random.default_rng(seed))
    bits = list(c.model_bit.values())
    typical = random_typical(rng, bits)
    for step in range(60):
        if step == 30:
            typical = random_typical(rng, bits)
        pod = random_pod(rng, f"p{step}")
        r = c.request(pod)
        feasible = c.feasible(r)
        if not feasible.any():
            continue
        decision = policy.select(PodContext(pod, [Option(pod.gpus, r, feasible)], c, 0.0, typical=typical))
        cpu_left = c.cap_cpu - c.req_cpu
        refs = {}
        for node in np.flatnonzero(feasible):
            free = [int(f) for f, e in zip(c.gpu_free[node], c.gpu_exists[node], strict=True) if e]
            refs[int(node)] = ref_delta(free, int(cpu_left[node]), int(c.node_model_bit[node]), r.cpu, r.gpus,
                                        r.gpu_milli, typical)
        lowest = min(d for d, _ in refs.values())
        assert refs[decision.node][0] == pytest.approx(lowest, abs=1e-6)
        want_gpu = refs[decision.node][1]
        assert (decision.gpu_ids or (-1,))[0] == want_gpu
        ids = decision.gpu_ids if decision.gpu_ids is not None else c.pick_gpus(decision.node, r)
        c.allocate(decision.node, r, ids)


@pytest.mark.parametrize("paper", [False, True])
def test_scoring_distinct_node_states_once_gives_every_node_its_own_score(paper):
    # 150 nodes from few types, lightly used: many share a state, so the cache scores each distinct state once
    # (more than MIN_DISTINCT_ROWS stale rows) and copies the result; it must equal scoring every row.
    from drlsched.policies.fgd import MIN_DISTINCT_ROWS, _Scores

    rng = np.random.default_rng(5)
    nodes = [NodeSpec(f"n{i:03d}", int(rng.choice([16000, 64000])), 262144, int(rng.choice([2, 8])),
                      str(rng.choice(MODELS))) for i in range(150)]
    c = Cluster(nodes)
    for _ in range(60):
        r = c.request(random_pod(rng, "fill"))
        fits = np.flatnonzero(c.feasible(r))
        if fits.size:
            node = int(fits[rng.integers(fits.size)])
            c.allocate(node, r, c.pick_gpus(node, r))
    typical = random_typical(rng, np.unique(c.node_model_bit))
    for trial in range(8):
        r = c.request(random_pod(rng, f"p{trial}"))
        feasible = np.flatnonzero(c.feasible(r))
        if feasible.size <= MIN_DISTINCT_ROWS:
            continue
        got = _Scores(c, paper).get(r, feasible, typical)
        want = fgd_delta(c.gpu_free[feasible], (c.cap_cpu - c.req_cpu)[feasible], c.node_model_bit[feasible],
                         r.cpu, r.gpus, r.gpu_milli, typical, paper)
        assert got[0] == pytest.approx(want[0]) and got[1].tolist() == want[1].tolist()


def test_distinct_rows_groups_equal_rows_exactly_even_when_the_hash_collides(monkeypatch):
    import drlsched.policies.fgd as fgd

    rng = np.random.default_rng(9)
    key = np.column_stack((rng.choice([0, 250, 500, 1000], size=(400, 8)), rng.integers(0, 3, (400, 3))))
    key = np.concatenate([key, key[:100]])  # 100 rows certainly repeated
    for mult in (fgd._HASH_MULT, np.zeros_like(fgd._HASH_MULT)):  # zeros: every row hashes alike
        monkeypatch.setattr(fgd, "_HASH_MULT", mult)
        first, back = fgd.distinct_rows(key)
        assert np.array_equal(key[first][back], key)
        assert first.size == np.unique(key, axis=0).shape[0]
