"""The softmax (attention) kernel ``G_ij = exp(x_i . z_j / gamma) / sum_j' exp(x_i . z_j' / gamma)``
against a numpy formula: dense, lazy (every pass, centred and not), float32, large inner
products, bad input. The Dask backend is tested in ``tests/test_distributed.py``, the CUDA
backend on the simulator in ``tests/test_cuda_sim.py``.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from ksvd_bench.estimators import KSVD
from ksvd_bench.kernels import (
    KernelSource,
    StructuredKernelSource,
    kernel_matrix,
    kernel_source,
    ksvd_kernel,
)
from ksvd_bench.kernels.compat import compat_data

#: float64 agreement with the numpy formula (the issue's 1e-12)
TOL = 1e-12


def formula(X, Z, gamma):
    """Row-wise softmax of ``X Z^T / gamma`` in float64, shifted by each row's largest
    logit (a naive ``exp`` overflows for logits above 709)."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    Z = Z.toarray() if sp.issparse(Z) else np.asarray(Z, dtype=np.float64)
    S = X @ Z.T / gamma
    E = np.exp(S - S.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def centred(G):
    return G - G.mean(axis=0) - G.mean(axis=1, keepdims=True) + G.mean()


def _points(n=70, m=90, d=7, seed=0, offset=0.0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal((m, d)) + offset


def _close(got, want, tol=TOL):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(1.0, np.abs(want).max()))


# ------------------------------------------------------------------ dense
@pytest.mark.parametrize("layout", ["dense", "x_sparse", "z_sparse", "both_sparse"])
def test_kernel_matrix_matches_formula(layout):
    X, Z = _points()
    rng = np.random.default_rng(1)
    X[rng.random(X.shape) < 0.4] = 0.0
    Z[rng.random(Z.shape) < 0.4] = 0.0
    Xi = sp.csr_matrix(X) if layout in ("x_sparse", "both_sparse") else X
    Zi = sp.csr_matrix(Z) if layout in ("z_sparse", "both_sparse") else Z
    G = kernel_matrix(Xi, Zi, "softmax", gamma=0.7)
    _close(G, formula(X, Z, 0.7))
    _close(kernel_matrix(Xi, Zi, "softmax", gamma=0.7, center=True), centred(formula(X, Z, 0.7)))


def test_default_temperature_is_sqrt_d():
    X, Z = _points(d=16)
    _close(kernel_matrix(X, Z, "softmax"), formula(X, Z, 4.0))
    assert KernelSource.from_points(X, Z, "softmax").gamma == 4.0
    assert KernelSource.from_points(X, Z, "softmax", gamma=2.0).gamma == 2.0


def test_ksvd_kernel_default_temperature_through_compat():
    """``kernel_source(A, "softmax")``: the temperature is ``factor * sqrt(d)``, ``d = min(N,
    M)`` the dimension of the mapped points."""
    A = np.random.default_rng(2).standard_normal((30, 12))
    X, Z = compat_data(A, "pca")
    assert X.shape[1] == 12
    for factor in (1.0, 2.0):
        g = factor * np.sqrt(12)
        G = ksvd_kernel(A, "softmax", compat="pca", center=False, bandwidth_factor=factor)
        _close(G, formula(X, Z, g))
        S = kernel_source(A, "softmax", compat="pca", bandwidth_factor=factor)
        assert S.gamma == pytest.approx(g, rel=1e-15)
        _close(S.dense(), centred(formula(X, Z, g)))


# ------------------------------------------------------------------ lazy CPU passes
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("layout", ["dense", "x_sparse", "both_sparse"])
def test_lazy_passes_match_formula(center, layout):
    """matmat, rmatmat, sketch, dense, rows, cols and blocks over several tiles (a small
    chunk budget: 16-row tiles of 64 columns) against the formula, centred and not."""
    X, Z = _points(70, 150, seed=3)
    if layout != "dense":
        X[np.abs(X) < 0.5] = 0.0
        Z[np.abs(Z) < 0.5] = 0.0
    Xi = sp.csr_matrix(X) if layout != "dense" else X
    Zi = sp.csr_matrix(Z) if layout == "both_sparse" else Z
    S = KernelSource.from_points(Xi, Zi, "softmax", gamma=1.3, center=center, chunk_bytes=16**3 * 4)
    assert S.chunk_rows < X.shape[0] and S.chunk_cols < Z.shape[0]
    G = formula(X, Z, 1.3)
    G = centred(G) if center else G
    rng = np.random.default_rng(4)
    V, U = rng.standard_normal((150, 3)), rng.standard_normal((70, 2))
    _close(S.matmat(V), G @ V)
    _close(S.rmatmat(U), G.T @ U)
    Y, W = S.sketch(V, U)
    _close(Y, G @ V)
    _close(W, G.T @ U)
    _close(S.dense(), G)
    r, c = [69, 0, 33], [149, 2, 80, 80]
    _close(S.rows(r), G[r])
    _close(S.cols(c), G[:, c])
    _close(S.block(r, c), G[np.ix_(r, c)])
    if not center:
        # the set-up pass's sum of squares: ||G||_F, free for a row-normalised kernel
        assert S.frobenius_norm() == pytest.approx(np.linalg.norm(G), rel=1e-12)


def test_rows_whose_largest_logit_lies_in_a_later_tile():
    """The streaming log-sum-exp of the set-up pass: each row's largest logit lies in its
    last column tile, about 200 above those of the first, so the running sum is rescaled
    by exp(-200) when that tile arrives."""
    rng = np.random.default_rng(5)
    d, m = 4, 256
    u = np.ones(d) / 2.0
    X = u + 0.1 * rng.standard_normal((40, d))
    Z = np.linspace(0.0, 200.0, m)[:, None] * u + 0.1 * rng.standard_normal((m, d))
    S = KernelSource.from_points(X, Z, "softmax", gamma=1.0, chunk_bytes=16 * 16 * 64)
    assert S.chunk_cols == 64 and np.all(np.argmax(X @ Z.T, axis=1) >= 192)
    G = formula(X, Z, 1.0)
    _close(S.dense(), G)
    V = rng.standard_normal((m, 2))
    _close(S.matmat(V), G @ V)


# ------------------------------------------------------------------ large inner products
def test_large_inner_products_do_not_overflow():
    """Logits x.z / gamma of 1e3 to 1e4 (a naive exp overflows above 709): every row is
    shifted by its largest logit, so its largest entry is exp(0) and the row sums to 1."""
    rng = np.random.default_rng(6)
    X, Z = 30.0 * rng.standard_normal((50, 8)), 30.0 * rng.standard_normal((60, 8))
    logits = X @ Z.T
    assert np.abs(logits).max() > 5e3
    with np.errstate(over="ignore"):
        assert np.isinf(np.exp(logits)).any()  # what the shift avoids
    G = formula(X, Z, 1.0)
    _close(kernel_matrix(X, Z, "softmax", gamma=1.0), G)
    S = KernelSource.from_points(X, Z, "softmax", gamma=1.0, center=True, chunk_bytes=16 * 16 * 16)
    _close(S.dense(), centred(G))
    V = rng.standard_normal((60, 3))
    _close(S.matmat(V), centred(G) @ V)
    for dtype in (np.float64, np.float32):
        B = KernelSource.from_points(X, Z, "softmax", gamma=1.0, dtype=dtype).dense()
        assert np.all(np.isfinite(B))
        np.testing.assert_allclose(B.sum(axis=1), 1.0, rtol=0, atol=1e-6)
        assert np.all(B.max(axis=1) == 1.0)  # each row's winner: exp(0) / (1 + tiny)


def test_large_logits_with_many_live_entries():
    """Keys with a common offset of 1e4: the logits are about 1e4, yet differ by O(1)
    across a row, so every entry counts. ``x . (z - mu) / gamma`` is the same softmax (a
    constant per row), and it is exact here (``z - mu`` is exact, Sterbenz)."""
    rng = np.random.default_rng(7)
    mu = np.full(8, 1e4)
    X = rng.standard_normal((40, 8))
    Z = rng.standard_normal((50, 8)) + mu
    assert np.abs(X @ Z.T / 3.0).max() > 1e3
    G = formula(X, Z - mu, 3.0)
    assert G.max() < 0.5  # not one-hot: a wrong shift would show
    _close(kernel_matrix(X, Z, "softmax", gamma=3.0), G)
    _close(KernelSource.from_points(X, Z, "softmax", gamma=3.0).dense(), G)
    # float32: the keys' offset is removed before the cross products (translate_to_mean),
    # which would otherwise keep 7 digits of x . z ~ 3e4 (logits off by ~1e-3)
    B = KernelSource.from_points(X, Z, "softmax", gamma=3.0, dtype=np.float32).dense()
    _close(B, G, tol=2e-5)


def test_float32_within_1e5_of_the_formula():
    X, Z = _points(60, 80, seed=8)
    G = formula(X, Z, 1.1)
    X32, Z32 = X.astype(np.float32), Z.astype(np.float32)
    assert kernel_matrix(X32, Z32, "softmax", gamma=1.1).dtype == np.float32
    _close(kernel_matrix(X32, Z32, "softmax", gamma=1.1), G, tol=1e-5)
    S = KernelSource.from_points(X32, Z32, "softmax", gamma=1.1, center=True)
    V = np.random.default_rng(9).standard_normal((80, 2))
    _close(S.matmat(V), centred(G) @ V, tol=1e-5)


def test_tiny_temperature_is_a_hard_argmax_until_it_overflows():
    X, Z = _points(20, 30, seed=10)
    G = kernel_matrix(X, Z, "softmax", gamma=1e-200)  # representable: one 1 per row
    np.testing.assert_array_equal(G, np.eye(30)[np.argmax(X @ Z.T, axis=1)])
    with pytest.raises(ValueError, match=r"gamma=1e-300 is too small .* magnitude\^2 / gamma"):
        kernel_matrix(X, Z, "softmax", gamma=1e-300)
    with pytest.raises(ValueError, match=r"in float32 arithmetic: \|x\.z\| / gamma"):
        KernelSource.from_points(X, Z, "softmax", gamma=1e-40, dtype=np.float32)


# ------------------------------------------------------------------ bad input, other entry points
@pytest.mark.parametrize(
    ("gamma", "exc", "match"),
    [
        (0.0, ValueError, "gamma must be finite and > 0"),
        (-1.0, ValueError, "gamma must be finite and > 0"),
        (np.nan, ValueError, "gamma must be finite and > 0"),
        (np.inf, ValueError, "gamma must be finite and > 0"),
        ("1", TypeError, "gamma must be a positive real number"),
        (True, TypeError, "gamma must be a positive real number"),
    ],
)
def test_bad_gamma_is_refused(gamma, exc, match):
    X, Z = _points()
    with pytest.raises(exc, match=match):
        kernel_matrix(X, Z, "softmax", gamma=gamma)
    with pytest.raises(exc, match=match):
        KernelSource.from_points(X, Z, "softmax", gamma=gamma)


def test_bad_shapes_are_refused():
    X, Z = _points()
    with pytest.raises(ValueError, match="same number of features .* X has 7, Z has 6"):
        kernel_matrix(X, Z[:, :6], "softmax")
    with pytest.raises(ValueError, match="same number of features"):
        KernelSource.from_points(X, Z[:, :6], "softmax")
    with pytest.raises(ValueError, match="X must be 2-d"):
        kernel_matrix(X[0], Z, "softmax")
    with pytest.raises(ValueError, match="Z is empty"):
        kernel_matrix(X, Z[:0], "softmax")
    with pytest.raises(ValueError, match="X contains NaN or Inf"):
        kernel_matrix(np.full_like(X, np.inf), Z, "softmax")


def test_structured_source_refuses_softmax_and_says_why():
    A = sp.random(40, 40, density=0.1, random_state=0, format="csr")
    why = r"structured source needs kernel 'sne' or 'rbf', got 'softmax'.*exp\(x.z / gamma\)"
    with pytest.raises(ValueError, match=why):
        kernel_source(A, "softmax", structured=True)
    with pytest.raises(ValueError, match=why):
        StructuredKernelSource(A, "softmax", gamma=1.0)
    S = kernel_source(A, "softmax", center=False)  # "auto": the general lazy source
    assert type(S) is KernelSource
    _close(S.dense(), formula(A, A.T.tocsr(), np.sqrt(40)))


def test_estimator_fits_softmax():
    A = np.random.default_rng(11).random((40, 40))
    est = KSVD(3, kernel="softmax", random_state=0).fit(A)
    assert est.gamma_ == np.sqrt(40)
    G = centred(formula(A, A.T, np.sqrt(40)))
    np.testing.assert_allclose(
        est.singular_values_, np.linalg.svd(G, compute_uv=False)[:3], rtol=1e-10
    )
    np.testing.assert_allclose(est.transform(A), est.left_features_, atol=1e-8)


def test_cli_kernel_choices_accept_softmax():
    from ksvd_bench.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["compare", "--kernel", "softmax"])
    assert args.kernel == "softmax"
    args = parser.parse_args(["roofline", "--kernel", "softmax"])
    assert args.kernel == "softmax"


