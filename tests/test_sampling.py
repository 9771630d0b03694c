"""Samplers of ``solvers.sampling``: ARP, ACA+, RPCholesky on the joint PSD kernel.

Each is compared with numpy's exact SVD on small matrices: exact when the sample spans G,
accurate on a rare-cluster kernel, deterministic per seed, with clear errors on bad input.
"""

import importlib
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import solvers
from ksvd_bench.datasets import make_rare_clusters
from ksvd_bench.kernels import KernelSource, kernel_matrix
from ksvd_bench.kernels.joint import JointKernel
from solvers._source import DenseSource
from solvers.sampling import (
    Selection,
    arp_pivots,
    rpcholesky_svd,
    select_rows_cols,
)


def _low_rank(n, m, r, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, r)) @ rng.standard_normal((r, m))


def _cross_svd(G, sel, r):
    """Top-r SVD of the cross approximation ``C G[I, J]^+ R`` of a selection."""
    C = G[:, sel.col_indices]
    R = G[sel.row_indices]
    W = G[np.ix_(sel.row_indices, sel.col_indices)]
    A = C @ np.linalg.pinv(W, rcond=1e-10) @ R
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    return U[:, :r], s[:r], Vt[:r].T


def _sin(Q, Qa):
    return float(np.linalg.norm(Qa - Q @ (Q.T @ Qa), 2))


def _top(G, r):
    U, s, Vt = np.linalg.svd(G, full_matrices=False)
    return U[:, :r], s[:r], Vt[:r].T


# --------------------------------------------------------------------------- row/col samplers
@pytest.mark.parametrize("sampling", ["arp", "aca"])
def test_exact_when_the_sample_spans_G(sampling):
    G = _low_rank(60, 45, 5)
    sel = select_rows_cols(
        DenseSource(G), 7, 5, sampling=sampling, rng=np.random.default_rng(0), rank=5
    )
    U, s, V = _top(G, 5)
    Ua, sa, Va = _cross_svd(G, sel, 5)
    np.testing.assert_allclose(sa, s, rtol=1e-8)
    assert _sin(U, Ua) < 1e-8 and _sin(V, Va) < 1e-8
    assert sel.row_indices.size == 7 and sel.col_indices.size == 5
    assert np.unique(sel.row_indices).size == 7 and np.unique(sel.col_indices).size == 5
    assert sel.row_indices.dtype == np.int64


def test_arp_costs_one_pass_and_reads_no_rows():
    G = _low_rank(40, 30, 4)
    sel = select_rows_cols(
        DenseSource(G), 6, 6, sampling="arp", rng=np.random.default_rng(1), rank=4
    )
    assert sel.n_passes == 1.0 and sel.entries_read == 40 * 30
    assert sel.rows is None and sel.cols is None
    assert sel.info["sketch_rank_rows"] == 4  # numerical rank of G Omega


def test_arp_pivots_take_a_row_of_leverage_one():
    # a direction carried by row 17 alone: every ARP draw must pick row 17
    rng = np.random.default_rng(0)
    Q = np.zeros((200, 3))
    Q[17, 0] = 1.0
    Q[:, 1:] = np.linalg.qr(rng.standard_normal((200, 2)))[0]
    Q[17, 1:] = 0
    Q[:, 1:] = np.linalg.qr(Q[:, 1:])[0]
    for seed in range(5):
        assert 17 in arp_pivots(Q, 3, np.random.default_rng(seed))


def test_aca_returns_the_rows_and_columns_it_read():
    G = _low_rank(50, 40, 6) + 1e-3 * np.random.default_rng(3).standard_normal((50, 40))
    sel = select_rows_cols(
        DenseSource(G), 9, 6, sampling="aca", rng=np.random.default_rng(2), rank=6
    )
    np.testing.assert_array_equal(sel.rows, G[sel.row_indices])
    np.testing.assert_array_equal(sel.cols, G[:, sel.col_indices])
    # 9 crosses read 9 rows and 9 columns; 3 of the columns are not kept; plus references
    assert sel.entries_read >= 3 * 50
    assert sel.n_passes == pytest.approx(sel.entries_read / (50 * 40))
    assert sel.info["aca_steps"] == 9


