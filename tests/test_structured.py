"""Tests of the structured (sparse plus rank-few) SNE/RBF kernel source and its exact SVD."""

import tracemalloc

import numba
import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy.sparse.linalg import svds
from threadpoolctl import threadpool_limits

import solvers
from ksvd_bench.datasets import load_graph, make_directed_graph
from ksvd_bench.kernels import kernel_matrix, ksvd_kernel, paper_gamma
from ksvd_bench.kernels.source import KernelSource, kernel_source
from ksvd_bench.kernels.structured import (
    MAX_CONDITION,
    StructuredKernelSource,
    StructureIllConditioned,
    structured_svd,
    supports_structure,
)

# ---------------------------------------------------------------------------------------------
# oracles
# ---------------------------------------------------------------------------------------------


def oracle(A, kernel, gamma, center):
    """Plain numpy kernel of x_i = A[i, :], z_j = A[:, j]; SNE by a row log-sum-exp."""
    X = np.asarray(A.toarray(), dtype=np.float64)
    XX = (A @ A).toarray()  # the dense product costs N^3: scipy's sparse one is the same numbers
    D = (X * X).sum(1)[:, None] + (X * X).sum(0)[None, :] - 2.0 * XX
    E = -np.maximum(D, 0.0) / gamma**2
    if kernel == "sne":
        E -= E.max(axis=1, keepdims=True)
        K = np.exp(E)
        K /= K.sum(axis=1, keepdims=True)
    else:
        K = np.exp(E)
    if center:
        K = K - K.mean(axis=0, keepdims=True)
        K = K - K.mean(axis=1, keepdims=True)
    return K


def oracle_condition(A, kernel, gamma):
    """max_i of the base/true ratio kappa_i (and, for SNE, the normaliser's cancellation
    rho_i) from dense distances, in the log domain."""
    X = np.asarray(A.toarray(), dtype=np.float64)
    r = (X * X).sum(1)
    c = (X * X).sum(0)
    D = np.maximum(r[:, None] + c[None, :] - 2.0 * (X @ X), 0.0)
    t = 1.0 / gamma**2
    delta = D.min(axis=1)
    log_kappa = t * (delta - r - c.min())  # log of max_j base_ij / max_j G_ij
    if kernel == "rbf":
        return float(np.exp(log_kappa.max()))
    bsum = np.exp(-t * (c - c.min())).sum()
    zs = np.exp(-t * (D - delta[:, None])).sum(axis=1)  # >= 1
    log_rho = log_kappa + np.log(bsum) - np.log(zs)
    return float(np.exp(max(log_kappa.max(), log_rho.max())))


def random_graph(n, density, seed, *, values="binary"):
    rng = np.random.default_rng(seed)
    A = sp.random(n, n, density=density, random_state=rng, format="csr")
    if values == "binary":
        A.data[:] = 1.0
    elif values == "positive":
        A.data = rng.uniform(0.5, 2.0, A.nnz)
    else:  # signed
        A.data = rng.uniform(0.5, 2.0, A.nnz) * rng.choice([-1.0, 1.0], A.nnz)
    return A


def alignment_error(X, Y):
    """max_i 1 - |x_i . y_i| for matching columns of two orthonormal bases."""
    return float(np.max(1.0 - np.abs(np.sum(X * Y, axis=0))))


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    # The oracles' LAPACK calls are small; BLAS threads only fight Numba's on 2 cores.
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="module")
def cora():
    return load_graph("cora").adjacency


@pytest.fixture(scope="module")
def small_graph():
    return make_directed_graph(300, n_communities=4, avg_degree=4.0, random_state=3).adjacency


# ---------------------------------------------------------------------------------------------
# the operator equals the kernel matrix
# ---------------------------------------------------------------------------------------------


