"""Fixes of the kernel-builder audit: compile-independent bits, float32 bandwidth range,
structured operand checks, gamma and cast validation."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from ksvd_bench.kernels import KernelSource, kernel_matrix, kernel_source
from ksvd_bench.kernels import leaves as nb
from ksvd_bench.kernels.structured import StructuredKernelSource


def _digest(arrays):
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()


# --------------------------------------------------------------------------- 1. determinism
# Large, mixed-sign operands: a reassociated or fused G - (r - g) - c rounds differently.
_DET = """
import numpy as np
from ksvd_bench.kernels import kernel_matrix
from ksvd_bench.kernels import leaves as nb

def results():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 9)) + 3
    Z = rng.normal(size=(260, 9))
    G = rng.normal(size=(300, 260)) * 1e3
    r, c = rng.normal(size=300) * 1e3, rng.normal(size=260) * 1e3
    P, S = G.copy(), G.copy()
    nb.center_inplace.parallel(P, r, c, 0.3)
    nb.center_inplace.serial(S, r, c, 0.3)
    return [P, S, nb.row_sums.serial(G), nb.row_sums.parallel(G),
            kernel_matrix(X, Z, "linear", center=True),
            kernel_matrix(X, Z, "sne", gamma=2.0, center=True)]
"""


def test_center_inplace_twins_give_the_written_bits():
    ns = {}
    exec(_DET, ns)
    P, S, rs, rp = ns["results"]()[:4]
    rng = np.random.default_rng(0)
    rng.normal(size=(300, 9)), rng.normal(size=(260, 9))
    G = rng.normal(size=(300, 260)) * 1e3
    r, c = rng.normal(size=300) * 1e3, rng.normal(size=260) * 1e3
    np.testing.assert_array_equal(P, S)
    np.testing.assert_array_equal(P, G - (r - 0.3)[:, None] - c[None, :])  # as written
    np.testing.assert_array_equal(rs, rp)
    assert np.abs(rs - G.sum(axis=1)).max() < 1e-9 * np.abs(G).sum(axis=1).max()
    G32 = G.astype(np.float32)
    P32, S32 = G32.copy(), G32.copy()
    args = (r.astype(np.float32), c.astype(np.float32), np.float32(0.3))
    nb.center_inplace.parallel(P32, *args)
    nb.center_inplace.serial(S32, *args)
    np.testing.assert_array_equal(P32, S32)


def test_results_match_a_fresh_compile(tmp_path):
    """A process compiling every kernel anew (empty Numba cache) gives this one's bits."""
    ns = {}
    exec(_DET, ns)
    here = _digest(ns["results"]())
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "nbcache"), NUMBA_NUM_THREADS="2")
    code = (
        _DET + "\nimport hashlib\nprint(hashlib.sha256(b''.join(np.ascontiguousarray(a)"
        ".tobytes() for a in results())).hexdigest())\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == here


def test_ordered_row_sum_is_a_fixed_order_sum():
    v = np.random.default_rng(1).normal(size=37) * 10.0 ** np.arange(-18, 19)
    p = [v[j::8] for j in range(8)]
    s = [0.0] * 8
    for j in range(8):
        for x in p[j][: len(v) // 8]:
            s[j] += x
    for x in v[len(v) // 8 * 8 :]:
        s[0] += x
    want = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
    assert nb.ordered_row_sum(v) == want
    assert nb.ordered_row_sum(v.astype(np.float32)) == nb.ordered_row_sum(
        v.astype(np.float32).astype(np.float64)
    )


def test_sparse_sne_small_gamma_keeps_the_nearest_entry():
    """Exact fastmath flags: the factorised sparse SNE row no longer loses its exp(0) entry
    (it divided by a zero row sum) when inv_g2 amplifies the rounding of |x|^2."""
    Xs = sp.random(30, 40, density=0.2, random_state=1, format="csr")
    for scale, gamma in ((1.0, 1e-19), (1e10, 1e-5), (1e19, 1e-6)):
        A, B = Xs * scale, Xs[:20] * scale
        G = kernel_matrix(A, B, "sne", gamma=gamma)
        np.testing.assert_allclose(G.sum(axis=1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(
            G, kernel_matrix(A.toarray(), B.toarray(), "sne", gamma=gamma), rtol=0, atol=1e-12
        )


# --------------------------------------------------------------------------- 2. float32 range
def _points(d=5):
    rng = np.random.default_rng(0)
    return rng.normal(size=(30, d)), rng.normal(size=(20, d)) + 0.3


@pytest.mark.parametrize("kernel", ["sne", "t", "rbf"])
def test_float32_source_is_accurate_or_refused_at_extreme_bandwidths(kernel):
    X, Z = _points()
    n_ok = n_refused = 0
    for scale in (1e-20, 1.0, 1e19):
        for log_ratio in (-30, 0, 10, 17, 18, 19, 25):
            gamma = scale * 10.0**-log_ratio
            G64 = kernel_matrix(X * scale, Z * scale, kernel, gamma=gamma)
            try:
                S = KernelSource.from_points(
                    X * scale, Z * scale, kernel, gamma=gamma, dtype=np.float32
                )
            except ValueError as exc:
                msg = str(exc)
                assert f"gamma={gamma:.3g}" in msg and "float32" in msg and "magnitude" in msg
                assert log_ratio >= 18  # refused only where float32 cannot hold the exponents
                n_refused += 1
                continue
            n_ok += 1
            D = S.dense()
            np.testing.assert_allclose(D, G64, rtol=0, atol=1e-5)
            Y = S.matmat(np.ones((20, 2), dtype=np.float32))
            np.testing.assert_allclose(Y, G64 @ np.ones((20, 2)), rtol=0, atol=1e-4)
            # float32 kernel_matrix stays finite and accurate on the same data
            G32 = kernel_matrix(X * scale, Z * scale, kernel, gamma=gamma, dtype=np.float32)
            np.testing.assert_allclose(G32, G64, rtol=0, atol=1e-5)
    assert n_ok >= 12 and n_refused >= 6
    # the float64 source takes them all
    KernelSource.from_points(X, Z, kernel, gamma=1e-25, dtype=np.float64).rows([0])


def test_float32_refusal_names_a_gamma_that_works():
    X, Z = _points()
    with pytest.raises(ValueError, match=r"gamma=1e-19 .* magnitude .* float32") as info:
        KernelSource.from_points(X, Z, "t", gamma=1e-19, dtype=np.float32)
    gamma_min = float(str(info.value).rsplit("gamma >= ", 1)[1])
    S = KernelSource.from_points(X, Z, "t", gamma=gamma_min, dtype=np.float32)
    np.testing.assert_allclose(
        S.dense(), kernel_matrix(X, Z, "t", gamma=gamma_min), rtol=0, atol=1e-5
    )


def test_float32_kernel_matrix_of_large_unscaled_points():
    """Points near 3e18 were used unscaled: their float32 squared norms overflowed."""
    X, Z = _points(64)
    for kernel in ("sne", "t", "rbf"):
        G64 = kernel_matrix(X * 3e18, Z * 3e18, kernel, gamma=1.2e19)
        G32 = kernel_matrix(X * 3e18, Z * 3e18, kernel, gamma=1.2e19, dtype=np.float32)
        S = KernelSource.from_points(X * 3e18, Z * 3e18, kernel, gamma=1.2e19, dtype=np.float32)
        np.testing.assert_allclose(G32, G64, rtol=0, atol=1e-5)
        np.testing.assert_allclose(S.dense(), G64, rtol=0, atol=1e-5)


# --------------------------------------------------------------------------- 3. operands
@pytest.fixture(scope="module")
def sources():
    A = sp.random(10, 10, density=0.3, random_state=0, format="csr")
    return [
        StructuredKernelSource(A, "sne", gamma=1.0, dtype=np.float32),
        kernel_source(A, "sne", gamma=1.0, structured=False, dtype=np.float32),
    ]


@pytest.mark.parametrize(
    "bad, exc, match",
    [
        (np.nan, ValueError, "X contains NaN or Inf"),
        (np.inf, ValueError, "X contains NaN or Inf"),
        ("object", TypeError, "X must hold real numbers, got dtype object"),
        ("masked", TypeError, "X is a masked array with masked entries"),
        ("shape", ValueError, r"X must have 10 rows, got shape \(9, 2\)"),
    ],
)
def test_both_sources_refuse_the_same_operands(sources, bad, exc, match):
    for S in sources:
        V = np.ones((10, 2))
        if bad == "object":
            V = V.astype(object)
        elif bad == "masked":
            V = np.ma.masked_array(V, mask=V == 0)
            V.mask[2, 1] = True
        elif bad == "shape":
            V = V[:9]
        else:
            V[3, 0] = bad
        with pytest.raises(exc, match=match):
            S.matmat(V)
        with pytest.raises(exc, match=match.replace("X", "Y")):
            S.rmatmat(V)


def test_both_sources_give_the_same_product_dtypes(sources):
    st, gen = sources
    rng = np.random.default_rng(0)
    V64 = rng.normal(size=(10, 3))
    for V in (
        V64,
        V64.astype(np.float32),
        np.ones((10, 2), dtype=bool),
        np.arange(10),
        np.ones(10, dtype=np.int64),
    ):
        a, b = st.matmat(V), gen.matmat(V)
        assert a.dtype == b.dtype == np.result_type(np.float32, V) and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert st.rmatmat(V).dtype == gen.rmatmat(V).dtype
    # both multiply in their storage dtype: the stored float32 T + L R^T times the operand
    # rounded to float32, returned in float64
    T = st.sparse_part.astype(np.float64)
    L, R = (F.astype(np.float64) for F in st.low_rank_factors)
    V32 = V64.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(st.matmat(V64), T @ V32 + L @ (R.T @ V32), rtol=0, atol=1e-7)
    np.testing.assert_array_equal(st.matmat(V64), st.matmat(V64.astype(np.float32)))
    huge = np.full((10, 1), 1e308)
    for S in (st, gen):
        with pytest.raises(ValueError, match=r"G @ X overflows the float64 range: X has entries"):
            with np.errstate(over="ignore"):
                S.matmat(huge)


# --------------------------------------------------------------------------- 4. gamma, casts
@pytest.mark.parametrize("kernel", ["linear", "poly"])
@pytest.mark.parametrize("gamma", [-1.0, 0.0, np.inf])
def test_kernel_matrix_refuses_a_bad_gamma_as_the_sources_do(kernel, gamma):
    X, Z = _points()
    with pytest.raises(ValueError) as km:
        kernel_matrix(X, Z, kernel, gamma=gamma)
    with pytest.raises(ValueError) as src:
        KernelSource.from_points(X, Z, kernel, gamma=gamma)
    assert str(km.value) == str(src.value) == f"gamma must be finite and > 0, got {gamma}"
    kernel_matrix(X, Z, kernel)  # None: ignored


@pytest.mark.parametrize("kernel", ["linear", "poly"])
def test_float32_cast_overflow_is_named(kernel):
    X, Z = _points()
    for f in (kernel_matrix, KernelSource.from_points):
        with pytest.raises(
            ValueError,
            match=r"X has entries up to 2\.\d+e\+50, beyond the "
            r"float32 range .* cast to dtype=float32",
        ):
            f(X * 1e50, Z * 1e-50, kernel, dtype=np.float32)
    G = kernel_matrix(X * 1e50, Z * 1e-50, kernel)  # float64 holds them
    assert np.all(np.isfinite(G))
