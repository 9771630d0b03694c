"""Issue 20: certificates that see missed directions, not only inflated values."""

import warnings

import numpy as np
import pytest

import solvers
from ksvd_bench.datasets import make_kernel_problem, make_rare_clusters
from ksvd_bench.kernels import KernelSource, kernel_matrix
from solvers._certificate import (
    MISS_SLACK,
    catch_probability,
    judge,
    power_certificate,
    power_miss_probability,
    sampled_certificate,
)


def sin_theta(A, B):
    return float(np.linalg.norm(A - B @ (B.T @ A), 2))


def solve(G, rank, **opts):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        res = solvers.svd(G, rank, method="asym_nystrom", **opts)
    return res, " | ".join(str(w.message) for w in record)


# -- the rules ----------------------------------------------------------------------------------


def test_a_value_below_its_lower_bound_is_unreliable():
    s = np.array([1.0, 0.5, 0.0])
    with pytest.warns(RuntimeWarning, match="s_3 = 0 is below a lower bound 0.012"):
        assert not judge("m", s, (50, 40), np.float64, lower=np.array([1.0, 0.5, 0.012]))
    # 10% below is the slack: an answer 5% low is not flagged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert judge("m", s[:2], (50, 40), np.float64, lower=np.array([1.05, 0.5]))
    # a check that could not run is no evidence: unreliable
    with pytest.warns(RuntimeWarning, match="could not be computed"):
        assert not judge("m", s[:2], (50, 40), np.float64, deflated=[(np.nan, "test")])


def diagonal_with_a_missed_direction(N=300, M=200):
    d = np.zeros(min(N, M))
    d[:6] = [5.0, 1.0, 0.9, 0.8, 0.7, 0.6]
    d[6:] = 1e-3
    G = np.zeros((N, M))
    G[np.arange(d.size), np.arange(d.size)] = d
    return G


def test_power_iteration_finds_a_missed_direction():
    G = diagonal_with_a_missed_direction()
    N, M = G.shape
    # the sample skips index 0, where sigma_1 = 5 lives: the answer is sigma_2..5. One
    # product finds a miss 5 / 0.77 = 6.5 times the threshold only by luck (the stated bound
    # 0.824 sqrt(196) / 6.5 > 1); three make it (0.824 sqrt(196) / 6.5^3)^5 < 1e-6.
    idx = np.arange(1, 40)
    assert power_miss_probability(5.0 / 0.77, 3, M - 4) < 1e-6
    res, msg = solve(G, 4, row_indices=idx, col_indices=idx, certificate_budget=0, check_passes=3)
    np.testing.assert_allclose(res.s, [1.0, 0.9, 0.8, 0.7])
    assert not res.info["reliable"] and "a top direction is missing" in msg
    cert = res.info["certificate"]
    assert cert["check_passes"] == res.info["n_products"] == 3 and cert["sampled"] is None
    # the deflated bound is a lower bound on the truth (5) and above the threshold
    assert (1 + MISS_SLACK) * 0.7 < cert["deflated"] <= 5.0 * (1 + 1e-12)
    # passes are counted: three products, plus the sample
    assert res.info["n_passes"] == pytest.approx(3 + (39 * M + N * 39) / (N * M))
    # with the direction in the sample: certified, silently
    ok, msg = solve(G, 4, row_indices=np.arange(40), col_indices=np.arange(40))
    assert ok.info["reliable"] and not msg
    np.testing.assert_allclose(ok.s, [5.0, 1.0, 0.9, 0.8])


def test_the_stated_failure_probability_holds():
    """Power iteration from Gaussian starts, against its stated bound, over 200 seeds."""
    rng = np.random.default_rng(0)
    M, k = 400, 3
    V = np.eye(M)[:, :k]
    # D = G (I - V V^T) has one singular value t = 3 theta in a random direction
    theta, t = 0.1, 0.3
    x = rng.standard_normal(M - k)
    G = np.zeros((50, M))
    G[:k, :k] = np.eye(k)
    G[k, k:] = t * x / np.linalg.norm(x)
    U = np.eye(50)[:, :k]
    for passes in (1, 2, 3):
        misses = sum(
            power_certificate(
                solvers._source.as_source(G),
                U,
                V,
                k,
                passes,
                np.random.default_rng(seed),
                n_extra=1,
            )["deflated"]
            <= theta
            for seed in range(200)
        )
        bound = power_miss_probability(t / theta, passes, M - k, width=1)
        assert misses / 200 <= bound + 0.05
    # with the default 5 starts and 6 passes the bound itself is small
    assert power_miss_probability(3.0, 6, M - k) < 1e-3
    assert power_miss_probability(1.0, 3, M - k) == 1.0


# -- the reproducers of issue 20, section 2 -----------------------------------------------------


@pytest.fixture(scope="module")
def rare():
    P = make_rare_clusters(1500, 1500, 64, n_clusters=20, n_rare=6, random_state=0)
    G = kernel_matrix(P.X, P.Z, "sne", gamma=P.gamma)
    return P, G, np.linalg.svd(G)


