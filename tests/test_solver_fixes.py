"""Reproducers of issue 14 (section 2, the solver items of 5 and 7) and the wiring of issue 15.

Every answer is compared with numpy's exact SVD; a value above the truth is a defect unless the
solver flagged it (``info["reliable"] = False`` with a ``RuntimeWarning``).
"""

import warnings

import numpy as np
import pytest

import solvers


def decaying_problem(N=400, M=300, seed=0):
    """G = U0 diag(0.5^i) V0^T with orthonormal U0, V0 from a seeded QR (issue 14's example)."""
    rng = np.random.default_rng(seed)
    U0 = np.linalg.qr(rng.standard_normal((N, M)))[0]
    V0 = np.linalg.qr(rng.standard_normal((M, M)))[0]
    s = 0.5 ** np.arange(M)
    return (U0 * s) @ V0.T, U0, s, V0


def sine(V, V_true):
    """Largest principal sine between span(V) and span(V_true) (orthonormal columns)."""
    return np.linalg.norm(V - V_true @ (V_true.T @ V), 2)


def triplet_residual(G, res):
    """max(||G V - U S||, ||G^T U - V S||) / ||S||: zero for exact, correctly paired triplets."""
    left = np.linalg.norm(G @ res.V - res.U * res.s)
    right = np.linalg.norm(G.T @ res.U - res.V * res.s)
    return max(left, right) / np.linalg.norm(res.s)


