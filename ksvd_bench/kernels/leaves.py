"""Leaf Numba kernels: distances to kernel values, row normalisation, centring.

Every parallel kernel runs ``prange`` over output rows (or over fixed-width column chunks)
with a serial inner loop and disjoint writes, so each output entry and each sum is computed
in one fixed order whatever the number of threads: results do not depend on the thread count.
Sums are accumulated in float64 even when the matrix is float32.

Inputs are validated (finite, shapes) by the callers: the kernels compile with
:data:`~ksvd_bench.kernels.ordered.EXACT_FASTMATH` (no NaN/Inf, sign of zero ignored),
flags that cannot change a finite result. Reassociation or contraction would let LLVM round
each compile of a function (parallel or serial, fresh or loaded from the disk cache, inlined
or not) differently, and the bits of a result would depend on what the process compiled.

``exp`` is :func:`exp_nonpos`, a polynomial kernel that LLVM vectorises (AVX2/AVX-512):
without Intel SVML (which pip's llvmlite cannot use) a call to libm's ``exp`` per entry
is several times slower and dominated the SNE build.

Kernel codes (``kind``): 0 = "rbf", 1 = "sne", 2 = "t", 5 = "softmax" (the codes of
:data:`~ksvd_bench.kernels.backends.base.CODES`). Softmax runs SNE's code with minus the
cross product in place of the squared distance (unclamped: it may be negative) and
``1 / gamma`` in place of ``1 / gamma^2``: ``exp((x.z - max_j x.z) / gamma)``, normalised.
"""

from __future__ import annotations

import types

import numba
import numpy as np
from llvmlite import ir
from numba import prange
from numba import types as nbtypes
from numba.extending import intrinsic, overload

from .ordered import EXACT_FASTMATH

RBF, SNE, T, SOFTMAX = 0, 1, 2, 5
#: width of the column chunks of the column-sum kernel (fixed: it sets the summation order)
COL_CHUNK = 256

#: below this many output entries a kernel runs its serial compile: waking the thread pool
#: costs more than the work (milliseconds on a loaded machine)
SERIAL_BELOW = 1 << 16


def compile_twice(func, fastmath=EXACT_FASTMATH):
    """``(parallel, serial)`` Numba compiles of one Python kernel written with ``prange``.

    ``prange`` is ``range`` when ``parallel`` is off, so both run the same loops in the same
    order per output row and give the same bits. Numba's on-disk cache is keyed by the
    function's qualified name and bytecode, not by the compile flags: the serial compile is
    made from a renamed copy of ``func`` so that neither compile is loaded as the other.
    ``fastmath`` is Numba's set of flags, the same for both; the default changes no finite
    result, so both compiles give the same bits, fresh or loaded from the cache.
    """
    twin = types.FunctionType(
        func.__code__,
        func.__globals__,
        func.__name__ + "_serial",
        func.__defaults__,
        func.__closure__,
    )
    twin.__qualname__ = func.__qualname__ + "_serial"
    twin.__doc__ = func.__doc__
    return (
        numba.njit(parallel=True, fastmath=fastmath, cache=True)(func),
        numba.njit(fastmath=fastmath, cache=True)(twin),
    )


class _Kernel:
    """A kernel compiled twice: parallel for large outputs, serial for small ones.

    The choice depends on the size of the first argument (the output) only, never on the
    number of threads, so results stay independent of the thread count; both compiles run
    the same loops in the same order per row (:func:`compile_twice`).
    """

    def __init__(self, func):
        self.parallel, self.serial = compile_twice(func)
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__

    def __call__(self, *args):
        if args[0].size < SERIAL_BELOW:
            return self.serial(*args)
        return self.parallel(*args)


_jit = _Kernel
_jit_serial = numba.njit(fastmath=EXACT_FASTMATH, cache=True)


LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01  # Cody-Waite split of log(2): LN2_HI + LN2_LO
LN2_LO = 1.90821492927058770002e-10
EXP_MIN = -708.0  # below this exp() is subnormal (< 3.3e-308): flushed to zero
#: 1.5 * 2^52: ``fl(y + ROUND_BITS)`` rounds ``y`` (``|y| < 2^51``) to the nearest integer ``k``
#: and holds it in its low mantissa bits (:func:`times_pow2_of_rounded` reads them; AVX2 has
#: no vector float64 -> int64 conversion, so ``int(k)`` would leave the loop scalar)
ROUND_BITS = 6755399441055744.0

#: ``exp(r) ~ 1 + r + r^2 (c2 + c3 r + ... + c11 r^9)`` on ``|r| <= log(2) / 2``: a fit
#: levelling the relative error ``r^2 e^-r (q(r) - (e^r - 1 - r) / r^2)`` on 11 Chebyshev
#: points (256-bit arithmetic); with these float64 coefficients the relative error is 9.4e-18
#: (0.09 ulp; the degree-13 Taylor polynomial's is 5.3e-18), for two fewer FMAs (a test checks
#: it below 1e-17 in extended precision)
_EXP_POLY = (
    2.511001928565117e-08,
    2.763263873212504e-07,
    2.755724242321896e-06,
    2.4801487371716608e-05,
    0.00019841269886507345,
    0.0013888888947779774,
    0.008333333333322238,
    0.04166666666652213,
    0.16666666666666674,
    0.500000000000001,
)


@intrinsic
def times_pow2_of_rounded(typingctx, v, kr):
    """``v 2^k`` from ``kr = fl(y + ROUND_BITS)`` holding ``k`` (float64), or
    ``fl(y + ROUND_BITS_F32)`` (float32).

    Adds ``k`` to the exponent field of ``v``: the low mantissa bits of ``kr`` hold ``k``
    (plus a high bit that the shift pushes out), shifted into the exponent field they add
    ``k`` modulo the word, two's complement. Exact where ``v 2^k`` is a normal number (the
    callers' clamps see to it) and ``v`` is not 0. Bit casts, a shift and an integer add: all
    vectorise in the caller's loop, on the integer ports, where a multiply by ``2^k`` would
    take an FMA port from the polynomial.
    """
    if v == nbtypes.float32 and kr == nbtypes.float32:
        width, mant = 32, 23
    elif v == nbtypes.float64 and kr == nbtypes.float64:
        width, mant = 64, 52
    else:
        return None

    def codegen(context, builder, signature, args):
        int_t = ir.IntType(width)
        k_field = builder.shl(builder.bitcast(args[1], int_t), ir.Constant(int_t, mant))
        return builder.bitcast(builder.add(builder.bitcast(args[0], int_t), k_field), args[0].type)

    return v(v, kr), codegen


@intrinsic
def never_inline(typingctx):
    """Mark the jit function that calls this as ``noinline`` for LLVM (no code emitted).

    LLVM inlines a jit function small enough into its jit callers. For the exp sweeps that
    costs speed: inlined into a pass's tile loop, the polynomial's constants no longer fit
    in registers and are loaded again on every iteration, where the called sweep keeps
    them in place (1.3-1.5 against 1.9-2.2 ns an entry, sweeping the rows of a 256 x 1024
    tile, on one Zen 3 core). A call per row costs nothing beside a row's work.
    """

    def codegen(context, builder, signature, args):
        attrs = builder.function.attributes
        if "alwaysinline" not in attrs:
            attrs.add("noinline")
        return context.get_dummy_value()

    return nbtypes.none(), codegen


