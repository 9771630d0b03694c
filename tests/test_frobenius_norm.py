"""``frobenius_norm()`` of the sources (exact, or None where only a bound is known), and the
gap estimate it gives rsvd / block Krylov and the driver on a lazy kernel source."""

import numpy as np
import pytest
import scipy.sparse as sp

import solvers
from ksvd_bench.driver import solve_to_tolerance
from ksvd_bench.kernels import KernelSource
from ksvd_bench.kernels.source import FROBENIUS_RTOL
from ksvd_bench.metrics import frobenius_norm

KERNELS = ("sne", "t", "rbf", "linear", "poly", "softmax")


def _points(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((40, 3)), rng.standard_normal((30, 3))


def _source(kernel, center, dtype=np.float64):
    X, Z = _points()
    gamma = None if kernel in ("linear", "poly") else 1.5
    return KernelSource.from_points(X, Z, kernel, gamma=gamma, center=center, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_source_frobenius_norm_is_the_dense_norm(kernel, center, dtype):
    src = _source(kernel, center, dtype)
    dense = np.linalg.norm(np.asarray(src.dense(), dtype=np.float64))
    value = src.frobenius_norm()
    measured, slack = src.frobenius_slack()
    if not center and kernel in ("rbf", "linear", "poly"):
        # no set-up pass measured it: only the analytic bound is known, and it is not exact
        assert value is None and measured is None
        assert src.norm_bound() >= dense
    elif value is None:
        # measured, but its rounding slack is not small against it: unknown, never a guess
        # (float32 exp kernels: (d + 2) u (1 + T) per entry, T the largest exponent)
        assert dtype == np.float32 and slack > FROBENIUS_RTOL["f"] * measured
        assert measured == pytest.approx(dense, rel=1e-6)
    else:
        rtol = 1e-12 if dtype == np.float64 else 1e-6
        assert value == pytest.approx(dense, rel=rtol)
        assert src.norm_bound() >= value
    # metrics.frobenius_norm falls back to a pass where the member says None
    assert frobenius_norm(src) == pytest.approx(dense, rel=1e-6)


def test_adapters_frobenius_norm():
    G = np.random.default_rng(1).standard_normal((20, 15))
    assert solvers.as_source(G).frobenius_norm() == pytest.approx(np.linalg.norm(G))
    assert solvers.as_source(sp.csr_matrix(G)).frobenius_norm() == pytest.approx(np.linalg.norm(G))


@pytest.mark.parametrize("method", ["rsvd", "block_krylov"])
def test_lazy_kernel_source_gets_the_exact_gap(method):
    src = _source("sne", True)
    G = np.asarray(src.dense())
    res = solvers.svd(src, 5, method=method, random_state=0, n_iter=1, n_oversamples=5)
    assert res.info["error_estimate_kind"] == "gap"
    truth = np.linalg.norm(G - res.U @ (res.U.T @ G))
    assert res.info["error_estimate"] == pytest.approx(truth, rel=1e-8)
    # uncentred rbf: ||G||_F unknown without a pass, so leave-one-out; still in band
    rbf = _source("rbf", False)
    G = np.asarray(rbf.dense())
    res = solvers.svd(rbf, 5, method=method, random_state=0, n_iter=1, n_oversamples=5)
    assert res.info["error_estimate_kind"] == "loo"
    truth = np.linalg.norm(G - res.U @ (res.U.T @ G))
    assert 0.5 <= res.info["error_estimate"] / truth <= 2


def test_driver_estimate_on_a_lazy_source():
    src = _source("t", True)
    G = np.asarray(src.dense())
    out = solve_to_tolerance(src, 5, "rsvd", 0.5, random_state=0, max_effort=20)
    assert out.stop == "estimate"
    assert all(h["estimate_kind"] == "gap" for h in out.history)
    truth = np.linalg.norm(G - out.result.U @ (out.result.U.T @ G))
    assert out.error_estimate == pytest.approx(truth, rel=1e-8)
    # no norm (uncentred rbf): the solver's leave-one-out, fused into the solve
    rbf = _source("rbf", False)
    out = solve_to_tolerance(rbf, 5, "block_krylov", 0.3, random_state=0)
    assert {h["estimate_kind"] for h in out.history} <= {"fused_loo", "fused_exact"}
    G = np.asarray(rbf.dense())
    truth = np.linalg.norm(G - out.result.U @ (out.result.U.T @ G))
    assert 0.5 <= out.error_estimate / truth <= 2
