"""KernelSource.from_points: the lazy kernel of two point sets, its fused passes and hooks."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from ksvd_bench.kernels import KERNELS, KernelSource, compat_data, kernel_matrix, kernel_source

# 300 x 140 with the default tiles (256 x 64 for M = 140): 2 row tiles and 3 column tiles,
# neither dividing the shape
N, M, D = 300, 140, 6
LAYOUTS = ["dense", "sparse_x", "sparse_z", "sparse_both"]
KW = {"gamma": 1.7, "degree": 3, "coef0": 0.5}


def _points(layout, seed=0, n=N, m=M, d=D):
    rng = np.random.default_rng(seed)

    def make(rows, sparse):
        if not sparse:
            return rng.standard_normal((rows, d))
        A = sp.random(
            rows, d, density=0.5, random_state=rng, format="csr", data_rvs=rng.standard_normal
        )
        return A.tocsr()

    X = make(n, layout in ("sparse_x", "sparse_both"))
    Z = make(m, layout in ("sparse_z", "sparse_both"))
    return X, Z


def _tol(G, dtype):
    scale = max(1.0, float(np.abs(G).max()))  # linear/poly values are not bounded by 1
    return (1e-12 if dtype == np.float64 else 2e-5) * scale


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_from_points_equals_kernel_matrix(kernel, center, dtype, layout):
    X, Z = _points(layout, seed=len(layout))
    G = kernel_matrix(X, Z, kernel, center=center, **KW).astype(np.float64)
    S = KernelSource.from_points(X, Z, kernel, center=center, dtype=dtype, **KW)
    assert (S.chunk_rows, S.chunk_cols) == (256, 64)
    assert S.shape == (N, M) and S.dtype == dtype and S.compat is None
    tol = _tol(G, dtype)
    np.testing.assert_allclose(S.dense(), G, rtol=0, atol=tol)
    rng = np.random.default_rng(1)
    r, c = rng.choice(N, 7, replace=False), rng.choice(M, 5, replace=False)
    np.testing.assert_allclose(S.rows(r), G[r], rtol=0, atol=tol)
    np.testing.assert_allclose(S.cols(c), G[:, c], rtol=0, atol=tol)
    np.testing.assert_allclose(S.block(r, c), G[np.ix_(r, c)], rtol=0, atol=tol)
    V = rng.standard_normal((M, 4))
    Wv = rng.standard_normal((N, 3))
    ptol = 20 * tol * np.sqrt(M)
    np.testing.assert_allclose(S.matmat(V), G @ V, rtol=0, atol=ptol)
    np.testing.assert_allclose(S.rmatmat(Wv), G.T @ Wv, rtol=0, atol=ptol)
    Y, W = S.sketch(V, Wv)
    np.testing.assert_allclose(Y, G @ V, rtol=0, atol=ptol)
    np.testing.assert_allclose(W, G.T @ Wv, rtol=0, atol=ptol)
    assert Y.dtype == W.dtype == np.float64  # float64 operands give float64 results
    assert S.norm_bound() >= np.linalg.norm(G, 2)


@pytest.mark.parametrize("kernel", ["sne", "t", "rbf"])
@pytest.mark.parametrize(
    "chunk_bytes, n, m, tiles", [(16 * 5, 13, 31, (1, 5)), (16 * 64 * 3, 47, 131, (3, 64))]
)
def test_small_tiles_and_bands(kernel, chunk_bytes, n, m, tiles):
    # tiny budgets: 1 x 5 tiles, or 3 x 64 tiles with two bands in the two-sided pass
    X, Z = _points("dense", seed=3, n=n, m=m)
    G = kernel_matrix(X, Z, kernel, gamma=1.1, center=True)
    S = KernelSource.from_points(X, Z, kernel, gamma=1.1, center=True, chunk_bytes=chunk_bytes)
    assert (S.chunk_rows, S.chunk_cols) == tiles
    rng = np.random.default_rng(2)
    V, Wv = rng.standard_normal((m, 5)), rng.standard_normal((n, 6))
    Y, W = S.sketch(V, Wv)
    np.testing.assert_allclose(Y, G @ V, rtol=0, atol=1e-13)
    np.testing.assert_allclose(W, G.T @ Wv, rtol=0, atol=1e-13)
    np.testing.assert_allclose(S.matmat(V[:, 0]), G @ V[:, 0], rtol=0, atol=1e-13)
    np.testing.assert_allclose(S.dense(), G, rtol=0, atol=1e-14)


def test_sketch_counts_one_pass_and_float32_operands():
    X, Z = _points("dense", seed=4)
    S = KernelSource.from_points(X, Z, "sne", gamma=2.0)
    rng = np.random.default_rng(0)
    V = rng.standard_normal((M, 3)).astype(np.float32)
    Wv = rng.standard_normal(N).astype(np.float32)
    Y, w = S.sketch(V, Wv)
    assert (S.n_passes, S.n_matmat) == (1, 2)
    assert Y.dtype == np.float64  # float64 storage: float64 results
    assert Y.shape == (N, 3) and w.shape == (M,)
    G = kernel_matrix(X, Z, "sne", gamma=2.0)
    np.testing.assert_allclose(w, G.T @ Wv.astype(np.float64), rtol=0, atol=1e-12)
    S32 = KernelSource.from_points(X.astype(np.float32), Z.astype(np.float32), "sne", gamma=2.0)
    assert S32.dtype == np.float32
    assert S32.matmat(V).dtype == np.float32  # float32 storage and operand: float32 out
    S.matmat(np.ones((M, 0)))
    assert S.sketch(np.ones((M, 0)), Wv)[0].shape == (N, 0)


@pytest.mark.numba_threads(2)  # fewer here: runs in a subprocess with 2
@pytest.mark.parametrize("layout", ["dense", "sparse_both"])
def test_passes_same_bits_with_1_and_2_threads(layout, with_numba_threads):
    X, Z = _points(layout, seed=5, n=301, m=257)
    rng = np.random.default_rng(0)
    V, Wv = rng.standard_normal((257, 4)), rng.standard_normal((301, 3))

    def run():
        # small budget: several bands in the sketch; the set-up pass has two sweeps
        S = KernelSource.from_points(X, Z, "sne", gamma=1.3, center=True, chunk_bytes=16 * 64 * 40)
        return (*S.sketch(V, Wv), S.matmat(V), S.rmatmat(Wv), S.dense(), np.array([S.norm_bound()]))

    for a, b in zip(with_numba_threads(1, run), with_numba_threads(2, run), strict=True):
        np.testing.assert_array_equal(a, b)


# Run in a fresh interpreter: prints a digest of every result a centred source produces.
# "preload" first runs the tile-level Numba helpers on their own, so the process holds a
# stand-alone compile of each next to the copies inside the passes (which copy a pass calls
# then depends on what was loaded: the fastmath flags must not let the copies round apart).
_CHILD = """
import hashlib, sys
import numpy as np
from ksvd_bench.kernels import KernelSource, kernel_source, kernel_matrix
from ksvd_bench.kernels.backends import cpu as F

