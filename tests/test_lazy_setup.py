"""``KernelSource.from_points(..., setup="lazy")``: the set-up pass runs on first use only."""

import numpy as np
import pytest

import solvers
from ksvd_bench.datasets import make_rare_clusters
from ksvd_bench.kernels import KernelSource, kernel_matrix


@pytest.fixture(scope="module")
def points():
    P = make_rare_clusters(240, 200, 8, n_clusters=6, n_rare=2, random_state=0)
    return P.X, P.Z, P.gamma


@pytest.mark.parametrize("kernel", ["sne", "t", "rbf"])
@pytest.mark.parametrize("center", [False, True])
def test_lazy_source_equals_the_eager_one(points, kernel, center):
    X, Z, gamma = points
    eager = KernelSource.from_points(X, Z, kernel, gamma=gamma, center=center)
    lazy = KernelSource.from_points(X, Z, kernel, gamma=gamma, center=center, setup="lazy")
    assert not lazy._ready
    V = np.random.default_rng(0).standard_normal((Z.shape[0], 3))
    assert np.array_equal(lazy.matmat(V), eager.matmat(V))
    assert lazy._ready
    assert lazy.frobenius_norm() == eager.frobenius_norm()
    assert lazy.norm_bound() == eager.norm_bound()


@pytest.mark.parametrize("kernel", ["sne", "t", "rbf"])
@pytest.mark.parametrize("center", [False, True])
def test_lazy_norm_bound_bounds_without_the_pass(points, kernel, center):
    X, Z, gamma = points
    lazy = KernelSource.from_points(X, Z, kernel, gamma=gamma, center=center, setup="lazy")
    G = kernel_matrix(X, Z, kernel, gamma=gamma, center=center)
    assert np.linalg.norm(G, 2) <= lazy.norm_bound()
    assert not lazy._ready


def test_rpcholesky_on_a_lazy_source_reads_no_pass(points):
    X, Z, gamma = points
    src = KernelSource.from_points(X, Z, "sne", gamma=gamma, setup="lazy")
    res = solvers.svd(
        src,
        6,
        method="asym_nystrom",
        sampling="rpcholesky",
        n_samples=30,
        check_passes=0,
        random_state=0,
    )
    assert not src._ready  # the set-up pass never ran
    N, M = src.shape
    assert res.info["entries_read"] < 0.5 * N * M
    G = kernel_matrix(X, Z, "sne", gamma=gamma)
    s = np.linalg.svd(G, compute_uv=False)[:6]
    assert np.max(np.abs(res.s - s)) <= 0.05 * s[0]


def test_setup_must_be_eager_or_lazy(points):
    X, Z, gamma = points
    with pytest.raises(ValueError, match="setup must be one of 'eager', 'lazy'"):
        KernelSource.from_points(X, Z, "sne", gamma=gamma, setup="later")