def test_aca_misses_a_decoupled_block():
    # documented failure: a tiny block with no coupling to the rest is never pivoted into
    rng = np.random.default_rng(0)
    big = _low_rank(200, 200, 3, seed=1)
    G = np.zeros((203, 203))
    G[:200, :200] = big
    G[200:, 200:] = 1e5 * np.linalg.qr(rng.standard_normal((3, 3)))[0]  # dominant, 3 x 3
    sel = select_rows_cols(
        DenseSource(G), 3, 3, sampling="aca", rng=np.random.default_rng(0), rank=3
    )
    hit_aca = np.any(sel.row_indices >= 200)
    arp = select_rows_cols(
        DenseSource(G), 3, 3, sampling="arp", rng=np.random.default_rng(0), rank=3
    )
    assert np.all(arp.row_indices >= 200)  # ARP finds the three dominant directions
    assert not hit_aca


@pytest.mark.parametrize("sampling", ["arp", "aca"])
def test_samplers_are_deterministic_per_seed(sampling):
    G = _low_rank(80, 70, 10) + 1e-2 * np.random.default_rng(5).standard_normal((80, 70))
    a, b, c = (
        select_rows_cols(
            DenseSource(G), 12, 10, sampling=sampling, rng=np.random.default_rng(s), rank=8
        )
        for s in (4, 4, 5)
    )
    np.testing.assert_array_equal(a.row_indices, b.row_indices)
    np.testing.assert_array_equal(a.col_indices, b.col_indices)
    assert not (
        np.array_equal(a.row_indices, c.row_indices)
        and np.array_equal(a.col_indices, c.col_indices)
    )


def test_select_rows_cols_bad_inputs():
    src = DenseSource(_low_rank(10, 8, 2))
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="n_rows"):
        select_rows_cols(src, 0, 2, sampling="arp", rng=rng, rank=2)
    with pytest.raises(ValueError, match="n_cols"):
        select_rows_cols(src, 2, 9, sampling="arp", rng=rng, rank=2)
    with pytest.raises(TypeError, match="n_rows"):
        select_rows_cols(src, 2.0, 2, sampling="arp", rng=rng, rank=2)
    with pytest.raises(ValueError, match="sampling must be one of"):
        select_rows_cols(src, 2, 2, sampling="leverage", rng=rng, rank=2)
    with pytest.raises(ValueError, match="rpcholesky_svd"):
        select_rows_cols(src, 2, 2, sampling="rpcholesky", rng=rng, rank=2)
    assert isinstance(select_rows_cols(src, 2, 2, sampling="aca", rng=rng, rank=2), Selection)