rng = np.random.default_rng(3)
X, Z = rng.normal(size=(700, 3)), rng.normal(size=(200, 3))
V, U = rng.normal(size=(200, 3)), rng.normal(size=(700, 2))
if sys.argv[1] == "preload":
    S0 = KernelSource._from_arrays(X, Z, "sne", gamma=0.7, center=True, setup=False)
    P, prm, (n, m) = S0._backend.points(), S0._backend.params, S0.shape
    C, K, sh = np.empty((2, 3)), np.empty((2, 3)), np.zeros(n)
    F.neg_distance_tile(P, 0, 2, 0, 3, np.empty(10), C, np.zeros(1))
    K[:] = C
    F.row_stats_tile(C, prm, 0, True, sh, np.zeros(n), np.zeros(n))
    F.distance_values(K, prm, 0, sh, np.ones(n))
    F.center_sums_tile(K, 0, np.empty((1, 2, 1))[0, :, 0], np.zeros(m), np.zeros(m))
out = []
for kernel in ("sne", "t"):
    # 4 KiB tiles: many column tiles, so SNE rows rescale their running sums
    S = KernelSource.from_points(X, Z, kernel, gamma=0.7, center=True, chunk_bytes=4096)
    out += [S._shift, S._scale, S._rmean, S._cmean, np.array([S._gmean, S._sumsq]),
            np.array([S.norm_bound()]), S.matmat(V), S.rmatmat(U), *S.sketch(V, U)]
