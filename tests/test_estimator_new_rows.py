"""KSVD.transform of NEW rows follows the documented extension ``e(x) = k(C^T x, Z) V S^-1``.

Every compatibility map (a0 "pinv", a1 "pca", a2 "random", None), both shapes (rows mapped
when ``M >= N``, columns mapped when ``N > M``), dense and sparse ``A``: the reference is built
in plain numpy from an independently formed ``C`` and the kernel definitions, never from the
estimator's stored map. Regression of the audit finding that ``row_map_`` stored
``pinv(A) A C`` (C's part in the row space of A) instead of ``C``, which is wrong for a
Gaussian ``C`` and for a rank-deficient ``A`` (relative error 1.38 on a 20 x 50 ``A``).
"""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from ksvd_bench.estimators import KSVD
from ksvd_bench.kernels.compat import compat_maps

GAMMA = 4.0
DEGREE, COEF0 = 3, 0.5


def _dense(A):
    return A.toarray() if sp.issparse(A) else np.asarray(A, dtype=np.float64)


def _kernel(X, Z, kernel):
    """Plain numpy definition of each kernel, rows of X against rows of Z."""
    if kernel == "linear":
        return X @ Z.T
    if kernel == "poly":
        return (X @ Z.T + COEF0) ** DEGREE
    d2 = np.maximum((X * X).sum(1)[:, None] + (Z * Z).sum(1)[None, :] - 2 * X @ Z.T, 0.0)
    if kernel == "rbf":
        return np.exp(-d2 / GAMMA**2)
    if kernel == "sne":
        E = np.exp(-(d2 - d2.min(axis=1, keepdims=True)) / GAMMA**2)
        return E / E.sum(axis=1, keepdims=True)
    K = 1.0 / (1.0 + d2 / GAMMA**2)  # "t"
    return K / K.sum(axis=1, keepdims=True)


def _flip(C):
    idx = np.argmax(np.abs(C), axis=0)
    signs = np.sign(C[idx, np.arange(C.shape[1])])
    signs[signs == 0] = 1.0
    return C * signs


def _paper_map(A, compat, random_state):
    """``(C, rows_mapped)`` of the paper's Algorithm 2, formed here from its definition.

    a2: the estimator draws one seed from ``random_state`` for the map, then C has entries
    N(0, 1/n); a1: the leading singular vectors with the largest entry of each positive;
    a0: ``pinv(A)`` (rows) or ``pinv(A^T)`` (columns).
    """
    A = _dense(A)
    N, M = A.shape
    rows = M >= N
    if compat is None:
        return np.eye(M), True
    if compat == "random":
        seed = int(np.random.default_rng(random_state).integers(2**63 - 1))
        n = min(N, M)
        return np.random.default_rng(seed).standard_normal((max(N, M), n)) / np.sqrt(n), rows
    if compat == "pinv":
        return (np.linalg.pinv(A) if rows else np.linalg.pinv(A.T)), rows
    U, _, Vt = np.linalg.svd(A, full_matrices=False)
    return (_flip(Vt.T) if rows else _flip(U)), rows


def _documented_embedding(est, A, A_new, compat, kernel, center):
    """``e(x) = g_c(x) V S^-1`` with ``g(x)_j = k(C^T x, z_j)``, all from numpy and ``C``."""
    C, rows = _paper_map(A, compat, 0)
    A, A_new = _dense(A), _dense(A_new)
    if rows:
        X_train, Z, X_new = A @ C, A.T, A_new @ C
    else:
        X_train, Z, X_new = A, A.T @ C, A_new
    g = _kernel(X_new, Z, kernel)
    if center:
        col_means = _kernel(X_train, Z, kernel).mean(axis=0)
        g = g - g.mean(axis=1, keepdims=True) - col_means + col_means.mean()
    return g @ est.right_features_ / est.singular_values_


def _fit(A, kernel, compat, center=True):
    return KSVD(
        3,
        kernel=kernel,
        gamma=GAMMA,
        compat=compat,
        center=center,
        degree=DEGREE,
        coef0=COEF0,
        random_state=0,
    ).fit(A)