def test_joint_psd_kernel_of_softmax():
    """``sampling="rpcholesky"`` reads the PSD kernel ``exp((u.v - c) / gamma)`` on the
    stacked points: its X-Z block, rows normalised, is G; no entry exceeds 1."""
    X, Z = _points(30, 40, d=5, seed=12)
    jp = KernelSource.from_points(X, Z + 2.0, "softmax", gamma=1.5, setup="lazy").joint_psd()
    assert jp.normalise
    K = jp.block(np.arange(70), np.arange(70))
    np.testing.assert_allclose(np.diag(K), jp.diag(), rtol=1e-14)
    assert K.max() <= 1.0 and np.linalg.eigvalsh(K).min() > -1e-12
    KXZ = K[:30, 30:]
    _close(KXZ / KXZ.sum(axis=1, keepdims=True), formula(X, Z + 2.0, 1.5))
    X, Z = 30.0 * X, 30.0 * Z  # logits of thousands: still no overflow
    jp = KernelSource.from_points(X, Z, "softmax", gamma=1.0, setup="lazy").joint_psd()
    K = jp.columns(np.arange(70))
    assert np.all(np.isfinite(K)) and K.max() <= 1.0


def test_race_problems_default_to_sqrt_d():
    from ksvd_bench.race.problems import problem_from_data, problem_from_points

    X, Z = _points(30, 20, d=9)
    P = problem_from_points(X, Z, name="attn", kernel="softmax")
    assert P.gamma == 3.0
    _close(P.G, formula(X, Z, 3.0))
    A = np.random.default_rng(13).random((25, 16))
    P = problem_from_data(A, name="a", kernel="softmax", compat="pca", center=False)
    assert P.gamma == 4.0
    _close(P.G, formula(*compat_data(A, "pca"), 4.0))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("factor", [1e150, 1e-150])
