"""Contract of the KSVD estimator: shapes, out-of-sample extension, determinism, validation."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

from ksvd_bench.estimators import KSVD
from ksvd_bench.kernels import kernel_matrix, paper_gamma


def _data(n, m, seed=0):
    return np.random.default_rng(seed).random((n, m))


def _sign_aligned(X, Y):
    """Y with each column's sign flipped to agree with X."""
    s = np.sign(np.sum(X * Y, axis=0))
    s[s == 0] = 1.0
    return Y * s


@parametrize_with_checks([KSVD(2, random_state=0)])
def test_sklearn_compatible(estimator, check):
    # every check of sklearn's suite passes except check_array_api_input, which sklearn itself
    # skips unless SCIPY_ARRAY_API is set (KSVD is numpy-only: Numba kernels, scipy solvers)
    check(estimator)


@pytest.mark.parametrize("shape", [(40, 40), (50, 12), (12, 30)])
@pytest.mark.parametrize("kernel", ["sne", "rbf", "t", "linear", "poly", "softmax"])
def test_shapes(shape, kernel):
    A = _data(*shape)
    est = KSVD(3, kernel=kernel, random_state=0).fit(A)
    n, m = shape
    assert est.left_features_.shape == (n, 3)
    assert est.right_features_.shape == (m, 3)
    assert est.singular_values_.shape == (3,)
    assert np.all(np.diff(est.singular_values_) <= 1e-12)
    assert est.transform(_data(7, m, seed=1)).shape == (7, 3)
    assert est.n_features_in_ == m
    assert list(est.get_feature_names_out()) == [f"ksvd{i}" for i in range(3)]


@pytest.mark.parametrize("kernel", ["sne", "rbf", "t", "poly", "softmax"])
@pytest.mark.parametrize("compat", ["pinv", "pca", "random"])
@pytest.mark.parametrize("center", [True, False])
def test_transform_of_training_rows_reproduces_left_features(kernel, compat, center):
    for shape in [(30, 8), (8, 30)]:
        A = _data(*shape, seed=3)
        est = KSVD(3, kernel=kernel, compat=compat, center=center, random_state=0).fit(A)
        if est.singular_values_[-1] < 1e-8 * est.singular_values_[0]:
            continue  # numerically rank-deficient G: the extension of that component is 0
        np.testing.assert_allclose(est.transform(A), est.left_features_, atol=1e-8)
        np.testing.assert_allclose(est.fit_transform(A), est.left_features_, atol=0)


def test_transform_matches_numpy_oracle_for_new_rows():
    rng = np.random.default_rng(5)
    A = rng.random((35, 35))
    A_new = rng.random((6, 35))
    est = KSVD(4, kernel="sne", gamma=1.3, center=True, random_state=0).fit(A)
    # oracle: SNE rows of the new data against the training columns z_j = A[:, j],
    # centred with the training column means, times V S^-1
    d_new = ((A_new[:, None, :] - A.T[None, :, :]) ** 2).sum(-1)
    g_new = np.exp(-d_new / 1.3**2)
    g_new /= g_new.sum(axis=1, keepdims=True)
    d_tr = ((A[:, None, :] - A.T[None, :, :]) ** 2).sum(-1)
    g_tr = np.exp(-d_tr / 1.3**2)
    g_tr /= g_tr.sum(axis=1, keepdims=True)
    col_means = g_tr.mean(axis=0)
    g_c = g_new - g_new.mean(axis=1, keepdims=True) - col_means + col_means.mean()
    expected = g_c @ est.right_features_ / est.singular_values_
    np.testing.assert_allclose(est.transform(A_new), expected, atol=1e-10)
    # and the fitted triplets are those of the dense centred matrix
    H = np.eye(35) - 1.0 / 35
    s = np.linalg.svd(H @ g_tr @ H, compute_uv=False)[:4]
    np.testing.assert_allclose(est.singular_values_, s, rtol=1e-8)


