"""Tests of ksvd_bench.metrics: eta, subspace_error, residuals, residual_estimate, sv_error,
triplet_residual."""

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import aslinearoperator

from ksvd_bench.metrics import (
    WEIGHTS,
    eta,
    residual_estimate,
    residuals,
    singular_value_groups,
    subspace_error,
    sv_error,
    triplet_residual,
)


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
    for w, wv in (
        ("singular_values", [2.0, 0.5]),
        ("relative", [1.0, 0.25]),
        ("uniform", [1.0, 1.0]),
    ):
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
    approx = SimpleNamespace(
        U=rng.standard_normal((N, r)), s=np.ones(r), V=rng.standard_normal((M, r))
    )
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
    pert = SimpleNamespace(
        U=exact.U + 1e-3 * rng.standard_normal(exact.U.shape), s=exact.s, V=exact.V
    )
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
    approx = SimpleNamespace(
        U=np.hstack([good.U, Uj[:, 2:]]),
        s=np.concatenate([good.s, np.zeros(3)]),
        V=np.hstack([good.V, Vj[:, 2:]]),
    )
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


# ---------------------------------------------------------------------------------------------
# repeated and clustered singular values
# ---------------------------------------------------------------------------------------------


def test_singular_value_groups():
    s = [5.0, 5.0, 3.0, 1.0, 1.0 - 1e-9, 1.0 - 2e-9]
    assert singular_value_groups(s) == [(0, 2), (2, 3), (3, 6)]
    # measured against s[0]: a gap of 4e-6 is a cluster at s[0] = 5 (5e-6), not at rtol 1e-7
    assert singular_value_groups([5.0, 1.0, 1.0 - 4e-6]) == [(0, 1), (1, 3)]
    assert singular_value_groups([5.0, 1.0, 1.0 - 4e-6], cluster_rtol=1e-7) == [
        (0, 1),
        (1, 2),
        (2, 3),
    ]
    assert singular_value_groups([2.0, 2.0, 1.0], cluster_rtol=0) == [(0, 2), (2, 3)]
    assert singular_value_groups([2.0, 2.0], cluster_rtol=None) == [(0, 1), (1, 2)]
    assert singular_value_groups(np.zeros(3)) == [(0, 3)]
    with pytest.raises(ValueError, match="non-negative"):
        singular_value_groups([1.0, -1.0])
    with pytest.raises(ValueError, match="non-increasing"):
        singular_value_groups([1.0, 2.0])
    with pytest.raises(ValueError, match="cluster_rtol"):
        singular_value_groups([1.0], cluster_rtol=-1e-3)
    with pytest.raises(TypeError, match="cluster_rtol"):
        singular_value_groups([1.0], cluster_rtol="tight")


def test_eta_repeated_value_any_basis_is_exact_and_tilt_is_hand_computed():
    theta = 0.3
    E = np.eye(4)
    ref = SimpleNamespace(U=E[:, :3], s=np.array([2.0, 2.0, 1.0]), V=E[:, :3])
    c = np.cos(0.7)
    rot = np.array([[c, -np.sin(0.7)], [np.sin(0.7), c]])
    inside = SimpleNamespace(
        U=np.hstack([E[:, :2] @ rot, E[:, 2:3]]),
        s=ref.s,
        V=np.hstack([E[:, :2] @ rot.T, -E[:, 2:3]]),
    )
    for w in WEIGHTS:
        assert eta(ref, inside, weights=w) == pytest.approx(0.0, abs=1e-15)
        assert eta(ref, inside, weights=w, cluster_rtol=None) > 0.1  # the literal eta fails it
    # one vector of the cluster tilted out of it by theta: principal cosines 1 and cos(theta)
    tilted = SimpleNamespace(
        U=np.column_stack([E[:, 1], np.cos(theta) * E[:, 0] + np.sin(theta) * E[:, 3], E[:, 2]]),
        s=ref.s,
        V=ref.V,
    )
    for w, wv in (("singular_values", 2.0), ("relative", 1.0), ("uniform", 1.0)):
        assert eta(ref, tilted, weights=w) == pytest.approx(wv * (1 - np.cos(theta)) / 3)


