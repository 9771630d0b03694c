"""Distances by BLAS: the CPU tiles of dense points (issue 21, item 2).

For rbf, SNE and t over dense points, the tile's GEMM forms minus the squared distances,
``[2 x_i, -|x_i|^2, -1] . [z_j, 1, |z_j|^2]``, and one sweep forms the exponent and takes
``exp``. Checked here against the cross-product path (kept for sparse points) and against
exact distances of the stored points, on hard families: far apart, rare clusters, flat
(every distance 0), two separated clouds (large SNE shifts) and points so large against
gamma that the exponents are all rounding: SNE rows must still sum to 1, with their nearest
entry exactly ``exp(0)``. Also the exp sweep's parts: the bit trick that applies ``2^k`` and
the polynomial, in extended precision.
"""

import numba
import numpy as np
import pytest
from scipy.spatial.distance import cdist

from ksvd_bench.kernels import KernelSource
from ksvd_bench.kernels.backends import cpu as F
from ksvd_bench.kernels.leaves import (
    _EXP_POLY,
    EXP_MIN,
    EXP_MIN_F32,
    ROUND_BITS,
    ROUND_BITS_F32,
    times_pow2_of_rounded,
)

N, M, D = 70, 55, 8


def _family(name, seed=0):
    """``(X, Z, gamma)`` of a hard point family."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))
    Z = rng.standard_normal((M, D))
    if name == "far":  # far from the origin: translation cannot help a spread this wide
        X *= 300.0
        Z *= 300.0
        return X, Z, 600.0
    if name == "rare":  # five rows in a cluster of their own, far from every column
        X[:5] += 40.0
        return X, Z, 3.0
    if name == "flat":  # every distance 0: exponents are all cancellation
        X[:] = X[0] + 1e3
        Z[:] = X[0]
        return X, Z, 1.0
    if name == "separated":  # SNE rows shifted by their nearest distance, about 40^2
        X[:, 0] += 20.0
        Z[:, 0] -= 20.0
        return X, Z, 4.0
    if name == "huge":  # exponents of order 1e36, rounded to 1e20: only their order is known
        return X * 1e18, Z * 1e18, 1.0
    return X, Z, 2.0


def _reference(S, kernel):
    """G over the source's stored points, from exact (cdist) distances, float64."""
    b = S._backend
    D2 = cdist(np.asarray(b._X, np.float64), np.asarray(b._Z, np.float64), "sqeuclidean")
    g = b.params.inv_g2
    if kernel == "rbf":
        return np.exp(-D2 * g)
    if kernel == "sne":
        return np.exp((S._shift[:, None] - D2) * g) * S._scale[:, None]
    return S._scale[:, None] / (1.0 + D2 * g)


