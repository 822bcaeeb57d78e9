"""fits_cpu_mem (the fit hint's CPU/memory check) against the plain check over every node, on both of its paths
(a few nodes: direct; more: the Pareto frontier)."""

import numpy as np
import pytest

from drlsched.cluster import fits_cpu_mem


@pytest.mark.parametrize("nodes", [0, 1, 3, 8, 9, 40, 500])
def test_fits_cpu_mem_agrees_with_checking_every_node(nodes: int) -> None:
    rng = np.random.default_rng(nodes)
    free_cpu = rng.integers(-500, 4000, nodes)
    free_mem = rng.integers(-1024, 16384, nodes)
    cpu = rng.integers(0, 4500, 300)
    mem = rng.integers(0, 17000, 300)
    want = ((cpu[:, None] <= free_cpu) & (mem[:, None] <= free_mem)).any(axis=1)
    got = fits_cpu_mem(cpu, mem, free_cpu, free_mem)
    assert got.dtype == bool and got.shape == (300,)
    assert np.array_equal(got, want)
    assert want.any() == (nodes > 0)