def test_extreme_magnitudes_stay_finite(sparse, factor):
    """Softmax depends on x.z / gamma only: points times f and gamma times f^2 give the same
    G, though x.z itself would overflow (1e300 * 1e300) or underflow to 0 unscaled."""
    X, Z = _points(12, 9, d=4, seed=14)
    Xs, Zs = X * factor, Z * factor
    if sparse:
        Xs, Zs = sp.csr_matrix(Xs), sp.csr_matrix(Zs)
    G = kernel_matrix(Xs, Zs, "softmax", gamma=1.3 * factor * factor)
    _close(G, formula(X, Z, 1.3))
    S = KernelSource.from_points(Xs, Zs, "softmax", gamma=1.3 * factor * factor, center=True)
    _close(S.dense(), centred(formula(X, Z, 1.3)))


def test_float32_points_whose_cross_products_overflow_float32():
    """float32 points of 1e20: x.z (about 1e40) is beyond float32, so the source scales
    them by a power of two first (as for SNE), and G stays right to float32 accuracy."""
    X, Z = _points(20, 30, d=4, seed=15)
    X32, Z32 = (X * 1e20).astype(np.float32), (Z * 1e20).astype(np.float32)
    with np.errstate(over="ignore"):
        assert not np.all(np.isfinite(X32 @ Z32.T))
    S = KernelSource.from_points(X32, Z32, "softmax", gamma=1.3e40, dtype=np.float32)
    G = formula(X32.astype(np.float64) / 1e20, Z32.astype(np.float64) / 1e20, 1.3)
    _close(S.dense(), G, tol=1e-5)
    _close(kernel_matrix(X32, Z32, "softmax", gamma=1.3e40), G, tol=1e-5)