# No "reassoc" flag: it would let LLVM fold the Cody-Waite reduction (or kr - ROUND_BITS).
# The loop vectorises (FMA, min/max and integer add and shift), unlike a call to libm's exp
# without SVML.
@numba.njit(fastmath={"nnan", "ninf", "nsz", "contract", "arcp"}, cache=True)
def exp_nonpos(a, shift=0.0, g=1.0):
    """``a <- exp(min((shift + a) g, 0))`` in place (float64), vectorisable, within 1 ulp of
    libm's ``exp`` of the rounded exponent.

    With the defaults, ``a <- exp(a)`` for ``a <= 0``. The tile passes give minus the
    squared distances, their row's shift (``>= 0``) and ``1 / gamma^2``: the exponent
    ``(shift - max(d, 0)) / gamma^2`` is formed in the same sweep, the clamp at 0 doing the
    work of the distances' (a distance below 0 makes the exponent positive either way).

    ``exp(x) = 2^k exp(r)`` with ``k`` the integer nearest ``x / log 2``, ``|r| <= log(2) / 2``
    (Cody-Waite) and a degree-11 polynomial for ``exp(r)`` (``_EXP_POLY``: relative error
    below 1e-17); ``2^k`` is applied to the exponent bits (:func:`times_pow2_of_rounded`).
    Exponents below ``EXP_MIN`` give 0 (subnormal results are flushed: an absolute error
    below 3.3e-308); positive ones are treated as 0. Per entry the loop has 15 FMAs and
    multiplies (a degree-13 Taylor polynomial and a multiply by ``2^k`` had 18), and it is
    never inlined (:func:`never_inline`).
    """
    never_inline()
    c11, c10, c9, c8, c7, c6, c5, c4, c3, c2 = _EXP_POLY
    for j in range(a.shape[0]):
        x0 = (shift + a[j]) * g
        x = min(max(x0, EXP_MIN), 0.0)  # min/max, not branches: they vectorise better
        kr = x * LOG2E + ROUND_BITS
        k = kr - ROUND_BITS
        r = (x - k * LN2_HI) - k * LN2_LO
        p = c11 * r + c10
        p = p * r + c9
        p = p * r + c8
        p = p * r + c7
        p = p * r + c6
        p = p * r + c5
        p = p * r + c4
        p = p * r + c3
        p = p * r + c2
        p = p * r + 1.0
        v = p * r + 1.0
        a[j] = times_pow2_of_rounded(v, kr) if x0 >= EXP_MIN else 0.0


# float32: Cephes' expf (Cody-Waite split of log 2, degree-5 minimax polynomial, within 1 ulp
# of a correctly rounded expf); below EXP_MIN_F32 the result is subnormal and flushed to 0
LN2_HI_F32 = np.float32(0.693359375)
LN2_LO_F32 = np.float32(-2.12194440e-4)
LOG2E_F32 = np.float32(LOG2E)
EXP_MIN_F32 = np.float32(-87.0)
ROUND_BITS_F32 = np.float32(12582912.0)  # 1.5 * 2^23, as ROUND_BITS
_EXPF_POLY = tuple(
    np.float32(c)
    for c in (
        1.9875691500e-4,
        1.3981999507e-3,
        8.3334519073e-3,
        4.1665795894e-2,
        1.6666665459e-1,
        5.0000001201e-1,
    )
)


@numba.njit(fastmath={"nnan", "ninf", "nsz", "contract", "arcp"}, cache=True)
def exp_nonpos_f32(a, shift, g):
    """``a <- exp(min((shift + a) g, 0))`` in place for float32 ``a``, ``shift`` and ``g``,
    all in float32 arithmetic, vectorisable.

    The float32 twin of :func:`exp_nonpos` (twice the vector width): ``exp(x) = 2^k exp(r)``
    with ``|r| <= log(2) / 2`` and Cephes' expf polynomial (relative error below 2e-7).
    Exponents below ``EXP_MIN_F32`` give 0 (an absolute error below 1.7e-38); positive ones
    are treated as 0.
    """
    never_inline()
    zero = np.float32(0.0)
    one = np.float32(1.0)
    c0, c1, c2, c3, c4, c5 = _EXPF_POLY
    for j in range(a.shape[0]):
        x0 = (shift + a[j]) * g
        x = min(max(x0, EXP_MIN_F32), zero)
        kr = x * LOG2E_F32 + ROUND_BITS_F32
        k = kr - ROUND_BITS_F32
        r = (x - k * LN2_HI_F32) - k * LN2_LO_F32
        p = c0 * r + c1
        p = p * r + c2
        p = p * r + c3
        p = p * r + c4
        p = p * r + c5
        v = (p * (r * r) + r) + one
        a[j] = times_pow2_of_rounded(v, kr) if x0 >= EXP_MIN_F32 else zero


