"""The learned packer's per-node observation (issue 26 item 3) on a hand-made cluster."""

import numpy as np
import pytest

from drlsched.cluster import Cluster
from drlsched.fragmentation import TypicalPods
from drlsched.rl.packer_features import CONTEXT_SHAPES, context_features, node_feature_count, node_features
from drlsched.workload import NodeSpec, PodSpec


def test_node_features_sort_each_gpus_free_share_and_mark_missing_gpus():
    c = Cluster([NodeSpec("a", 32000, 65536, 4, "T4"), NodeSpec("b", 64000, 131072, 2, "V100M32")])
    r = c.request(PodSpec("p", "j", 0.0, 8000, 1024, gpus=1, gpu_milli=300))
    c.allocate(0, r, (2,))
    f = node_features(c, np.array([0, 1]), np.array([250.0, 0.0]))
    assert f.shape == (2, node_feature_count(c))
    np.testing.assert_allclose(f[0, :4], [1.0, 1.0, 1.0, 0.7])  # GPU 2 has 700 milli left, sorted last
    np.testing.assert_allclose(f[1, :4], [1.0, 1.0, -1.0, -1.0])  # node b has 2 of the 4 slots
    np.testing.assert_allclose(f[:, 4], [1.0, 0.5])  # GPU count / largest
    models = f[:, 5:7]
    assert models.sum(axis=1).tolist() == [1.0, 1.0] and models[0].tolist() != models[1].tolist()
    assert f[0, 7] == pytest.approx(24000 / 64000) and f[1, 7] == pytest.approx(1.0)  # free CPU share
    assert f[0, 8] == pytest.approx((65536 - 1024) / 131072)
    np.testing.assert_allclose(f[:, 9], [0.25, 0.0])  # FGD growth in GPUs


def test_context_features_hold_the_request_and_the_most_frequent_shapes():
    c = Cluster([NodeSpec("a", 32000, 65536, 4, "T4")])
    r = c.request(PodSpec("p", "j", 0.0, 16000, 1024, gpus=2))
    one = np.array([1, 2, 1], dtype=np.int64)
    typical = TypicalPods(cpu=np.array([0, 0, 0]), gpus=one, gpu_milli=np.array([500, 1000, 1000]),
                          model_mask=np.zeros(3, dtype=np.int64), freq=np.array([0.2, 0.5, 0.3]))
    x = context_features(c, r, typical)
    assert x.shape == (3 + 3 * CONTEXT_SHAPES,)
    np.testing.assert_allclose(x[:3], [0.5, 0.5, 1.0])
    np.testing.assert_allclose(x[3:12], [0.5, 1.0, 0.5, 0.25, 1.0, 0.3, 0.25, 0.5, 0.2])
    assert not x[12:].any()
    assert not context_features(c, r, None)[3:].any()
