"""Tests of ksvd_bench.metrics.lowrank_error and frobenius_norm, and a property test that every
exact (LAPACK) answer passes every accuracy measure on repeated and clustered spectra."""

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy.sparse.linalg import aslinearoperator

from ksvd_bench.driver import reference_svd
from ksvd_bench.metrics import (
    CLUSTER_RTOL,
    LOWRANK_FLOOR_RTOL,
    WEIGHTS,
    eta,
    frobenius_norm,
    lowrank_error,
    subspace_error,
)


def triplets(U, s, V):
    return SimpleNamespace(U=U, s=s, V=V)


def svd_triplets(G, r):
    U, s, Vt = np.linalg.svd(G, full_matrices=False)
    return triplets(U[:, :r], s[:r], Vt[:r].T)


def matrix_with_spectrum(s, N, M, seed):
    rng = np.random.default_rng(seed)
    k = len(s)
    U = np.linalg.qr(rng.standard_normal((N, k)))[0]
    V = np.linalg.qr(rng.standard_normal((M, k)))[0]
    return (U * s) @ V.T


# ---------------------------------------------------------------------------------------------
# lowrank_error
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["pass", "products"])
def test_lowrank_hand_computed(method):
    G = np.diag([3.0, 2.0, 2.0, 1.0])
    I4 = np.eye(4)
    ref = triplets(I4[:, :2], np.array([3.0, 2.0]), I4[:, :2])
    # the other basis vector of the repeated value 2 is as good: no pairing, no gap needed
    other = triplets(I4[:, [0, 2]], ref.s, I4[:, [0, 2]])
    assert lowrank_error(G, ref, other, method=method) == pytest.approx(0.0, abs=1e-15)
    # e4 instead of e2: G - P G keeps diag(0, 2, 2, 0); the optimum keeps diag(0, 0, 2, 1)
    wrong = triplets(I4[:, [0, 3]], ref.s, I4[:, [0, 3]])
    value, terms = lowrank_error(G, ref, wrong, method=method, return_terms=True)
    assert terms["error"] == pytest.approx(np.sqrt(8.0))
    assert terms["optimum"] == pytest.approx(np.sqrt(5.0))
    assert terms["norm_fro"] == pytest.approx(np.sqrt(18.0))
    assert terms["method"] == method
    assert value == pytest.approx(np.sqrt(8.0 / 5.0) - 1.0)


def test_lowrank_scales_vectors_and_penalises_parallel_ones():
    G = np.diag([3.0, 2.0, 1.0])
    ref = svd_triplets(G, 2)
    scaled = triplets(ref.U * np.array([5.0, -0.1]), ref.s, ref.V)
    assert lowrank_error(G, ref, scaled) == pytest.approx(0.0, abs=1e-15)
    # two copies of u_1: U U^T = 2 u_1 u_1^T is no projector, and it misses u_2
    twice = triplets(ref.U[:, [0, 0]], ref.s, ref.V)
    expected = np.sqrt(3.0**2 + 2.0**2 + 1.0) / 1.0 - 1.0  # ||G - 2 G_1||_F / ||G - G_2||_F - 1
    assert lowrank_error(G, ref, twice) == pytest.approx(expected)


@pytest.mark.parametrize("kind", ["dense", "sparse", "operator"])
def test_lowrank_pass_and_products_agree_with_dense_oracle(kind):
    rng = np.random.default_rng(0)
    A = sp.random(60, 45, density=0.3, random_state=1, format="csr")
    D = A.toarray()
    G = {"dense": D, "sparse": A, "operator": aslinearoperator(A)}[kind]
    ref = svd_triplets(D, 5)
    approx = triplets(ref.U + 0.05 * rng.standard_normal(ref.U.shape), ref.s, ref.V)
    Un = approx.U / np.linalg.norm(approx.U, axis=0)
    error = np.linalg.norm(D - Un @ (Un.T @ D))
    optimum = np.sqrt(np.sum(np.linalg.svd(D, compute_uv=False)[5:] ** 2))
    expected = error / optimum - 1.0
    assert expected > 1e-3
    passed = lowrank_error(G, ref, approx, method="pass", chunk=7)
    products = lowrank_error(
        G,
        ref,
        approx,
        method="products",
        norm_fro=np.linalg.norm(D) if kind == "operator" else None,
    )
    assert passed == pytest.approx(expected, rel=1e-10)
    assert products == pytest.approx(expected, rel=1e-8)
    assert lowrank_error(G, ref, approx) == pytest.approx(expected, rel=1e-10)  # auto: a pass


def test_lowrank_exact_low_rank_uses_the_floor():
    G = matrix_with_spectrum([2.0, 1.0], 30, 20, seed=2)  # rank 2, asked for rank 3
    ref = reference_svd(G, 3)
    assert ref.s[2] < 1e-14
    exact = svd_triplets(G.T.copy(), 3)
    exact = triplets(exact.V, exact.s, exact.U)  # another exact SVD: its third vector differs
    value, terms = lowrank_error(G, ref, exact, return_terms=True)
    assert terms["optimum"] < 1e-13 and terms["floor"] == pytest.approx(
        LOWRANK_FLOOR_RTOL["pass"] * np.linalg.norm(G)
    )
    assert value <= 1e-8
    # a first vector off by 1e-9 leaves an error of about 1e-9 * sigma_1: measured on the floor
    rng = np.random.default_rng(3)
    off = triplets(exact.U + 1e-9 * rng.standard_normal(exact.U.shape), exact.s, exact.V)
    value, terms = lowrank_error(G, ref, off, return_terms=True)
    assert value == pytest.approx((terms["error"] - terms["optimum"]) / terms["floor"])
    assert 1e-5 < value < 1e-2