A = np.abs(rng.normal(size=(300, 300)))
S = kernel_source(A, "sne", center=True, structured=False)
out += [S._rmean, S._cmean, S.matmat(rng.normal(size=(300, 2)))]
out.append(kernel_matrix(X, Z, "linear"))  # X @ Z.T, once numpy's threaded GEMM
print(hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in out)).hexdigest())
"""


def _child_digest(mode, blas_threads, numba_threads):
    blas = str(blas_threads)
    env = dict(
        os.environ,
        OPENBLAS_NUM_THREADS=blas,
        OMP_NUM_THREADS=blas,
        MKL_NUM_THREADS=blas,
        NUMBA_NUM_THREADS=str(numba_threads),
    )
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, mode], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_centred_results_same_bits_across_processes_and_thread_counts():
    """Fresh processes with 2 and 1 BLAS/Numba threads, one holding stand-alone helper
    compiles: the set-up state, norm bound, passes and a dense cross product agree bitwise."""
    a = _child_digest("plain", 2, 2)
    b = _child_digest("preload", 1, 1)
    assert len(a) == 64
    assert a == b


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("center", [False, True])
def test_norm_bound_is_an_upper_bound(kernel, center):
    X, Z = _points("dense", seed=6, n=60, m=45)
    G = kernel_matrix(X, Z, kernel, center=center, **KW)
    S = KernelSource.from_points(X, Z, kernel, center=center, **KW)
    bound = S.norm_bound()
    assert bound >= np.linalg.norm(G, 2)
    if kernel in ("sne", "t") or center:  # the set-up pass measured the Frobenius norm
        np.testing.assert_allclose(bound, np.linalg.norm(G), rtol=1e-8)
    S32 = KernelSource.from_points(X, Z, kernel, center=center, dtype=np.float32, **KW)
    assert S32.norm_bound() >= np.linalg.norm(S32.dense().astype(np.float64), 2)


def test_ksvd_source_builds_on_the_points_machinery():
    A = np.random.default_rng(7).standard_normal((40, 55))
    S1 = kernel_source(A, "sne", compat="pinv", center=True)
    X, Z = compat_data(A, "pinv")
    S2 = KernelSource.from_points(X, Z, "sne", gamma=S1.gamma, center=True)
    V = np.random.default_rng(8).standard_normal((55, 3))
    np.testing.assert_array_equal(S1.matmat(V), S2.matmat(V))
    assert S1.compat == "pinv" and S2.compat is None


# ------------------------------------------------------------------ scale-out hooks
def test_row_range_hooks_reproduce_the_in_process_passes():
    X, Z = _points("dense", seed=9, n=203, m=97)
    ref = KernelSource.from_points(X, Z, "sne", gamma=1.4, center=True)
    S = KernelSource._from_arrays(X, Z, "sne", gamma=1.4, center=True, setup=False)
    with pytest.raises(RuntimeError, match="set-up pass has not run"):
        S.matmat(np.ones(97))
    bounds = [0, 70, 71, 150, 203]  # uneven ranges, one of a single row
    ranges = list(zip(bounds[:-1], bounds[1:], strict=True))
    remote = pickle.loads(pickle.dumps(S))  # what a worker receives
    S.finish_setup([remote.setup_rows(a, b) for a, b in ranges])
    rng = np.random.default_rng(0)
    V, Wv = rng.standard_normal((97, 3)), rng.standard_normal((203, 2))
    parts = [S.pass_rows(a, b, V, Wv[a:b]) for a, b in ranges]
    Y = np.vstack([p[0] for p in parts])
    W = sum(p[1] for p in parts)
    Yr, Wr = ref.sketch(V, Wv)
    np.testing.assert_allclose(Y, Yr, rtol=0, atol=1e-14)
    np.testing.assert_allclose(W, Wr, rtol=0, atol=1e-14)
    np.testing.assert_allclose(S.norm_bound(), ref.norm_bound(), rtol=1e-12)
    c = np.array([3, 0, 96])
    np.testing.assert_allclose(S.block_rows(70, 150, c), ref.cols(c)[70:150], atol=1e-15)
    assert S.pass_rows(5, 9, None, None) == (None, None)
    assert S.pass_rows(5, 9, V)[1] is None
    with pytest.raises(ValueError, match="tile"):
        S.finish_setup([remote.setup_rows(0, 70), remote.setup_rows(71, 203)])
    with pytest.raises(ValueError, match="row range"):
        S.pass_rows(10, 5, V)


def test_pickle_round_trip_gives_the_same_bits():
    X, Z = _points("sparse_x", seed=10)
    S = KernelSource.from_points(X, Z, "t", gamma=0.9, center=True)
    S2 = pickle.loads(pickle.dumps(S))
    V = np.random.default_rng(0).standard_normal((M, 2))
    np.testing.assert_array_equal(S.matmat(V), S2.matmat(V))
    assert type(S2) is KernelSource and S2.norm_bound() == S.norm_bound()


# ------------------------------------------------------------------ extreme scales
def test_extreme_magnitudes_are_rescaled():
    X, Z = _points("dense", seed=11, n=30, m=20)
    for kernel in ("sne", "rbf", "t"):
        ref = kernel_matrix(X, Z, kernel, gamma=1.5)
        for f in (1e200, 1e-200):
            S = KernelSource.from_points(X * f, Z * f, kernel, gamma=1.5 * f)
            np.testing.assert_allclose(S.dense(), ref, rtol=1e-12, atol=1e-14)


def test_overflowing_poly_and_linear_are_refused_at_construction():
    """A kernel whose norm bound overflows was accepted and gave inf products (and
    ``norm_bound() = inf``, degree 400): now refused, naming the cure."""
    X, Z = _points("dense", seed=12, n=20, m=10)
    for degree in (400, 1000):
        with pytest.raises(ValueError, match=r"kernel 'poly' may overflow.*lower degree="):
            KernelSource.from_points(X, Z, "poly", degree=degree)
        with pytest.raises(ValueError, match=r"kernel 'poly' may overflow"):
            kernel_source(
                np.random.default_rng(1).standard_normal((30, 30)),
                "poly",
                degree=degree,
                compat=None,
                structured=False,
            )
    with pytest.raises(ValueError, match=r"kernel 'linear' may overflow.*rescale X and Z"):
        KernelSource.from_points(X * 1e160, Z * 1e160, "linear")
    with pytest.raises(ValueError, match=r"exceeds the float32 range"):
        KernelSource.from_points(X * 1e19, Z * 1e19, "linear", dtype=np.float32)
    # a large but representable degree: the bound is computed in logs, finite and valid
    S = KernelSource.from_points(X / 4, Z / 4, "poly", degree=200, center=True)
    G = kernel_matrix(X / 4, Z / 4, "poly", degree=200, center=True)
    assert np.isfinite(S.norm_bound()) and S.norm_bound() >= np.linalg.norm(G, 2)
    np.testing.assert_allclose(S.dense(), G, rtol=1e-12, atol=1e-12 * np.abs(G).max())


# ------------------------------------------------------------------ bad input
GOOD = np.ones((4, 3))


@pytest.mark.parametrize(
    "X, Z, kwargs, exc, match",
    [
        (GOOD, np.ones((4, 2)), {"gamma": 1.0}, ValueError, "same number of features"),
        (np.array([[np.nan, 1.0, 0.0]]), GOOD, {"gamma": 1.0}, ValueError, "X contains NaN"),
        (
            GOOD,
            sp.csr_matrix(np.array([[np.inf, 0, 0]])),
            {"gamma": 1.0},
            ValueError,
            "Z contains NaN",
        ),
        (np.empty((0, 3)), GOOD, {"gamma": 1.0}, ValueError, "X is empty"),
        (GOOD, np.empty((0, 3)), {"gamma": 1.0}, ValueError, "Z is empty"),
        (GOOD, GOOD, {"gamma": 0.0}, ValueError, "gamma must be finite and > 0"),
        (GOOD, GOOD, {"gamma": -2.0}, ValueError, "gamma must be finite and > 0"),
        (GOOD, GOOD, {}, ValueError, "gamma is required"),
        (GOOD, GOOD, {"gamma": 1e-160}, ValueError, "gamma=1e-160 is too small"),
        (GOOD, GOOD, {"gamma": 1.0, "chunk_bytes": 0}, ValueError, "chunk_bytes"),
        (GOOD, GOOD, {"gamma": 1.0, "dtype": np.int64}, ValueError, "dtype"),
        (GOOD, GOOD, {"gamma": 1.0, "center": 1}, TypeError, "center"),
        (GOOD, GOOD, {"gamma": 1.0, "kernel": "laplace"}, ValueError, "kernel"),
    ],
)
def test_from_points_bad_input(X, Z, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        KernelSource.from_points(X, Z, **kwargs)


def test_bad_operands():
    S = KernelSource.from_points(GOOD, np.ones((5, 3)), "rbf", gamma=1.0)
    with pytest.raises(ValueError, match="Omega must have 5 rows"):
        S.sketch(np.ones((4, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="Psi must have 4 rows"):
        S.sketch(np.ones((5, 2)), np.ones((5, 2)))
    with pytest.raises(ValueError, match="X contains NaN"):
        S.matmat(np.full(5, np.nan))


@st.composite
def _small_problems(draw):
    n, m, d = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))

    def make(rows, sparse):
        if sparse:
            return sp.random(rows, d, density=0.5, random_state=rng, format="csr")
        A = rng.standard_normal((rows, d))
        A[rng.random(rows) < 0.2] = 0.0  # some all-zero points
        return A

    return (
        make(n, draw(st.booleans())),
        make(m, draw(st.booleans())),
        draw(st.sampled_from(KERNELS)),
        draw(st.booleans()),
        draw(st.sampled_from([16, 16 * 3, 1 << 20])),
    )


@given(prob=_small_problems())
@settings(max_examples=25, deadline=None)
def test_from_points_equals_kernel_matrix_hypothesis(prob):
    X, Z, kernel, center, chunk_bytes = prob
    G = kernel_matrix(X, Z, kernel, center=center, **KW)
    S = KernelSource.from_points(X, Z, kernel, center=center, chunk_bytes=chunk_bytes, **KW)
    tol = _tol(G, np.float64)
    np.testing.assert_allclose(S.dense(), G, rtol=0, atol=tol)
    V = np.linspace(-1.0, 1.0, Z.shape[0] * 2).reshape(-1, 2)
    U = np.linspace(-1.0, 1.0, X.shape[0] * 3).reshape(-1, 3)
    Y, W = S.sketch(V, U)
    np.testing.assert_allclose(Y, G @ V, rtol=0, atol=10 * tol)
    np.testing.assert_allclose(W, G.T @ U, rtol=0, atol=10 * tol)
    assert S.norm_bound() >= np.linalg.norm(G, 2)


# ------------------------------------------------------------------ backends
def test_device_cpu_is_the_default_backend():
    X, Z = _points("dense", seed=11, n=40, m=30)
    S = KernelSource.from_points(X, Z, "sne", center=True, **KW)
    C = KernelSource.from_points(X, Z, "sne", center=True, device="cpu", **KW)
    A = kernel_source(X, "rbf", compat="pinv", device="cpu")
    assert S.device == C.device == A.device == "cpu"
    assert C._backend.name == "cpu" and C._backend.tiles == (C.chunk_rows, C.chunk_cols)
    V = np.random.default_rng(0).standard_normal((30, 2))
    np.testing.assert_array_equal(S.matmat(V), C.matmat(V))
    for bad in ("gpu", None, 0):
        with pytest.raises(ValueError, match="device must be one of"):
            KernelSource.from_points(X, Z, "sne", device=bad, **KW)
        with pytest.raises(ValueError, match="device must be one of"):
            kernel_source(X, "sne", device=bad)
    with pytest.raises(ValueError, match="structured=True runs in process on the CPU"):
        kernel_source(
            sp.random(20, 20, density=0.2, random_state=0, format="csr"),
            "sne",
            structured=True,
            device="cuda",
        )


def test_backends_import_no_source_module():
    """The source picks a backend, never the reverse (no import circle)."""
    import ast
    import pathlib

    import ksvd_bench.kernels.backends as backends

    up = ("source", "structured", "distributed")  # the modules that pick a backend
    for path in pathlib.Path(backends.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.ImportFrom) and node.level == 2:  # from .. import x
                names = [
                    f"ksvd_bench.kernels.{n}"
                    for n in [node.module or ""] + [a.name for a in node.names]
                ]
            else:
                continue
            for name in names:
                assert not any(name.startswith(f"ksvd_bench.kernels.{u}") for u in up), (
                    f"{path.name} imports {name}"
                )


# ------------------------------------------------------------------ float32 far from the origin
@pytest.mark.parametrize("kernel", ["rbf", "sne", "t"])
def test_float32_points_far_from_the_origin(kernel):
    """Points at 100 + N(0, 1): the cross products cancel 2.6 digits about the origin (the
    float32 kernel was off by 3e-3); about the common mean they cancel none."""
    rng = np.random.default_rng(14)
    X = (100 + rng.standard_normal((300, 64))).astype(np.float32)
    Z = (100 + rng.standard_normal((200, 64))).astype(np.float32)
    gamma = np.sqrt(128.0)
    G = kernel_matrix(X.astype(np.float64), Z.astype(np.float64), kernel, gamma=gamma)
    scale = np.abs(G).max()
    G32 = kernel_matrix(X, Z, kernel, gamma=gamma)
    S32 = KernelSource.from_points(X, Z, kernel, gamma=gamma, center=True)
    assert G32.dtype == S32.dtype == np.float32
    assert np.abs(G32 - G).max() <= 1e-5 * scale
    Gc = G - G.mean(axis=1, keepdims=True) - G.mean(axis=0) + G.mean()
    assert np.abs(S32.dense() - Gc).max() <= 1e-5 * scale
    V = rng.standard_normal((200, 2))
    assert np.abs(S32.matmat(V) - Gc @ V).max() <= 1e-5 * scale * np.abs(V).sum(axis=0).max()


def test_translation_keeps_linear_and_poly_and_sparse_exact():
    """Only distance kernels are translated: x.z changes under a translation."""
    rng = np.random.default_rng(15)
    X, Z = 50 + rng.standard_normal((20, 4)), 50 + rng.standard_normal((15, 4))
    np.testing.assert_allclose(kernel_matrix(X, Z, "linear"), X @ Z.T, rtol=1e-15)
    S = KernelSource.from_points(X, Z, "poly", degree=2, coef0=1.0)
    np.testing.assert_allclose(S.dense(), (X @ Z.T + 1.0) ** 2, rtol=1e-14)
    Xs = sp.random(20, 4, density=0.5, random_state=0, format="csr") * 50
    Gs = kernel_matrix(Xs, Xs, "rbf", gamma=30.0)
    D = Xs.toarray()
    ref = np.exp(-((D[:, None, :] - D[None, :, :]) ** 2).sum(-1) / 900.0)
    np.testing.assert_allclose(Gs, ref, rtol=0, atol=1e-13)


# ------------------------------------------------------------------ found by a new user
@pytest.mark.parametrize("kernel", ["sne", "linear"])
@pytest.mark.parametrize("sparse", [False, True])
def test_later_writes_to_the_points_leave_the_source_unchanged(kernel, sparse):
    """``X[0, 0] = 50`` after construction used to change G behind the source's back."""
    X, Z = _points("sparse_both" if sparse else "dense", seed=16, n=30, m=20)
    S = KernelSource.from_points(X, Z, kernel, center=True, **KW)
    before = S.dense()
    if sparse:
        X.data[0] = 50.0
        Z.data[:] = 0.0
    else:
        X[0, 0] = 50.0
        Z[:] = 0.0
    np.testing.assert_array_equal(S.dense(), before)
    np.testing.assert_allclose(S.matmat(np.ones(20)), before.sum(axis=1), atol=1e-12)
    A = np.random.default_rng(17).standard_normal((25, 25))
    T = kernel_source(A, kernel, compat=None, structured=False, center=True)
    before = T.dense()
    A[0, :] = 50.0
    np.testing.assert_array_equal(T.dense(), before)


