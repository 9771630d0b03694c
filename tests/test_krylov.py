"""Randomized block Krylov SVD: pass count, the Krylov space it builds, and its accuracy."""

import numpy as np
import pytest
from scipy import linalg
from scipy.sparse.linalg import LinearOperator

import solvers


def spectrum_matrix(N, M, s, seed, dtype=np.float64):
    """``U diag(s) V^T`` with random orthonormal U, V (len(s) columns)."""
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.standard_normal((N, len(s))))[0]
    V = np.linalg.qr(rng.standard_normal((M, len(s))))[0]
    return ((U * s) @ V.T).astype(dtype)


def projection_error(G, U, ord=2):
    """``||G - U U^T G||`` (spectral norm by default)."""
    return np.linalg.norm(G - U @ (U.T @ G), ord)


@pytest.mark.parametrize("q", [0, 1, 3])
def test_pass_and_product_counts(q):
    G = spectrum_matrix(90, 70, 0.9 ** np.arange(60), seed=0)
    # check_passes=0: the algorithm's own passes (the certificate's are counted on top)
    res = solvers.block_krylov(G, 4, n_oversamples=3, n_iter=q, random_state=0, check_passes=0)
    b = 4 + 3
    # Algorithm 2: q + 1 products with G, q with G^T for the space, one with G^T for Z^T G
    assert res.info["n_products"] == 2 * q + 2
    assert res.info["n_passes"] == 2 * q + 2
    assert res.info["n_matvec"] == (2 * q + 1) * b + (q + 1) * b  # the last: all of Z
    assert res.info["n_block_entries"] == 0
    assert res.info["effort"] == q and res.info["block_size"] == b
    assert res.info["basis_size"] == (q + 1) * b


def test_basis_stops_growing_when_it_fills_the_space():
    G = spectrum_matrix(40, 30, 1.0 / (1 + np.arange(30)), seed=1)
    res = solvers.block_krylov(G, 5, n_oversamples=5, n_iter=10, random_state=0)
    # Blocks of 10 fill R^30 after three: 3 products with G, 2 with G^T, no more (plus the
    # certificate's check_passes, 2 by default).
    assert res.info["basis_size"] == 30
    assert res.info["n_passes"] == 5 + 2 == 5 + res.info["check_passes"]
    np.testing.assert_allclose(res.s, np.linalg.svd(G, compute_uv=False)[:5], rtol=1e-12)


def test_matches_an_explicit_krylov_space():
    """Same start block: the answer is the Rayleigh-Ritz SVD on span[A O, (A A^T) A O, ...]."""
    N, M, rank, p, q = 60, 45, 3, 2, 2
    G = spectrum_matrix(N, M, 0.8 ** np.arange(45), seed=2)
    res = solvers.block_krylov(G, rank, n_oversamples=p, n_iter=q, random_state=5)
    omega = np.random.default_rng(5).standard_normal((M, rank + p))
    K = np.hstack([np.linalg.matrix_power(G.T @ G, i) @ omega for i in range(q + 1)])
    Z = np.linalg.qr(G @ K)[0]  # Musco & Musco's Krylov space lives on the left
    Ub, s, Wt = np.linalg.svd(Z.T @ G, full_matrices=False)
    np.testing.assert_allclose(res.s, s[:rank], rtol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(res.U * (Z @ Ub[:, :rank]), axis=0)), 1, atol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(res.V * Wt[:rank].T, axis=0)), 1, atol=1e-9)


def test_more_accurate_than_rsvd_at_equal_passes_on_a_slow_spectrum():
    """Musco & Musco's point: on a slowly decaying spectrum the Krylov space beats the last
    power iterate. At equal passes (8) its spectral-norm error is far smaller."""
    N, M, rank = 400, 300, 10
    s = (1.0 + np.arange(300)) ** -0.5
    G = spectrum_matrix(N, M, s, seed=3)
    kry = solvers.block_krylov(G, rank, n_oversamples=5, n_iter=3, random_state=0)
    rs = solvers.rsvd(G, rank, n_oversamples=5, n_iter=3, random_state=0)
    assert kry.info["n_passes"] == 8 + 2 and rs.info["n_passes"] == 8 + 2  # + certificate
    opt = s[rank]  # ||G - G_r||_2
    err_kry = projection_error(G, kry.U) / opt - 1
    err_rs = projection_error(G, rs.U) / opt - 1
    assert err_kry < 0.2 * err_rs
    # Per-vector: singular values too.
    assert np.max(np.abs(kry.s - s[:rank]) / s[:rank]) < np.max(np.abs(rs.s - s[:rank]) / s[:rank])


def test_stable_on_an_exactly_low_rank_matrix():
    """Rank 3 < the block: later blocks are numerically in the span, yet stay orthonormal."""
    rng = np.random.default_rng(4)
    G = rng.standard_normal((80, 3)) @ rng.standard_normal((3, 50))
    res = solvers.block_krylov(G, 6, n_oversamples=4, n_iter=4, random_state=0)
    np.testing.assert_allclose(res.U.T @ res.U, np.eye(6), atol=1e-12)
    np.testing.assert_allclose(res.V.T @ res.V, np.eye(6), atol=1e-12)
    s = np.linalg.svd(G, compute_uv=False)
    np.testing.assert_allclose(res.s[:3], s[:3], rtol=1e-12)
    assert np.all(res.s[3:] <= 1e-12 * s[0])


@pytest.mark.parametrize(("rank", "p", "q"), [(2, 10, 2), (1, 0, 30), (2, 0, 12)])
def test_zero_matrix(rank, p, q):
    """Every Krylov block after the first is zero: the basis must still fill up with
    orthonormal directions (blocks of one vector too)."""
    res = solvers.block_krylov(np.zeros((30, 20)), rank, n_oversamples=p, n_iter=q, random_state=0)
    np.testing.assert_array_equal(res.s, 0)
    assert res.info["basis_size"] == 20
    np.testing.assert_allclose(res.U.T @ res.U, np.eye(rank), atol=1e-14)
    np.testing.assert_allclose(res.V.T @ res.V, np.eye(rank), atol=1e-14)


def test_wide_matrix_goes_through_the_transpose():
    G = spectrum_matrix(50, 120, 0.7 ** np.arange(50), seed=5)
    res = solvers.block_krylov(G, 4, n_iter=2, random_state=0)
    assert res.info["transposed"] is True
    assert res.U.shape == (50, 4) and res.V.shape == (120, 4)
    np.testing.assert_allclose(res.s, np.linalg.svd(G, compute_uv=False)[:4], rtol=1e-10)
    np.testing.assert_allclose(np.einsum("ij,ij->j", res.U, G @ res.V), res.s, rtol=1e-10)


def test_float32_lazy_source_stays_float32():
    G = spectrum_matrix(90, 70, 0.7 ** np.arange(70), seed=6, dtype=np.float32)
    op = LinearOperator(
        G.shape,
        matvec=lambda x: G @ x,
        rmatvec=lambda y: G.T @ y,
        matmat=lambda X: G @ X,
        rmatmat=lambda Y: G.T @ Y,
        dtype=np.float32,
    )
    res = solvers.block_krylov(op, 5, n_iter=3, random_state=0)
    assert res.U.dtype == res.s.dtype == res.V.dtype == np.float32
    s = linalg.svdvals(G.astype(np.float64))
    np.testing.assert_allclose(res.s, s[:5], rtol=1e-5)
