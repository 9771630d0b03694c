"""Device code of the CUDA backend (:mod:`.cuda`): the tile kernels, in Numba CUDA.

Each thread block of ``NT = 128`` threads (a 16 x 8 grid) computes one tile of ``G`` at a
time: it stages its rows of ``X`` and columns of ``Z`` in shared memory, ``d`` in chunks of
``DC``, each thread accumulates the cross products of ``TR/16`` rows by ``TC/8`` columns in
registers (register blocking: each value loaded from shared memory feeds several
multiply-adds), turns them into kernel values and writes the tile to shared memory; then
the same threads multiply the tile into their outputs, each owning several rows and
several columns of the result, again in registers.

* ``G @ Omega`` alone (``row_pass``): one block per tile of ``TR`` rows owns those rows of
  the result and walks the column tiles in order.
* ``G.T @ Psi``, or both at once (``col_pass``): one block per tile of ``TC`` columns owns
  those rows of ``G.T @ Psi`` and walks the row tiles of a band in order; ``G @ Omega`` is
  written as one partial per column tile and row, summed over the tiles in order by
  ``sum_parts`` before the next band, so that buffer stays within a byte budget.
* Set-up (``row_stats``, ``center_stats``) and blocks (``fill``) use the same tiles.

The kernels are built per storage dtype and operand width (:func:`_build`: shared and
local arrays need constant shapes) and keep to the plain ``cuda.jit`` subset that Numba's
CUDA simulator runs (shared memory, local arrays, ``syncthreads``; no warp shuffles, no
atomics); ``benchmarks/scripts/bench_gpu.py --ptx`` compiles them for sm_90 without a GPU
(no register spills). :data:`CONFIGS` holds the tile shapes, the knobs to tune on a GPU.

Determinism. Tile shapes are constants, every output has one owner that adds its terms in
a fixed order, and no sum uses atomics: two runs give the same bits.

Precision. float64 storage computes everything in float64, as the CPU backend does.
float32 storage computes cross products, distances, ``exp`` and a tile's partial products
in float32 (the GPU's fast path), the exponent ``(shift - d) / gamma^2`` and the t and poly
kernels in float64, and adds every tile's partial into float64 accumulators; the set-up
sums are float64. Kernel values below float32's range are flushed to zero in float32.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._cuda_import import load_cuda
from .base import LINEAR, POLY, SNE, T

__all__ = ["TY", "TX", "NT", "CONFIGS", "SUM_THREADS", "kernels", "kernel_signatures"]

cuda = load_cuda()  # ImportError / CudaUnavailableError, each saying what is missing

#: threads of a block: TY x TX = 128 (rows of a tile are spread over TY, columns over TX)
TY, TX = 16, 8
NT = TY * TX
TXB = 3  # log2(TX)
#: tile configurations ``(TR, TC, DC, CY_MAX)`` per storage dtype: a tile of TR rows by TC
#: columns of G, d staged DC at a time, at most 8 * CY_MAX operand columns per block. "row":
#: passes owning rows (``G @ Omega``, set-up row statistics, blocks); "col": passes owning
#: columns. Static shared memory stays below 48 KiB in every kernel (float32 row pass:
#: 16.6 + 8.3 + 8.4 + 8.2 KiB).
CONFIGS = {
    (np.dtype(np.float32), "row"): (64, 32, 64, 8),
    (np.dtype(np.float32), "col"): (32, 64, 32, 8),
    (np.dtype(np.float64), "row"): (64, 32, 16, 4),
    (np.dtype(np.float64), "col"): (32, 32, 16, 4),
}
#: threads per block of the elementwise partial-sum kernel
SUM_THREADS = 256
#: largest finite float64, the start of a running minimum
_BIG = 1.7976931348623157e308


# ----------------------------------------------------------------------- device code
def _build(dtype, cy):
    """The kernels for storage ``dtype`` whose passes handle ``8 * cy`` operand columns.

    Built on first use (shared and local arrays need their shapes and dtype as constants).
    """
    f32 = dtype == np.float32
    FT = numba.float32 if f32 else numba.float64  # storage / fast compute type
    F8 = numba.float64
    TR, TC, DC, _ = CONFIGS[(dtype, "row")]
    CR, CC, CD, _ = CONFIGS[(dtype, "col")]
    KC = TX * cy
    RR, RC = TR // TY, TC // TX  # a thread's rows and columns of a row-config tile
    CRR, CRC = CR // TY, CC // TX  # ... of a col-config tile
    WR = CC // TY  # columns of G whose G.T @ Psi rows a thread owns (col pass)
    # shapes of shared and local arrays must be compile-time constants: precomputed here
    DC1, TC1, CD1, CC1 = DC + 1, TC + 1, CD + 1, CC + 1  # +1: padding against bank conflicts
    NRC, NRY, NCC, NCY, NWY = RR * RC, RR * cy, CRR * CRC, CRR * cy, WR * cy
    dev = cuda.jit(device=True, inline="always")

    @dev
    def load_points(dst, P, idx, i0, n, c0, d, tid):
        """``dst[r, t] = P[row(i0 + r), c0 + t]`` (zero outside ``i0 + r < n``, ``c0 + t < d``).

        ``row(i) = idx[i]`` when ``idx`` is non-empty (gathered blocks), else ``i``.
        Consecutive threads read consecutive features of a point (coalesced).
        """
        nr = dst.shape[0]
        dc = dst.shape[1] - 1  # one column of padding
        for e in range(tid, nr * dc, NT):
            r = e // dc
            t = e - r * dc
            i = i0 + r
            c = c0 + t
            v = FT(0.0)
            if i < n and c < d:
                ii = idx[i] if idx.shape[0] > 0 else i
                v = P[ii, c]
            dst[r, t] = v

    @dev
    def cross_step(sX, sZ, t, acc, ra, rb, ty, tx, rr, rc):
        """Add feature ``t`` of the staged points to the thread's cross products."""
        for r in range(rr):
            ra[r] = sX[ty + TY * r, t]
        for c in range(rc):
            rb[c] = sZ[tx + TX * c, t]
        for r in range(rr):
            for c in range(rc):
                acc[r * rc + c] += ra[r] * rb[c]

    @dev
    def mac_step(sA, sB, t, part, ra, ob, ty, tx, rr, transposed):
        """``part[r, c] += A[r, t] * sB[t, tx + TX c]`` for the thread's rows ``ty + TY r``.

        ``A = sA`` (rows of the tile) or, ``transposed``, ``sA.T`` (columns of the tile).
        """
        for r in range(rr):
            ra[r] = sA[t, ty + TY * r] if transposed else sA[ty + TY * r, t]
        for c in range(cy):
            ob[c] = sB[t, tx + TX * c]
        for r in range(rr):
            for c in range(cy):
                part[r * cy + c] += ra[r] * ob[c]

    @dev
    def mac(sA, sB, nt, part, ra, ob, ty, tx, rr, transposed):
        """``part = sum_t A[r, t] * sB[t, c]`` over ``t < nt`` (compute type, in order).

        A plain counted loop, two steps at a time: leaner than ``range`` on the GPU.
        """
        for q in range(rr * cy):
            part[q] = FT(0.0)
        t = 0
        while t + 1 < nt:
            mac_step(sA, sB, t, part, ra, ob, ty, tx, rr, transposed)
            mac_step(sA, sB, t + 1, part, ra, ob, ty, tx, rr, transposed)
            t += 2
        if t < nt:
            mac_step(sA, sB, t, part, ra, ob, ty, tx, rr, transposed)

    @dev
    def cross(X, Z, xidx, zidx, i0, n, j0, m, d, sX, sZ, acc, ra, rb, ty, tx, tid, load_x,
              load_z, rr, rc):
        """``acc[r * rc + c] = x_i . z_j`` for ``i = i0 + ty + TY r``, ``j = j0 + tx + TX c``.

        Sums over the features in order (0, 1, ..., d - 1) whatever the chunking, so every
        pass computes the same bits for the same entry. ``load_x``/``load_z`` False reuses
        the staged points (when ``d <= DC`` and they did not change).
        """
        dc = sX.shape[1] - 1
        for q in range(rr * rc):
            acc[q] = FT(0.0)
        for c0 in range(0, d, dc):
            if load_x or d > dc:
                load_points(sX, X, xidx, i0, n, c0, d, tid)
            if load_z or d > dc:
                load_points(sZ, Z, zidx, j0, m, c0, d, tid)
            cuda.syncthreads()
            nt = min(dc, d - c0)  # the staged chunk's features
            t = 0
            while t + 1 < nt:  # a plain counted loop, two steps at a time (see mac)
                cross_step(sX, sZ, t, acc, ra, rb, ty, tx, rr, rc)
                cross_step(sX, sZ, t + 1, acc, ra, rb, ty, tx, rr, rc)
                t += 2
            if t < nt:
                cross_step(sX, sZ, t, acc, ra, rb, ty, tx, rr, rc)
            cuda.syncthreads()

    @dev
    def distance(cr, xi, zj):
        """``max(|x|^2 + |z|^2 - 2 x.z, 0)`` in the compute type."""
        dist = xi + zj - FT(2.0) * cr
        return dist if dist > FT(0.0) else FT(0.0)

    @dev
    def value(cr, xi, zj, kind, g, coef0, degree, sh, sc):
        """The kernel value of one entry (compute type) from its cross product ``cr``.

        As the CPU backend: exp kernels ``exp(min((sh - d) g, 0)) * sc``, t ``sc / (1 +
        d g)``, linear ``cr``, poly ``(cr + coef0) ** degree``; the exponent, t and poly
        in float64.
        """
        if kind == LINEAR:
            return cr
        if kind == POLY:
            return FT((F8(cr) + coef0) ** degree)
        dist = F8(distance(cr, xi, zj))
        if kind == T:
            return FT(sc * (1.0 / (1.0 + dist * g)))
        x = (sh - dist) * g
        x = x if x < 0.0 else 0.0
        return FT(math.exp(FT(x))) * FT(sc)

    @dev
    def row_consts(shift, scale, xx, idx, i0, n, ty, sh, sc, xi, rr):
        """A thread's rows' shift, scale and squared norm (0, 1, 0 outside the range)."""
        for r in range(rr):
            i = i0 + ty + TY * r
            sh[r] = 0.0
            sc[r] = 1.0
            xi[r] = FT(0.0)
            if i < n:
                ii = idx[i] if idx.shape[0] > 0 else i
                sh[r] = shift[ii]
                sc[r] = scale[ii]
                xi[r] = xx[ii]

    @dev
    def values_tile(acc, xi, zz, zidx, j0, m, i0, n, kind, g, coef0, degree, sh, sc, sK, ty,
                    tx, rr, rc):
        """Write the tile's kernel values to ``sK`` (zero outside the matrix)."""
        for c in range(rc):
            j = j0 + tx + TX * c
            zj = FT(0.0)
            if j < m:
                zj = zz[zidx[j] if zidx.shape[0] > 0 else j]
            for r in range(rr):
                v = FT(0.0)
                if j < m and i0 + ty + TY * r < n:
                    v = value(acc[r * rc + c], xi[r], zj, kind, g, coef0, degree, sh[r],
                              sc[r])
                sK[ty + TY * r, tx + TX * c] = v

    @dev
    def load_operand(dst, V, r0, nr, c0, nc):
        """``dst[t, c] = V[r0 + t, c0 + c]`` (zero outside ``r0 + t < nr``, ``c0 + c < nc``)."""
        rows = dst.shape[0]
        cols = dst.shape[1]
        tid = cuda.threadIdx.x
        for e in range(tid, rows * cols, NT):
            t = e // cols
            c = e - t * cols
            v = FT(0.0)
            if r0 + t < nr and c0 + c < nc:
                v = V[r0 + t, c0 + c]
            dst[t, c] = v

    @cuda.jit
    def row_pass(X, Z, xx, zz, noidx, a, b, d, kind, g, coef0, degree, shift, scale, Om, Y):
        """``Y[i - a] = G[i] @ Om`` for the rows ``[a, b)``; block (row tile, column chunk).

        Each thread owns RR rows by ``cy`` columns of ``Y``: a tile's products are summed
        in the compute type, then added to float64 accumulators, tile after tile in order.
        """
        sX = cuda.shared.array((TR, DC1), FT)
        sZ = cuda.shared.array((TC, DC1), FT)
        sK = cuda.shared.array((TR, TC1), FT)
        sO = cuda.shared.array((TC, KC), FT)
        acc = cuda.local.array(NRC, FT)
        ra = cuda.local.array(RR, FT)
        rb = cuda.local.array(RC, FT)
        ob = cuda.local.array(cy, FT)
        part = cuda.local.array(NRY, FT)
        tot = cuda.local.array(NRY, F8)
        sh = cuda.local.array(RR, F8)
        sc = cuda.local.array(RR, F8)
        xi = cuda.local.array(RR, FT)
        tid = cuda.threadIdx.x
        ty = (tid >> TXB) & (TY - 1)  # masks: provably non-negative, no index wraparound
        tx = tid & (TX - 1)
        i0 = a + cuda.blockIdx.x * TR
        kc0 = cuda.blockIdx.y * KC
        m = Z.shape[0]
        k = Om.shape[1]
        row_consts(shift, scale, xx, noidx, i0, b, ty, sh, sc, xi, RR)
        for q in range(RR * cy):
            tot[q] = 0.0
        for j0 in range(0, m, TC):
            load_operand(sO, Om, j0, m, kc0, k)
            cross(X, Z, noidx, noidx, i0, b, j0, m, d, sX, sZ, acc, ra, rb, ty, tx, tid,
                  j0 == 0, True, RR, RC)
            values_tile(acc, xi, zz, noidx, j0, m, i0, b, kind, g, coef0, degree, sh, sc, sK,
                        ty, tx, RR, RC)
            cuda.syncthreads()
            mac(sK, sO, TC, part, ra, ob, ty, tx, RR, False)
            for q in range(RR * cy):
                tot[q] += F8(part[q])
            cuda.syncthreads()
        for r in range(RR):
            i = i0 + ty + TY * r
            for c in range(cy):
                col = kc0 + tx + TX * c
                if i < b and col < k:
                    Y[i - a, col] = tot[r * cy + c]

    @cuda.jit
    def col_pass(X, Z, xx, zz, noidx, r0, r1, d, kind, g, coef0, degree, shift, scale, Psi,
                 W, Om, Ypart, want_y, first):
        """``W += G[r0:r1].T @ Psi`` (``W =`` when ``first``) and, with ``want_y``, the
        partials of ``G[r0:r1] @ Om``.

        One block per (column tile, operand chunk) owns those rows of ``W`` and walks the
        row tiles of ``[r0, r1)`` in order; ``Ypart[t, i - r0]`` gets ``G[i, tile t] @
        Om[tile t]`` (summed over the tile in the compute type).
        """
        sX = cuda.shared.array((CR, CD1), FT)
        sZ = cuda.shared.array((CC, CD1), FT)
        sK = cuda.shared.array((CR, CC1), FT)
        sP = cuda.shared.array((CR, KC), FT)
        sO = cuda.shared.array((CC, KC), FT)
        acc = cuda.local.array(NCC, FT)
        ra = cuda.local.array(CRR, FT)
        rb = cuda.local.array(CRC, FT)
        wa = cuda.local.array(WR, FT)
        ob = cuda.local.array(cy, FT)
        part = cuda.local.array(NWY, FT)
        tot = cuda.local.array(NWY, F8)
        ypart = cuda.local.array(NCY, FT)
        sh = cuda.local.array(CRR, F8)
        sc = cuda.local.array(CRR, F8)
        xi = cuda.local.array(CRR, FT)
        tid = cuda.threadIdx.x
        ty = (tid >> TXB) & (TY - 1)  # masks: provably non-negative, no index wraparound
        tx = tid & (TX - 1)
        tile = cuda.blockIdx.x
        j0 = tile * CC
        kc0 = cuda.blockIdx.y * KC
        m = Z.shape[0]
        l = Psi.shape[1]
        k = Om.shape[1]
        has_w = kc0 < l
        has_y = want_y and kc0 < k
        if has_y:
            load_operand(sO, Om, j0, m, kc0, k)
        for q in range(WR * cy):
            tot[q] = 0.0
        for i0 in range(r0, r1, CR):
            load_operand(sP, Psi, i0 - r0, r1 - r0, kc0, l)
            row_consts(shift, scale, xx, noidx, i0, r1, ty, sh, sc, xi, CRR)
            cross(X, Z, noidx, noidx, i0, r1, j0, m, d, sX, sZ, acc, ra, rb, ty, tx, tid,
                  True, i0 == r0, CRR, CRC)
            values_tile(acc, xi, zz, noidx, j0, m, i0, r1, kind, g, coef0, degree, sh, sc, sK,
                        ty, tx, CRR, CRC)
            cuda.syncthreads()
            if has_w:
                mac(sK, sP, CR, part, wa, ob, ty, tx, WR, True)
                for q in range(WR * cy):
                    tot[q] += F8(part[q])
            if has_y:
                mac(sK, sO, CC, ypart, ra, ob, ty, tx, CRR, False)
                for r in range(CRR):
                    i = i0 + ty + TY * r
                    for c in range(cy):
                        col = kc0 + tx + TX * c
                        if i < r1 and col < k:
                            Ypart[tile, i - r0, col] = ypart[r * cy + c]
            cuda.syncthreads()
        if has_w:
            for r in range(WR):
                j = j0 + ty + TY * r
                for c in range(cy):
                    col = kc0 + tx + TX * c
                    if j < m and col < l:
                        W[j, col] = tot[r * cy + c] if first else W[j, col] + tot[r * cy + c]

    @cuda.jit
    def sum_parts(parts, n, out, off):
        """``out[off + i, c] = parts[0, i, c] + parts[1, i, c] + ...`` (in order) for ``i < n``."""
        e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        k = parts.shape[2]
        if e < n * k:
            i = e // k
            c = e - i * k
            s = 0.0
            for t in range(parts.shape[0]):
                s += F8(parts[t, i, c])
            out[off + i, c] = s

    @cuda.jit
    def row_stats(X, Z, xx, zz, noidx, a, b, d, kind, g, shift, rsum, rsq):
        """SNE/t row statistics of rows ``[a, b)``: smallest distance, sum and sum of squares.

        Thread ``r < TR`` owns row ``i0 + r``. SNE streams a log-sum-exp: when a tile lowers
        the row's minimum, the sums so far are rescaled, so no term exceeds 1. Sums are
        float64, in column order.
        """
        sX = cuda.shared.array((TR, DC1), FT)
        sZ = cuda.shared.array((TC, DC1), FT)
        sV = cuda.shared.array((TR, TC1), F8)
        sM = cuda.shared.array(TR, F8)
        acc = cuda.local.array(NRC, FT)
        ra = cuda.local.array(RR, FT)
        rb = cuda.local.array(RC, FT)
        xi = cuda.local.array(RR, FT)
        tid = cuda.threadIdx.x
        ty = (tid >> TXB) & (TY - 1)  # masks: provably non-negative, no index wraparound
        tx = tid & (TX - 1)
        i0 = a + cuda.blockIdx.x * TR
        m = Z.shape[0]
        own = tid < TR and i0 + tid < b
        mn = 0.0
        s = 0.0
        s2 = 0.0
        for r in range(RR):
            i = i0 + ty + TY * r
            xi[r] = xx[i] if i < b else FT(0.0)
        for j0 in range(0, m, TC):
            cross(X, Z, noidx, noidx, i0, b, j0, m, d, sX, sZ, acc, ra, rb, ty, tx, tid,
                  j0 == 0, True, RR, RC)
            for c in range(RC):
                j = j0 + tx + TX * c
                for r in range(RR):
                    v = _BIG
                    if j < m and i0 + ty + TY * r < b:
                        v = F8(distance(acc[r * RC + c], xi[r], zz[j]))
                    sV[ty + TY * r, tx + TX * c] = v
            cuda.syncthreads()
            if tid < TR:
                if kind == SNE and own:
                    lo = _BIG
                    for c in range(TC):
                        lo = min(lo, sV[tid, c])
                    if j0 == 0:
                        mn = lo
                    elif lo < mn:
                        f = math.exp((lo - mn) * g)
                        s *= f
                        s2 *= f * f
                        mn = lo
                sM[tid] = mn
            cuda.syncthreads()
            for c in range(RC):
                j = j0 + tx + TX * c
                for r in range(RR):
                    row = ty + TY * r
                    v = 0.0
                    if j < m and i0 + row < b:
                        dist = sV[row, tx + TX * c]
                        if kind == T:
                            v = 1.0 / (1.0 + dist * g)
                        else:
                            x = (sM[row] - dist) * g
                            x = x if x < 0.0 else 0.0
                            v = F8(FT(math.exp(FT(x))))
                    sV[row, tx + TX * c] = v
            cuda.syncthreads()
            if own:
                for c in range(TC):
                    v = sV[tid, c]
                    s += v
                    s2 += v * v
            cuda.syncthreads()
        if own:
            shift[i0 + tid - a] = mn
            rsum[i0 + tid - a] = s
            rsq[i0 + tid - a] = s2

    @cuda.jit
    def center_stats(X, Z, xx, zz, noidx, r0, r1, d, kind, g, coef0, degree, shift, scale,
                     rowpart, colsum, colsq):
        """Centring sums of rows ``[r0, r1)``: ``rowpart[t, i - r0]`` (row sums over column
        tile t), and ``colsum``, ``colsq`` (column sums and sums of squares) added to.

        One block per column tile; thread ``c < CC`` owns column ``j0 + c``, threads
        ``CC <= tid < CC + CR`` own the tile's rows; float64 sums in a fixed order.
        """
        sX = cuda.shared.array((CR, CD1), FT)
        sZ = cuda.shared.array((CC, CD1), FT)
        sK = cuda.shared.array((CR, CC1), FT)
        acc = cuda.local.array(NCC, FT)
        ra = cuda.local.array(CRR, FT)
        rb = cuda.local.array(CRC, FT)
        sh = cuda.local.array(CRR, F8)
        sc = cuda.local.array(CRR, F8)
        xi = cuda.local.array(CRR, FT)
        tid = cuda.threadIdx.x
        ty = (tid >> TXB) & (TY - 1)  # masks: provably non-negative, no index wraparound
        tx = tid & (TX - 1)
        tile = cuda.blockIdx.x
        j0 = tile * CC
        m = Z.shape[0]
        j = j0 + tid
        s = 0.0
        s2 = 0.0
        for i0 in range(r0, r1, CR):
            row_consts(shift, scale, xx, noidx, i0, r1, ty, sh, sc, xi, CRR)
            cross(X, Z, noidx, noidx, i0, r1, j0, m, d, sX, sZ, acc, ra, rb, ty, tx, tid,
                  True, i0 == r0, CRR, CRC)
            values_tile(acc, xi, zz, noidx, j0, m, i0, r1, kind, g, coef0, degree, sh, sc, sK,
                        ty, tx, CRR, CRC)
            cuda.syncthreads()
            if tid < CC:
                for t in range(CR):
                    v = F8(sK[t, tid])
                    s += v
                    s2 += v * v
            elif tid < CC + CR:
                r = tid - CC
                if i0 + r < r1:
                    rs = 0.0
                    for t in range(CC):
                        rs += F8(sK[r, t])
                    rowpart[tile, i0 + r - r0, 0] = rs
            cuda.syncthreads()
        if tid < CC and j < m:
            colsum[j] += s
            colsq[j] += s2

    @cuda.jit
    def fill(X, Z, xx, zz, ridx, cidx, n, m, d, kind, g, coef0, degree, shift, scale, rmean,
             cmean, gmean, center, out):
        """``out[r, c] = G[row(r), col(c)]`` (centred when ``center``); one block per tile.

        ``row(r) = ridx[r]`` (or ``r`` when ``ridx`` is empty), likewise for columns.
        """
        sX = cuda.shared.array((TR, DC1), FT)
        sZ = cuda.shared.array((TC, DC1), FT)
        sK = cuda.shared.array((TR, TC1), FT)
        acc = cuda.local.array(NRC, FT)
        ra = cuda.local.array(RR, FT)
        rb = cuda.local.array(RC, FT)
        sh = cuda.local.array(RR, F8)
        sc = cuda.local.array(RR, F8)
        xi = cuda.local.array(RR, FT)
        tid = cuda.threadIdx.x
        ty = (tid >> TXB) & (TY - 1)  # masks: provably non-negative, no index wraparound
        tx = tid & (TX - 1)
        n_ct = (m + TC - 1) // TC  # a 1-d grid over (row tile, column tile): no y limit
        i0 = (cuda.blockIdx.x // n_ct) * TR
        j0 = (cuda.blockIdx.x % n_ct) * TC
        row_consts(shift, scale, xx, ridx, i0, n, ty, sh, sc, xi, RR)
        cross(X, Z, ridx, cidx, i0, n, j0, m, d, sX, sZ, acc, ra, rb, ty, tx, tid, True, True,
              RR, RC)
        values_tile(acc, xi, zz, cidx, j0, m, i0, n, kind, g, coef0, degree, sh, sc, sK, ty,
                    tx, RR, RC)
        for r in range(RR):
            i = i0 + ty + TY * r
            if i < n:
                ii = ridx[i] if ridx.shape[0] > 0 else i
                ri = rmean[ii] - gmean
                for c in range(RC):
                    j = j0 + tx + TX * c
                    if j < m:
                        v = F8(sK[ty + TY * r, tx + TX * c])
                        if center:
                            jj = cidx[j] if cidx.shape[0] > 0 else j
                            v = v - ri - cmean[jj]
                        out[i, j] = FT(v)

    return {"row_pass": row_pass, "col_pass": col_pass, "sum_parts": sum_parts,
            "row_stats": row_stats, "center_stats": center_stats, "fill": fill}


_KERNELS = {}


def kernel_signatures(dtype):
    """``{name: argument types}`` of the kernels for storage ``dtype``, as the passes call them.

    For compiling them ahead of time without a GPU (``cuda.compile_ptx``; see
    ``benchmarks/scripts/bench_gpu.py --ptx``).
    """
    from numba import types as nt

    ft = numba.from_dtype(np.dtype(dtype))
    i8, f8, b1 = nt.int64, nt.float64, nt.boolean
    A1, A2, A3 = (nt.Array(ft, n, "C") for n in (1, 2, 3))
    D1, D2, D3 = (nt.Array(f8, n, "C") for n in (1, 2, 3))
    I1 = nt.Array(i8, 1, "C")
    pts = (A2, A2, A1, A1, I1)
    prm = (i8, i8, i8, i8, f8, f8, f8)  # range, d, kind, inv_g2, coef0, degree
    return {
        "row_pass": (*pts, *prm, D1, D1, A2, D2),
        "col_pass": (*pts, *prm, D1, D1, nt.Array(ft, 2, "A"), D2, A2, A3, b1, b1),
        "sum_parts": (A3, i8, D2, i8),
        "sum_parts_f8": (D3, i8, D2, i8),
        "row_stats": (*pts, i8, i8, i8, i8, f8, D1, D1, D1),
        "center_stats": (*pts, *prm, D1, D1, D3, D1, D1),
        "fill": (A2, A2, A1, A1, I1, I1, i8, i8, i8, i8, f8, f8, f8, D1, D1, D1, D1, f8, b1,
                 A2),
    }


def kernels(dtype, cy=1):
    key = (np.dtype(dtype), int(cy))
    if key not in _KERNELS:
        _KERNELS[key] = _build(key[0], key[1])
    return _KERNELS[key]
