"""kernel_matrix, center_matrix, compat_data and ksvd_kernel against numpy/sklearn oracles."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax
from sklearn.metrics.pairwise import euclidean_distances, polynomial_kernel

from ksvd_bench.kernels import (
    KERNELS,
    center_matrix,
    compat_data,
    kernel_matrix,
    ksvd_kernel,
    paper_gamma,
)


def oracle(X, Z, kernel, gamma=1.0, degree=2, coef0=1.0):
    """Plain float64 numpy/sklearn reference of every kernel."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    Z = Z.toarray() if sp.issparse(Z) else np.asarray(Z)
    X = X.astype(np.float64)
    Z = Z.astype(np.float64)
    if kernel == "linear":
        return X @ Z.T
    if kernel == "poly":
        return polynomial_kernel(X, Z, degree=degree, gamma=1.0, coef0=coef0)
    if kernel == "softmax":
        return softmax(X @ Z.T / gamma, axis=1)
    d2 = euclidean_distances(X, Z, squared=True)
    if kernel == "rbf":
        return np.exp(-d2 / gamma**2)
    if kernel == "sne":
        return softmax(-d2 / gamma**2, axis=1)
    K = 1.0 / (1.0 + d2 / gamma**2)
    return K / K.sum(axis=1, keepdims=True)


def make_data(rng, n, d, sparse, zero_rows, density=0.4):
    if sparse:
        X = sp.random(
            n, d, density=density, random_state=rng, format="csr", data_rvs=rng.standard_normal
        )
        X = X.tolil()
        for i in zero_rows:
            X[i, :] = 0
        return X.tocsr()
    X = rng.standard_normal((n, d))
    X[list(zero_rows)] = 0.0
    return X


@st.composite
def problems(draw):
    n = draw(st.integers(1, 9))
    m = draw(st.integers(1, 9))
    d = draw(st.integers(1, 6))
    sparse = draw(st.booleans())
    zx = draw(st.sets(st.integers(0, n - 1), max_size=2))
    zz = draw(st.sets(st.integers(0, m - 1), max_size=2))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    X = make_data(rng, n, d, sparse, zx)
    Z = make_data(rng, m, d, sparse and draw(st.booleans()), zz)
    gamma = draw(st.sampled_from([0.3, 1.0, 2.5]))
    return X, Z, gamma