def test_eta_cluster_penalises_parallel_vectors_and_is_bounded():
    E = np.eye(3)
    ref = SimpleNamespace(U=E[:, :2], s=np.ones(2), V=E[:, :2])
    twice = SimpleNamespace(U=E[:, [0, 0]], s=np.ones(2), V=E[:, :2])
    # nuclear norm of [[1, 1], [0, 0]] is sqrt(2): the pair covers one direction, not two
    assert eta(ref, twice, weights="uniform") == pytest.approx((2 - np.sqrt(2)) / 2)
    outside = SimpleNamespace(U=E[:, [2, 2]], s=np.ones(2), V=E[:, [2, 2]])
    assert eta(ref, outside, weights="uniform") == pytest.approx(2.0)


def test_eta_cluster_cut_by_rank_uses_the_whole_cluster():
    E = np.eye(4)
    ref3 = SimpleNamespace(U=E[:, :3], s=np.array([2.0, 1.0, 1.0]), V=E[:, :3])
    approx = SimpleNamespace(U=E[:, [0, 2]], s=np.array([2.0, 1.0]), V=E[:, [0, 2]])
    assert eta(ref3, approx, weights="uniform", rank=2) == pytest.approx(0.0, abs=1e-15)
    assert subspace_error(ref3, approx, rank=2) == (0.0, 0.0)
    # a reference cut at 2 cannot know that u_3 is as good as u_2: the literal verdict
    ref2 = SimpleNamespace(U=E[:, :2], s=np.array([2.0, 1.0]), V=E[:, :2])
    assert eta(ref2, approx, weights="uniform") == pytest.approx(1.0)
    assert subspace_error(ref2, approx) == (1.0, 1.0)
    # inside the cut cluster but tilted out of it by 45 degrees, or missing u_1
    tilted = SimpleNamespace(
        U=np.column_stack([E[:, 0], (E[:, 2] + E[:, 3]) / np.sqrt(2)]), s=approx.s, V=approx.V
    )
    assert subspace_error(ref3, tilted, rank=2)[0] == pytest.approx(np.sqrt(0.5))
    missing = SimpleNamespace(U=E[:, [1, 2]], s=approx.s, V=E[:, [1, 2]])
    assert subspace_error(ref3, missing, rank=2) == pytest.approx((1.0, 1.0))
    with pytest.raises(ValueError, match="rank"):
        eta(ref3, approx, rank=4)


def test_zero_singular_values_of_a_rectangular_matrix_form_the_null_cluster():
    # G = 2 e1 e1^T (5 x 3): u_2 may be any unit vector orthogonal to e1 in R^5, v_2 in R^3
    E5, E3 = np.eye(5), np.eye(3)
    ref = SimpleNamespace(U=E5[:, :2], s=np.array([2.0, 0.0]), V=E3[:, :2])
    other = SimpleNamespace(U=E5[:, [0, 4]], s=np.array([2.0, 0.0]), V=E3[:, [0, 2]])
    for w in WEIGHTS:
        assert eta(ref, other, weights=w) == pytest.approx(0.0, abs=1e-15)
    assert subspace_error(ref, other) == (0.0, 0.0)
    assert eta(ref, other, weights="uniform", cluster_rtol=None) == pytest.approx(1.0)
    wrong = SimpleNamespace(U=E5[:, [4, 0]], s=np.array([2.0, 0.0]), V=E3[:, [0, 2]])
    assert eta(ref, wrong, weights="uniform") == pytest.approx(1.0)  # u_1 missed, u~_2 = e1