def test_masked_points_are_refused():
    X = np.ma.masked_array(np.ones((5, 3)))
    X[1, 2] = np.ma.masked
    with pytest.raises(TypeError, match=r"X is a masked array with 1 masked entries.*filled"):
        KernelSource.from_points(X, np.ones((4, 3)), "rbf", gamma=1.0)
    with pytest.raises(TypeError, match=r"Z is a masked array"):
        KernelSource.from_points(np.ones((4, 3)), X, "rbf", gamma=1.0)
    with pytest.raises(TypeError, match=r"A is a masked array"):
        kernel_source(X, "rbf", gamma=1.0)
    with pytest.raises(TypeError, match=r"X is a masked array"):
        kernel_matrix(X, X, "rbf", gamma=1.0)
    # no masked entry: the plain data
    plain = np.random.default_rng(0).standard_normal((5, 3))
    S = KernelSource.from_points(np.ma.masked_array(plain, mask=False), plain, "rbf", gamma=1.0)
    T = KernelSource.from_points(plain, plain, "rbf", gamma=1.0)
    np.testing.assert_array_equal(S.dense(), T.dense())
    np.testing.assert_allclose(
        S.dense(), kernel_matrix(plain, plain, "rbf", gamma=1.0), rtol=1e-14, atol=0
    )