# --------------------------------------------------------------------------- RPCholesky
def _points(n=40, m=30, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal((m, d))


class _Holder:
    """A source with a fixed joint kernel (to read its entry counter afterwards)."""

    def __init__(self, jp):
        self.jp = jp
        self.shape = (jp.n_x, jp.n_z)

    def joint_psd(self):
        return self.jp


@pytest.mark.parametrize("kernel", ["rbf", "sne", "t", "linear", "softmax"])
@pytest.mark.parametrize("center", [False, True])
def test_rpcholesky_with_all_pivots_is_exact(kernel, center):
    X, Z = _points()
    src = KernelSource.from_points(X, Z, kernel, gamma=1.5, center=center)
    G = kernel_matrix(X, Z, kernel, gamma=1.5, center=center)
    r = 3
    U, s, V, info = rpcholesky_svd(src, r, 70, rng=np.random.default_rng(0))
    Ue, se, Ve = _top(G, r)
    np.testing.assert_allclose(s, se, rtol=1e-6, atol=1e-9 * se[0])
    assert _sin(Ue, U) < 1e-5 and _sin(Ve, V) < 1e-5
    assert info["trace_residual"] < 1e-8 * 70


@pytest.mark.parametrize("kernel", ["sne", "t"])
def test_rpcholesky_counts_every_entry_it_reads(kernel):
    X, Z = _points(50, 40, 2, seed=1)
    for pivots in ("scaled", "plain"):
        jp = JointKernel(X, Z, kernel, inv_g2=1.0)
        info = rpcholesky_svd(_Holder(jp), 4, 12, rng=np.random.default_rng(3), pivots=pivots)[3]
        assert info["entries_read"] == jp.n_entries


def test_rpcholesky_counts_entries_and_the_trace_bound_holds():
    X, Z = _points(50, 40, 2, seed=1)
    jp = JointKernel(X, Z, "rbf", inv_g2=1.0)
    k = 8
    U, s, V, info = rpcholesky_svd(_Holder(jp), k, k, rng=np.random.default_rng(3))
    assert info["entries_read"] == jp.n_entries
    # diagonal + k columns + the small rejection blocks
    assert 90 * (k + 1) <= info["entries_read"] <= 90 * (k + 1) + 40 * k * k
    assert info["n_passes"] == pytest.approx(info["entries_read"] / (50 * 40))
    G = kernel_matrix(X, Z, "rbf", gamma=1.0)
    err_nuclear = np.linalg.svd(G - (U * s) @ V.T, compute_uv=False).sum()
    assert err_nuclear <= info["trace_bound"] * (1 + 1e-9)
    assert info["trace_bound"] <= info["trace_residual"] / 2 * (1 + 1e-12)
    assert info["pivots_x"].size + info["pivots_z"].size == info["n_pivots"] == k


def test_rpcholesky_finds_rare_clusters():
    P = make_rare_clusters(500, 400, 16, n_clusters=6, n_rare=2, rare_weight=0.02, random_state=0)
    assert np.bincount(P.labels_x)[-2:].max() <= 4  # the rare clusters hold a few points
    src = KernelSource.from_points(P.X, P.Z, "sne", gamma=P.gamma)
    G = kernel_matrix(P.X, P.Z, "sne", gamma=P.gamma)
    U, s, V, info = rpcholesky_svd(src, 6, 40, rng=np.random.default_rng(0))
    Ue, se, Ve = _top(G, 6)
    assert max(_sin(Ue, U), _sin(Ve, V)) < 1e-2
    found = set(P.labels_x[info["pivots_x"]]) | set(P.labels_z[info["pivots_z"]])
    assert found == set(range(6))
    assert info["n_passes"] < 0.2


def test_rpcholesky_is_deterministic_per_seed():
    X, Z = _points(60, 50, 4, seed=2)
    src = KernelSource.from_points(X, Z, "sne", gamma=1.0)
    a, b, c = (rpcholesky_svd(src, 4, 12, rng=np.random.default_rng(s)) for s in (7, 7, 8))
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[3]["pivots_x"], b[3]["pivots_x"])
    assert not np.array_equal(
        np.sort(np.concatenate([a[3]["pivots_x"], a[3]["pivots_z"] + 60])),
        np.sort(np.concatenate([c[3]["pivots_x"], c[3]["pivots_z"] + 60])),
    )


def test_rpcholesky_float32_and_sparse_points():
    X, Z = _points(40, 30, 5, seed=4)
    G = kernel_matrix(X, Z, "rbf", gamma=2.0)
    src = KernelSource.from_points(
        sp.csr_matrix(X), Z.astype(np.float32), "rbf", gamma=2.0, dtype=np.float32
    )
    U, s, V, _ = rpcholesky_svd(src, 3, 70, rng=np.random.default_rng(0), dtype=np.float32)
    assert U.dtype == s.dtype == V.dtype == np.float32
    np.testing.assert_allclose(s, _top(G, 3)[1], rtol=1e-5)