@pytest.mark.parametrize("sampling, m", [("uniform", 80), ("aca", 160)])
def test_rare_cluster_misses_are_unreliable(rare, sampling, m):
    _, G, (U, s, Vt) = rare
    r = 20
    assert s[r - 1] > 100 * s[r]  # the top-20 subspace is well posed
    for seed in range(1):
        res, msg = solve(G, r, n_samples=m, sampling=sampling, random_state=seed)
        err = max(sin_theta(U[:, :r], res.U), sin_theta(Vt[:r].T, res.V))
        sv_err = np.abs(res.s - s[:r]).max() / s[0]
        wrong = err > 0.1 or sv_err > 0.1
        assert wrong  # the sample misses rare clusters (s_15..s_20 = 0 in the review)
        assert not res.info["reliable"] and "cannot be trusted" in msg


def test_coherent_problem_is_right_or_unreliable_and_near_its_best_projection():
    """Issue 20: the stable core's subspace error was 30x the best projection of its own
    rows and columns (sin theta 1.0 vs 0.03). The noise cut compared the core's values on
    the m sampled columns with the rows' noise over all M columns; see "The noise on the
    columns' scale" in asym_nystrom. Now within 4x (measured 2.0-2.8x over seeds 0-4; the
    oblique projection of these uniform rows allows about 10x)."""
    G = make_kernel_problem(1200, 1000, rank=20, decay="polynomial", coherence=0.9, random_state=0)
    U, s, Vt = np.linalg.svd(G)
    r = 5
    for seed in range(3):
        res, msg = solve(G, r, n_samples=80, random_state=seed)
        I, J = res.info["row_indices"], res.info["col_indices"]
        Qc, Qr = np.linalg.qr(G[:, J])[0], np.linalg.qr(G[I].T)[0]
        a, _, bt = np.linalg.svd(Qc.T @ G @ Qr)
        best = max(sin_theta(U[:, :r], Qc @ a[:, :r]), sin_theta(Vt[:r].T, Qr @ bt[:r].T))
        err = max(sin_theta(U[:, :r], res.U), sin_theta(Vt[:r].T, res.V))
        assert err < 4 * best
        wrong = err > 0.1 or np.abs(res.s - s[:r]).max() > 0.1 * s[0]
        assert not (wrong and res.info["reliable"])


# -- the sampled certificate --------------------------------------------------------------------


def isolated_cluster_problem(n=2000, size=4, value=5.0, seed=0):
    """Rank 5 (values 4 ... 1.5) on the first n - size rows and columns plus an isolated
    constant block of ``size`` rows and columns with singular value ``value``: an answer
    without it misses a cluster of weight ``size / n`` on both sides, visible only on its
    own rows (each with residual norm ``value / sqrt(size)``) and columns."""
    rng = np.random.default_rng(seed)
    m = n - size
    U, V = np.zeros((n, 5)), np.zeros((n, 5))
    U[:m] = np.linalg.qr(rng.standard_normal((m, 5)))[0]
    V[:m] = np.linalg.qr(rng.standard_normal((m, 5)))[0]
    s = np.array([4.0, 3.0, 2.5, 2.0, 1.5])
    G = (U * s) @ V.T
    G[m:, m:] = value / size
    return G, (U, s, V)


def test_sampled_certificate_catches_a_missed_cluster_as_often_as_stated():
    G, (Ur, sr, Vr) = isolated_cluster_problem()  # the exact top 6 but the cluster's
    n = G.shape[0]
    assert 5.0 / np.sqrt(4) > (1 + MISS_SLACK) * sr[-1]  # one hit proves the miss
    budget = 2 * 150 * n  # 150 rows and 150 columns
    caught, trials = 0, 100
    for seed in range(trials):
        c = sampled_certificate(G, Ur, sr, Vr, budget, np.random.default_rng(seed))
        assert c["rows"] == c["cols"] == 150 and c["entries"] == budget
        assert c["deflated"] <= 5.0 * (1 + 1e-12)  # a lower bound, always
        caught += c["deflated"] > (1 + MISS_SLACK) * sr[-1]
    p_side = catch_probability(4 / n, 150, n)
    stated = 1 - (1 - p_side) ** 2  # rows and columns drawn independently
    assert 0.4 < stated < 0.6
    assert abs(caught / trials - stated) < 0.15  # binomial sd 0.05
    # The answer with the cluster (the exact top 6) passes: no false alarm.
    e = np.full(4, 0.5)
    U6 = np.hstack([np.pad(e, (n - 4, 0))[:, None], Ur])
    V6 = np.hstack([np.pad(e, (n - 4, 0))[:, None], Vr])
    s6 = np.concatenate([[5.0], sr])
    np.testing.assert_allclose((U6 * s6) @ V6.T, G, atol=1e-12)
    for seed in range(5):
        c = sampled_certificate(G, U6, s6, V6, budget, np.random.default_rng(seed))
        assert c["deflated"] <= (1 + MISS_SLACK) * s6[-1]