def test_complex_and_overflowing_operands_are_refused_by_name():
    """A complex operand lost its imaginary part with a ComplexWarning; a finite operand of
    1e308 returned inf/NaN."""
    X, Z = _points("dense", seed=18, n=30, m=20)
    S = KernelSource.from_points(X, Z, "sne", center=True, **KW)
    L = KernelSource.from_points(X, Z, "linear")
    V, U = np.ones((20, 2)), np.ones((30, 2))
    for src in (S, L):
        with pytest.raises(TypeError, match=r"X is complex"):
            src.matmat(V + 1j)
        with pytest.raises(TypeError, match=r"Y is complex"):
            src.rmatmat(U[:, 0] * 1j)
        with pytest.raises(TypeError, match=r"Omega is complex"):
            src.sketch(V.astype(np.complex64), U)
        with pytest.raises(TypeError, match=r"Psi is complex"):
            src.sketch(V, U + 0j)
        with pytest.raises(TypeError, match=r"X must hold real numbers"):
            src.matmat(np.array([["a"] * 2] * 20))
        with pytest.raises(ValueError, match=r"G @ X overflows.*rescale X"):
            src.matmat(V * 1e308)
        with pytest.raises(ValueError, match=r"G\.T @ Y overflows.*rescale Y"):
            src.rmatmat(U * 1e308)
        with pytest.raises(ValueError, match=r"G\.T @ Psi overflows.*rescale Psi"):
            src.sketch(V, U * 1e308)
        with pytest.raises(TypeError, match=r"X is a masked array"):
            src.matmat(np.ma.masked_array(V, mask=np.eye(20, 2, dtype=bool)))
    V = np.random.default_rng(19).standard_normal((20, 2))
    Y = S.matmat(V * 2.0**990)  # large but representable: no error, the exact scaling
    np.testing.assert_array_equal(Y, S.matmat(V) * 2.0**990)