def test_linear_kernel_with_pinv_is_the_svd_of_A():
    A = _data(25, 10, seed=2)
    est = KSVD(4, kernel="linear", compat="pinv", center=False, random_state=0).fit(A)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose(est.singular_values_, s[:4], rtol=1e-8)
    np.testing.assert_allclose(_sign_aligned(U[:, :4], est.left_features_), U[:, :4], atol=1e-7)


def test_sparse_and_dense_input_agree():
    A = sp.random(60, 60, density=0.08, random_state=0, format="csr")
    A.data[:] = 1.0
    dense = KSVD(5, random_state=0).fit(A.toarray())
    sparse = KSVD(5, random_state=0).fit(A)
    np.testing.assert_allclose(sparse.singular_values_, dense.singular_values_, rtol=1e-9)
    np.testing.assert_allclose(
        _sign_aligned(dense.left_features_, sparse.left_features_),
        dense.left_features_,
        atol=1e-7,
    )
    assert sparse.gamma_ == pytest.approx(paper_gamma(A, 1.0))


def test_determinism_and_seeds():
    A = _data(40, 15, seed=4)
    a = KSVD(3, kernel="rbf", compat="random", random_state=7).fit(A)
    b = KSVD(3, kernel="rbf", compat="random", random_state=7).fit(A)
    np.testing.assert_array_equal(a.left_features_, b.left_features_)
    np.testing.assert_array_equal(a.transform(A[:5]), b.transform(A[:5]))
    c = KSVD(3, kernel="rbf", compat="random", random_state=8).fit(A)
    assert not np.allclose(a.singular_values_, c.singular_values_)


def test_generator_random_state_accepted():
    A = _data(30, 30, seed=6)
    est = KSVD(2, random_state=np.random.default_rng(0)).fit(A)
    assert est.left_features_.shape == (30, 2)


def test_asym_nystrom_solver_plugs_in():
    A = _data(60, 60, seed=8)
    exact = KSVD(3, kernel="rbf", random_state=0).fit(A)
    approx = KSVD(
        3, kernel="rbf", solver="asym_nystrom", solver_options={"n_samples": 60}, random_state=0
    ).fit(A)
    # with every row and column sampled the Nystrom approximation is G itself
    np.testing.assert_allclose(approx.singular_values_, exact.singular_values_, rtol=1e-6)
    assert approx.solver_info_["method"] == "asym_nystrom"


def test_bandwidth_factor_scales_paper_gamma():
    A = _data(30, 30, seed=9)
    est = KSVD(2, bandwidth_factor=2.0, random_state=0).fit(A)
    assert est.gamma_ == pytest.approx(2.0 * paper_gamma(A, 1.0))
    fixed = KSVD(2, gamma=0.7, random_state=0).fit(A)
    assert fixed.gamma_ == 0.7


def test_kernel_values_used_by_transform_follow_kernel_matrix():
    A = _data(20, 20, seed=10)
    est = KSVD(2, kernel="rbf", center=False, random_state=0).fit(A)
    G = kernel_matrix(A, A.T.copy(), "rbf", gamma=est.gamma_)
    np.testing.assert_allclose(
        est.transform(A), G @ est.right_features_ / est.singular_values_, atol=1e-12
    )


@pytest.mark.parametrize(
    ("params", "exc", "match"),
    [
        (dict(n_components=0), ValueError, "n_components"),
        (dict(n_components=2.5), TypeError, "n_components"),
        (dict(n_components=50), ValueError, "n_components"),
        (dict(n_components=2, kernel="cosine"), ValueError, "kernel"),
        (dict(n_components=2, compat="svd"), ValueError, "compat"),
        (dict(n_components=2, compat=None), ValueError, "compat"),
        (dict(n_components=2, solver="eig"), ValueError, "solver"),
        (dict(n_components=2, solver_options=[1]), TypeError, "solver_options"),
        (dict(n_components=2, gamma=-1.0), ValueError, "gamma"),
        (dict(n_components=2, bandwidth_factor=0.0), ValueError, "gamma"),
        (dict(n_components=2, center="yes"), TypeError, "center"),
    ],
)
def test_bad_parameters(params, exc, match):
    with pytest.raises(exc, match=match):
        KSVD(**params).fit(_data(20, 10))