def quiet(fn, *args, **kwargs):
    """Call ``fn`` and fail on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


# -- block Krylov: Musco & Musco's Algorithm 2 --------------------------------------------------


@pytest.mark.parametrize("p", [40, 10])
def test_block_krylov_at_depth_zero_is_as_good_as_rsvd(p):
    G, U0, s, V0 = decaying_problem()
    bk = solvers.svd(G, 5, method="block_krylov", n_oversamples=p, n_iter=0, random_state=1)
    rs = solvers.svd(G, 5, method="rsvd", n_oversamples=p, n_iter=0, random_state=1)
    # It used to return s at 16% of the truth and a random V (subspace sine 0.96).
    np.testing.assert_allclose(bk.s, s[:5], rtol=1e-6)
    assert sine(bk.V, V0[:, :5]) < 1e-5 and sine(bk.U, U0[:, :5]) < 1e-3
    assert np.all(bk.s >= rs.s * (1 - 1e-12))
    for mine, theirs, truth in ((bk.U, rs.U, U0), (bk.V, rs.V, V0)):
        assert sine(mine, truth[:, :5]) <= sine(theirs, truth[:, :5]) * (1 + 1e-6) + 1e-14
    assert bk.info["n_passes"] == rs.info["n_passes"] == 2 + 2  # + the certificate's 2


@pytest.mark.parametrize("q", [0, 1, 2, 3])
def test_block_krylov_beats_rsvd_at_equal_passes(q):
    """Same seed, same passes: the Krylov space contains RSVD's, so by interlacing
    sigma_i(rsvd) <= sigma_i(block_krylov) <= sigma_i(G)."""
    N, M = 300, 200
    rng = np.random.default_rng(q)
    U0 = np.linalg.qr(rng.standard_normal((N, M)))[0]
    V0 = np.linalg.qr(rng.standard_normal((M, M)))[0]
    s = (1.0 + np.arange(M)) ** -0.5  # slow decay: the methods differ
    G = (U0 * s) @ V0.T
    bk = solvers.block_krylov(G, 8, n_oversamples=4, n_iter=q, random_state=3)
    rs = solvers.rsvd(
        G, 8, n_oversamples=4, n_iter=q, random_state=3, power_iteration_normalizer="QR"
    )
    assert bk.info["n_passes"] == rs.info["n_passes"] == 2 * q + 2 + 2  # + certificate
    assert np.all(bk.s >= rs.s * (1 - 1e-10))
    assert np.all(bk.s <= s[:8] * (1 + 1e-12))
    err = [np.linalg.norm(G - r.U @ (r.U.T @ G), 2) for r in (bk, rs)]
    assert err[0] <= err[1] * (1 + 1e-10)


# -- sym_nystrom: U and V paired through G^T U ---------------------------------------------------


def test_sym_nystrom_reproduces_a_rotation():
    c, s = np.cos(np.pi / 6), np.sin(np.pi / 6)
    G = np.array([[c, -s], [s, c]])
    res = quiet(solvers.svd, G, 2, method="sym_nystrom", n_samples=2, random_state=0)
    np.testing.assert_allclose((res.U * res.s) @ res.V.T, G, atol=1e-14)  # was the identity


def rbf(X, gamma):
    d = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    return np.exp(-gamma * d)


def test_sym_nystrom_on_duplicated_rows():
    X = np.vstack([np.random.default_rng(0).random((10, 20))] * 2)
    K = rbf(X, 0.1)
    U, s, Vt = np.linalg.svd(K)
    assert s[4] - s[5] > 1e-3 * s[0]  # the rank-5 truncation is unique
    res = quiet(solvers.svd, K, 5, method="sym_nystrom", n_samples=20, random_state=0)
    best = (U[:, :5] * s[:5]) @ Vt[:5]
    assert np.linalg.norm((res.U * res.s) @ res.V.T - best) < 1e-10 * s[0]  # was 0.55
    # Below the full sample the pairing stays right and no value exceeds the truth.
    for n in (10, 15):
        part = solvers.svd(K, 5, method="sym_nystrom", n_samples=n, random_state=0)
        assert triplet_residual(K, part) < 0.3
        assert np.all(part.s <= s[:5] * (1 + 1e-12))


def test_sym_nystrom_with_repeated_values():
    rng = np.random.default_rng(1)
    Q1 = np.linalg.qr(rng.standard_normal((60, 60)))[0]
    Q2 = np.linalg.qr(rng.standard_normal((50, 50)))[0]
    d = np.r_[5, 5, 5, 2, 2, np.full(45, 0.1)]
    G = (Q1[:, :50] * d) @ Q2.T
    full5 = quiet(solvers.svd, G, 5, method="sym_nystrom", n_samples=60, random_state=0)
    np.testing.assert_allclose(full5.s, d[:5], rtol=1e-12)
    best = (Q1[:, :5] * d[:5]) @ Q2[:, :5].T
    assert np.linalg.norm((full5.U * full5.s) @ full5.V.T - best) < 1e-12
    # Rank 4 splits the pair (2, 2): any pair member is right, but U and V must match. The
    # top-4 subspace is not determined (sigma_4 = sigma_5): the certificate says so.
    with pytest.warns(RuntimeWarning, match="top-4 subspace is unknown"):
        full4 = solvers.svd(G, 4, method="sym_nystrom", n_samples=60, random_state=0)
    assert triplet_residual(G, full4) < 1e-12 and not full4.info["reliable"]
    part = solvers.svd(G, 5, method="sym_nystrom", n_samples=30, random_state=0)
    assert np.all(part.s <= d[:5] * (1 + 1e-12))
    np.testing.assert_allclose(np.einsum("ij,ij->j", part.U, G @ part.V), part.s, rtol=1e-12)


# -- asym_nystrom: stable core, no clipping, a-posteriori check ---------------------------------


@pytest.mark.parametrize("core", ["stable", "paper"])
def test_asym_nystrom_exact_rank_two_sample_is_exact_and_quiet(core):
    rng = np.random.default_rng(2)
    Qa = np.linalg.qr(rng.standard_normal((50, 2)))[0]
    Qb = np.linalg.qr(rng.standard_normal((40, 2)))[0]
    G = Qa @ Qb.T  # sigma = (1, 1)
    res = quiet(
        solvers.asym_nystrom,
        G,
        2,
        row_indices=[0, 1],
        col_indices=[0, 1],
        core=core,
        random_state=0,
    )  # used to return s = [1.414, 0] with 3 warnings
    np.testing.assert_allclose(res.s, [1, 1], rtol=1e-12)
    np.testing.assert_allclose((res.U * res.s) @ res.V.T, G, atol=1e-13)
    assert res.info["reliable"] and res.info["core"] == core


def test_asym_nystrom_stable_core_on_a_noisy_low_rank_matrix():
    rng = np.random.default_rng(3)
    G = (rng.standard_normal((300, 8)) * 2.0 ** -np.arange(8)) @ rng.standard_normal((8, 200))
    G += 1e-6 * rng.standard_normal(G.shape)
    U, s, Vt = np.linalg.svd(G)
    # the stable core's C W_eps^+ R sees all 8 directions; the paper's C W_4^+ R only 4
    for core, tol, sine_tol in (("stable", 1e-5, 1e-5), ("paper", 5e-2, 0.5)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore" if core == "paper" else "error")
            res = solvers.svd(G, 4, method="asym_nystrom", n_samples=30, core=core, random_state=0)
        np.testing.assert_allclose(res.s, s[:4], rtol=tol)
        assert sine(res.U, U[:, :4]) < sine_tol and sine(res.V, Vt[:4].T) < sine_tol
        # the paper's subspace is 0.2 off (wrong by issue 20's measure): the subspace
        # certificate flags it; the stable core's is certified
        wrong = max(sine(res.U, U[:, :4]), sine(res.V, Vt[:4].T)) > 0.1
        assert res.info["reliable"] == (core == "stable") == (not wrong)
    assert res.info["n_rows"] == 30  # paper: n = m
    stable = solvers.svd(G, 4, method="asym_nystrom", n_samples=30, random_state=0)
    assert stable.info["n_rows"] == 60 and stable.info["core"] == "stable"


@pytest.mark.parametrize("core", ["stable", "paper"])
def test_asym_nystrom_partial_samples_are_flagged_or_within_the_factor(core):
    """The guard's partial-sample case: samples that do not span G. Every answer is either
    certified (reliable, no value above 1.5x the truth) or flagged with a warning; none is
    clipped to a bound."""
    rng = np.random.default_rng(6)
    G = (rng.standard_normal((80, 12)) * 0.7 ** np.arange(12)) @ rng.standard_normal((12, 60))
    G += 1e-3 * rng.standard_normal(G.shape)
    s = np.linalg.svd(G, compute_uv=False)
    flagged = 0
    for seed in range(8):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            res = solvers.svd(
                G, 3, method="asym_nystrom", n_samples=4, core=core, random_state=seed
            )
        warned = any("cannot be trusted" in str(w.message) for w in record)
        assert warned == (not res.info["reliable"])
        if res.info["reliable"]:
            assert np.all(res.s <= 1.5 * s[:3] * (1 + 1e-12))
        flagged += warned
        assert not np.isclose(res.s[0], np.linalg.norm(G))  # never the Frobenius bound
    # 4 columns for rank 3 on this spectrum: every answer's subspace is 0.4 to 1.0 off (issue
    # 20's measure calls them all wrong), and the subspace certificate flags every one
    assert flagged == 8


def heavy_problem(seed=0):
    """Rank 3 whose mass sits in 100 heavy rows and 100 heavy columns (1000 x 800)."""
    rng = np.random.default_rng(seed)
    N, M = 1000, 800
    dr, dc = np.ones(N), np.ones(M)
    dr[rng.choice(N, 100, replace=False)] = 10
    dc[rng.choice(M, 100, replace=False)] = 10
    return (dr[:, None] * rng.standard_normal((N, 3))) @ (rng.standard_normal((3, M)) * dc)


def test_norm_sampling_raw_values_use_the_importance_weights():
    G = heavy_problem()
    N, M = G.shape
    s = np.linalg.svd(G, compute_uv=False)[:3]
    for seed in range(3):
        res = solvers.svd(
            G,
            3,
            method="asym_nystrom",
            n_samples=60,
            sampling="norm",
            orthogonalize=False,
            check_passes=0,
            random_state=seed,
        )
        # it used to be 17.2, 15.5, 14.0 times the truth (the uniform factor sqrt(NM/nm))
        assert np.all(np.abs(res.s / s - 1) < 0.3)
        # the norm pass is counted: one pass plus the sample
        extra = res.info["certificate"]["sampled"]["entries"]  # the sampled certificate
        assert res.info["n_passes"] == pytest.approx(1 + (60 * M + N * 60 + extra) / (N * M))
        assert res.info["entries_read"] == N * M + 60 * M + N * 60 + extra


def test_asym_nystrom_samplers_through_svd():
    rng = np.random.default_rng(4)
    G = rng.standard_normal((120, 4)) @ rng.standard_normal((4, 90))
    U, s, Vt = np.linalg.svd(G)
    for sampling in ("uniform", "norm", "arp", "aca"):
        res = quiet(
            solvers.svd,
            G,
            4,
            method="asym_nystrom",
            n_samples=12,
            sampling=sampling,
            random_state=0,
        )
        np.testing.assert_allclose(res.s, s[:4], rtol=1e-9)
        assert sine(res.U, U[:, :4]) < 1e-9 and res.info["sampling"] == sampling
        N, M = G.shape
        assert res.info["entries_read"] == round(res.info["n_passes"] * N * M)
    with pytest.raises(ValueError, match="rpcholesky"):
        solvers.svd(G, 4, method="asym_nystrom", n_samples=12, sampling="rpcholesky")


def test_asym_nystrom_rpcholesky_on_a_point_source():
    from ksvd_bench.datasets import make_clustered_points
    from ksvd_bench.kernels import KernelSource

    pts = make_clustered_points(300, 200, 16, 5, random_state=0)
    src = KernelSource.from_points(pts.X, pts.Z, "sne", gamma=pts.gamma)
    G = solvers.source_to_dense(src)
    U, s, Vt = np.linalg.svd(G)
    res = solvers.svd(
        src, 5, method="asym_nystrom", n_samples=30, sampling="rpcholesky", random_state=0
    )
    np.testing.assert_allclose(res.s, s[:5], rtol=1e-2)
    assert sine(res.U, U[:, :5]) < 2e-2 and res.info["reliable"]
    assert res.info["n_passes"] < 2.5  # its reads (a fraction of a pass) plus 2 check passes


# -- generalized Nyström: flagged inflation ------------------------------------------------------


def test_generalized_nystrom_flags_inflated_values():
    G = np.random.default_rng(0).standard_normal((80, 50))
    with pytest.warns(RuntimeWarning, match="cannot be trusted"):
        res = solvers.svd(G, 3, method="generalized_nystrom", random_state=0)
    assert not res.info["reliable"] and res.info["inflation_estimate"] > 0
    dup = np.vstack([np.random.default_rng(1).standard_normal((40, 50))] * 2)
    for seed in range(3):
        with pytest.warns(RuntimeWarning, match="cannot be trusted"):
            res = solvers.svd(
                dup, 3, method="generalized_nystrom", n_oversamples=10, random_state=seed
            )
        assert not res.info["reliable"]


def test_generalized_nystrom_defaults_hold_on_clustered_points():
    from ksvd_bench.datasets import make_clustered_points
    from ksvd_bench.kernels import KernelSource

    pts = make_clustered_points(600, 500, 64, 10, random_state=0)
    G = solvers.source_to_dense(KernelSource.from_points(pts.X, pts.Z, "sne", gamma=pts.gamma))
    U, s, Vt = np.linalg.svd(G)
    for seed in range(3):
        res = quiet(solvers.svd, G, 10, method="generalized_nystrom", random_state=seed)
        assert res.info["reliable"] and sine(res.U, U[:, :10]) < 1e-2
        assert np.all(res.s <= 1.01 * s[:10])


# -- every method reports reliable ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "opts"),
    [
        ("tsvd", {}),
        ("rsvd", {}),
        ("block_krylov", {}),
        ("generalized_nystrom", {}),
        # sym_nystrom: 20 to 40 Gram columns for rank 3 leave its subspace 0.11-0.17 off
        # (flagged); 60 (all rows) are exact
        ("sym_nystrom", {"n_samples": 60}),
        ("asym_nystrom", {"n_samples": 20}),
    ],
)
def test_every_method_reports_reliable(method, opts):
    rng = np.random.default_rng(5)
    G = rng.standard_normal((60, 5)) @ rng.standard_normal((5, 40))
    res = quiet(solvers.svd, G, 3, method=method, random_state=0, **opts)
    assert res.info["reliable"] is True
    if "nystrom" in method and method != "generalized_nystrom":
        assert res.info["entries_read"] == round(res.info["n_passes"] * 60 * 40)


# -- tsvd: clear errors, full rank ---------------------------------------------------------------


def test_tsvd_maxiter_error_names_maxiter():
    G = np.random.default_rng(0).standard_normal((60, 40))
    with pytest.raises(RuntimeError, match="maxiter=1"):
        solvers.svd(G, 3, method="tsvd", maxiter=1)


def test_tsvd_propack_at_full_rank_on_a_centred_lazy_source():
    from ksvd_bench.kernels import KernelSource

    rng = np.random.default_rng(0)
    src = KernelSource.from_points(
        rng.standard_normal((30, 5)), rng.standard_normal((20, 5)), "rbf", gamma=2.0, center=True
    )
    G = solvers.source_to_dense(src)
    res = solvers.svd(src, 20, method="tsvd", backend="propack", random_state=0)
    np.testing.assert_allclose(res.s, np.linalg.svd(G, compute_uv=False), atol=1e-13)
    np.testing.assert_allclose((res.U * res.s) @ res.V.T, G, atol=1e-13)
    assert res.info["exact_path"] == "dense" and res.info["n_passes"] == 1


# -- public helpers ------------------------------------------------------------------------------


def test_public_helpers():
    from solvers._result import fix_signs
    from solvers._source import check_index
    from solvers.validation import check_random_state

    assert solvers.fix_signs is fix_signs and solvers.check_index is check_index
    assert solvers.check_random_state is check_random_state
    assert isinstance(solvers.check_random_state(3), np.random.Generator)
    np.testing.assert_array_equal(solvers.check_index([2, 0], 3, "idx"), [2, 0])
    U, V = -np.eye(2), np.eye(2)
    solvers.fix_signs(U, V)
    np.testing.assert_array_equal(U, np.eye(2))
    np.testing.assert_array_equal(V, -np.eye(2))