def _tiles(S):
    """The whole G as one tile, by the distance GEMM and by the cross-product path."""
    b = S._backend
    P = b.points()
    n, m = S.shape
    assert P.za.shape == (m, D + 2)  # dense points, a distance kernel: the GEMM path
    out = []
    for Q in (P, P._replace(za=np.empty((0, 0), S.dtype))):
        K = np.empty((n, m), dtype=S.dtype)
        F.neg_distance_tile(Q, 0, n, 0, m, np.empty(n * (D + 2), S.dtype), K, np.zeros(1))
        F.distance_values(K, b.params, 0, S._shift, S._scale)
        out.append(K)
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", ["rbf", "sne", "t"])
@pytest.mark.parametrize("family", ["plain", "far", "rare", "flat", "separated"])
def test_distance_gemm_within_its_rounding_bound(family, kernel, dtype):
    X, Z, gamma = _family(family)
    S = KernelSource.from_points(X, Z, kernel, gamma=gamma, dtype=dtype)
    by_gemm, by_cross = _tiles(S)
    ref = _reference(S, kernel)
    # the certificate's model (KernelSource._evaluation_slack): the exponent rounds by
    # (d + 2) u T, T = 2 (max |x|^2 + max |z|^2) / gamma^2; then the exponent's own two
    # roundings, exp (1 ulp; below exp(EXP_MIN) flushed to 0), the row scale and the cast
    u = np.finfo(dtype).eps
    T = 2 * S._backend.params.inv_g2 * (S._xx.max() + S._zz.max())
    flushed = np.exp(float(EXP_MIN if dtype == np.float64 else EXP_MIN_F32))
    bound = ((D + 2) * u * T + 6 * u) * ref + flushed
    for name, K in (("gemm", by_gemm), ("cross", by_cross)):
        err = np.abs(K.astype(np.float64) - ref)
        assert np.all(err <= bound), (name, float(np.max(err / bound)))
    if family == "flat":  # clamped at 0: exactly the kernel's value at distance 0
        np.testing.assert_array_equal(by_gemm, by_cross)
    # and the pass itself agrees with the tile
    Om = np.random.default_rng(1).standard_normal((S.shape[1], 3))
    np.testing.assert_allclose(
        S.matmat(Om),
        by_gemm.astype(np.float64) @ Om,
        rtol=100 * u,
        atol=100 * u * np.abs(ref).max(),
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("family", ["plain", "rare", "separated", "huge"])
def test_sne_rows_sum_to_one_with_their_nearest_entry_exact(family, dtype):
    """The set-up pass takes each row's shift from the same GEMM as the passes, so the
    nearest entry's exponent is exactly 0 and the row normaliser fits the pass's values,
    even where rounding swamps every exponent (``huge``)."""
    X, Z, gamma = _family(family)
    S = KernelSource.from_points(X, Z, "sne", gamma=gamma, dtype=dtype)
    G = S.dense().astype(np.float64)
    u = np.finfo(dtype).eps
    np.testing.assert_allclose(G.sum(axis=1), 1.0, rtol=S.shape[1] * u)
    np.testing.assert_array_equal(G.max(axis=1), S._scale.astype(dtype))
    np.testing.assert_allclose(S.matmat(np.ones(S.shape[1])), 1.0, rtol=S.shape[1] * u)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", ["rbf", "sne", "t"])
def test_blocks_match_the_whole_matrix(kernel, dtype):
    """Blocks take their rows of the kept augmented columns (``_take_za``): the same
    entries as the whole matrix, to rounding (BLAS may order a small product's sums
    differently, as it did for the cross products)."""
    X, Z, gamma = _family("separated")
    S = KernelSource.from_points(X, Z, kernel, gamma=gamma, dtype=dtype, center=True)
    G = S.dense()
    atol = 1e3 * np.finfo(dtype).eps * np.abs(G).max()
    rng = np.random.default_rng(3)
    rows, cols = rng.choice(N, 7, replace=False), rng.choice(M, 9, replace=False)
    np.testing.assert_allclose(S._eval(rows, cols), G[rows][:, cols], rtol=0, atol=atol)
    np.testing.assert_allclose(S._eval(rows[:1], None), G[rows[:1]], rtol=0, atol=atol)
    np.testing.assert_allclose(S._eval(None, cols[:1]), G[:, cols[:1]], rtol=0, atol=atol)


def test_sparse_points_keep_the_cross_product_path():
    X, Z, gamma = _family("plain")
    import scipy.sparse as sp

    S = KernelSource.from_points(sp.csr_matrix(X), Z, "rbf", gamma=gamma)
    assert S._backend.points().za.size == 0
    T = KernelSource.from_points(X, Z, "rbf", gamma=gamma)
    Om = np.random.default_rng(2).standard_normal((M, 2))
    np.testing.assert_allclose(S.matmat(Om), T.matmat(Om), rtol=1e-13)


def test_linear_and_poly_take_no_augmented_points():
    X, Z, _ = _family("plain")
    for kernel in ("linear", "poly"):
        S = KernelSource.from_points(X, Z, kernel)
        assert S._backend.points().za.size == 0


@numba.njit(cache=False)
def _scaled(v, y, round_bits):
    """``times_pow2_of_rounded(v[i], fl(y[i] + round_bits))``, as the exp sweeps call it."""
    out = np.empty_like(v)
    for i in range(v.shape[0]):
        out[i] = times_pow2_of_rounded(v[i], y[i] + round_bits)
    return out


@pytest.mark.parametrize(
    "dtype, k_min, round_bits",
    [
        (np.float64, -1021, ROUND_BITS),  # exp(EXP_MIN) = 2^-1021.4: the sweeps' smallest k
        (np.float32, -125, ROUND_BITS_F32),
    ],
)
def test_times_pow2_of_rounded_is_exact_where_the_result_is_normal(dtype, k_min, round_bits):
    rng = np.random.default_rng(3)
    k = np.repeat(np.arange(k_min, 1), 8)
    # exp(r) for |r| <= log(2) / 2, its ends included
    v = np.exp(rng.uniform(-np.log(2) / 2, np.log(2) / 2, k.size))
    v[::8], v[1::8] = np.sqrt(0.5), np.sqrt(2.0)
    v = v.astype(dtype)
    # the rounding is the sweep's: y near k, ties included, rounds to k (or to k's even twin)
    y = (k + rng.uniform(-0.49, 0.49, k.size)).astype(dtype)
    got = _scaled(v, y, dtype(round_bits))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.ldexp(v, k))
    # one below: reachable only with r > 0 (k rounded down), so v >= 1 keeps it normal
    v1 = np.array([1.0, 1.2, np.sqrt(2.0)], dtype)
    np.testing.assert_array_equal(
        _scaled(v1, np.full(3, k_min - 1, dtype), dtype(round_bits)), np.ldexp(v1, k_min - 1)
    )


@pytest.mark.skipif(
    np.finfo(np.longdouble).eps > 1e-18, reason="needs an extended-precision long double (x86)"
)
def test_exp_polynomial_relative_error_below_1e17_in_extended_precision():
    # 1 + r + r^2 q(r) with the float64 coefficients, evaluated exactly enough (64-bit
    # mantissa) to see its approximation error, which the float64 sweep adds to its rounding
    r = np.linspace(-np.log(2) / 2, np.log(2) / 2, 200001).astype(np.longdouble)
    q = np.zeros_like(r)
    for c in _EXP_POLY:
        q = q * r + np.longdouble(c)
    err = np.abs((1 + r + r * r * q) / np.exp(r) - 1)
    assert err.max() < 1e-17


@pytest.mark.parametrize(
    "name, dtype", [("exp_nonpos", np.float64), ("exp_nonpos_f32", np.float32)]
)
def test_exp_sweeps_are_marked_noinline(name, dtype):
    # inlined into a pass's tile loop the sweep reloads its constants on every iteration
    # (never_inline); compiled afresh here, as a cached copy cannot be inspected
    import re

    from ksvd_bench.kernels import leaves

    fresh = numba.njit(fastmath={"nnan", "ninf", "nsz", "contract", "arcp"}, cache=False)(
        getattr(leaves, name).py_func
    )
    fresh(np.zeros(8, dtype), dtype(0.0), dtype(1.0))
    ir = fresh.inspect_llvm(fresh.signatures[0])
    define = next(
        line
        for line in ir.splitlines()
        if line.startswith("define") and name in line and "cpython" not in line
    )
    groups = dict(re.findall(r"^attributes (#\d+) = \{(.*)\}", ir, re.M))
    group = re.search(r"(#\d+) \{?$", define.strip())  # absent: no attributes at all
    assert group is not None and "noinline" in groups[group.group(1)].split(), define