def test_sampled_certificate_against_numpy_on_a_lazy_source(rare):
    """Frobenius error estimate and the lower bound, on the lazy SNE source's tiles."""
    P, G, (U, s, Vt) = rare
    src = KernelSource.from_points(P.X, P.Z, "sne", gamma=P.gamma, setup="lazy")
    r = 20
    for k in (r, 14):  # the exact answer, and one that misses 6 directions
        Uk, sk, Vk = U[:, :k], s[:k], Vt[:k].T
        true = np.linalg.norm(G - (Uk * sk) @ Vk.T)
        defl = max(
            np.linalg.svd(G - Uk @ (Uk.T @ G), compute_uv=False)[0],
            np.linalg.svd(G - (G @ Vk) @ Vk.T, compute_uv=False)[0],
        )
        c = sampled_certificate(src, Uk, sk, Vk, 2 * 300 * 1500, np.random.default_rng(1))
        assert c["rows"] == c["cols"] == 300
        assert c["deflated"] <= defl * (1 + 1e-9)
        if k == r:  # the tail is spread evenly: the estimate is close
            assert abs(c["fro_error"] - true) < 0.1 * true
            assert c["deflated"] <= (1 + MISS_SLACK) * sk[-1]
    assert 0.9 < c["catch_1pct"] <= 1.0


def test_check_passes_zero_uses_the_sampled_certificate(rare):
    P, G, (U, s, Vt) = rare
    src = KernelSource.from_points(P.X, P.Z, "sne", gamma=P.gamma)  # set-up pass already run
    res, msg = solve(src, 20, n_samples=80, sampling="rpcholesky", check_passes=0, random_state=0)
    cert = res.info["certificate"]
    assert cert["check_passes"] == 0 and res.info["n_products"] == 0
    sampled = cert["sampled"]
    own = res.info["n_block_entries"] - sampled["entries"]
    assert 0 < sampled["entries"] <= max(0.1 * own, 2 * 1500)
    err = max(sin_theta(U[:, :20], res.U), sin_theta(Vt[:20].T, res.V))
    assert not (err > 0.1 and res.info["reliable"])


def test_sampled_certificate_that_would_run_the_set_up_pass_is_skipped_and_unverified(rare):
    """On a ``setup="lazy"`` source the first row read runs the whole set-up pass, far over
    the certificate's budget: it does not run, says why, and the answer is not vouched for
    (issue 32: unknown, None, not False). Its normalised rows can be read without the pass:
    the row-sampled certificate estimates the error against G itself."""
    P, G, _ = rare
    src = KernelSource.from_points(P.X, P.Z, "sne", gamma=P.gamma, setup="lazy")
    res, msg = solve(src, 20, n_samples=80, sampling="rpcholesky", check_passes=0, random_state=0)
    assert src.setup_pending()  # the set-up pass never ran
    sampled = res.info["certificate"]["sampled"]
    assert "set-up pass" in sampled["skipped"]
    assert res.info["reliable"] is None
    assert "set-up" in msg
    # the warning says what reliable is (None, not False) and names the skipped check's
    # own remedy, not the sampler advice meant for a wrong answer
    assert "(info['reliable'] = None)" in msg and "= False" not in msg
    assert "sample more rows" not in msg and res.info["certificate"]["failed"] == ["not_run"]
    rows = res.info["certificate"]["sampled_rows"]
    true = np.linalg.norm(G - (res.U * res.s) @ res.V.T)
    assert rows["fro_error_low"] <= true <= rows["fro_error_high"]
    assert rows["fro_error_high"] < 2 * true
    # where the interval holds, what it implies holds against numpy's SVD of G itself
    U, s, Vt = np.linalg.svd(G)
    high = rows["fro_error_high"]
    assert np.max(np.abs(res.s - s[:20])) <= rows["sv_error_high"] * (res.s[0] - high)
    sin = max(sin_theta(U[:, :20], res.U), sin_theta(Vt[:20].T, res.V))
    assert sin <= rows["sin_theta_high"] < 0.1


# -- issue 20, section 7: a full sample is exact ------------------------------------------------


@pytest.mark.parametrize("decades", [8, 14])
def test_full_sample_matches_numpy_to_rounding(decades):
    """40 x 30, s_i = 10^(-decades i / 5), i = 0..5 (SciPy's svds tests, adapted): the
    sqrt(eps) cut-off used to return s_6 = 0 for 1e-8; with a spanning sample it is at
    rounding level."""
    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.standard_normal((40, 6)))[0]
    V = np.linalg.qr(rng.standard_normal((30, 6)))[0]
    G = (U * 10.0 ** (-decades * np.arange(6) / 5)) @ V.T
    Ue, se, Vte = np.linalg.svd(G)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = solvers.asym_nystrom(G, 6, n_samples=30, n_rows=40, random_state=0)
    assert res.info["reliable"] and res.info["core_rank"] == 6
    np.testing.assert_allclose(res.s, se[:6], rtol=0, atol=1e-12 * se[0])
    np.testing.assert_allclose((res.U * res.s) @ res.V.T, G, rtol=0, atol=1e-12 * se[0])
    # the well-separated vectors match numpy's, up to sign
    np.testing.assert_allclose(np.abs(np.sum(res.U * Ue[:, :6], 0)), 1, atol=1e-6)