@settings(deadline=None)
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_cluster_eta_bounded_sign_invariant_and_literal_when_simple(seed, data):
    rng = np.random.default_rng(seed)
    N, M = data.draw(st.integers(2, 10)), data.draw(st.integers(2, 10))
    k = min(N, M)
    s = np.sort(
        np.array(data.draw(st.lists(st.sampled_from([3.0, 1.0, 0.5, 0.0]), min_size=k, max_size=k)))
    )[::-1]
    s[0] = 3.0  # keeps the relative weights defined
    U = np.linalg.qr(rng.standard_normal((N, k)))[0]
    V = np.linalg.qr(rng.standard_normal((M, k)))[0]
    r = data.draw(st.integers(1, k))
    ref = SimpleNamespace(U=U, s=s, V=V)
    approx = SimpleNamespace(
        U=rng.standard_normal((N, r)), s=np.ones(r), V=rng.standard_normal((M, r))
    )
    flips = rng.choice([-1.0, 1.0], size=r)
    flipped = SimpleNamespace(U=approx.U * flips, s=approx.s, V=approx.V * flips[::-1])
    for w in WEIGHTS:
        value = eta(ref, approx, weights=w, rank=r)
        assert 0.0 <= value <= 2 * mean_weight(s[:r], w) * (1 + 1e-12) + 1e-15
        assert eta(ref, flipped, weights=w, rank=r) == pytest.approx(value, rel=1e-10, abs=1e-14)
    distinct = SimpleNamespace(U=U, s=np.linspace(2.0, 1.0, k), V=V)
    for w in WEIGHTS:
        assert eta(distinct, approx, weights=w, rank=r) == eta(
            distinct, approx, weights=w, rank=r, cluster_rtol=None
        )


def test_eta_rejects_negative_or_unsorted_reference_values():
    ref = SimpleNamespace(U=np.eye(3)[:, :2], s=np.array([-1.0, -2.0]), V=np.eye(3)[:, :2])
    approx = SimpleNamespace(U=np.eye(3)[:, 1:], s=np.ones(2), V=np.eye(3)[:, 1:])
    with pytest.raises(ValueError, match="reference.s must be non-negative"):
        eta(ref, approx)
    with pytest.raises(ValueError, match="non-increasing"):
        eta(SimpleNamespace(U=ref.U, s=np.array([1.0, 2.0]), V=ref.V), approx)
    with pytest.raises(ValueError, match="non-negative"):
        subspace_error(ref, approx)


def test_residual_estimate_treats_a_repeated_value_as_one_subspace():
    rng = np.random.default_rng(10)
    N, M = 60, 50
    s = np.concatenate([[4.0, 2.0, 2.0, 2.0, 1.0], 0.5 ** np.arange(1, 21)])
    G = (np.linalg.qr(rng.standard_normal((N, 25)))[0] * s) @ np.linalg.qr(
        rng.standard_normal((M, 25))
    )[0].T
    exact = svd_triplets(G, 6)
    # rotate the exact vectors of the repeated value 2 inside their subspace
    R = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    U, V = exact.U.copy(), exact.V.copy()
    U[:, 1:4], V[:, 1:4] = U[:, 1:4] @ R, V[:, 1:4] @ R
    rotated = SimpleNamespace(U=U, s=exact.s, V=V)
    ref = svd_triplets(G, 6)
    assert eta(ref, rotated, weights="uniform") < 1e-14
    assert eta(ref, rotated, weights="uniform", cluster_rtol=None) > 1e-2
    assert residual_estimate(G, rotated, weights="uniform", rank=5) < 1e-20
    assert residual_estimate(G, rotated, weights="uniform", rank=5, cluster_rtol=None) > 0.1


# ---------------------------------------------------------------------------------------------
# whole triplets
# ---------------------------------------------------------------------------------------------