def test_rpcholesky_bad_inputs():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match='sampling="rpcholesky" needs a lazy point source'):
        rpcholesky_svd(DenseSource(_low_rank(10, 8, 2)), 2, 4, rng=rng)
    X, Z = _points()
    src = KernelSource.from_points(X, Z, "rbf", gamma=1.0)
    with pytest.raises(ValueError, match="n_pivots must be >= rank"):
        rpcholesky_svd(src, 5, 3, rng=rng)
    with pytest.raises(ValueError, match="n_pivots"):
        rpcholesky_svd(src, 2, 71, rng=rng)
    with pytest.raises(ValueError, match="rank"):
        rpcholesky_svd(src, 0, 3, rng=rng)
    with pytest.raises(TypeError, match="rank"):
        rpcholesky_svd(src, 2.0, 3, rng=rng)
    with pytest.raises(ValueError, match="pivots must be"):
        rpcholesky_svd(src, 2, 4, rng=rng, pivots="greedy")
    poly = KernelSource.from_points(X, Z, "poly", coef0=-1.0, degree=2)
    with pytest.raises(ValueError, match="coef0 >= 0"):
        rpcholesky_svd(poly, 2, 4, rng=rng)


def test_joint_kernel_blocks_match_the_kernel_matrix():
    X, Z = _points(20, 15, 3, seed=6)
    for kernel in ("rbf", "sne", "t", "linear", "poly"):
        jp = KernelSource.from_points(X, Z, kernel, gamma=0.8).joint_psd()
        K = jp.columns(np.arange(35))
        B = K[:20, 20:]
        if jp.normalise:
            B = B / B.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(
            B, kernel_matrix(X, Z, kernel, gamma=0.8), rtol=1e-12, atol=1e-14
        )
        assert np.linalg.eigvalsh((K + K.T) / 2).min() > -1e-10 * np.abs(K).max()
        np.testing.assert_allclose(np.diag(K), jp.diag(), rtol=1e-12)


def test_rpcholesky_needs_no_setup_pass():
    X, Z = _points(30, 20, 3, seed=8)
    lazy = KernelSource._from_arrays(X, Z, "sne", gamma=1.0, setup=False)
    U, s, V, info = rpcholesky_svd(lazy, 3, 50, rng=np.random.default_rng(0))
    np.testing.assert_allclose(s, _top(kernel_matrix(X, Z, "sne", gamma=1.0), 3)[1], rtol=1e-6)
    assert lazy.n_passes == 0 and lazy.n_entries == 0  # G itself was never evaluated


@pytest.mark.parametrize("cond", [1e2, 1e9, 1e15])
def test_cholesky_qr_is_orthonormal_for_ill_conditioned_factors(cond, monkeypatch):
    rpc = importlib.import_module("solvers.sampling.rpcholesky")  # the package's
    # rpcholesky attribute is the function of that name

    monkeypatch.setattr(rpc, "_SWEEP_ROWS", 128)  # several blocks per sweep
    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.standard_normal((500, 12)))[0]
    W = np.linalg.qr(rng.standard_normal((12, 12)))[0]
    A = (U * np.logspace(0, -np.log10(cond), 12)) @ W
    fact = rpc._r_factors(A.T)
    Q, R = rpc._left_vectors(A.T, fact, np.eye(12)), rpc._r_of(fact)
    np.testing.assert_allclose(Q.T @ Q, np.eye(12), atol=1e-13)
    np.testing.assert_allclose(Q @ R, A, atol=1e-13)
    assert np.allclose(R, np.triu(R))


