"""Tests of ksvd_bench.metrics: eta, subspace_error, residuals, residual_estimate."""

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import aslinearoperator

from ksvd_bench.metrics import WEIGHTS, eta, residual_estimate, residuals, subspace_error


def svd_triplets(G, r):
    U, s, Vt = np.linalg.svd(G, full_matrices=False)
    return SimpleNamespace(U=U[:, :r], s=s[:r], V=Vt[:r].T)


def mean_weight(s, weights):
    return {"singular_values": s, "relative": s / s[0], "uniform": np.ones_like(s)}[weights].mean()


def low_rank_plus_noise(rng, N=120, M=90, decay=0.6, noise=1e-4, k=30):
    Q1 = np.linalg.qr(rng.standard_normal((N, k)))[0]
    Q2 = np.linalg.qr(rng.standard_normal((M, k)))[0]
    return (Q1 * decay ** np.arange(k)) @ Q2.T + noise * rng.standard_normal((N, M))


def randomized_approx(G, r, p, q, rng):
    """A plain randomized range-finder SVD: approximations of controllable quality."""
    Y = G @ rng.standard_normal((G.shape[1], r + p))
    for _ in range(q):
        Y = G @ (G.T @ np.linalg.qr(Y)[0])
    Q = np.linalg.qr(Y)[0]
    Ub, sb, Vbt = np.linalg.svd(Q.T @ G, full_matrices=False)
    return SimpleNamespace(U=(Q @ Ub)[:, :r], s=sb[:r], V=Vbt[:r].T)


shapes = st.tuples(st.integers(2, 12), st.integers(2, 12))


def random_reference(shape, seed, data):
    """A seeded Generator, a drawn rank r and the top-r triplets of a random matrix."""
    rng = np.random.default_rng(seed)
    r = data.draw(st.integers(1, min(shape)))
    return rng, r, svd_triplets(rng.standard_normal(shape), r)


@settings(deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**32 - 1), data=st.data())
def test_eta_of_exact_is_zero_for_all_weights(shape, seed, data):
    _, _, ref = random_reference(shape, seed, data)
    for w in WEIGHTS:
        assert eta(ref, ref, weights=w) == pytest.approx(0.0, abs=1e-12)


@settings(deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**32 - 1), data=st.data())
def test_eta_invariant_to_sign_flips_and_bounded(shape, seed, data):
    N, M = shape
    rng, r, ref = random_reference(shape, seed, data)
    # An arbitrary (unnormalised) approximation with as many triplets.
    approx = SimpleNamespace(
        U=rng.standard_normal((N, r)), s=np.sort(rng.random(r))[::-1], V=rng.standard_normal((M, r))
    )
    flips_u = rng.choice([-1.0, 1.0], size=r)
    flips_v = rng.choice([-1.0, 1.0], size=r)
    flipped = SimpleNamespace(U=approx.U * flips_u, s=approx.s, V=approx.V * flips_v)
    for w in WEIGHTS:
        value = eta(ref, approx, weights=w)
        assert eta(ref, flipped, weights=w) == pytest.approx(value, rel=1e-12, abs=1e-15)
        assert 0.0 <= value <= 2 * mean_weight(ref.s, w) * (1 + 1e-12)


def test_eta_extremes_reach_the_bound():
    ref = SimpleNamespace(U=np.eye(4)[:, :2], s=np.array([3.0, 1.0]), V=np.eye(3)[:, :2])
    orth = SimpleNamespace(U=np.eye(4)[:, 2:4], s=np.array([3.0, 1.0]), V=np.eye(3)[:, [2, 2]])
    assert eta(ref, orth, weights="singular_values") == pytest.approx(2 * ref.s.mean())
    assert eta(ref, orth, weights="uniform") == pytest.approx(2.0)


