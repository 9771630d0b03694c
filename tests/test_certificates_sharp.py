"""Issue 32 §1/§2/§6: the power-probe bound on the norm outside the answer, the probes fused
into the solve's last pass, and the false alarms they leave. Every bound is checked
against numpy's exact SVD on the families the certificate was not tuned on."""

import warnings

import numpy as np
import pytest
from scipy.special import erfinv

import solvers
from ksvd_bench.kernels import kernel_matrix
from solvers._certificate import (
    power_certificate,
    power_probe_bound,
    power_probe_constants,
    triplet_bounds,
)
from solvers._source import as_source


def test_the_anticoncentration_constants():
    # P(max_i |v^T w_i| < c) = erf(c / sqrt 2)^t: the issue's f = 1.48 at t = 20 and 1e-6
    c_block, c_max = power_probe_constants(20, failure=2e-6)
    assert 1 / c_max == pytest.approx(1 / (np.sqrt(2) * erfinv(1e-6 ** (1 / 20))))
    assert 1 / c_max == pytest.approx(1.479, abs=1e-3)
    # P(||v^T W|| < c) = F_chi2(c^2; t) = 1e-6: c^2 = 2.554 at t = 20
    assert c_block**2 == pytest.approx(2.5536, abs=1e-3)
    assert power_probe_constants(0) == (0.0, 0.0)


def _chain_failures(sigma, t, passes, failure, trials, rng):
    """How often power_probe_bound falls below ||D|| for D = diag(sigma) (N = M)."""
    W = rng.standard_normal((trials, sigma.size, t))
    chains = [[] for _ in range(trials)]
    for j in range(1, passes + 1):
        W = sigma[None, :, None] * W  # D and D^T alike for a diagonal D
        block = np.linalg.norm(W, 2, axis=(1, 2))
        col = np.linalg.norm(W, axis=1).max(axis=1)
        for i in range(trials):
            chains[i].append((j, np.log(block[i]), np.log(col[i])))
    bounds = np.array([power_probe_bound(chain, t, failure)[0] for chain in chains])
    return float(np.mean(bounds < sigma.max()))


@pytest.mark.parametrize(
    "name, sigma",
    [
        ("rank one", np.r_[1.0, np.zeros(59)]),
        ("flat", np.ones(60)),
        ("two-scale", np.r_[np.ones(3), 0.3 * np.ones(57)]),
    ],
)
def test_the_power_probe_bound_fails_at_most_as_often_as_stated(name, sigma):
    """Simulated at a failure probability large enough to see (0.2, then 0.05): the bound
    is below ||D|| at most that often; on the rank-one worst case the chi-square event
    alone has probability failure / 2, which the simulation must see."""
    rng = np.random.default_rng(0)
    for failure, t in ((0.2, 5), (0.05, 10)):
        freq = _chain_failures(sigma, t, 2, failure, 3000, rng)
        se = np.sqrt(failure * (1 - failure) / 3000)
        assert freq <= failure + 4 * se, (name, failure, freq)
        if name == "rank one":
            assert freq >= failure / 2 - 4 * se, (failure, freq)