@pytest.mark.parametrize("cond_a, cond_b", [(1.0, 1.0), (1e6, 1e3), (1e12, 1e12), (1e15, 1e2)])
def test_orth_svd_of_a_product_matches_numpy_on_ill_conditioned_factors(
    cond_a, cond_b, monkeypatch
):
    """The SVD of A B^T without copying A or B, through blocked CholeskyQR2 (issue 32: the
    stored-Q version swept 1e6 x 80 factors eleven times): values to 1e-13 s_1, vectors to
    1e-10 and orthonormal to 1e-13, also where A and B are ill-conditioned (graded columns,
    a Gram-only SVD loses half the digits there)."""
    rpc = importlib.import_module("solvers.sampling.rpcholesky")  # the package's
    # rpcholesky attribute is the function of that name

    monkeypatch.setattr(rpc, "_SWEEP_ROWS", 100)
    rng = np.random.default_rng(1)
    k, rank = 14, 5

    def factor(n, cond):
        Q = np.linalg.qr(rng.standard_normal((n, k)))[0]
        return (Q * np.logspace(0, -np.log10(cond), k)) @ np.linalg.qr(rng.normal(size=(k, k)))[0]

    A, B = factor(700, cond_a), factor(450, cond_b)
    A += 3.0  # far from the origin: the factors of a kernel are
    U, s, V = rpc._orth_svd(A.T, B.T, rank, np.random.default_rng(0))
    Ue, se, Vte = np.linalg.svd(A @ B.T)
    np.testing.assert_allclose(s, se[:rank], rtol=0, atol=1e-13 * se[0])
    np.testing.assert_allclose(U.T @ U, np.eye(rank), atol=1e-13)
    np.testing.assert_allclose(V.T @ V, np.eye(rank), atol=1e-13)
    gaps = se[:rank] - se[1 : rank + 1]
    for i in np.flatnonzero(gaps > 1e-3 * se[0]):  # vectors of separated values
        assert abs(abs(U[:, i] @ Ue[:, i]) - 1) < 1e-10
        assert abs(abs(V[:, i] @ Vte[i]) - 1) < 1e-10


@pytest.mark.parametrize("sampling", ["uniform", "norm"])
def test_select_rows_cols_takes_a_plain_source_for_the_basic_samplers(sampling):
    G = np.random.default_rng(0).standard_normal((30, 20))
    sel = select_rows_cols(
        DenseSource(G), 3, 4, sampling=sampling, rng=np.random.default_rng(0), rank=2
    )
    assert sel.row_indices.size == 3 and sel.col_indices.size == 4
    assert sel.entries_read == (G.size if sampling == "norm" else 0)


def test_rpcholesky_below_the_rank_pads_with_a_warning():
    rng = np.random.default_rng(0)
    P = rng.standard_normal((3, 3))  # three distinct points: the joint kernel has rank 3
    src = KernelSource.from_points(
        np.repeat(P, 20, axis=0), np.repeat(P, 15, axis=0), "rbf", gamma=2.0
    )
    with pytest.warns(RuntimeWarning, match="numerical rank 3 < rank=5"):
        res = solvers.svd(
            src,
            5,
            method="asym_nystrom",
            sampling="rpcholesky",
            n_samples=8,
            random_state=0,
            check_passes=0,
        )
    assert res.info["numerical_rank"] == 3
    assert np.all(res.s[3:] == 0) and np.all(res.s[:3] > 0)
    np.testing.assert_allclose(res.U.T @ res.U, np.eye(5), atol=1e-12)


# --------------------------------------------- issue 20 §6: RPCholesky at the edges of its range
def _issue20_points():
    rng = np.random.default_rng(0)
    return rng.standard_normal((60, 5)), rng.standard_normal((40, 5))