def test_eta_hand_computed():
    theta, phi = 0.3, 1.1
    ref = SimpleNamespace(U=np.eye(3)[:, :2], s=np.array([2.0, 0.5]), V=np.eye(2))
    # u~_1 at angle theta from u_1 with norm 5 (eta divides it out), u~_2 exact but negated;
    # v~_1 exact, v~_2 at angle phi from v_2.
    Ua = np.array([[5 * np.cos(theta), 0.0], [5 * np.sin(theta), -1.0], [0.0, 0.0]])
    Va = np.array([[1.0, np.sin(phi)], [0.0, np.cos(phi)]])
    approx = SimpleNamespace(U=Ua, s=np.array([1.0, 1.0]), V=Va)
    dev = np.array([1 - np.cos(theta), 1 - np.cos(phi)])  # per triplet, u part + v part
    for w, wv in (("singular_values", [2.0, 0.5]), ("relative", [1.0, 0.25]),
                  ("uniform", [1.0, 1.0])):
        assert eta(ref, approx, weights=w) == pytest.approx(np.dot(wv, dev) / 2)


def test_eta_uses_first_r_columns_of_approx():
    rng = np.random.default_rng(1)
    G = rng.standard_normal((8, 6))
    ref, full = svd_triplets(G, 2), svd_triplets(G, 5)
    assert eta(ref, full, weights="uniform") == pytest.approx(0.0, abs=1e-12)


def test_eta_validation():
    rng = np.random.default_rng(2)
    G = rng.standard_normal((6, 5))
    ref, small = svd_triplets(G, 3), svd_triplets(G, 2)
    with pytest.raises(ValueError, match="weights"):
        eta(ref, ref, weights="lambda")
    with pytest.raises(ValueError, match="fewer than the reference's rank"):
        eta(ref, small)
    with pytest.raises(ValueError, match="rows"):
        eta(ref, svd_triplets(rng.standard_normal((7, 5)), 3))
    with pytest.raises(TypeError, match="approx must have attributes"):
        eta(ref, np.zeros((6, 3)))
    bad = SimpleNamespace(U=ref.U.copy(), s=ref.s, V=ref.V)
    bad.U[0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        eta(ref, bad)
    with pytest.raises(ValueError, match="same number of triplets"):
        eta(ref, SimpleNamespace(U=ref.U, s=ref.s[:2], V=ref.V))


def test_subspace_error_hand_computed_rotation():
    theta = 0.2
    ref = SimpleNamespace(U=np.eye(4)[:, :2], s=np.array([2.0, 1.0]), V=np.eye(3)[:, :2])
    c, s = np.cos(theta), np.sin(theta)
    # U~ leaves the subspace by theta in one direction; V~ rotates inside it (no error).
    Ua = np.array([[1, 0], [0, c], [0, s], [0, 0]], dtype=float)
    Va = np.array([[c, -s], [s, c], [0, 0]])
    sin_u, sin_v = subspace_error(ref, SimpleNamespace(U=Ua, s=ref.s, V=Va))
    assert sin_u == pytest.approx(np.sin(theta), rel=1e-12)
    assert sin_v == pytest.approx(0.0, abs=1e-14)
    # Inside-subspace rotation is a full error for eta, none for the subspace metric.
    assert eta(ref, SimpleNamespace(U=ref.U, s=ref.s, V=Va), weights="uniform") > 0.01


@settings(deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**32 - 1), data=st.data())
def test_subspace_error_matches_projection_oracle(shape, seed, data):
    N, M = shape
    rng, r, ref = random_reference(shape, seed, data)
    approx = SimpleNamespace(U=rng.standard_normal((N, r)), s=np.ones(r),
                             V=rng.standard_normal((M, r)))
    got = subspace_error(ref, approx)
    for X, Y, value in ((ref.U, approx.U, got[0]), (ref.V, approx.V, got[1])):
        Qy = sla.orth(Y)
        expected = np.linalg.norm(Qy - X @ (X.T @ Qy), 2) if Qy.shape[1] == r else 1.0
        assert value == pytest.approx(min(expected, 1.0), abs=1e-10)