def exp_inplace(a, shift, g):
    """``a <- exp(min((shift + a) g, 0))`` in ``a``'s own precision (jit code only).

    :func:`exp_nonpos` for float64 rows, :func:`exp_nonpos_f32` for float32 rows (``shift``
    and ``g`` of the row's dtype).
    """
    raise NotImplementedError("exp_inplace is called from jit code only")


@overload(exp_inplace)
def _exp_inplace(a, shift, g):
    if a.dtype == nbtypes.float32:
        return lambda a, shift, g: exp_nonpos_f32(a, shift, g)
    return lambda a, shift, g: exp_nonpos(a, shift, g)


def like(a, x):
    """The number ``x`` as a scalar of the dtype of array ``a`` (jit code only).

    Numba types a literal such as ``2.0`` as float64, and one float64 operand turns float32
    arithmetic into float64: tile code takes its constants through this.
    """
    return a.dtype.type(x)


@overload(like)
def _like(a, x):
    if a.dtype == nbtypes.float32:
        return lambda a, x: np.float32(x)
    return lambda a, x: np.float64(x)


@numba.njit(fastmath=EXACT_FASTMATH, cache=True)
def ordered_row_sum(row):
    """Sum of a 1-d array in float64 from eight interleaved partial sums, added in a fixed
    order.

    Independent sums keep the adder pipelines busy without licence to reassociate
    (:data:`EXACT_FASTMATH`), so every compiled copy adds in this order; a single running
    sum waits on each add.
    """
    n = row.shape[0]
    n8 = n - n % 8
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    for j in range(0, n8, 8):
        s0 += row[j]
        s1 += row[j + 1]
        s2 += row[j + 2]
        s3 += row[j + 3]
        s4 += row[j + 4]
        s5 += row[j + 5]
        s6 += row[j + 6]
        s7 += row[j + 7]
    for j in range(n8, n):
        s0 += row[j]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@numba.njit(fastmath=EXACT_FASTMATH, cache=True)
def _kernel_row(crow, xi, zz, inv_g2, kind, buf, orow):
    """One row of :func:`dense_rows` / :func:`dense_fused`: ``orow <- k(crow)``.

    ``crow[j] = x_i . z_j`` and ``xi = |x_i|^2``; ``buf`` (float64) is a work row of length
    ``m``. ``orow`` may be ``crow`` itself (each entry is read before any is written).
    Returns the row's ``(shift, scale)``. Softmax takes ``d_j = -x_i . z_j`` (``xi`` and
    ``zz`` unused) and ``inv_g2 = 1 / gamma``: its shift is minus the row's largest cross
    product, so its largest entry is ``exp(0)`` as SNE's nearest one is.
    """
    m = buf.shape[0]
    if kind == SOFTMAX:
        for j in range(m):
            buf[j] = -crow[j]
    else:
        for j in range(m):
            d = xi + zz[j] - 2.0 * crow[j]
            buf[j] = d if d > 0.0 else 0.0
    mn = 0.0
    if kind == SNE or kind == SOFTMAX:
        # a loop of its own: it vectorises (a minimum is exact in any order), where a running
        # minimum in the loop above kept that loop scalar without fastmath's "reassoc"
        mn = np.inf
        for j in range(m):
            mn = min(mn, buf[j])
    if kind == T:
        for j in range(m):
            buf[j] = 1.0 / (1.0 + buf[j] * inv_g2)
    else:
        for j in range(m):
            buf[j] = (mn - buf[j]) * inv_g2
        exp_nonpos(buf)
    c = 1.0
    if kind != RBF:
        c = 1.0 / ordered_row_sum(buf)
    for j in range(m):
        orow[j] = buf[j] * c
    return mn, c