@pytest.mark.parametrize("kernel", ["sne", "t"])
def test_rpcholesky_with_one_pivot_answers_or_says_unreliable(kernel):
    """n_samples=1 used to return s = [0.] with reliable=True after divide-by-zero warnings
    (the scaled pivots were drawn before any normaliser estimate existed)."""
    X, Z = _issue20_points()
    src = KernelSource.from_points(X, Z, kernel, gamma=2.0)
    G = kernel_matrix(X, Z, kernel, gamma=2.0)
    Ue, se, _ = _top(G, 1)
    if kernel == "sne":
        assert se[0] == pytest.approx(1.343, abs=1e-3)  # the issue's reproducer
    n_reliable = 0
    for seed in range(10):
        with np.errstate(divide="raise", over="raise", invalid="raise"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an unreliable answer warns
            res = solvers.asym_nystrom(
                src, 1, n_samples=1, sampling="rpcholesky", random_state=seed
            )
        assert np.all(np.isfinite(res.s)) and res.s[0] > 0.5 * se[0]
        wrong = abs(res.s[0] - se[0]) > 0.1 * se[0] or _sin(Ue, res.U) > 0.1
        n_reliable += res.info["reliable"]
        assert not (wrong and res.info["reliable"]), (seed, res.s / se)
    # one pivot overestimates s_1 by 13-75% on these kernels (wrong by issue 20's measure,
    # 0.1 s_1): the certificate's value bound flags every one (it used to pass 3-5 of 10)
    assert n_reliable == 0


@pytest.mark.parametrize("gamma", [1e-2, 1e-3])
def test_rpcholesky_with_an_underflowing_kernel_names_gamma(gamma):
    """Every row sum of K_XZ underflows: no normaliser can be estimated from the joint kernel.
    It used to die in scipy ('A has a NaN entry'); it is now a clear error naming gamma."""
    X, Z = _issue20_points()
    src = KernelSource.from_points(X, Z, "sne", gamma=gamma)
    with pytest.raises(ValueError, match=rf"gamma = {gamma:g} is small .* another sampling"):
        solvers.asym_nystrom(src, 5, n_samples=15, sampling="rpcholesky", random_state=0)
    # the samplers that read G's own rows answer on the same source
    G = kernel_matrix(X, Z, "sne", gamma=gamma)
    assert np.all(np.isfinite(G))
    for sampling in ("uniform", "norm", "arp", "aca"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = solvers.asym_nystrom(src, 5, n_samples=15, sampling=sampling, random_state=0)
        assert np.all(np.isfinite(res.s))


def test_rpcholesky_with_unresolved_rows_is_unreliable():
    """gamma = 0.1: the factors resolve the row sums of only a few rows; the others are 0 in
    the answer (not 1e12 times too large), and the answer says it cannot be trusted."""
    X, Z = _issue20_points()
    src = KernelSource.from_points(X, Z, "sne", gamma=0.1)
    with pytest.warns(RuntimeWarning, match="not resolved by the factors"):
        res = solvers.asym_nystrom(src, 5, n_samples=15, sampling="rpcholesky", random_state=0)
    assert res.info["unresolved_rows"] > 0 and res.info["reliable"] is False
    G = kernel_matrix(X, Z, "sne", gamma=0.1)
    assert np.all(res.s <= 1.5 * np.linalg.svd(G, compute_uv=False)[0])


def test_rpcholesky_takes_no_core():
    X, Z = _issue20_points()
    src = KernelSource.from_points(X, Z, "sne", gamma=2.0)
    for opts in ({"core": "paper"}, {"core": "stable"}, {"orthogonalize": False}):
        with pytest.raises(ValueError, match='does not apply to sampling="rpcholesky"'):
            solvers.asym_nystrom(src, 2, n_samples=10, sampling="rpcholesky", **opts)
    res = solvers.asym_nystrom(src, 2, n_samples=10, sampling="rpcholesky", random_state=0)
    assert res.info["core"] is None and res.info["sampling"] == "rpcholesky"


def test_rpcholesky_normaliser_bound_holds():
    """|D_i - D~_i| = |(E_XZ 1)_i| <= sqrt(E_ii M tr E_ZZ) for the PSD residual E (issue 32
    §5): the factorisation's own bound on how far its row normalisers are from G's."""
    rpc = importlib.import_module("solvers.sampling.rpcholesky")
    X, Z = _points(300, 200, 4, seed=3)
    src = KernelSource.from_points(X, Z, "sne", gamma=1.5, setup="lazy")
    jp = src.joint_psd()
    F, _, resid, _ = rpc.rpcholesky(jp, 25, rng=np.random.default_rng(0))
    D = jp.block(np.arange(300), np.arange(300, 500)).sum(axis=1)
    approx = rpc._row_sums(F, 300)
    bound = np.sqrt(resid[:300] * 200 * resid[300:].sum())
    assert np.all(np.abs(D - approx) <= bound * (1 + 1e-12) + 1e-12)
    assert np.max(np.abs(D - approx)) > 1e-6  # 25 pivots: the normalisers are estimates
    _, _, _, info = rpcholesky_svd(src, 3, 25, rng=np.random.default_rng(0))
    assert np.isfinite(info["normaliser_bound"]) and info["normaliser_bound_median"] > 0
