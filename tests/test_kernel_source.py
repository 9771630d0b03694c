"""KernelSource: a lazy view of ksvd_kernel's matrix, through the solvers' source protocol."""

import pickle

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from ksvd_bench.kernels import KERNELS, KernelSource, kernel_source, ksvd_kernel
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
    S = kernel_source(A, kernel, structured=False, chunk_bytes=3 * 16 * shape[1], **kw)
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
    S = kernel_source(A, kernel, compat=compat, structured=False, chunk_bytes=16 * m)
    r = np.arange(n)[::-1]
    np.testing.assert_allclose(S.block(r, np.arange(m)), G[r], rtol=0, atol=1e-12)
    np.testing.assert_allclose(G.mean(axis=0), 0.0, atol=1e-13)
    np.testing.assert_allclose(G.mean(axis=1), 0.0, atol=1e-13)


def test_float32_source():
    A = _data((10, 13), False, 1).astype(np.float32)
    G = ksvd_kernel(A, "sne")
    S = kernel_source(A, "sne")
    assert G.dtype == np.float32 and S.dtype == np.float32
    np.testing.assert_allclose(S.dense(), G, atol=1e-6)


def test_protocol_counters_and_solvers_adapter():
    A = _data((11, 7), False, 2)
    S = kernel_source(A, "t", compat="pca")
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
    S = kernel_source(A, "sne")
    with pytest.raises(IndexError, match="row indices"):
        S.rows([6])
    with pytest.raises(TypeError, match="column indices"):
        S.cols([0.5])
    with pytest.raises(ValueError, match="X must have 6 rows"):
        S.matmat(np.ones((5, 2)))
    with pytest.raises(ValueError, match="structured"):
        kernel_source(A, structured="yes")
    with pytest.raises(ValueError, match="structured=True"):
        kernel_source(A, "sne", structured=True)  # dense A: no structured source
    with pytest.raises(ValueError, match="chunk_bytes"):
        kernel_source(A, chunk_bytes=0)
    with pytest.raises(ValueError, match="A contains NaN"):
        kernel_source(np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="compat"):
        kernel_source(np.ones((3, 4)), compat=None)
    with pytest.raises(ValueError, match="gamma"):
        kernel_source(A, gamma=0.0)
    with pytest.raises(ValueError, match="kernel"):
        kernel_source(A, "laplace")


def test_structured_dispatch():
    A = _data((20, 20), True, 4)
    S = kernel_source(A, "sne", structured="auto")
    try:
        from ksvd_bench.kernels.structured import StructuredKernelSource
    except ImportError:
        assert type(S) is KernelSource  # module not there yet: "auto" falls back
        with pytest.raises(ImportError, match="structured"):
            kernel_source(A, "sne", structured=True)
    else:
        assert isinstance(S, StructuredKernelSource)
        G = ksvd_kernel(A, "sne")
        np.testing.assert_allclose(source_to_dense(S), G, atol=1e-12)
    # never delegated: structured=False, a compat map, a dense A or a non-exp kernel
    assert type(kernel_source(A, "sne", structured=False)) is KernelSource
    assert type(kernel_source(A, "t")) is KernelSource
    assert type(kernel_source(A.toarray(), "sne")) is KernelSource
    assert type(kernel_source(A, "sne", compat="pinv")) is KernelSource


@pytest.mark.numba_threads(2)  # fewer here: runs in a subprocess with 2
@pytest.mark.parametrize("kernel", ["sne", "t"])
def test_same_result_with_1_and_2_threads(kernel):
    A = _data((300, 260), True, 5)
    old = numba.get_num_threads()
    out = []
    try:
        for k in (1, 2):
            numba.set_num_threads(k)
            S = kernel_source(A, kernel, compat="random", random_state=0)
            out.append(
                (S.block(np.arange(0, 300, 7), np.arange(0, 260, 3)), S.matmat(np.ones((260, 2))))
            )
    finally:
        numba.set_num_threads(old)
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


def test_kernel_source_class_always_builds_itself():
    """``KernelSource(A)`` is a KernelSource even where ``kernel_source`` picks the structured
    source (issue 34: no ``__new__`` dispatch); both give the same G; it pickles."""
    A = _data((20, 20), True, 4)
    S = KernelSource(A, "sne")
    assert isinstance(S, KernelSource) and type(S) is KernelSource
    F = kernel_source(A, "sne")
    assert type(F).__name__ == "StructuredKernelSource"
    G = ksvd_kernel(A, "sne")
    np.testing.assert_allclose(S.dense(), G, rtol=0, atol=1e-12)
    np.testing.assert_allclose(source_to_dense(F), G, rtol=0, atol=1e-12)
    V = np.random.default_rng(0).normal(size=(20, 3))
    R = pickle.loads(pickle.dumps(S))
    assert type(R) is KernelSource and R.is_set_up()
    np.testing.assert_array_equal(R.matmat(V), S.matmat(V))
    # the factory's parameters are refused by the class, naming the factory
    with pytest.raises(TypeError, match=r"kernel_source\(A, \.\.\., structured="):
        KernelSource(A, "sne", structured=True)
    with pytest.raises(TypeError, match=r"kernel_source\(A, \.\.\., client="):
        KernelSource(A, "sne", client=object())


def test_backends_implement_their_protocols():
    """Each device backend implements every hook of ``Backend`` with its signature; the
    source implements every member of ``RowSource``; the Dask backend calls no private
    member of the source it drives."""
    import ast
    import inspect
    import pathlib

    from ksvd_bench.kernels.backends import base
    from ksvd_bench.kernels.backends.cpu import CpuBackend

    hooks = sorted(base.Backend.__abstractmethods__)
    assert hooks == ["block", "products", "setup_rows"]
    here = pathlib.Path(base.__file__).parent

    def methods(path, cls):  # {name: parameter names} of a class, read without importing it
        tree = ast.parse((here / path).read_text())
        (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
        return {
            f.name: [a.arg for a in f.args.args]
            for f in node.body
            if isinstance(f, ast.FunctionDef)
        }

    for path, cls in (("cpu.py", "CpuBackend"), ("cuda.py", "CudaBackend")):
        own = methods(path, cls)
        for hook in hooks:
            want = list(inspect.signature(getattr(base.Backend, hook)).parameters)
            assert own.get(hook) == want, (cls, hook, own.get(hook), want)
    assert not CpuBackend.__abstractmethods__
    members = [
        name
        for name, value in vars(base.RowSource).items()
        if callable(value) and not name.startswith("_")
    ]
    assert len(members) == 11
    for name in members:
        want = inspect.signature(getattr(base.RowSource, name))
        assert inspect.signature(getattr(KernelSource, name)) == want, name
    assert issubclass(KernelSource, base.RowSource)
    assert isinstance(KernelSource(_data((5, 4), False, 0), "rbf"), base.RowSource)
    assert not isinstance(kernel_source(_data((20, 20), True, 4), "sne"), base.RowSource)
    # dask.py reaches the source through the protocol only: no `obj._name` on a source
    # (``source._points``/``_state`` are a DistributedKernelSource's own futures there)
    tree = ast.parse((here / "dask.py").read_text())
    private = {
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and ast.unparse(node.value) in ("source", "points", "src", "self.local", "local")
    }
    assert private == {"source._points", "source._state"}, private