@given(
    n=st.integers(1, 30),
    density=st.floats(0.0, 0.3),
    seed=st.integers(0, 10_000),
    values=st.sampled_from(["binary", "positive", "signed"]),
    kernel=st.sampled_from(["sne", "rbf"]),
    center=st.booleans(),
    log_gamma=st.floats(-2.0, 3.0),
)
def test_dense_matches_oracle(n, density, seed, values, kernel, center, log_gamma):
    A = random_graph(n, density, seed, values=values)
    gamma = 10.0**log_gamma
    try:
        src = StructuredKernelSource(A, kernel, gamma=gamma, center=center)
    except StructureIllConditioned as exc:
        # Only signed data (A @ A < 0 somewhere) can be ill-conditioned, and then truly so.
        assert values == "signed"
        assert (A @ A).min() < 0
        with np.errstate(over="ignore"):
            assert oracle_condition(A, kernel, gamma) > 0.5 * MAX_CONDITION
        assert exc.condition > MAX_CONDITION and "structured=False" in str(exc)
        return
    assert src.condition <= MAX_CONDITION
    with np.errstate(over="ignore"):
        assert oracle_condition(A, kernel, gamma) <= 2.0 * MAX_CONDITION
    if values != "signed":
        assert src.condition <= 1.0 + 1e-9  # <= 1 exactly; t * eps * |x|^2 in the exponents
    G = src.dense()
    ref = oracle(A, kernel, gamma, center)
    assert np.all(np.isfinite(G))
    # Integer data give exact distances; real data carry t * eps * |x|^2 in the exponent.
    atol = 1e-13 if values == "binary" else 1e-12 + 1e-15 / gamma**2 * 50
    np.testing.assert_allclose(G, ref, rtol=0, atol=atol)


def test_ill_conditioned_signed_data_raises():
    # Found by hypothesis: a base 8e37 times the row maximum cancelled to garbage (error 4e14).
    A = random_graph(6, 0.25, 1, values="signed")
    with pytest.raises(StructureIllConditioned, match="structured=False") as info:
        StructuredKernelSource(A, "sne", gamma=0.1, center=False)
    assert isinstance(info.value, ValueError)
    assert info.value.condition > MAX_CONDITION
    with np.errstate(over="ignore"):
        assert oracle_condition(A, "sne", 0.1) > 1e30
    assert supports_structure(A, "sne")  # the structure applies; its numbers do not
    # "auto" falls back to the general lazy source (exact), True re-raises.
    S = kernel_source(A, "sne", gamma=0.1, compat=None, center=False)
    assert type(S) is KernelSource
    np.testing.assert_allclose(S.dense(), oracle(A, "sne", 0.1, False), rtol=0, atol=1e-14)
    with pytest.raises(StructureIllConditioned):
        kernel_source(A, "sne", gamma=0.1, compat=None, center=False, structured=True)
    # a wide bandwidth makes the same data well conditioned
    src = StructuredKernelSource(A, "sne", gamma=10.0, center=False)
    assert src.condition <= MAX_CONDITION
    np.testing.assert_allclose(src.dense(), oracle(A, "sne", 10.0, False), rtol=0, atol=1e-13)


@pytest.mark.parametrize("kernel", ["sne", "rbf"])
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("gamma", [1e-2, None, 1e3])
def test_matches_package_kernels(small_graph, kernel, center, gamma):
    A = small_graph
    gamma = paper_gamma(A, 1.0) if gamma is None else gamma
    G = StructuredKernelSource(A, kernel, gamma=gamma, center=center).dense()
    K1 = kernel_matrix(A, A.T.tocsr(), kernel, gamma=gamma, center=center)
    K2 = ksvd_kernel(A, kernel, gamma=gamma, compat=None, center=center)
    np.testing.assert_allclose(G, K1, rtol=0, atol=1e-13)
    np.testing.assert_allclose(G, K2, rtol=0, atol=1e-13)