@_jit
def dense_rows(C, xx, zz, inv_g2, kind, shift, scale):
    """Turn cross products ``C[i, j] = x_i . z_j`` into kernel values, in place.

    ``d_ij = max(xx[i] + zz[j] - 2 C[i, j], 0)`` (negative values are cancellation error).
    For SNE each row is shifted by its smallest distance before ``exp`` (log-sum-exp), so
    the largest entry is exp(0) = 1 and the row sum cannot underflow or overflow. SNE and t
    rows are divided by their sums (softmax: ``d_ij = -C[i, j]``, shifted by the row's
    largest cross product, see :func:`_kernel_row`). ``shift[i]`` and ``scale[i]`` (1 / row
    sum; 1 for rbf) receive the per-row constants so that any block can later be evaluated
    alone. Each row is worked on in a float64 buffer whatever the dtype of ``C``.
    """
    n, m = C.shape
    for i in prange(n):
        buf = np.empty(m, dtype=np.float64)
        shift[i], scale[i] = _kernel_row(C[i], xx[i], zz, inv_g2, kind, buf, C[i])


@_jit
def dense_fused(out, X, Zt, xx, zz, inv_g2, kind, shift, scale, chunk):
    """Distance kernel of dense ``X`` and ``Z`` (given as ``Zt = Z.T``) written into ``out``.

    Fuses the cross product with :func:`dense_rows`: parallel over fixed chunks of
    ``chunk`` rows, each computes its ``X[a:b] @ Z.T`` with BLAS (the caller limits BLAS
    to one thread) while it fits in cache, then turns it into kernel values row by row. The
    N x M cross-product matrix is never stored, so ``out`` is written exactly once. The
    chunk size is fixed by the caller (not by the thread count), so results do not depend
    on the number of threads. Same per-row arithmetic as :func:`dense_rows`.
    """
    n = X.shape[0]
    m = Zt.shape[1]
    n_chunks = (n + chunk - 1) // chunk
    for c in prange(n_chunks):
        a = c * chunk
        b = min(a + chunk, n)
        C = np.dot(X[a:b], Zt)
        buf = np.empty(m, dtype=np.float64)
        for ii in range(b - a):
            i = a + ii
            shift[i], scale[i] = _kernel_row(C[ii], xx[i], zz, inv_g2, kind, buf, out[i])


@numba.njit(fastmath=EXACT_FASTMATH, cache=True)
def _has_index(indices, a, b, j):
    """Binary search for column ``j`` in the sorted ``indices[a:b]`` of one CSR row."""
    lo, hi = a, b
    while lo < hi:
        mid = (lo + hi) // 2
        v = indices[mid]
        if v == j:
            return True
        if v < j:
            lo = mid + 1
        else:
            hi = mid
    return False


