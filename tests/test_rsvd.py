"""Randomized SVD: agreement with scikit-learn's implementation and its own knobs."""

import numpy as np
import pytest
from scipy.sparse.linalg import LinearOperator, aslinearoperator
from sklearn.utils.extmath import randomized_range_finder as sk_range_finder
from sklearn.utils.extmath import randomized_svd

import solvers


def decaying(N, M, seed, *, decay=0.7, k=40, noise=1e-4, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, k)) * decay ** np.arange(k)
    G = X @ rng.standard_normal((k, M)) + noise * rng.standard_normal((N, M))
    return G.astype(dtype)


@pytest.mark.parametrize("normalizer", ["auto", "QR", "LU", "none"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_agrees_with_sklearn(normalizer, dtype):
    # Rank-10 signal: a sketch of 18 vectors captures it, so both answers are accurate.
    G = decaying(150, 110, seed=0, k=10, dtype=dtype)
    # Unnormalised power iterations wash out small directions below float32 precision: one.
    n_iter = 1 if normalizer == "none" else 5
    kw = {"n_oversamples": 10, "n_iter": n_iter, "power_iteration_normalizer": normalizer}
    ours = solvers.rsvd(G, 8, random_state=0, **kw)
    U, s, Vt = randomized_svd(G, 8, random_state=0, **kw)
    assert ours.s.dtype == s.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-8
    np.testing.assert_allclose(ours.s, s, rtol=tol)
    np.testing.assert_allclose(np.abs(np.sum(ours.U * U, axis=0)), 1, atol=tol)
    np.testing.assert_allclose(np.abs(np.sum(ours.V * Vt.T, axis=0)), 1, atol=tol)
    expected = {"auto": "LU"}.get(normalizer, normalizer)
    assert ours.info["power_iteration_normalizer"] == expected


def test_wide_matrix_goes_through_the_transpose():
    G = decaying(60, 140, seed=1)
    res = solvers.rsvd(G, 5, n_iter=6, random_state=0)
    assert res.info["transposed"] is True
    U, s, Vt = randomized_svd(G, 5, n_iter=6, random_state=0)
    np.testing.assert_allclose(res.s, s, rtol=1e-8)
    np.testing.assert_allclose(np.abs(np.sum(res.V * Vt.T, axis=0)), 1, atol=1e-8)


@pytest.mark.parametrize(("rank", "expected"), [(2, 7), (10, 4)])
def test_n_iter_auto_follows_sklearn(rank, expected):
    G = decaying(80, 60, seed=2)  # 0.1 * min(N, M) = 6
    res = solvers.rsvd(G, rank, n_iter="auto", random_state=0)
    assert res.info["n_iter"] == expected


@pytest.mark.parametrize(("n_iter", "expected"), [(0, "none"), (2, "none"), (3, "LU")])
def test_auto_normalizer(n_iter, expected):
    res = solvers.rsvd(decaying(40, 30, seed=3), 2, n_iter=n_iter, random_state=0)
    assert res.info["power_iteration_normalizer"] == expected


def test_product_count():
    N, M, rank, p, q = 70, 50, 3, 6, 2
    res = solvers.rsvd(
        decaying(N, M, seed=4), rank, n_oversamples=p, n_iter=q, random_state=0, check_passes=0
    )
    # q power iterations (2 products each), the final range product and the projection
    # (check_passes=0: without the certificate's passes).
    assert res.info["n_matvec"] == (2 * q + 2) * (rank + p)
    assert res.info["n_block_entries"] == 0
    assert res.info["effort"] == p and res.info["n_random"] == rank + p


def test_sketch_is_capped_at_min_dimension():
    G = decaying(30, 20, seed=5)
    res = solvers.rsvd(G, 4, n_oversamples=100, random_state=0)
    assert res.info["n_random"] == 20
    s = np.linalg.svd(G, compute_uv=False)
    np.testing.assert_allclose(res.s, s[:4], rtol=1e-10)


def test_float32_lazy_source_stays_float32():
    G = decaying(90, 70, seed=6, dtype=np.float32)
    op = LinearOperator(
        G.shape,
        matvec=lambda x: G @ x,
        rmatvec=lambda y: G.T @ y,
        matmat=lambda X: G @ X,
        rmatmat=lambda Y: G.T @ Y,
        dtype=np.float32,
    )
    res = solvers.rsvd(op, 5, n_iter=6, random_state=0)
    assert res.U.dtype == res.s.dtype == res.V.dtype == np.float32
    s = np.linalg.svd(G.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(res.s, s[:5], rtol=1e-4)


@pytest.mark.parametrize("normalizer", ["QR", "LU", "none"])
def test_range_finder_captures_an_exact_low_rank_range(normalizer):
    rng = np.random.default_rng(7)
    A = rng.standard_normal((80, 6)) @ rng.standard_normal((6, 50))
    Q = solvers.randomized_range_finder(
        aslinearoperator(A), 8, 3, power_iteration_normalizer=normalizer, random_state=0
    )
    np.testing.assert_allclose(Q.T @ Q, np.eye(8), atol=1e-10)
    residual = A - Q @ (Q.T @ A)
    assert np.linalg.norm(residual) <= 1e-10 * np.linalg.norm(A)
    # scikit-learn's finder spans the same 6-dimensional range.
    Qs = sk_range_finder(A, size=8, n_iter=3, power_iteration_normalizer=normalizer, random_state=0)
    P = np.linalg.svd(A, full_matrices=False)[0][:, :6]
    for B in (Q, Qs):
        np.testing.assert_allclose(np.linalg.norm(B.T @ P, axis=0), 1, atol=1e-10)


def test_range_finder_validation():
    A = np.ones((5, 4))
    with pytest.raises(ValueError, match="size"):
        solvers.randomized_range_finder(A, 5, 1)
    with pytest.raises(ValueError, match="n_iter"):
        solvers.randomized_range_finder(A, 2, -1)
    with pytest.raises(ValueError, match="power_iteration_normalizer"):
        solvers.randomized_range_finder(A, 2, 1, power_iteration_normalizer="Cholesky")
    with pytest.raises(TypeError, match="random_state"):
        solvers.randomized_range_finder(A, 2, 1, random_state="0")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(500, 12), (12, 12), (40, 1)])
def test_permuted_lu_factor_is_scipy_lu_permute_l(dtype, shape):
    """The faster LU normaliser returns scipy's ``lu(permute_l=True)`` factor bit for bit."""
    from scipy.linalg import lu

    from solvers.rsvd import permuted_lu_factor

    Y = np.random.default_rng(8).standard_normal(shape).astype(dtype)
    Y[0] *= 1e-3  # force row exchanges
    before = Y.copy()
    L = permuted_lu_factor(Y)
    np.testing.assert_array_equal(Y, before)  # the input is not overwritten
    assert L.dtype == dtype and L.shape == shape
    np.testing.assert_array_equal(L, lu(Y, permute_l=True)[0])
    assert np.abs(L).max() <= 1
