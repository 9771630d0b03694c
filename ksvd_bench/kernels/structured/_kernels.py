"""Numba kernels of the structured operator ``G = T + L R^T`` (sparse plus rank-few).

Every kernel runs ``prange`` over output rows with serial inner loops, so results do not
depend on the number of threads; :class:`_Threads` runs small products on one thread.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ..leaves import compile_twice

_NJIT = {"parallel": True, "fastmath": True, "cache": True}
#: multiply-adds below which kernels run on one thread (a few milliseconds of work: a
#: parallel launch on a loaded 2-core machine can cost as much)
_PARALLEL_WORK = 1 << 22


# ---------------------------------------------------------------------------------------------
# Numba kernels (prange over output rows, serial inner loops: thread-count independent)
# ---------------------------------------------------------------------------------------------


@numba.njit(**_NJIT)
def _row_min_distance(indptr, indices, pdata, r, c, small, big):
    """``delta_i = min_j |x_i - z_j|^2`` over all M columns in ``O(nnz(P_i) log nnz(P_i))``.

    Off the pattern of row ``i`` the distance is ``r_i + c_j``: its minimum is ``r_i`` plus
    the smallest ``c_j`` among the columns not in the pattern, found by walking ``small`` (the
    ``max_i nnz(P_i) + 1`` columns of smallest ``c``, ascending) until a column is missing
    from the row's sorted indices. ``big`` is a finite upper bound of every distance
    (fastmath assumes no infinities).
    """
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for i in prange(n):
        lo = indptr[i]
        hi = indptr[i + 1]
        best = big
        for k in range(small.shape[0]):
            j = small[k]
            a = lo
            b = hi
            while a < b:
                mid = (a + b) // 2
                if indices[mid] < j:
                    a = mid + 1
                else:
                    b = mid
            if a == hi or indices[a] != j:
                best = r[i] + c[j]
                break
        for p in range(lo, hi):
            d = max(r[i] + c[indices[p]] - 2.0 * pdata[p], 0.0)
            if d < best:
                best = d
        out[i] = best
    return out


@numba.njit(**_NJIT)
def _sparse_part(indptr, indices, pdata, r, c, c_min, t, sne, bsum, b, delta):
    """Entries of ``T`` (on the pattern of ``P``) and the row factor ``a`` of ``G = T + a b^T``.

    ``b_j = exp(-t (c_j - c_min)) <= 1`` is the column factor (as stored) and
    ``delta[i]`` the smallest distance of row ``i`` (:func:`_row_min_distance`). SNE rows are
    shifted by ``delta_i`` (log-sum-exp), so every entry of ``G`` is an exponential of a
    non-positive argument; the base ``a_i b_j`` is at most ``kappa_i`` times the row's
    largest entry, and the caller has checked ``kappa_i`` (no overflow). Also returns
    ``rho_i``, the amplification of rounding in the SNE normaliser computed as
    ``(off-pattern sum of b) = sum(b) - (on-pattern sum of b)`` (0 for RBF).
    """
    n = indptr.shape[0] - 1
    tdata = np.empty(pdata.shape[0], dtype=np.float64)
    a = np.empty(n, dtype=np.float64)
    rho = np.zeros(n, dtype=np.float64)
    for i in prange(n):
        lo = indptr[i]
        hi = indptr[i + 1]
        base = r[i] + c_min  # smallest off-pattern distance of row i (up to rank-one columns)
        if sne:
            shift = delta[i]
            on_b = 0.0
            on_g = 0.0
            for p in range(lo, hi):
                j = indices[p]
                on_b += b[j]
                d = max(r[i] + c[j] - 2.0 * pdata[p], 0.0)
                on_g += np.exp(-t * (d - shift))
            off = max(bsum - on_b, 0.0)
            s0 = np.exp(-t * (base - shift))  # kappa_i: the largest base entry / the row max
            # The term of the smallest distance is exp(0) = 1, so the true sum is >= 1; the
            # floor only removes rounding (and keeps the log finite when rho flags the row).
            z = max(s0 * off + on_g, 1.0)
            rho[i] = s0 * bsum / z
            logz = np.log(z)
        else:
            logz = 0.0
            shift = 0.0
        a[i] = np.exp(-t * (base - shift) - logz)
        for p in range(lo, hi):
            j = indices[p]
            x = 2.0 * t * pdata[p]
            if x > 0.0:
                # T = G_ij (1 - e^{-x}): G_ij <= 1 is formed directly, no overflow of expm1(x).
                d = max(r[i] + c[j] - 2.0 * pdata[p], 0.0)
                tdata[p] = np.exp(-t * (d - shift) - logz) * (-np.expm1(-x))
            else:
                # T = a_i b_j expm1(x) from the stored a_i, b_j, so that a_i b_j + T_ij =
                # a_i b_j e^x cancels only the final roundings (kappa_i eps), not the
                # t eps |x|^2 of separately rounded exponents.
                tdata[p] = (a[i] * b[j]) * np.expm1(x)
    return tdata, a, rho


def _spmm_lowrank_py(indptr, indices, data, X, L, W, out):
    """``out = T @ X + L @ W`` for CSR ``T`` (rows of ``out`` are independent)."""
    n = out.shape[0]
    k = out.shape[1]
    q = L.shape[1]
    for i in prange(n):
        for col in range(k):
            acc = 0.0
            for s in range(q):
                acc += L[i, s] * W[s, col]
            out[i, col] = acc
        for p in range(indptr[i], indptr[i + 1]):
            v = data[p]
            j = indices[p]
            for col in range(k):
                out[i, col] += v * X[j, col]


_spmm_lowrank, _spmm_lowrank_serial = compile_twice(_spmm_lowrank_py)


class _Threads:
    """Run Numba with one thread (and BLAS with one thread) when the work is small.

    A parallel launch costs more than a millisecond of work, and far more on a loaded
    machine; kernels parallelise over output rows only, so the bits do not change.
    """

    _controller = None

    def __init__(self, work=0, blas=False):
        self.serial = work < _PARALLEL_WORK
        self.blas = blas

    def __enter__(self):
        self._numba = numba.get_num_threads()
        if self.serial:
            numba.set_num_threads(1)
        if self.blas:
            if _Threads._controller is None:
                # start-up: threadpoolctl loads only when BLAS threads are first limited
                from threadpoolctl import ThreadpoolController

                _Threads._controller = ThreadpoolController()
            self._limit = _Threads._controller.limit(limits=1, user_api="blas")
        return self

    def __exit__(self, *exc):
        numba.set_num_threads(self._numba)
        if self.blas:
            self._limit.restore_original_limits()
        return False


#: fastmath without "reassoc". With it LLVM turns a sparse row's dot product into AVX-512
#: gathers, which are slower than scalar loads (2x on the AMD EPYC this was measured on);
#: without it every row is summed in storage order, by the serial and the parallel compile.
_FASTMATH_ORDERED = {"nnan", "ninf", "nsz", "arcp", "contract", "afn"}


def _spmv_lowrank_py(indptr, indices, data, x, L, w, out):
    """One-vector ``out = T x + L w`` (``w = R^T x``): the inner loop of a Krylov solver.

    Each row is summed in storage order (sparse terms, then the ``q`` low-rank terms) into a
    float64 accumulator, so float32 storage gives float64 products and the bits do not depend
    on the number of threads.
    """
    q = L.shape[1]
    for i in prange(out.shape[0]):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * x[indices[p]]
        for s in range(q):
            acc += L[i, s] * w[s]
        out[i] = acc


_spmv_lowrank, _spmv_lowrank_serial = compile_twice(_spmv_lowrank_py, _FASTMATH_ORDERED)


@numba.njit(fastmath=_FASTMATH_ORDERED, cache=True)
def _project_vector(R, x, w):
    """``w = R^T x``, one serial sum per entry (thread-count independent)."""
    for s in range(R.shape[1]):
        acc = 0.0
        for j in range(x.shape[0]):
            acc += R[j, s] * x[j]
        w[s] = acc


def _lowrank_matvec(parts, L, R, x, out):
    """``out = T x + L (R^T x)`` for one vector; big products use the parallel compile.

    The choice depends on the size of the operator only, and both compiles sum every entry in
    the same order, so the bits never depend on the number of threads.
    """
    w = np.empty(R.shape[1], dtype=np.float64)
    _project_vector(R, x, w)
    if parts[2].shape[0] + (L.shape[0] + R.shape[0]) * L.shape[1] >= _PARALLEL_WORK:
        _spmv_lowrank(parts[0], parts[1], parts[2], x, L, w, out)
    else:
        _spmv_lowrank_serial(parts[0], parts[1], parts[2], x, L, w, out)
    return out


def _gram_lowrank_py(a_parts, at_parts, L, R, x, u, w, z):
    """``z = A (A^T x)`` for ``A = T + L R^T`` (``a_parts``: T in CSR, ``at_parts``: T^T in
    CSR); ``u`` (A^T x) and ``w`` (q numbers) are workspace. One call per step of ARPACK on
    the Gram matrix: a Python call and its allocations cost as much as the products on
    small cores. Rows are summed in storage order, as in :func:`_spmv_lowrank_py`.
    """
    q = L.shape[1]
    for s in range(q):
        acc = 0.0
        for i in range(x.shape[0]):
            acc += L[i, s] * x[i]
        w[s] = acc
    indptr, indices, data = at_parts
    for j in prange(u.shape[0]):
        acc = 0.0
        for p in range(indptr[j], indptr[j + 1]):
            acc += data[p] * x[indices[p]]
        for s in range(q):
            acc += R[j, s] * w[s]
        u[j] = acc
    for s in range(q):
        acc = 0.0
        for j in range(u.shape[0]):
            acc += R[j, s] * u[j]
        w[s] = acc
    indptr, indices, data = a_parts
    for i in prange(z.shape[0]):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * u[indices[p]]
        for s in range(q):
            acc += L[i, s] * w[s]
        z[i] = acc


_gram_lowrank, _gram_lowrank_serial = compile_twice(_gram_lowrank_py, _FASTMATH_ORDERED)


def _lowrank_product(parts, L, R, X, dtype):
    """``T @ X + L @ (R^T @ X)``; small products run serially (a parallel launch costs more
    than the work, and far more on a loaded machine). The path depends on the size of the
    product only, and every path sums each output entry in a fixed order, so the bits never
    depend on the number of threads."""
    out = np.empty((L.shape[0], X.shape[1]), dtype=dtype)
    if X.shape[1] == 1:  # Krylov solvers: one vector at a time
        col = np.empty(L.shape[0], dtype=np.float64) if dtype != np.float64 else out[:, 0]
        _lowrank_matvec(parts, L, R, np.ascontiguousarray(X[:, 0]), col)
        out[:, 0] = col
        return out
    W = np.empty((R.shape[1], X.shape[1]), dtype=dtype)
    work = X.shape[1] * (parts[2].shape[0] + (L.shape[0] + R.shape[0]) * L.shape[1])
    if work >= _PARALLEL_WORK:
        _project(R, X, W)
        _spmm_lowrank(parts[0], parts[1], parts[2], X, L, W, out)
    else:
        _project_serial(R, X, W)
        _spmm_lowrank_serial(parts[0], parts[1], parts[2], X, L, W, out)
    return out


def _project_py(R, X, W):
    """``W = R^T @ X`` with one serial sum per output entry (thread-count independent)."""
    q = R.shape[1]
    k = X.shape[1]
    m = X.shape[0]
    for e in prange(q * k):
        s = e // k
        col = e - s * k
        acc = 0.0
        for j in range(m):
            acc += R[j, s] * X[j, col]
        W[s, col] = acc


_project, _project_serial = compile_twice(_project_py)


def compile_products(parts, parts_t, L, R):
    """Compile (or load from Numba's disk cache) both compiles, serial and parallel, of every
    product kernel for these argument types (``parts``, ``parts_t``: T and T^T in CSR; the
    storage dtype is ``L``'s). The parallel compiles run only on large operators: a small
    operator's solve would leave them to the first large one."""
    n, m, q = L.shape[0], R.shape[0], L.shape[1]
    x = np.zeros(m, dtype=L.dtype)
    w = np.zeros(q)
    for spmv in (_spmv_lowrank, _spmv_lowrank_serial):
        spmv(parts[0], parts[1], parts[2], x, L, w, np.empty(n))
    for gram in (_gram_lowrank, _gram_lowrank_serial):  # ARPACK's vectors are float64
        gram(parts, parts_t, L, R, np.zeros(n), np.empty(m), np.empty(q), np.empty(n))
    X = np.zeros((m, 2), dtype=L.dtype)
    W = np.empty((q, 2), dtype=L.dtype)
    for project, spmm in ((_project, _spmm_lowrank), (_project_serial, _spmm_lowrank_serial)):
        project(R, X, W)
        spmm(parts[0], parts[1], parts[2], X, L, W, np.empty((n, 2), dtype=L.dtype))


@numba.njit(**_NJIT)
def _gather_rows(indptr, indices, data, L, R, ridx, out):
    """``out[k, :] = G[ridx[k], :]`` for ``G = T + L R^T`` (T in CSR)."""
    m = R.shape[0]
    q = R.shape[1]
    for k in prange(ridx.shape[0]):
        i = ridx[k]
        for j in range(m):
            acc = 0.0
            for s in range(q):
                acc += L[i, s] * R[j, s]
            out[k, j] = acc
        for p in range(indptr[i], indptr[i + 1]):
            out[k, indices[p]] += data[p]


@numba.njit(**_NJIT)
def _gather_block(indptr, indices, data, L, R, ridx, cidx, cstart, cpos, out):
    """``out = G[ridx][:, cidx]``; ``cpos[cstart[j]:cstart[j + 1]]`` lists where column j goes."""
    q = R.shape[1]
    for k in prange(ridx.shape[0]):
        i = ridx[k]
        for h in range(cidx.shape[0]):
            j = cidx[h]
            acc = 0.0
            for s in range(q):
                acc += L[i, s] * R[j, s]
            out[k, h] = acc
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            for e in range(cstart[j], cstart[j + 1]):
                out[k, cpos[e]] += data[p]


@numba.njit(fastmath=True, cache=True)
def _row_hashes(indptr, indices, data_bits, L_bits):
    """A 64-bit FNV-1a hash of each row's pattern, values and low-rank coefficients."""
    n = indptr.shape[0] - 1
    q = L_bits.shape[1]
    out = np.empty(n, dtype=np.uint64)
    prime = np.uint64(1099511628211)
    for i in range(n):
        h = np.uint64(14695981039346656037)
        for p in range(indptr[i], indptr[i + 1]):
            h = (h ^ np.uint64(indices[p])) * prime
            h = (h ^ np.uint64(data_bits[p])) * prime
        h = (h ^ np.uint64(indptr[i + 1] - indptr[i])) * prime
        for s in range(q):
            h = (h ^ np.uint64(L_bits[i, s])) * prime
        out[i] = h
    return out


@numba.njit(fastmath=True, cache=True)
def _rows_equal(indptr, indices, data, L, rows, reps, ok):
    """``ok[k]`` is True iff row ``rows[k]`` equals row ``reps[k]`` bit for bit."""
    q = L.shape[1]
    for k in range(rows.shape[0]):
        i = rows[k]
        j = reps[k]
        same = indptr[i + 1] - indptr[i] == indptr[j + 1] - indptr[j]
        if same:
            off = indptr[j] - indptr[i]
            for p in range(indptr[i], indptr[i + 1]):
                if indices[p] != indices[p + off] or data[p] != data[p + off]:
                    same = False
                    break
        if same:
            for s in range(q):
                if L[i, s] != L[j, s]:
                    same = False
                    break
        ok[k] = same


@numba.njit(cache=True)
def _core_csr(indptr, indices, data, row_reps, col_map, wr, wc, n_rows):
    """CSR (``n_rows`` rows, the last ones empty) of ``T[row_reps]`` on the columns with
    ``col_map >= 0``, renumbered by ``col_map`` and scaled by ``wr`` (rows) and ``wc`` (columns)."""
    g = row_reps.shape[0]
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    for r in range(g):
        i = row_reps[r]
        count = 0
        for p in range(indptr[i], indptr[i + 1]):
            if col_map[indices[p]] >= 0:
                count += 1
        ptr[r + 1] = ptr[r] + count
    for r in range(g, n_rows):
        ptr[r + 1] = ptr[g]
    ind = np.empty(ptr[g], dtype=np.int64)
    val = np.empty(ptr[g], dtype=np.float64)
    for r in range(g):
        i = row_reps[r]
        k = ptr[r]
        for p in range(indptr[i], indptr[i + 1]):
            j = col_map[indices[p]]
            if j >= 0:
                ind[k] = j
                val[k] = data[p] * wr[r] * wc[j]
                k += 1
    return ptr, ind, val


@numba.njit(cache=True)
def _transpose_csr(indptr, indices, data, n_cols):
    """CSR of the transpose (rows of the result list their entries in increasing order)."""
    ptr = np.zeros(n_cols + 1, dtype=np.int64)
    for p in range(indices.shape[0]):
        ptr[indices[p] + 1] += 1
    for j in range(n_cols):
        ptr[j + 1] += ptr[j]
    fill = ptr[:-1].copy()
    ind = np.empty(indices.shape[0], dtype=np.int64)
    val = np.empty(indices.shape[0], dtype=data.dtype)
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            ind[fill[j]] = i
            val[fill[j]] = data[p]
            fill[j] += 1
    return ptr, ind, val


@numba.njit(cache=True)
def _expand_rows(Uc, group, sqrt_sizes, empty_pos, Qz, g, out):
    """``out = Q_r Uc``: a class member gets its class's row over ``sqrt(class size)``, an
    empty row its coordinates in the empty rows' span (``Qz``) times the last rows of ``Uc``."""
    q = Qz.shape[1]
    for i in range(out.shape[0]):
        gi = group[i]
        if gi >= 0:
            for c in range(out.shape[1]):
                out[i, c] = Uc[gi, c] / sqrt_sizes[gi]
        else:
            e = empty_pos[i]
            for c in range(out.shape[1]):
                acc = 0.0
                for s in range(q):
                    acc += Qz[e, s] * Uc[g + s, c]
                out[i, c] = acc