def test_subspace_error_rank_deficient_approx_is_one():
    ref = SimpleNamespace(U=np.eye(3)[:, :2], s=np.ones(2), V=np.eye(3)[:, :2])
    approx = SimpleNamespace(U=np.eye(3)[:, [0, 0]], s=np.ones(2), V=np.eye(3)[:, :2])
    assert subspace_error(ref, approx) == (1.0, 0.0)


@pytest.mark.parametrize("kind", ["dense", "sparse", "operator"])
def test_residuals_zero_for_exact_and_match_oracle_when_perturbed(kind):
    rng = np.random.default_rng(3)
    A = sp.random(40, 30, density=0.3, random_state=4, format="csr")
    G = {"dense": A.toarray(), "sparse": A, "operator": aslinearoperator(A)}[kind]
    exact = svd_triplets(A.toarray(), 4)
    res = residuals(G, exact)
    assert res["u"].shape == (4,) and res["v"].shape == (4,)
    assert res["max"] < 1e-13
    pert = SimpleNamespace(U=exact.U + 1e-3 * rng.standard_normal(exact.U.shape), s=exact.s,
                           V=exact.V)
    res = residuals(G, pert)
    D = A.toarray()
    ru = np.linalg.norm(D @ pert.V - pert.U * pert.s, axis=0) / pert.s[0]
    rv = np.linalg.norm(D.T @ pert.U - pert.V * pert.s, axis=0) / pert.s[0]
    np.testing.assert_allclose(res["u"], ru, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(res["v"], rv, rtol=1e-10)
    assert np.all(res["u"] > 0) and np.all(res["v"] > 0)
    assert res["max"] == pytest.approx(max(ru.max(), rv.max()))


def test_residuals_shape_mismatch():
    G = np.ones((5, 4))
    with pytest.raises(ValueError, match="shape"):
        residuals(G, svd_triplets(np.ones((4, 5)), 1))


def test_residual_estimate_exact_is_tiny():
    rng = np.random.default_rng(5)
    G = low_rank_plus_noise(rng)
    for w in WEIGHTS:
        assert residual_estimate(G, svd_triplets(G, 5), weights=w) < 1e-20


def test_residual_estimate_tracks_eta():
    """On low-rank + noise, the estimate is a mild overestimate of eta across 5 decades."""
    rng = np.random.default_rng(6)
    G = low_rank_plus_noise(rng)
    r = 5
    ref = svd_triplets(G, r)
    etas, ests = [], []
    for q in range(3):
        for p in (0, 2, 5, 10):
            approx = randomized_approx(G, r, p, q, rng)
            for w in WEIGHTS:
                e = eta(ref, approx, weights=w)
                if e < 1e-12:  # eta's own rounding floor (1 - cos near 1e-16)
                    continue
                etas.append(e)
                ests.append(residual_estimate(G, approx, weights=w))
    etas, ests = np.array(etas), np.array(ests)
    assert len(etas) >= 15
    assert etas.max() / etas.min() > 1e4  # the study spans a wide range of accuracies
    ratio = ests / etas
    # Davis-Kahan makes it an upper-bound-like estimate; the gap ratio makes it pessimistic
    # by a moderate factor (about 2-10 here), never by orders of magnitude.
    assert np.all(ratio > 0.5), ratio
    assert np.all(ratio < 50), ratio
    # Monotone relation: rank correlation close to 1.
    rank_corr = np.corrcoef(np.argsort(np.argsort(etas)), np.argsort(np.argsort(ests)))[0, 1]
    assert rank_corr > 0.9


def test_residual_estimate_extra_triplets_and_terms():
    rng = np.random.default_rng(7)
    G = low_rank_plus_noise(rng)
    approx = randomized_approx(G, 8, 0, 0, rng)
    est, terms = residual_estimate(G, approx, weights="uniform", rank=5, return_terms=True)
    assert terms["terms"].shape == (5,)
    assert np.all(terms["gaps"] <= terms["mu"])
    assert np.all((terms["terms"] >= 0) & (terms["terms"] <= 2))
    assert est == pytest.approx(terms["terms"].mean())
    # sigma_{k+1} <= ||(I - QQ^T) G||_2; power iterations approach that norm from below.
    Q = np.linalg.qr(approx.U)[0]
    assert terms["tail"] <= np.linalg.norm(G - Q @ (Q.T @ G), 2) * (1 + 1e-12)
    sv = np.linalg.svd(G, compute_uv=False)
    assert terms["tail"] >= 0.5 * sv[8]


def test_residual_estimate_validation():
    G = np.eye(4)
    ex = svd_triplets(G, 2)
    with pytest.raises(ValueError, match="weights"):
        residual_estimate(G, ex, weights="bad")
    with pytest.raises(ValueError, match="rank"):
        residual_estimate(G, ex, rank=3)
    with pytest.raises(ValueError, match="n_power_iter"):
        residual_estimate(G, ex, n_power_iter=-1)
    with pytest.raises(ValueError, match="block"):
        residual_estimate(G, ex, block=0)


def test_residual_estimate_weights_do_not_drop_zero_valued_triplets():
    """A solver that returns s~ = 0 with arbitrary vectors must still be charged for them."""
    rng = np.random.default_rng(8)
    G = low_rank_plus_noise(rng, decay=0.8)
    r = 5
    ref = svd_triplets(G, r)
    good = svd_triplets(G, 2)
    # Three junk triplets: random directions orthogonal to the good ones, value 0.
    Uj = np.linalg.qr(np.hstack([good.U, rng.standard_normal((G.shape[0], 3))]))[0]
    Vj = np.linalg.qr(np.hstack([good.V, rng.standard_normal((G.shape[1], 3))]))[0]
    approx = SimpleNamespace(U=np.hstack([good.U, Uj[:, 2:]]),
                             s=np.concatenate([good.s, np.zeros(3)]),
                             V=np.hstack([good.V, Vj[:, 2:]]))
    for w in WEIGHTS:
        e = eta(ref, approx, weights=w)
        assert e > 0.1 * mean_weight(ref.s, w)
        est, terms = residual_estimate(G, approx, weights=w, return_terms=True)
        assert est >= 0.5 * e
        assert np.all(terms["terms"][2:] == 2.0)


def test_residual_estimate_ritz_bound_sharpens_clusters():
    """Two singular values 1e-4 apart: the per-triplet bound saturates, Saad's does not."""
    rng = np.random.default_rng(9)
    N, M, k = 150, 120, 30
    Q1 = np.linalg.qr(rng.standard_normal((N, k)))[0]
    Q2 = np.linalg.qr(rng.standard_normal((M, k)))[0]
    s = 0.5 ** np.arange(k)
    s[2] = s[1] * (1 - 1e-4)
    G = (Q1 * s) @ Q2.T + 1e-6 * rng.standard_normal((N, M))
    ref = svd_triplets(G, 4)
    sharper = 0
    for q, p in ((0, 10), (1, 2), (1, 5), (2, 2), (3, 2)):
        approx = randomized_approx(G, 4, p, q, rng)  # Rayleigh-Ritz triplets by construction
        e = eta(ref, approx, weights="uniform")
        est, terms = residual_estimate(G, approx, weights="uniform", return_terms=True)
        plain = residual_estimate(G, approx, weights="uniform", ritz=False)
        assert terms["ritz"]
        assert e <= 2 * est  # still conservative
        assert est <= plain * (1 + 1e-12)
        sharper += est < 1e-2 * plain
    assert sharper >= 3
    # A perturbed answer is not a set of Ritz triplets, and "auto" notices.
    approx = randomized_approx(G, 4, 5, 1, rng)
    approx.U = approx.U + 1e-6 * rng.standard_normal(approx.U.shape)
    assert not residual_estimate(G, approx, return_terms=True)[1]["ritz"]