@pytest.mark.parametrize("kernel", KERNELS)
@given(prob=problems())
@settings(max_examples=25, deadline=None)
def test_kernel_matches_oracle_float64(kernel, prob):
    X, Z, gamma = prob
    G = kernel_matrix(X, Z, kernel, gamma=gamma, degree=3, coef0=0.5)
    assert G.dtype == np.float64
    assert G.shape == (X.shape[0], Z.shape[0])
    np.testing.assert_allclose(G, oracle(X, Z, kernel, gamma, 3, 0.5), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
@given(prob=problems())
@settings(max_examples=10, deadline=None)
def test_kernel_float32_in_float32_out(kernel, prob):
    X, Z, gamma = prob
    X32, Z32 = X.astype(np.float32), Z.astype(np.float32)
    G = kernel_matrix(X32, Z32, kernel, gamma=gamma)
    assert G.dtype == np.float32
    ref = oracle(X32, Z32, kernel, gamma)
    np.testing.assert_allclose(G, ref, rtol=2e-4, atol=2e-4 * max(1.0, np.abs(ref).max()))
    assert kernel_matrix(X32, Z32, kernel, gamma=gamma, dtype=np.float64).dtype == np.float64
    assert kernel_matrix(X, Z, kernel, gamma=gamma, dtype="float32").dtype == np.float32


@pytest.mark.parametrize("kernel", ["sne", "t", "softmax"])
@pytest.mark.parametrize("sparse", [False, True])
def test_rows_sum_to_one(kernel, sparse):
    rng = np.random.default_rng(1)
    X = make_data(rng, 40, 7, sparse, {3})
    Z = make_data(rng, 30, 7, sparse, {0})
    G = kernel_matrix(X, Z, kernel, gamma=0.8)
    np.testing.assert_allclose(G.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(G >= 0)


@pytest.mark.parametrize("gamma", [1e-3, 1e-2, 1.0, 1e2, 1e3])
@pytest.mark.parametrize("sparse", [False, True])
def test_sne_stable_for_extreme_gamma(gamma, sparse):
    rng = np.random.default_rng(2)
    X = make_data(rng, 25, 5, sparse, set(), density=0.5)
    Z = make_data(rng, 35, 5, sparse, set(), density=0.5)
    G = kernel_matrix(X, Z, "sne", gamma=gamma)
    assert np.all(np.isfinite(G))
    np.testing.assert_allclose(G.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(G, oracle(X, Z, "sne", gamma), rtol=1e-7, atol=1e-12)


def test_sparse_adjacency_sne_matches_dense():
    # the factorised sparse path (one exp per nonzero of X @ Z.T) against the dense path
    rng = np.random.default_rng(3)
    A = (sp.random(60, 60, density=0.05, random_state=rng, format="csr") > 0).astype(float)
    Z = A.T.tocsr()
    for kernel in ("sne", "rbf"):
        for gamma in (0.05, 1.0, 30.0):
            Gs = kernel_matrix(A, Z, kernel, gamma=gamma)
            Gd = kernel_matrix(A.toarray(), Z.toarray(), kernel, gamma=gamma)
            np.testing.assert_allclose(Gs, Gd, rtol=1e-12, atol=1e-14)


def test_sparse_duplicates_and_bool_input():
    # duplicate CSR entries are summed before the squared norms are read from the data
    cols = np.array([1, 1, 0, 2, 2])
    Xdup = sp.csr_matrix((np.ones(5), cols, np.array([0, 2, 3, 5])), shape=(3, 3))
    assert not Xdup.has_canonical_format
    Xd = Xdup.toarray()
    np.testing.assert_allclose(
        kernel_matrix(Xdup, Xdup, "sne", gamma=1.0), oracle(Xd, Xd, "sne", 1.0), rtol=1e-12
    )
    B = sp.csr_matrix(Xd > 0)
    np.testing.assert_allclose(
        kernel_matrix(B, B, "rbf", gamma=2.0), oracle(Xd > 0, Xd > 0, "rbf", 2.0), rtol=1e-12
    )


def test_negative_squared_distances_clipped():
    # x == z up to cancellation: the distance must be 0, not a tiny negative number
    X = np.full((3, 4), 1e8) + np.arange(4)
    G = kernel_matrix(X, X, "rbf", gamma=1e-3)
    np.testing.assert_array_equal(np.diag(G), 1.0)
    assert np.all(G <= 1.0)


@pytest.mark.parametrize("kernel", ["sne", "rbf", "linear"])
@pytest.mark.parametrize("sparse", [False, True])
def test_center_zero_means_and_oracle(kernel, sparse):
    rng = np.random.default_rng(4)
    X = make_data(rng, 17, 6, sparse, {0})
    Z = make_data(rng, 23, 6, sparse, set())
    Gc = kernel_matrix(X, Z, kernel, gamma=1.5, center=True)
    np.testing.assert_allclose(Gc.mean(axis=0), 0.0, atol=1e-14)
    np.testing.assert_allclose(Gc.mean(axis=1), 0.0, atol=1e-14)
    G = oracle(X, Z, kernel, 1.5)
    HN = np.eye(17) - 1.0 / 17
    HM = np.eye(23) - 1.0 / 23
    np.testing.assert_allclose(Gc, HN @ G @ HM, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(center_matrix(G), HN @ G @ HM, rtol=1e-9, atol=1e-13)


def test_center_matrix_keeps_input_and_float32():
    G = np.random.default_rng(5).random((6, 4)).astype(np.float32)
    G0 = G.copy()
    Gc = center_matrix(G)
    assert Gc.dtype == np.float32
    np.testing.assert_array_equal(G, G0)
    np.testing.assert_allclose(Gc.mean(axis=1), 0.0, atol=1e-6)


@pytest.mark.numba_threads(2)  # fewer here: runs in a subprocess with 2
@pytest.mark.parametrize("kernel", ["sne", "rbf", "t", "poly"])
@pytest.mark.parametrize("sparse", [False, True])
def test_same_result_with_1_and_2_threads(kernel, sparse, with_numba_threads):
    rng = np.random.default_rng(6)
    X = make_data(rng, 301, 9, sparse, {1})
    Z = make_data(rng, 700, 9, sparse, {2})

    def run():
        return kernel_matrix(X, Z, kernel, gamma=0.9, center=True)

    G1 = with_numba_threads(1, run)
    G2 = with_numba_threads(2, run)
    np.testing.assert_array_equal(G1, G2)


# ------------------------------------------------------------------ compat and ksvd_kernel
@st.composite
def data_matrices(draw):
    n = draw(st.integers(1, 8))
    m = draw(st.integers(1, 8))
    sparse = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    if sparse:
        A = sp.random(
            n, m, density=0.6, random_state=rng, format="csr", data_rvs=rng.standard_normal
        )
        if A.nnz == 0:
            A = sp.csr_matrix(([1.0], ([0], [0])), shape=(n, m))
        return A
    return rng.standard_normal((n, m))


@given(A=data_matrices())
@settings(max_examples=40, deadline=None)
def test_linear_pinv_returns_A(A):
    # the paper's Remark: with compat a0 the linear kernel is A pinv(A) A = A
    G = ksvd_kernel(A, "linear", compat="pinv", center=False)
    Ad = A.toarray() if sp.issparse(A) else A
    np.testing.assert_allclose(G, Ad, rtol=0, atol=1e-12 * max(1.0, np.abs(Ad).max()))


def test_linear_pinv_ill_conditioned_and_rank_deficient():
    rng = np.random.default_rng(7)
    for n, m in [(20, 35), (35, 20), (25, 25)]:
        U, _ = np.linalg.qr(rng.standard_normal((n, min(n, m))))
        V, _ = np.linalg.qr(rng.standard_normal((m, min(n, m))))
        s = np.logspace(0, -10, min(n, m))
        s[-3:] = 0.0
        A = (U * s) @ V.T
        G = ksvd_kernel(A, "linear", compat="pinv", center=False)
        np.testing.assert_allclose(G, A, rtol=0, atol=1e-13)


@pytest.mark.parametrize("shape", [(7, 12), (12, 7), (9, 9)])
@pytest.mark.parametrize("compat", ["pinv", "pca", "random"])
def test_compat_shapes_and_sparse_equals_dense(shape, compat):
    rng = np.random.default_rng(8)
    A = rng.standard_normal(shape)
    A[A < 0.3] = 0.0
    X, Z = compat_data(A, compat, random_state=3)
    n = min(shape)
    assert X.shape == (shape[0], n) and Z.shape == (shape[1], n)
    Xs, Zs = compat_data(sp.csr_matrix(A), compat, random_state=3)
    dense = [M.toarray() if sp.issparse(M) else M for M in (Xs, Zs)]
    np.testing.assert_allclose(dense[0], X, atol=1e-12)
    np.testing.assert_allclose(dense[1], Z, atol=1e-12)


def test_compat_pca_preserves_distances_of_projected_source():
    rng = np.random.default_rng(9)
    A = rng.standard_normal((6, 15))  # M > N: the rows x_i are projected to R^6
    X, Z = compat_data(A, "pca")
    np.testing.assert_allclose(euclidean_distances(X), euclidean_distances(A), atol=1e-12)
    np.testing.assert_array_equal(Z, A.T)
    B = rng.standard_normal((15, 6))  # N > M: the columns z_j are projected to R^6
    X, Z = compat_data(B, "pca")
    np.testing.assert_allclose(euclidean_distances(Z), euclidean_distances(B.T), atol=1e-12)
    np.testing.assert_array_equal(X, B)


def test_compat_random_seeded_and_auto():
    rng = np.random.default_rng(10)
    A = rng.standard_normal((5, 11))
    X1, _ = compat_data(A, "random", random_state=0)
    X2, _ = compat_data(A, "random", random_state=np.random.default_rng(0))
    X3, _ = compat_data(A, "random", random_state=1)
    np.testing.assert_array_equal(X1, X2)
    assert not np.allclose(X1, X3)
    Xa, _ = compat_data(A, "auto")
    Xp, _ = compat_data(A, "pca")
    np.testing.assert_array_equal(Xa, Xp)
    S = rng.standard_normal((4, 4))
    Xs, Zs = compat_data(S, "auto")
    np.testing.assert_array_equal(Xs, S)
    np.testing.assert_array_equal(Zs, S.T)


def test_ksvd_kernel_default_gamma_and_compat():
    rng = np.random.default_rng(11)
    A = rng.random((12, 20))
    g = paper_gamma(A)
    np.testing.assert_allclose(np.sqrt(20 * A.var()), g)
    G = ksvd_kernel(A, "sne", center=False)
    X, Z = compat_data(A, "pca")
    np.testing.assert_allclose(G, oracle(X, Z, "sne", g), rtol=1e-10, atol=1e-14)
    Gc = ksvd_kernel(A, "sne", bandwidth_factor=2.0)
    np.testing.assert_allclose(Gc, center_matrix(oracle(X, Z, "sne", 2 * g)), atol=1e-13)


# ------------------------------------------------------------------ bad input
GOOD = np.ones((3, 2))


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((np.array([[np.nan, 1.0]]), GOOD), {"gamma": 1.0}, ValueError, "X contains NaN"),
        ((GOOD, np.array([[np.inf, 1.0]])), {"gamma": 1.0}, ValueError, "Z contains NaN"),
        ((sp.csr_matrix(np.array([[np.nan, 1.0]])), GOOD), {"gamma": 1.0}, ValueError, "X "),
        ((np.empty((0, 2)), GOOD), {"gamma": 1.0}, ValueError, "X is empty"),
        ((GOOD, np.empty((3, 0))), {"gamma": 1.0}, ValueError, "Z is empty"),
        ((GOOD, np.ones((3, 5))), {"gamma": 1.0}, ValueError, "same number of features"),
        ((np.ones(3), GOOD), {"gamma": 1.0}, ValueError, "X must be 2-d"),
        ((GOOD, GOOD), {"gamma": 0.0}, ValueError, "gamma"),
        ((GOOD, GOOD), {"gamma": -1.0}, ValueError, "gamma"),
        ((GOOD, GOOD), {"gamma": "1"}, TypeError, "gamma"),
        ((GOOD, GOOD), {}, ValueError, "gamma is required"),
        ((GOOD, GOOD, "poly"), {"degree": 0.5}, ValueError, "degree"),
        ((GOOD, GOOD, "poly"), {"degree": "2"}, TypeError, "degree"),
        ((GOOD, GOOD, "gauss"), {"gamma": 1.0}, ValueError, "kernel"),
        ((GOOD, GOOD), {"gamma": 1.0, "dtype": np.int32}, ValueError, "dtype"),
        ((GOOD, GOOD), {"gamma": 1.0, "center": "yes"}, TypeError, "center"),
        ((np.array([["a", "b"]]), GOOD), {"gamma": 1.0}, TypeError, "X must hold real"),
    ],
)
def test_kernel_matrix_bad_input(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        kernel_matrix(*args, **kwargs)


@pytest.mark.parametrize(
    "A, kwargs, exc, match",
    [
        (np.array([[1.0, np.nan], [0.0, 1.0]]), {}, ValueError, "A contains NaN"),
        (np.empty((0, 3)), {}, ValueError, "A is empty"),
        (np.ones((3, 4)), {"compat": "svd"}, ValueError, "compat"),
        (np.ones((3, 4)), {"compat": None}, ValueError, "compat=None needs a square A"),
        (np.eye(3), {"gamma": -2.0}, ValueError, "gamma"),
        (np.eye(3), {"bandwidth_factor": 0.0}, ValueError, "bandwidth_factor"),
        (np.eye(3), {"kernel": "poly", "degree": 0}, ValueError, "degree"),
        (np.eye(3), {"kernel": "cosine"}, ValueError, "kernel"),
        (np.ones((3, 3)), {}, ValueError, "zero variance"),
    ],
)
def test_ksvd_kernel_bad_input(A, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ksvd_kernel(A, **kwargs)


def test_compat_data_bad_input():
    with pytest.raises(ValueError, match="compat"):
        compat_data(np.eye(3), "identity")
    with pytest.raises(ValueError, match="A contains NaN"):
        compat_data(sp.csr_matrix(np.array([[np.inf, 0.0], [0.0, 1.0]])), "pca")


# ------------------------------------------------------------------ vectorised exp
def test_exp_nonpos_within_one_ulp_of_numpy():
    from ksvd_bench.kernels.leaves import EXP_MIN, exp_nonpos

    rng = np.random.default_rng(12)
    x = np.concatenate(
        [
            -rng.random(20000) * 800.0,
            -np.logspace(-300, 2.8, 2000),
            [0.0, -0.0, EXP_MIN, EXP_MIN + 1e-9, -1e-300, -np.log(2) / 2],
        ]
    )
    y = x.copy()
    exp_nonpos(y)
    ref = np.exp(x)
    normal = x >= EXP_MIN
    ulps = np.abs(y[normal] - ref[normal]) / np.spacing(ref[normal])
    assert ulps.max() <= 1.0
    np.testing.assert_array_equal(y[~normal], 0.0)  # subnormal results flushed to zero
    assert np.all(ref[~normal] < np.exp(EXP_MIN))


# ------------------------------------------------------------------ extreme scales (issue 11)
@pytest.mark.parametrize("kernel", ["rbf", "sne", "t"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("factor", [1e200, 1e-200])
def test_extreme_magnitudes_stay_finite(kernel, sparse, factor):
    # X*1e200 with gamma=1e200 used to give NaN (|x|^2 overflowed): the kernel only
    # depends on |x - z| / gamma, so it must equal the unscaled one
    rng = np.random.default_rng(13)
    X = make_data(rng, 12, 4, sparse, set())
    Z = make_data(rng, 9, 4, sparse, set())
    G = kernel_matrix(X * factor, Z * factor, kernel, gamma=1.3 * factor)
    np.testing.assert_allclose(G, kernel_matrix(X, Z, kernel, gamma=1.3), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("gamma", [1e-150, 1e-160, 1e-300, 5e-324])
def test_tiny_gamma_raises_value_error_naming_gamma(gamma):
    # used to raise ZeroDivisionError below ~1.5e-154 (1/gamma^2 overflowed)
    X = np.random.default_rng(14).standard_normal((5, 3))
    with pytest.raises(ValueError, match="gamma=.* is too small for data of magnitude"):
        kernel_matrix(X, X, "sne", gamma=gamma)
    G = kernel_matrix(X, X, "sne", gamma=1e-100)  # small but representable: a hard argmin
    np.testing.assert_array_equal(G, np.eye(5))


def test_tiny_data_with_tiny_gamma_is_fine():
    X = np.random.default_rng(15).standard_normal((6, 3))
    G = kernel_matrix(X * 1e-300, X * 1e-300, "t", gamma=2e-300)
    np.testing.assert_allclose(G, kernel_matrix(X, X, "t", gamma=2.0), rtol=1e-12)


def test_overflowing_poly_and_linear_raise():
    X = np.random.default_rng(16).standard_normal((8, 3)) + 2.0
    with pytest.raises(ValueError, match=r"kernel 'poly' gives non-finite values.*degree"):
        kernel_matrix(X, X, "poly", degree=1000)  # used to return inf
    with pytest.raises(ValueError, match="kernel 'linear' gives non-finite values"):
        kernel_matrix(X * 1e200, X * 1e200, "linear")
    with pytest.raises(ValueError, match="not real"):
        kernel_matrix(X, -X, "poly", degree=2.5, coef0=0.0)