@pytest.mark.parametrize("gamma", [1e-2, 1e3])
def test_cora_extreme_bandwidths(cora, gamma):
    src = StructuredKernelSource(cora, "sne", gamma=gamma, center=False)
    G = src.dense()
    assert np.all(np.isfinite(G))
    np.testing.assert_allclose(G.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    ref = oracle(cora, "sne", gamma, False)
    np.testing.assert_allclose(G, ref, rtol=0, atol=1e-14)
    Gc = StructuredKernelSource(cora, "sne", gamma=gamma, center=True).dense()
    np.testing.assert_allclose(
        Gc, ksvd_kernel(cora, "sne", gamma=gamma, compat=None), rtol=0, atol=1e-14
    )
    np.testing.assert_allclose(Gc.mean(axis=0), 0.0, atol=1e-15)
    np.testing.assert_allclose(Gc.mean(axis=1), 0.0, atol=1e-15)


def test_rbf_small_bandwidth_keeps_sparse_part(cora):
    # gamma = 1e-2: e^{-r_i/g^2} underflows, yet G_ij = 1 where x_i = z_j must survive.
    src = StructuredKernelSource(cora, "rbf", gamma=1e-2, center=False)
    G = src.dense()
    ref = oracle(cora, "rbf", 1e-2, False)
    assert ref.max() == 1.0
    np.testing.assert_array_equal(G > 0.5, ref > 0.5)
    np.testing.assert_allclose(G, ref, rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------------------------
# protocol members
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["sne", "rbf"])
@pytest.mark.parametrize("center", [False, True])
def test_products_rows_cols_blocks(small_graph, kernel, center):
    src = StructuredKernelSource(small_graph, kernel, gamma=0.7, center=center)
    G = oracle(small_graph, kernel, 0.7, center)
    rng = np.random.default_rng(0)
    n = src.shape[0]
    X = rng.standard_normal((n, 5))
    np.testing.assert_allclose(src.matmat(X), G @ X, rtol=0, atol=1e-13)
    np.testing.assert_allclose(src.rmatmat(X), G.T @ X, rtol=0, atol=1e-13)
    np.testing.assert_allclose(src.matmat(X[:, 0]), G @ X[:, 0], rtol=0, atol=1e-13)
    np.testing.assert_allclose(src.rmatvec(X[:, 1]), G.T @ X[:, 1], rtol=0, atol=1e-13)
    ridx = np.array([5, 0, 5, n - 1, 17])
    cidx = np.array([3, 3, 299, 0, 42, 7])
    np.testing.assert_allclose(src.rows(ridx), G[ridx], rtol=0, atol=1e-15)
    np.testing.assert_allclose(src.cols(cidx), G[:, cidx], rtol=0, atol=1e-15)
    np.testing.assert_allclose(src.block(ridx, cidx), G[np.ix_(ridx, cidx)], rtol=0, atol=1e-15)
    assert src.rows(np.array([], dtype=int)).shape == (0, n)
    assert src.block(ridx, np.array([], dtype=int)).shape == (ridx.size, 0)
    assert src.n_entries > 0 and src.n_matmat == 4
    T = src.sparse_part
    L, R = src.low_rank_factors
    np.testing.assert_allclose(T.toarray() + L @ R.T, G, rtol=0, atol=1e-15)
    assert src.nnz == T.nnz <= (small_graph @ small_graph).nnz


def test_float32(small_graph):
    s64 = StructuredKernelSource(small_graph, "sne", gamma=0.7)
    s32 = StructuredKernelSource(small_graph, "sne", gamma=0.7, dtype=np.float32)
    assert s32.dtype == np.float32
    X = np.random.default_rng(1).standard_normal((small_graph.shape[0], 3))
    out = s32.matmat(X.astype(np.float32))  # a float64 operand gives float64, as KernelSource
    assert out.dtype == np.float32 and s32.rows([1, 2]).dtype == np.float32
    np.testing.assert_allclose(out, s64.matmat(X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(s32.dense(), s64.dense(), rtol=0, atol=1e-7)
    res = structured_svd(s32, 4)
    assert res.U.dtype == np.float32
    np.testing.assert_allclose(res.s, structured_svd(s64, 4).s, rtol=1e-5)


@pytest.mark.numba_threads(2)  # fewer here: runs in a subprocess with 2
def test_thread_count_does_not_change_bits(cora):
    src = StructuredKernelSource(cora, "sne", gamma=paper_gamma(cora, 1.0))
    X = np.random.default_rng(2).standard_normal((cora.shape[0], 256))  # parallel path
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = (src.matmat(X), src.rmatmat(X), src.rows(np.arange(0, 2708, 3)))
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = (src.matmat(X), src.rmatmat(X), src.rows(np.arange(0, 2708, 3)))
    finally:
        numba.set_num_threads(before)
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)
    # the one-vector path (ARPACK's) agrees with the blocked one to rounding
    np.testing.assert_allclose(src.matmat(X[:, 0]), one[0][:, 0], rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------------------------
# exact SVD
# ---------------------------------------------------------------------------------------------


def _check_against(res, U, s, V, vals=1e-10, vecs=1e-8):
    np.testing.assert_allclose(res.s, s, rtol=vals, atol=0)
    assert alignment_error(res.U, U) <= vecs
    assert alignment_error(res.V, V) <= vecs
    np.testing.assert_allclose(res.U.T @ res.U, np.eye(res.s.size), atol=1e-12)
    np.testing.assert_allclose(res.V.T @ res.V, np.eye(res.s.size), atol=1e-12)


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_structured_svd_matches_dense_path(name):
    """Top-20 of the paper's SNE kernel (centred) vs dense G + ARPACK at tol=0."""
    A = load_graph(name).adjacency
    gamma = paper_gamma(A, 1.0)
    src = StructuredKernelSource(A, "sne", gamma=gamma)
    res = structured_svd(src, 20, random_state=0)
    G = ksvd_kernel(A, "sne", gamma=gamma, compat=None, center=True)
    U, s, Vt = svds(G, k=20, tol=0, random_state=np.random.default_rng(0))
    order = np.argsort(-s)
    _check_against(res, U[:, order], s[order], Vt[order].T)
    assert res.info["method"] == "structured" and res.info["solver"] == "arpack"
    assert res.info["core_shape"][0] < A.shape[0]


@pytest.mark.parametrize("kernel", ["sne", "rbf"])
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("solver", ["dense", "arpack"])
def test_structured_svd_matches_lapack(small_graph, kernel, center, solver):
    src = StructuredKernelSource(small_graph, kernel, gamma=0.8, center=center)
    U, s, Vt = sla.svd(oracle(small_graph, kernel, 0.8, center))
    res = structured_svd(src, 8, solver=solver, random_state=1)
    # stop where the spectrum has a clear gap so that vectors are determined
    _check_against(res, U[:, :8], s[:8], Vt[:8].T, vals=1e-10, vecs=1e-8)
    assert res.info["solver"] == solver
    again = src.svd(8, solver=solver, random_state=1)
    np.testing.assert_array_equal(again.U, res.U)


def test_rank_beyond_compressed_core():
    # Very sparse graph: the compressed core is smaller than the requested rank.
    A = random_graph(12, 0.05, 4)
    src = StructuredKernelSource(A, "rbf", gamma=0.9, center=True)
    res = structured_svd(src, 12, random_state=0)
    s = sla.svdvals(oracle(A, "rbf", 0.9, True))
    np.testing.assert_allclose(res.s, s, rtol=0, atol=1e-13)
    np.testing.assert_allclose(res.U.T @ res.U, np.eye(12), atol=1e-12)
    np.testing.assert_allclose(res.V.T @ res.V, np.eye(12), atol=1e-12)
    G = oracle(A, "rbf", 0.9, True)
    np.testing.assert_allclose(res.U * res.s @ res.V.T, G, atol=1e-13)


@pytest.mark.parametrize("method", solvers.METHODS)
def test_every_solver_runs_on_source(small_graph, method):
    src = StructuredKernelSource(small_graph, "sne", gamma=0.8)
    exact = structured_svd(src, 5, random_state=0)
    # the randomized methods (rsvd, block_krylov, generalized_nystrom) share n_oversamples
    options = {
        "tsvd": {"tol": 0.0},
        "sym_nystrom": {"n_samples": 300},
        "asym_nystrom": {"n_samples": 300},
    }.get(method, {"n_oversamples": 10})
    res = solvers.svd(src, 5, method=method, random_state=0, **options)
    assert res.U.shape == (300, 5) and res.V.shape == (300, 5)
    assert np.all(np.diff(res.s) <= 0)
    if method == "tsvd":
        _check_against(res, exact.U, exact.s, exact.V)
    elif method == "asym_nystrom":  # every column sampled: exact up to rounding
        np.testing.assert_allclose(res.s, exact.s, rtol=1e-8)
    else:
        assert np.all(np.abs(res.s - exact.s) <= 0.5 * exact.s[0])


def test_pubmed_memory_and_arpack_agreement():
    A = load_graph("pubmed").adjacency
    n = A.shape[0]
    gamma = paper_gamma(A, 0.5)
    StructuredKernelSource(A[:50, :50], "sne", gamma=gamma)  # JIT outside the measurement
    tracemalloc.start()
    src = StructuredKernelSource(A, "sne", gamma=gamma)
    res = structured_svd(src, 20, random_state=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.02 * n * n * 8  # an N x N float64 array is 3.1 GB; we stay under 62 MB
    arp = solvers.svd(src, 20, method="tsvd", random_state=0, tol=0.0)
    _check_against(res, arp.U, arp.s, arp.V)


@pytest.mark.numba_threads(2)  # fewer here: runs in a subprocess with 2
def test_one_vector_kernels_serial_and_parallel_agree_bitwise(cora):
    # ARPACK's products: the parallel compile (large operators) and the serial one sum every
    # row in the same order, whatever the number of threads.
    from ksvd_bench.kernels.structured import _kernels as S

    src = StructuredKernelSource(cora, "sne", gamma=paper_gamma(cora, 1.0), center=True)
    n = cora.shape[0]
    x = np.random.default_rng(5).standard_normal(n)
    L, R = src.low_rank_factors
    w = R.T @ x
    before = numba.get_num_threads()
    outs = []
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            for kernel in (S._spmv_lowrank, S._spmv_lowrank_serial):
                out = np.empty(n)
                kernel(*src._T, x, L, w, out)
                outs.append(out)
            for kernel in (S._gram_lowrank, S._gram_lowrank_serial):
                z, u, ww = np.empty(n), np.empty(n), np.empty(L.shape[1])
                kernel(src._T, src._Tt, L, R, x, u, ww, z)
                outs.append(z)
    finally:
        numba.set_num_threads(before)
    for a, b in zip(outs[0:2] + outs[4:6], outs[0:1] * 2 + outs[4:5] * 2, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(outs[2:4] + outs[6:8], outs[2:3] * 2 + outs[6:7] * 2, strict=True):
        np.testing.assert_array_equal(a, b)
    G = src.dense()
    np.testing.assert_allclose(outs[0], G @ x, rtol=0, atol=1e-15 * np.abs(G).sum(1).max())
    gram = G @ (G.T @ x)
    np.testing.assert_allclose(outs[2], gram, rtol=0, atol=1e-13 * np.abs(gram).max())


@pytest.mark.parametrize("center", [False, True])
def test_compression_choice_does_not_change_the_answer(small_graph, center):
    src = StructuredKernelSource(small_graph, "sne", gamma=0.8, center=center)
    ref = structured_svd(src, 6, solver="dense", compress=False, random_state=0)
    for compress in ("auto", True, False):
        res = structured_svd(src, 6, solver="arpack", compress=compress, random_state=0)
        _check_against(res, ref.U, ref.s, ref.V, vals=1e-11, vecs=1e-9)
        assert res.info["n_passes"] > 0 and res.info["n_matvec"] >= res.info["n_passes"]
    uncompressed = structured_svd(src, 6, solver="arpack", compress=False, random_state=0)
    assert not uncompressed.info["compressed"]
    assert uncompressed.info["core_shape"] == small_graph.shape
    assert structured_svd(src, 6, solver="arpack", compress=True).info["compressed"]


def test_auto_compresses_only_when_it_pays(cora):
    # Cora's SNE core is a small fraction of G; a synthetic graph's barely compresses.
    gamma = paper_gamma(cora, 1.0)
    auto = structured_svd(StructuredKernelSource(cora, "sne", gamma=gamma), 5, random_state=0)
    g, h = auto.info["core_shape"]
    assert auto.info["compressed"] and g * h <= 0.5 * cora.shape[0] ** 2
    A = make_directed_graph(3000, random_state=0).adjacency
    res = structured_svd(
        StructuredKernelSource(A, "sne", gamma=paper_gamma(A, 1.0)), 5, random_state=0
    )
    assert not res.info["compressed"] and res.info["core_shape"] == A.shape
    assert res.info["row_groups"] > 0.8 * A.shape[0]


def test_ncv_is_capped_at_the_core(small_graph):
    src = StructuredKernelSource(small_graph, "sne", gamma=0.8)
    capped = structured_svd(src, 4, solver="arpack", compress=True, ncv=10_000, random_state=0)
    ref = structured_svd(src, 4, solver="dense", random_state=0)
    np.testing.assert_allclose(capped.s, ref.s, rtol=1e-12)
    assert capped.info["effort"] == min(capped.info["core_shape"])
    with pytest.raises(ValueError, match="ncv must be > rank"):
        structured_svd(src, 4, solver="arpack", ncv=4)


@pytest.mark.parametrize("center", [False, True])
def test_tsvd_takes_the_exact_path_of_the_source(cora, center):
    src = StructuredKernelSource(cora, "sne", gamma=paper_gamma(cora, 1.0), center=center)
    res = solvers.svd(src, 10, method="tsvd", random_state=0)
    assert res.info["exact_path"] == "source"
    assert res.info["source_info"]["compressed"]
    assert res.info["n_matvec"] == res.info["source_info"]["n_matvec"] > 0
    assert res.info["n_passes"] == res.info["source_info"]["n_passes"] > 0
    # ARPACK on the full operator through a plain LinearOperator: the same answer
    plain = solvers.svd(src.aslinearoperator(), 10, method="tsvd", random_state=0)
    assert plain.info["exact_path"] == "svds"
    _check_against(res, plain.U, plain.s, plain.V)
    U, s, V = src.exact_svd(10, random_state=0)  # the protocol member unpacks as a triple
    np.testing.assert_allclose(s, res.s, rtol=1e-12)
    # residuals at ARPACK's level: ||G v - s u|| <= 1e-12 s_1
    G = src.dense()
    assert np.linalg.norm(G @ res.V - res.U * res.s, axis=0).max() <= 1e-12 * res.s[0]
    assert np.linalg.norm(G.T @ res.U - res.V * res.s, axis=0).max() <= 1e-12 * res.s[0]


def test_exact_path_of_a_float32_source(small_graph):
    s32 = StructuredKernelSource(small_graph, "sne", gamma=0.7, dtype=np.float32)
    s64 = StructuredKernelSource(small_graph, "sne", gamma=0.7)
    res = solvers.svd(s32, 4, method="tsvd", random_state=0)
    assert res.s.dtype == np.float32 and res.info["exact_path"] == "source"
    np.testing.assert_allclose(res.s, solvers.svd(s64, 4, method="tsvd").s, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------


def test_bad_input(small_graph):
    A = small_graph
    with pytest.raises(ValueError, match="square"):
        StructuredKernelSource(sp.random(4, 5, density=0.5, format="csr"), gamma=1.0)
    with pytest.raises(ValueError, match="kernel"):
        StructuredKernelSource(A, "t", gamma=1.0)
    with pytest.raises(ValueError, match="gamma"):
        StructuredKernelSource(A, gamma=0.0)
    with pytest.raises(TypeError, match="gamma"):
        StructuredKernelSource(A, gamma=None)
    bad = A.copy()
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        StructuredKernelSource(bad, gamma=1.0)
    with pytest.raises(ValueError, match="non-empty"):
        StructuredKernelSource(sp.csr_matrix((0, 0)), gamma=1.0)
    with pytest.raises(ValueError, match="dtype"):
        StructuredKernelSource(A, gamma=1.0, dtype=np.int64)
    with pytest.raises(TypeError, match="center"):
        StructuredKernelSource(A, gamma=1.0, center="yes")
    src = StructuredKernelSource(A, gamma=1.0)
    with pytest.raises(ValueError, match=rf"X must have {src.shape[1]} rows, got shape \(7, 2\)"):
        src.matmat(np.ones((7, 2)))
    with pytest.raises(TypeError, match="X is complex"):  # it lost its imaginary part
        src.matmat(np.ones(src.shape[1]) * 1j)
    with pytest.raises(TypeError, match="Y is complex"):
        src.rmatmat(np.ones((src.shape[0], 2), dtype=np.complex64))
    with pytest.raises(IndexError, match="row indices"):
        src.rows([300])
    with pytest.raises(IndexError, match="column indices"):
        src.cols([-1])
    with pytest.raises(TypeError, match="integers"):
        src.block([0.5], [1])
    with pytest.raises(ValueError, match="rank"):
        structured_svd(src, 0)
    with pytest.raises(ValueError, match="solver"):
        structured_svd(src, 3, solver="lobpcg")
    with pytest.raises(ValueError, match="tol"):
        structured_svd(src, 3, tol=-1.0)
    with pytest.raises(TypeError, match="source"):
        structured_svd(A, 3)


def test_supports_structure(small_graph):
    assert supports_structure(small_graph, "sne")
    assert supports_structure(small_graph, "rbf", None)
    assert not supports_structure(small_graph, "t")
    assert not supports_structure(small_graph, "sne", "pca")
    assert not supports_structure(small_graph.toarray(), "sne")
    assert not supports_structure(small_graph[:, :10], "sne")


def test_cache_key_identifies_the_matrix(small_graph):
    a = StructuredKernelSource(small_graph, gamma=0.7)
    b = StructuredKernelSource(small_graph.copy(), gamma=0.7)
    c = StructuredKernelSource(small_graph, gamma=0.71)
    d = StructuredKernelSource(small_graph, "rbf", gamma=0.7)
    assert a.cache_key == b.cache_key
    assert len({a.cache_key, c.cache_key, d.cache_key}) == 3


# ---------------------------------------------------------------------------------------------
# the residual study (data only; the numbers come from the metrics module)
# ---------------------------------------------------------------------------------------------


def test_residual_study_rows():
    from ksvd_bench.race.residual_study import (
        run_residual_study,
        summarize_residual_study,
    )

    efforts = {"tsvd": (1e-1, 0.0), "rsvd": (0, 10)}
    seen = []
    rows = run_residual_study(
        ("cora",), 5, methods=("tsvd", "rsvd"), efforts=efforts, callback=seen.append
    )
    assert len(rows) == len(seen) == 4 * 3
    assert {r["weights"] for r in rows} == {"singular_values", "relative", "uniform"}
    assert all(r["error"] is None and np.isfinite(r["residual_estimate"]) for r in rows)
    exact = [r for r in rows if r["method"] == "tsvd" and r["value"] == 0.0]
    rough = [r for r in rows if r["method"] == "rsvd" and r["value"] == 0]
    for e, r in zip(exact, rough, strict=True):
        assert e["eta"] < 1e-12 < r["eta"]
        assert e["residual_max"] < r["residual_max"]
        assert e["residual_estimate"] < r["residual_estimate"]
    summary = summarize_residual_study(rows)
    assert [(s["dataset"], s["n"]) for s in summary] == [("cora", 4)] * 3
    with pytest.raises(ValueError, match="datasets"):
        run_residual_study(("cora-features",))
    with pytest.raises(ValueError, match="methods"):
        run_residual_study(("cora",), methods=("svd",))


# ---------------------------------------------------------------------------------------------
# the driver's reference SVD uses the exact structured path
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("center", [False, True])
def test_reference_svd_uses_structured_svd(small_graph, center, tmp_path):
    from ksvd_bench.driver import reference_svd

    src = StructuredKernelSource(small_graph, "sne", gamma=0.8, center=center)
    ref = reference_svd(src, 8, cache_dir=tmp_path)
    assert ref.info["method"] == "structured" and not ref.info["cached"]
    U, s, Vt = sla.svd(oracle(small_graph, "sne", 0.8, center), lapack_driver="gesdd")
    _check_against(ref, U[:, :8], s[:8], Vt[:8].T, vals=1e-10, vecs=1e-8)
    # sign convention: the largest-magnitude entry of each left vector is positive
    top = np.argmax(np.abs(ref.U), axis=0)
    assert np.all(ref.U[top, np.arange(8)] > 0)
    # cached under the source's cache_key: an equal source built again hits the cache
    again = reference_svd(
        StructuredKernelSource(small_graph.copy(), "sne", gamma=0.8, center=center),
        8,
        cache_dir=tmp_path,
    )
    assert again.info["cached"]
    np.testing.assert_array_equal(again.U, ref.U)
    np.testing.assert_array_equal(again.s, ref.s)


def test_kernel_source_delegates_float32(small_graph):
    A32 = small_graph.astype(np.float32)
    S = kernel_source(A32, "sne", gamma=0.7, compat=None)
    assert isinstance(S, StructuredKernelSource) and S.dtype == np.float32
    S64 = kernel_source(small_graph, "sne", gamma=0.7, compat=None, dtype=np.float32)
    assert isinstance(S64, StructuredKernelSource) and S64.dtype == np.float32
    ref = ksvd_kernel(small_graph, "sne", gamma=0.7, compat=None)
    np.testing.assert_allclose(S.dense(), ref, rtol=0, atol=1e-7)
    np.testing.assert_array_equal(S.dense(), S64.dense())
