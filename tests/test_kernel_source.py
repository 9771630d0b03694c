"""KernelSource: a lazy view of ksvd_kernel's matrix, through the solvers' source protocol."""

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from ksvd_bench.kernels import KERNELS, KernelSource, ksvd_kernel
from solvers import as_source
from solvers._source import source_to_dense


def _data(shape, sparse, seed):
    rng = np.random.default_rng(seed)
    if sparse:
        A = sp.random(
            *shape, density=0.3, random_state=rng, format="csr", data_rvs=rng.standard_normal
        )
        A = A.tolil()
        A[0, 0] = 1.0  # never all-zero
        return A.tocsr()
    return rng.standard_normal(shape)


CASES = [
    ((14, 14), None),
    ((9, 16), "pca"),
    ((16, 9), "pinv"),
    ((12, 15), "random"),
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape, compat", CASES)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("center", [True, False])
def test_blocks_equal_full_matrix(kernel, shape, compat, sparse, center):
    A = _data(shape, sparse, seed=sum(shape))
    kw = dict(compat=compat, center=center, random_state=5, degree=3, coef0=0.5)
    G = ksvd_kernel(A, kernel, **kw)
    # a tiny chunk budget forces several streamed chunks in the set-up pass and products
    S = KernelSource(A, kernel, structured=False, chunk_bytes=3 * 16 * shape[1], **kw)
    assert S.chunk_rows == 3
    assert S.shape == G.shape and S.dtype == G.dtype
    tol = 1e-12 * max(1.0, np.abs(G).max())  # linear/poly values are not bounded by 1
    rng = np.random.default_rng(0)
    r = rng.choice(shape[0], size=5, replace=False)
    c = rng.choice(shape[1], size=4, replace=False)
    np.testing.assert_allclose(S.block(r, c), G[np.ix_(r, c)], rtol=0, atol=tol)
    np.testing.assert_allclose(S.rows(r), G[r], rtol=0, atol=tol)
    np.testing.assert_allclose(S.cols(c), G[:, c], rtol=0, atol=tol)
    np.testing.assert_allclose(S.dense(), G, rtol=0, atol=tol)
    V = rng.standard_normal((shape[1], 3))
    W = rng.standard_normal((shape[0], 2))
    np.testing.assert_allclose(S.matmat(V), G @ V, rtol=0, atol=10 * tol)
    np.testing.assert_allclose(S.rmatmat(W), G.T @ W, rtol=0, atol=10 * tol)
    np.testing.assert_allclose(S.matmat(V[:, 0]), G @ V[:, 0], rtol=0, atol=10 * tol)


@given(
    n=st.integers(1, 10),
    m=st.integers(1, 10),
    sparse=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    kernel=st.sampled_from(["sne", "t", "rbf", "softmax"]),
)
@settings(max_examples=20, deadline=None)
def test_blocks_equal_full_matrix_hypothesis(n, m, sparse, seed, kernel):
    A = _data((n, m), sparse, seed)
    if (A.toarray() if sparse else A).var() == 0:
        return
    compat = None if n == m else "pinv"
    G = ksvd_kernel(A, kernel, compat=compat)
    S = KernelSource(A, kernel, compat=compat, structured=False, chunk_bytes=16 * m)
    r = np.arange(n)[::-1]
    np.testing.assert_allclose(S.block(r, np.arange(m)), G[r], rtol=0, atol=1e-12)
    np.testing.assert_allclose(G.mean(axis=0), 0.0, atol=1e-13)
    np.testing.assert_allclose(G.mean(axis=1), 0.0, atol=1e-13)


def test_float32_source():
    A = _data((10, 13), False, 1).astype(np.float32)
    G = ksvd_kernel(A, "sne")
    S = KernelSource(A, "sne")
    assert G.dtype == np.float32 and S.dtype == np.float32
    np.testing.assert_allclose(S.dense(), G, atol=1e-6)


def test_protocol_counters_and_solvers_adapter():
    A = _data((11, 7), False, 2)
    S = KernelSource(A, "t", compat="pca")
    assert as_source(S) is S
    np.testing.assert_allclose(source_to_dense(S), ksvd_kernel(A, "t", compat="pca"), atol=1e-12)
    S.n_entries = 0
    S.rows([0, 1])
    S.cols([3])
    S.block([1, 2, 3], [0, 1])
    assert S.n_entries == 2 * 7 + 11 + 6
    n_matmat = S.n_matmat
    S.matmat(np.ones((7, 1)))
    S.rmatmat(np.ones((11, 1)))
    assert S.n_matmat == n_matmat + 2
    assert S.rows([]).shape == (0, 7)
    assert S.block([1], []).shape == (1, 0)


def test_bad_input():
    A = _data((6, 6), False, 3)
    S = KernelSource(A, "sne")
    with pytest.raises(IndexError, match="row indices"):
        S.rows([6])
    with pytest.raises(TypeError, match="column indices"):
        S.cols([0.5])
    with pytest.raises(ValueError, match="X must have 6 rows"):
        S.matmat(np.ones((5, 2)))
    with pytest.raises(ValueError, match="structured"):
        KernelSource(A, structured="yes")
    with pytest.raises(ValueError, match="structured=True"):
        KernelSource(A, "sne", structured=True)  # dense A: no structured source
    with pytest.raises(ValueError, match="chunk_bytes"):
        KernelSource(A, chunk_bytes=0)
    with pytest.raises(ValueError, match="A contains NaN"):
        KernelSource(np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="compat"):
        KernelSource(np.ones((3, 4)), compat=None)
    with pytest.raises(ValueError, match="gamma"):
        KernelSource(A, gamma=0.0)
    with pytest.raises(ValueError, match="kernel"):
        KernelSource(A, "laplace")


def test_structured_dispatch():
    A = _data((20, 20), True, 4)
    S = KernelSource(A, "sne", structured="auto")
    try:
        from ksvd_bench.kernels.structured import StructuredKernelSource
    except ImportError:
        assert type(S) is KernelSource  # module not there yet: "auto" falls back
        with pytest.raises(ImportError, match="structured"):
            KernelSource(A, "sne", structured=True)
    else:
        assert isinstance(S, StructuredKernelSource)
        G = ksvd_kernel(A, "sne")
        np.testing.assert_allclose(source_to_dense(S), G, atol=1e-12)
    # never delegated: structured=False, a compat map, a dense A or a non-exp kernel
    assert type(KernelSource(A, "sne", structured=False)) is KernelSource
    assert type(KernelSource(A, "t")) is KernelSource
    assert type(KernelSource(A.toarray(), "sne")) is KernelSource
    assert type(KernelSource(A, "sne", compat="pinv")) is KernelSource


@pytest.mark.numba_threads(2)  # fewer here: runs in a subprocess with 2
@pytest.mark.parametrize("kernel", ["sne", "t"])
def test_same_result_with_1_and_2_threads(kernel):
    A = _data((300, 260), True, 5)
    old = numba.get_num_threads()
    out = []
    try:
        for k in (1, 2):
            numba.set_num_threads(k)
            S = KernelSource(A, kernel, compat="random", random_state=0)
            out.append(
                (S.block(np.arange(0, 300, 7), np.arange(0, 260, 3)), S.matmat(np.ones((260, 2))))
            )
    finally:
        numba.set_num_threads(old)
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