SHAPES = [(20, 50), (50, 20), (30, 30)]  # rows mapped, columns mapped, square (rows mapped)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("compat", ["random", "pca", "pinv"])
@pytest.mark.parametrize("kernel", ["sne", "rbf", "t", "linear", "poly"])
def test_new_rows_embed_by_the_documented_formula(shape, compat, kernel):
    rng = np.random.default_rng(1)
    A = rng.random(shape)
    A_new = rng.random((6, shape[1])) + 0.3 * rng.standard_normal((6, shape[1]))
    est = _fit(A, kernel, compat)
    expected = _documented_embedding(est, A, A_new, compat, kernel, True)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(est.transform(A_new), expected, rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize("center", [True, False])
def test_square_data_without_map_embeds_raw_rows(center):
    rng = np.random.default_rng(2)
    A = rng.random((25, 25))
    A_new = rng.random((5, 25))
    est = _fit(A, "sne", None, center=center)
    assert est.row_map_ is None
    expected = _documented_embedding(est, A, A_new, None, "sne", center)
    np.testing.assert_allclose(est.transform(A_new), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("compat", ["random", "pca", "pinv"])
def test_sparse_data_embeds_new_rows_by_the_documented_formula(shape, compat):
    rng = np.random.default_rng(3)
    A = sp.random(*shape, density=0.3, format="csr", random_state=rng) + sp.eye(*shape)
    A = sp.csr_matrix(A)
    A_new = sp.random(6, shape[1], density=0.3, format="csr", random_state=rng)
    est = _fit(A, "rbf", compat)
    expected = _documented_embedding(est, A, A_new, compat, "rbf", True)
    np.testing.assert_allclose(
        est.transform(A_new), expected, rtol=0, atol=1e-10 * np.abs(expected).max()
    )
    # the same map as for the dense copy, and training rows still give the left features
    dense = _fit(A.toarray(), "rbf", compat)
    np.testing.assert_allclose(
        est.transform(A_new),
        dense.transform(A_new.toarray()),
        rtol=0,
        atol=1e-10 * np.abs(expected).max(),
    )
    np.testing.assert_allclose(est.transform(A), est.left_features_, atol=1e-8)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("compat", ["random", "pca", "pinv"])
def test_row_map_is_the_map_on_the_mapped_side_only(shape, compat):
    A = np.random.default_rng(4).random(shape)
    est = _fit(A, "rbf", compat)
    C, rows = _paper_map(A, compat, 0)
    if rows:
        # the map itself, not its projection pinv(A) A C onto the row space of A
        np.testing.assert_allclose(est.row_map_, C, rtol=0, atol=1e-10 * np.abs(C).max())
        np.testing.assert_array_equal(est.column_data_, A.T)
    else:
        assert est.row_map_ is None  # N > M: the columns are mapped, new rows enter raw
        np.testing.assert_allclose(est.column_data_, A.T @ C, rtol=0, atol=1e-12)


def test_gaussian_map_is_not_confined_to_the_row_space():
    """The audit's case: a new row off the row space of a wide A sees all of C."""
    rng = np.random.default_rng(0)
    A = rng.random((20, 50))
    est = _fit(A, "rbf", "random")
    C, _ = _paper_map(A, "random", 0)
    projected = np.linalg.pinv(A) @ (A @ C)
    # the old row map: equal on the training rows, 77% off as a matrix
    assert np.linalg.norm(C - projected) > 0.5 * np.linalg.norm(C)
    np.testing.assert_allclose(A @ est.row_map_, A @ C, rtol=0, atol=1e-12)
    assert np.linalg.norm(est.row_map_ - C) <= 1e-14 * np.linalg.norm(C)


def test_rank_deficient_data_use_the_whole_map():
    """pca on a wide A of rank 8 < N: C has directions off the row space of A."""
    rng = np.random.default_rng(6)
    A = rng.random((20, 8)) @ rng.random((8, 50))
    A_new = rng.random((5, 50))
    for compat in ("pca", "random", "pinv"):
        est = _fit(A, "sne", compat)
        expected = _documented_embedding(est, A, A_new, compat, "sne", True)
        np.testing.assert_allclose(
            est.transform(A_new), expected, rtol=0, atol=1e-10 * np.abs(expected).max()
        )


def test_compat_maps_reproduce_compat_data_and_the_map():
    rng = np.random.default_rng(7)
    for shape in SHAPES:
        A = rng.random(shape)
        for compat in ("random", "pca", "pinv"):
            X, Z, row_map, column_map = compat_maps(A, compat, random_state=11)
            rows = shape[1] >= shape[0]
            assert (row_map is None) is not rows and (column_map is None) is rows
            if compat == "pinv":
                # X and Z are the orthogonal projectors; the map is pinv(A) or pinv(A^T)
                C = row_map if rows else column_map
                ref = np.linalg.pinv(A) if rows else np.linalg.pinv(A.T)
                np.testing.assert_allclose(C, ref, rtol=0, atol=1e-10 * np.abs(ref).max())
            if rows:
                np.testing.assert_allclose(X, A @ row_map, rtol=0, atol=1e-12)
            else:
                np.testing.assert_allclose(Z, A.T @ column_map, rtol=0, atol=1e-12)


def test_fitted_estimator_pickles_and_clones_with_its_map():
    rng = np.random.default_rng(8)
    A = rng.random((20, 50))
    A_new = rng.random((4, 50))
    est = _fit(A, "rbf", "random")
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.row_map_, est.row_map_)
    np.testing.assert_array_equal(back.transform(A_new), est.transform(A_new))
    refit = clone(est).fit(A)  # same random_state: the same map, the same embedding
    np.testing.assert_array_equal(refit.row_map_, est.row_map_)
    np.testing.assert_allclose(refit.transform(A_new), est.transform(A_new), rtol=0, atol=1e-13)