def test_bad_input():
    A = _data(10, 10)
    A[2, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KSVD(2).fit(A)
    est = KSVD(2, random_state=0).fit(_data(10, 10))
    with pytest.raises(ValueError, match="features"):
        est.transform(_data(3, 4))


@pytest.mark.parametrize(
    ("random_state", "exc"),
    [
        (-1, ValueError),
        (1.5, TypeError),
        ("0", TypeError),
        (True, TypeError),
        (np.random.RandomState(0), TypeError),
    ],
)
def test_bad_random_state_is_named(random_state, exc):
    # numpy's own message ("expected non-negative integer") does not say which argument
    with pytest.raises(exc, match="random_state"):
        KSVD(2, random_state=random_state).fit(_data(10, 10))


@pytest.mark.parametrize("shape", [(12, 12), (12, 7)])
@pytest.mark.parametrize(
    "params",
    [
        dict(kernel="sne", gamma=1.0),
        dict(kernel="rbf", gamma=0.5),
        dict(kernel="linear"),
        dict(kernel="sne", gamma=1.0, solver="rsvd"),
    ],
)
def test_all_zero_input_gives_zero_spectrum_and_zero_features(shape, params):
    # the centred kernel of an all-zero A is the zero matrix: no direction to learn
    A = np.zeros(shape)
    est = KSVD(3, random_state=0, **params).fit(A)
    # centring a constant G leaves rounding error only (kernel entries are O(1))
    assert np.all(est.singular_values_ <= 1e-13)
    for F in (est.left_features_, est.right_features_):
        np.testing.assert_allclose(F.T @ F, np.eye(3), atol=1e-12)
    np.testing.assert_array_equal(est.transform(np.ones((4, shape[1]))), np.zeros((4, 3)))


def test_all_zero_input_with_the_bandwidth_rule_names_gamma():
    with pytest.raises(ValueError, match="pass gamma"):
        KSVD(2, random_state=0).fit(np.zeros((10, 10)))


def test_masked_array_is_refused_not_unmasked():
    A = _data(12, 12, seed=11)
    masked = np.ma.masked_array(A, mask=np.eye(12, dtype=bool))
    with pytest.raises(TypeError, match="A is a masked array with 12 masked entries"):
        KSVD(2, random_state=0).fit(masked)
    est = KSVD(2, random_state=0).fit(A)
    with pytest.raises(TypeError, match="A is a masked array"):
        est.transform(masked[:3])
    # nothing masked: nothing to lose, same answer as the plain array
    plain = KSVD(2, random_state=0).fit(np.ma.masked_array(A))
    np.testing.assert_array_equal(plain.singular_values_, est.singular_values_)


def test_complete_set_of_triplets_is_exact_on_the_rank_deficient_centred_kernel():
    # centring makes G_c of rank <= 5 here: a Krylov solver asked for all 6 triplets fails or
    # invents a sixth value (SciPy's PROPACK); the estimator takes LAPACK on the dense kernel
    A = _data(6, 6, seed=12)
    est = KSVD(6, kernel="rbf", gamma=0.8, random_state=0).fit(A)
    G = kernel_matrix(A, A.T.copy(), "rbf", gamma=0.8)
    H = np.eye(6) - 1.0 / 6
    expected = np.linalg.svd(H @ G @ H, compute_uv=False)
    np.testing.assert_allclose(est.singular_values_, expected, rtol=1e-10, atol=1e-14)
    assert est.singular_values_[-1] < 1e-12
    assert est.solver_info_["backend"] == "lapack"
    np.testing.assert_allclose(est.left_features_.T @ est.left_features_, np.eye(6), atol=1e-12)