@_jit
def sparse_exp_rows(out, indptr, indices, data, xx, zz, zorder, inv_g2, normalize, shift, scale):
    """Exp kernel (rbf, or SNE when ``normalize``) for sparse data, one write per entry.

    The cross products come as a CSR matrix ``(indptr, indices, data)`` with sorted indices.
    Where the cross product is a structural zero, ``d_ij = xx[i] + zz[j]`` and the entry
    factorises: ``exp((mn - xx[i] - zz[j]) g) = F_i * ez_j`` with ``ez_j = exp((zmin - zz[j]) g)``
    computed once. A row is then one scaled copy of ``ez`` plus ``nnz(row)`` exact ``exp``
    corrections, and its SNE normaliser follows from ``sum(ez)`` without a pass over the row,
    so building G costs about as much as writing it. ``zorder`` sorts ``zz`` ascending: the
    smallest distance among the structural zeros is found by walking it past the row's
    nonzero columns. Rows where ``F_i > 1`` (possible only when some cross products are
    negative) take the direct path to rule out overflow.
    """
    n, m = out.shape
    zmin = zz[zorder[0]]
    ez = np.empty(m, dtype=np.float64)
    for j in range(m):
        ez[j] = (zmin - zz[j]) * inv_g2
    exp_nonpos(ez)
    ez_total = 0.0
    for j in range(m):
        ez_total += ez[j]
    for i in prange(n):
        a = indptr[i]
        b = indptr[i + 1]
        xi = xx[i]
        mn = np.inf
        for k in range(a, b):
            d = xi + zz[indices[k]] - 2.0 * data[k]
            if d < 0.0:
                d = 0.0
            if d < mn:
                mn = d
        zgap = -1.0
        for t in range(m):
            j = zorder[t]
            if not _has_index(indices, a, b, j):
                d = xi + zz[j]
                if d < mn:
                    mn = d
                    zgap = zz[j] - zmin
                break
        if not normalize:
            mn = 0.0
            lf = (mn - xi - zmin) * inv_g2
        elif zgap >= 0.0:
            # the nearest column is a structural zero: mn - xi - zmin is zz[j] - zmin, formed
            # without cancelling xi (inv_g2 would amplify its rounding and lose that entry,
            # exp(0) = 1; it is 0 exactly when zz[j] is zmin)
            lf = zgap * inv_g2
        else:
            lf = (mn - xi - zmin) * inv_g2
        if lf <= 0.0:
            f = np.exp(lf)
            s_fact = 0.0
            s_exact = 0.0
            for k in range(a, b):
                j = indices[k]
                d = xi + zz[j] - 2.0 * data[k]
                if d < 0.0:
                    d = 0.0
                s_fact += ez[j]
                s_exact += np.exp((mn - d) * inv_g2)
            if normalize:
                s = f * (ez_total - s_fact) + s_exact
                # the row's nearest entry is exp(0): the sum is at least 1 (and s_exact)
                s = max(s, s_exact, 1.0)
                c = 1.0 / s
            else:
                c = 1.0
            fc = f * c
            for j in range(m):
                out[i, j] = fc * ez[j]
            for k in range(a, b):
                j = indices[k]
                d = xi + zz[j] - 2.0 * data[k]
                if d < 0.0:
                    d = 0.0
                out[i, j] = np.exp((mn - d) * inv_g2) * c
        else:
            for j in range(m):
                out[i, j] = xi + zz[j]
            for k in range(a, b):
                j = indices[k]
                d = out[i, j] - 2.0 * data[k]
                out[i, j] = d if d > 0.0 else 0.0
            s = 0.0
            for j in range(m):
                e = np.exp((mn - out[i, j]) * inv_g2)
                out[i, j] = e
                s += e
            c = 1.0 / s if normalize else 1.0
            if normalize:
                for j in range(m):
                    out[i, j] = out[i, j] * c
        shift[i] = mn
        scale[i] = c


@_jit
def poly_inplace(C, coef0, degree):
    """``C <- (C + coef0) ** degree`` in place."""
    n, m = C.shape
    for i in prange(n):
        for j in range(m):
            C[i, j] = (C[i, j] + coef0) ** degree


@_jit
def row_sums(G):
    """Row sums of ``G`` in float64, each in a fixed order (:func:`ordered_row_sum`)."""
    n = G.shape[0]
    out = np.empty(n, dtype=np.float64)
    for i in prange(n):
        out[i] = ordered_row_sum(G[i])
    return out


@_jit
def col_sums(G):
    """Column sums of ``G`` in float64, each summed serially over the rows in order.

    Parallel over fixed-width column chunks; reading a chunk of each row keeps the access
    contiguous without any reduction across threads.
    """
    n, m = G.shape
    out = np.zeros(m, dtype=np.float64)
    n_chunks = (m + COL_CHUNK - 1) // COL_CHUNK
    for c in prange(n_chunks):
        j0 = c * COL_CHUNK
        j1 = min(j0 + COL_CHUNK, m)
        acc = np.zeros(j1 - j0, dtype=np.float64)
        for i in range(n):
            for j in range(j0, j1):
                acc[j - j0] += G[i, j]
        for j in range(j0, j1):
            out[j] = acc[j - j0]
    return out


@_jit
def center_inplace(G, rmean, cmean, gmean):
    """``G[i, j] <- G[i, j] - rmean[i] - cmean[j] + gmean`` in place."""
    n, m = G.shape
    for i in prange(n):
        ri = rmean[i] - gmean
        for j in range(m):
            G[i, j] = G[i, j] - ri - cmean[j]


@_jit_serial
def ordered_sum(v):
    """Serial float64 sum of a vector (fixed order)."""
    s = 0.0
    for i in range(v.shape[0]):
        s += v[i]
    return s
