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


@pytest.mark.parametrize("kernel", ["sne", "t"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_normalised_rows_are_read_without_the_setup_pass(points, kernel, dtype):
    """Issue 32 §5: a normalised row carries its own normaliser (its sum over M entries), so
    reading it must not run the set-up pass over all of G (N M entries: an hour and a half
    at N = M = 1e6 on 2 cores). Equal to the eager source's rows, bit for bit."""
    X, Z, gamma = points
    lazy = KernelSource.from_points(X, Z, kernel, gamma=gamma, setup="lazy", dtype=dtype)
    eager = KernelSource.from_points(X, Z, kernel, gamma=gamma, dtype=dtype)
    idx = np.array([5, 239, 0, 5, 101])
    assert lazy.rows_without_setup()
    R = lazy.rows(idx)
    assert lazy.setup_pending() and not lazy._ready  # no pass ran
    assert lazy.n_entries == 2 * idx.size * Z.shape[0]  # the normalisers', then the rows'
    assert np.array_equal(R, eager.rows(idx))
    np.testing.assert_allclose(R.sum(axis=1), 1.0, rtol=1e-5)
    lazy.cols([0])  # a column needs every row's normaliser: the set-up runs
    assert lazy._ready and np.array_equal(lazy.rows(idx), R)


@pytest.mark.parametrize("kernel, center", [("sne", True), ("rbf", True)])
def test_rows_of_a_centred_source_still_need_the_setup(points, kernel, center):
    X, Z, gamma = points
    lazy = KernelSource.from_points(X, Z, kernel, gamma=gamma, center=center, setup="lazy")
    assert not lazy.rows_without_setup()
    lazy.rows([0, 1])
    assert lazy._ready