def test_lowrank_zero_matrix_scores_zero():
    G = np.zeros((6, 4))
    ref = reference_svd(G, 2)
    other = triplets(np.eye(6)[:, 3:5], np.zeros(2), np.eye(4)[:, 2:4])
    for method in ("pass", "products"):
        assert lowrank_error(G, ref, other, method=method) == 0.0


def test_lowrank_validation():
    G = np.diag([3.0, 2.0, 1.0])
    ref = svd_triplets(G, 2)
    with pytest.raises(ValueError, match="method"):
        lowrank_error(G, ref, ref, method="exact")
    with pytest.raises(ValueError, match="norm_fro"):
        lowrank_error(G, ref, ref, method="products", norm_fro=-1.0)
    with pytest.raises(TypeError, match="norm_fro"):
        lowrank_error(G, ref, ref, method="products", norm_fro="big")
    with pytest.raises(ValueError, match="floor_rtol"):
        lowrank_error(G, ref, ref, floor_rtol=2.0)
    with pytest.raises(ValueError, match="chunk"):
        lowrank_error(G, ref, ref, chunk=0)
    with pytest.raises(ValueError, match="shape"):
        lowrank_error(np.ones((4, 3)), ref, ref)
    with pytest.raises(ValueError, match="rank"):
        lowrank_error(G, ref, ref, rank=3)
    with pytest.raises(ValueError, match="non-negative"):
        lowrank_error(G, triplets(ref.U, -ref.s, ref.V), ref)


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_frobenius_norm_of_every_source(chunk):
    A = sp.random(50, 33, density=0.2, random_state=4, format="csr")
    expected = np.linalg.norm(A.toarray())
    for G in (A.toarray(), A, aslinearoperator(A)):
        assert frobenius_norm(G, chunk=chunk) == pytest.approx(expected, rel=1e-13)


# ---------------------------------------------------------------------------------------------
# every exact answer passes every measure
# ---------------------------------------------------------------------------------------------

LEVELS = (3.0, 1.0, 0.5, 1e-3, 0.0)
# relative splits of a repeated value: exact ties, clusters below CLUSTER_RTOL, and gaps just
# above it that must still be resolved (vector by vector) by an exact answer
SPLITS = (0.0, 1e-13, 1e-9, 1e-7, 1e-5, 1e-3)


@st.composite
def clustered_problems(draw):
    N = draw(st.integers(2, 9))
    M = draw(st.integers(2, 9))
    k = min(N, M)
    levels = draw(st.lists(st.sampled_from(LEVELS), min_size=k, max_size=k))
    splits = draw(st.lists(st.sampled_from(SPLITS), min_size=k, max_size=k))
    s = np.sort([lv * (1 + sp_) for lv, sp_ in zip(levels, splits, strict=True)])[::-1]
    seed = draw(st.integers(0, 2**32 - 1))
    rank = draw(st.integers(1, k))
    transpose = draw(st.booleans())
    return matrix_with_spectrum(s, N, M, seed), rank, seed, transpose


def another_exact_svd(G, rank, seed, transpose):
    """An exact SVD by another route: LAPACK gesvd of a permuted (and maybe transposed) G."""
    rng = np.random.default_rng(seed)
    p, q = rng.permutation(G.shape[0]), rng.permutation(G.shape[1])
    H = G[p][:, q]
    if transpose:
        Vh, s, Uh_t = sla.svd(H.T, full_matrices=False, lapack_driver="gesvd")
        Uh = Uh_t.T
    else:
        Uh, s, Vh_t = sla.svd(H, full_matrices=False, lapack_driver="gesvd")
        Vh = Vh_t.T
    U, V = np.empty_like(Uh), np.empty_like(Vh)
    U[p], V[q] = Uh, Vh  # G = P^T H Q^T
    return triplets(U[:, :rank], s[:rank], V[:, :rank])


@given(problem=clustered_problems())
def test_every_exact_answer_passes_every_measure(problem):
    G, rank, seed, transpose = problem
    ref = reference_svd(G, rank, cluster_rtol=CLUSTER_RTOL)
    assert len(ref.s) >= rank
    exact = another_exact_svd(G, rank, seed, transpose)
    np.testing.assert_allclose(exact.s, ref.s[:rank], atol=1e-13 * max(ref.s[0], 1.0))
    for w in WEIGHTS:
        assert eta(ref, exact, weights=w, rank=rank) <= 1e-8
    assert max(subspace_error(ref, exact, rank=rank)) <= 1e-8
    assert lowrank_error(G, ref, exact, rank=rank) <= 1e-8