def _points(kind, n, rng):
    if kind == "heavy":
        return rng.standard_t(1.5, (n, 8))
    if kind == "far":
        return 1e5 + rng.standard_normal((n, 6)) * 2.0 ** -np.arange(6)
    if kind == "duplicated":
        return np.repeat(rng.standard_normal((n // 3 + 1, 6)), 3, axis=0)[:n]
    if kind == "rare":  # ten clusters, the last with 0.5% of the points
        w = np.array([0.30, 0.20, 0.15, 0.12, 0.08, 0.06, 0.04, 0.025, 0.02, 0.005])
        c = np.maximum(1, np.round(w * n).astype(int))
        c[0] += n - c.sum()
        C = 3 * np.random.default_rng(14).standard_normal((10, 8))
        return C[np.repeat(np.arange(10), c)] + rng.standard_normal((n, 8))
    raise ValueError(kind)


def hard(kind, seed=0, n=150, m=120):
    """A kernel matrix (or a planted spectrum) of a hard family."""
    rng = np.random.default_rng(seed)
    if kind == "clustered_spectrum":  # clusters of three values within 1e-3
        k = min(n, m)
        s = 2.0 ** -(np.arange(k) // 3) * (1 - 1e-3 * (np.arange(k) % 3))
        U = np.linalg.qr(rng.standard_normal((n, k)))[0]
        V = np.linalg.qr(rng.standard_normal((m, k)))[0]
        return (U * s) @ V.T
    X, Z = _points(kind, n, rng), _points(kind, m, rng)
    if kind == "rare":
        return kernel_matrix(X, Z, "sne", gamma=np.sqrt(32))
    d2 = ((X[:40, None] - Z[None, :40]) ** 2).sum(-1)
    return kernel_matrix(X, Z, "rbf", gamma=float(np.sqrt(np.median(d2[d2 > 0]))))


HARD = ("rare", "heavy", "clustered_spectrum", "duplicated", "far")


def _truth(G, U, V):
    D = G - U @ (U.T @ G)
    return np.linalg.norm(D - (D @ V) @ V.T, 2)


def _sin(A, B):
    B = np.linalg.qr(B)[0]
    return float(np.linalg.norm(A - B @ (B.T @ A), 2))


@pytest.mark.parametrize("kind", HARD)
def test_each_bound_holds_against_numpy_on_hard_families(kind):
    """The chains alone (no ||G||_F, no orthonormal block), with and without a sketch, and
    with the Frobenius split: lower bounds below sigma_i(G) and ||D||, the upper bound above
    ||D||, and the sin theta and value bounds above numpy's errors, on answers from too
    little effort to enough."""
    G = hard(kind)
    U0, s0, Vt0 = np.linalg.svd(G, full_matrices=False)
    fro2 = float(np.sum(G**2))

    class Plain:  # matmat / rmatmat only: the passes alternate sides
        shape, dtype = G.shape, G.dtype

        def matmat(self, X):
            return G @ X

        def rmatmat(self, Y):
            return G.T @ Y

    for r in (3, 6):
        for p, q in ((0, 0), (5, 1), (10, 3)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = solvers.rsvd(G, r, n_oversamples=p, n_iter=q, random_state=p, check_passes=0)
            d_true = _truth(G, res.U, res.V)
            sv = float(np.max(np.abs(res.s - s0[:r])))
            sin = max(_sin(U0[:, :r], res.U), _sin(Vt0[:r].T, res.V))
            for src, extra, f2 in ((as_source(G), 0, None), (Plain(), 0, None), (G, r + 15, fro2)):
                src = as_source(G) if src is G else src
                for passes in (2, 3):
                    cert = power_certificate(
                        src, res.U, res.V, r, passes, np.random.default_rng(passes), extra, fro2=f2
                    )
                    assert np.all(cert["lower"] <= s0[:r] * (1 + 1e-10))
                    assert cert["deflated"] <= d_true * (1 + 1e-10) + 1e-14
                    assert d_true <= cert["deflated_upper"] * (1 + 1e-10) + 1e-14
                    bound_sin, bound_sv, _ = triplet_bounds(res.s, cert)
                    lead = max(float(cert["rayleigh"][0]), float(cert["lower"][0]))
                    assert sin <= bound_sin * (1 + 1e-9) + 1e-12
                    assert sv <= bound_sv * lead * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("kind", HARD)
@pytest.mark.parametrize("method", ["rsvd", "block_krylov"])
def test_fused_probes_hold_against_numpy(kind, method):
    """The probes drawn in the solve's last pass: the certificate of rsvd and block_krylov
    (one and two check passes, G and G^T orientation) bounds ||D|| from both sides."""
    for G in (hard(kind, 1), hard(kind, 1).T):
        for check in (1, 2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = solvers.svd(G, 4, method=method, random_state=3, check_passes=check)
            cert = res.info["certificate"]
            d_true = _truth(G, res.U, res.V)
            assert cert["deflated"] <= d_true * (1 + 1e-10) + 1e-14
            assert d_true <= cert["deflated_upper"] * (1 + 1e-10) + 1e-14
            assert cert["upper_kind"] in ("power_probes", "frobenius")
            assert cert["upper_failure"] == (1e-6 if cert["upper_kind"] == "power_probes" else 0)
            assert res.info["check_passes"] == check
            assert res.info["n_passes"] == pytest.approx(2 * 4 + 2 + check)


def test_the_issue_reproducer_is_certified_at_one_pass():
    """Issue 32 §1: 10 Gaussian clusters, s_10 / s_11 = 3.0, rsvd exact to 1e-11. The
    Frobenius bound read 0.638 where ||D|| = 0.109: uncertified. The fused chain (one check
    pass, two products) bounds it within 2.5x, and the answer is certified."""
    rng = np.random.default_rng(14)
    w = np.array([0.30, 0.20, 0.15, 0.12, 0.08, 0.06, 0.04, 0.025, 0.02, 0.005])
    C = 3 * rng.normal(size=(10, 16))

    def counts(n):
        c = np.maximum(1, np.round(w * n).astype(int))
        c[0] += n - c.sum()
        return c

    X = C[np.repeat(np.arange(10), counts(1200))] + rng.normal(size=(1200, 16))
    Z = C[np.repeat(np.arange(10), counts(1000))] + rng.normal(size=(1000, 16))
    X, Z = X[rng.permutation(1200)], Z[rng.permutation(1000)]
    G = kernel_matrix(X, Z, "sne", gamma=np.sqrt(32))
    s = np.linalg.svd(G, compute_uv=False)
    for method in ("rsvd", "block_krylov"):
        res = solvers.svd(G, 10, method=method, random_state=0, check_passes=1)
        cert = res.info["certificate"]
        assert res.info["reliable"] is True
        assert s[10] <= cert["deflated_upper"] <= 2.5 * s[10]