def test_sv_error_values_only():
    rng = np.random.default_rng(7)
    G = low_rank_plus_noise(rng)
    ref = svd_triplets(G, 6)
    assert sv_error(ref, ref) == 0.0
    shrunk = SimpleNamespace(U=ref.U, s=ref.s * np.linspace(1.0, 0.5, 6), V=ref.V)
    expected = np.max(np.abs(shrunk.s - ref.s)) / ref.s[0]
    assert sv_error(ref, shrunk) == pytest.approx(expected, rel=1e-14)
    # values compared as a spectrum: their order in the answer does not matter
    flipped = SimpleNamespace(U=ref.U[:, ::-1], s=ref.s[::-1], V=ref.V[:, ::-1])
    assert sv_error(ref, flipped) == 0.0
    assert sv_error(ref, shrunk, rank=2) == pytest.approx(
        np.max(np.abs(shrunk.s[:2] - ref.s[:2])) / ref.s[0]
    )
    zero = SimpleNamespace(U=ref.U, s=np.zeros(6), V=ref.V)
    assert sv_error(zero, shrunk) == pytest.approx(np.max(shrunk.s))  # s_1 = 0: absolute
    with pytest.raises(ValueError, match="fewer than"):
        sv_error(ref, SimpleNamespace(U=ref.U[:, :2], s=ref.s[:2], V=ref.V[:, :2]))
    with pytest.raises(TypeError, match="attributes"):
        sv_error(ref, ref.s)
    with pytest.raises(ValueError, match="non-finite"):
        sv_error(ref, SimpleNamespace(U=ref.U, s=np.full(6, np.nan), V=ref.V))


def test_triplet_residual_ties_u_s_and_v():
    rng = np.random.default_rng(8)
    G = low_rank_plus_noise(rng)
    ref = svd_triplets(G, 5)
    assert triplet_residual(G, ref) < 1e-13
    # the right vectors with wrong values: residual = ||U (S - S~)||_F relative to ||s||
    half = SimpleNamespace(U=ref.U, s=ref.s / 2, V=ref.V)
    value, terms = triplet_residual(G, half, reference=ref, return_terms=True)
    assert terms["u"] == pytest.approx(np.linalg.norm(ref.s / 2), rel=1e-10)
    assert terms["scale"] == pytest.approx(np.linalg.norm(ref.s), rel=1e-14)
    assert value == pytest.approx(0.5, rel=1e-10)
    # without a reference the answer's own values set the scale
    assert triplet_residual(G, half) == pytest.approx(1.0, rel=1e-10)
    # a random V of the right size: about 1 or more
    V = np.linalg.qr(rng.standard_normal((G.shape[1], 5)))[0]
    assert triplet_residual(G, SimpleNamespace(U=ref.U, s=ref.s, V=V), reference=ref) > 0.5
    # precomputed products give the same number, and any source too
    products = (G @ half.V, G.T @ half.U)
    assert triplet_residual(G, half, products=products) == triplet_residual(G, half)
    assert triplet_residual(aslinearoperator(G), half) == pytest.approx(
        triplet_residual(G, half), rel=1e-12
    )
    assert triplet_residual(G, half, scale=2.0) == pytest.approx(terms["u"] / 2.0)
    assert triplet_residual(G, half, rank=2) == pytest.approx(1.0, rel=1e-10)
    with pytest.raises(ValueError, match="products"):
        triplet_residual(G, half, products=(G @ half.V, G @ half.V))
    with pytest.raises(ValueError, match="shape"):
        triplet_residual(G[:-1], half)
    with pytest.raises(ValueError, match="scale"):
        triplet_residual(G, half, scale=-1.0)
    with pytest.raises(ValueError, match="rank"):
        triplet_residual(G, half, rank=9)


def test_residual_estimate_takes_the_products_it_would_compute():
    rng = np.random.default_rng(3)
    G = rng.standard_normal((40, 30))
    U, s, Vt = np.linalg.svd(G + 0.01 * rng.standard_normal(G.shape), full_matrices=False)
    approx = SimpleNamespace(U=U[:, :4], s=s[:4], V=Vt[:4].T)
    own = residual_estimate(G, approx)
    given = residual_estimate(G, approx, products=(G @ approx.V, G.T @ approx.U))
    assert given == pytest.approx(own, rel=1e-12)
    with pytest.raises(ValueError, match="products must have shapes"):
        residual_estimate(G, approx, products=(G @ approx.V[:, :3], G.T @ approx.U))
