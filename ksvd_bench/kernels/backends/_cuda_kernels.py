"""Device code of the CUDA backend (:mod:`.cuda`): the tile kernels, in Numba CUDA.

Each thread block of ``NT`` threads (a ``TY x TX`` grid, 16 x 8 on a GPU) computes one tile
of ``G`` at a time: it stages its rows of ``X`` and columns of ``Z`` in shared memory, ``d``
in chunks of ``DC``, each thread accumulates the cross products of ``TR/TY`` rows by
``TC/TX`` columns in registers (register blocking: each value loaded from shared memory
feeds several multiply-adds), turns them into kernel values in place and writes them to
shared memory, a slab of columns at a time (:func:`_device_functions`, ``values_tile``);
then the same threads multiply each slab into their outputs, each owning several rows and
several columns of the result, again in registers. The kernels are that tile step inside
the loop each pass needs:

* ``G @ Omega`` alone (:func:`_row_pass`): one block per tile of ``TR`` rows owns those rows
  of the result and walks the column tiles in order.
* ``G.T @ Psi``, or both at once (:func:`_col_pass`): one block per tile of ``TC`` columns
  owns those rows of ``G.T @ Psi`` and walks the row tiles of a band in order; ``G @ Omega``
  is written as one partial per column tile and row, summed over the tiles in order by
  ``sum_parts`` (:func:`_sum_parts`) before the next band, so that buffer stays within a
  byte budget.
* Set-up (:func:`_row_stats`, :func:`_center_stats`) and blocks (:func:`_fill`) use the same
  tiles.

The kernels are built per storage dtype, operand width and :class:`Layout` (:func:`kernels`:
shared and local arrays need constant shapes) and keep to the plain ``cuda.jit`` subset that
both Numba CUDA targets and the CUDA simulator run (shared memory, local arrays,
``syncthreads``; no warp shuffles, no atomics; types from ``cuda.types``, see
:mod:`._cuda_import`). :func:`variants` lists every compiled variant, for compiling them
ahead of time without a GPU (``ksvd_bench.kernels.backends.cuda_kernel_resources``).

Layouts. :data:`GPU_LAYOUT` holds the tile shapes tuned for a GPU, measured on an H200
(``benchmarks/recorded/passes/README.md``): a pass there is bound by the instructions its
warps issue, not by the multiply-adds (ncu: 0.43 instructions issued per scheduler and
cycle at 8 warps per SM; 0.61 at 16, with the multiply-adds 28% of the instructions), so
the float32 passes ask for 4 blocks per SM (launch bounds: at most 128 registers, no
spills) rather than larger register tiles (8 x 8 per thread at 2 blocks per SM was slower),
and staging costs a few instructions per value (whole chunks: plain loads, several in flight
before their stores; no division and unsigned indices). Numba's
simulator runs each CUDA thread as a Python thread, so there (:data:`SIM_LAYOUT`) the same
code runs with 16-thread blocks and small tiles: a tiny test matrix is then cut into several
tiles instead of being padded to one large one, which keeps the simulator tests fast and
still exercises ragged tiles, feature chunks, operand chunks and slabs.

Determinism. Tile shapes are constants, every output has one owner that adds its terms in
a fixed order, and no sum uses atomics: two runs give the same bits.

Precision. float64 storage computes everything in float64, as the CPU backend does.
float32 storage computes cross products, distances, ``exp`` and the partial products of a
group of ``row_group`` tiles (128 terms on the GPU) in float32 (the GPU's fast path), the
exponent ``(shift - d) / gamma^2`` and the t and poly kernels in float64, and adds every
group's partial to the float64 result in global memory (float64 accumulators in registers
would cost a third of the blocks an SM holds); the set-up
sums are float64. Kernel values below float32's range are flushed to zero in float32.
"""

from __future__ import annotations

import collections
import math
import types

import numpy as np

from ._cuda_import import import_cuda, simulated
from .base import LINEAR, POLY, SNE, SOFTMAX, T

__all__ = [
    "Layout",
    "GPU_LAYOUT",
    "SIM_LAYOUT",
    "LAYOUT",
    "TY",
    "TX",
    "NT",
    "CONFIGS",
    "SUM_THREADS",
    "CY_KERNELS",
    "kernels",
    "kernel_signatures",
    "variants",
    "cuda",
]

cuda = import_cuda()  # ImportError / CudaUnavailableError, each saying what is missing

#: A block's thread grid and tiles. ``ty x tx`` threads per block (powers of two; rows of a
#: tile are spread over ``ty``, columns over ``tx``); ``sum_threads``: threads per block of
#: the elementwise partial-sum kernel; ``configs``: ``(TR, TC, DC, CY_MAX, NS, MB)`` per
#: storage dtype and kernel family: a tile of TR rows by TC columns of G, d staged DC at a
#: time, at most ``tx * CY_MAX`` operand columns per block, the tile's values multiplied in
#: NS slabs of ``TC / NS`` columns (a thread's cross products of the whole tile stay in
#: registers; the values go through shared memory one slab at a time, which keeps large
#: tiles within 48 KiB), and launch bounds asking ptxas for MB blocks per SM (0: none).
#: "row": passes owning rows (``G @ Omega``); "col": passes owning columns (no slabs);
#: "setrow", "setcol": the set-up statistics and blocks. ``row_group``: terms of a product
#: that a thread sums in the compute type before it adds them to the float64 result (whole
#: tiles: at least one).
Layout = collections.namedtuple(
    "Layout", ["name", "ty", "tx", "sum_threads", "configs", "row_group"]
)

_F4, _F8 = np.dtype(np.float32), np.dtype(np.float64)
#: The GPU's layout. Static shared memory stays below 48 KiB in every kernel (float32 row
#: pass at cy = 6: 8.5 + 8.5 + 9 + 12 KiB and the rows' constants; column pass, 47.3 KiB).
#: The float32 passes hold 4 x 8 cross products per thread and ask for 4 blocks of 128
#: threads per SM (measured on an H200, see the module docstring).
GPU_LAYOUT = Layout(
    "gpu",
    16,
    8,
    256,
    {
        (_F4, "row"): (64, 64, 32, 6, 2, 4),
        (_F4, "col"): (64, 64, 8, 6, 1, 4),
        (_F8, "row"): (64, 32, 16, 4, 1, 0),
        (_F8, "col"): (32, 32, 16, 4, 1, 0),
        (_F4, "setrow"): (64, 32, 64, 1, 1, 0),
        (_F4, "setcol"): (32, 64, 32, 1, 1, 0),
        (_F8, "setrow"): (64, 32, 16, 1, 1, 0),
        (_F8, "setcol"): (32, 32, 16, 1, 1, 0),
    },
    128,
)
#: The simulator's layout (see the module docstring): the same constraints, small tiles.
#: float32 takes up to 3 operand columns a thread: an operand chunk 12 wide, not a power of
#: two, as on the GPU (48), so :func:`load_operand`'s idle threads run here too.
SIM_LAYOUT = Layout(
    "simulator",
    4,
    4,
    32,
    {
        (_F4, "row"): (8, 8, 8, 3, 2, 0),
        (_F4, "col"): (4, 8, 4, 2, 1, 0),
        (_F8, "row"): (8, 8, 4, 2, 2, 0),
        (_F8, "col"): (4, 8, 4, 2, 1, 0),
        (_F4, "setrow"): (8, 8, 4, 1, 1, 0),
        (_F4, "setcol"): (4, 8, 4, 1, 1, 0),
        (_F8, "setrow"): (8, 8, 4, 1, 1, 0),
        (_F8, "setcol"): (4, 8, 4, 1, 1, 0),
    },
    16,
)
#: the layout of this process: the simulator's under ``NUMBA_ENABLE_CUDASIM=1``
LAYOUT = SIM_LAYOUT if simulated() else GPU_LAYOUT
TY, TX = LAYOUT.ty, LAYOUT.tx
NT = TY * TX
CONFIGS = LAYOUT.configs
SUM_THREADS = LAYOUT.sum_threads
#: the kernels whose code depends on the operand width ``cy`` (the others are built once)
CY_KERNELS = ("row_pass", "col_pass")
#: largest finite float64, the start of a running minimum
_BIG = 1.7976931348623157e308


def _check_layout(layout):
    """Raise if ``layout`` breaks an assumption of the kernels (each named below)."""
    ty, tx = layout.ty, layout.tx
    nt = ty * tx
    if ty & (ty - 1) or tx & (tx - 1):
        raise ValueError(f"layout {layout.name}: ty and tx must be powers of two (masks)")
    for dtype in (_F4, _F8):
        for fam in ("", "set"):
            tr, tc, _, _, ns, _ = layout.configs[(dtype, fam + "row")]
            cr, cc, _, _, cns, _ = layout.configs[(dtype, fam + "col")]
            if tr % ty or tc % tx or cr % ty or cc % tx or cc % ty:
                raise ValueError(f"layout {layout.name}: tiles must split evenly over threads")
            if tc % (ns * tx) or cns != 1:
                raise ValueError(
                    f"layout {layout.name}: row-pass slabs must split the "
                    f"tile's columns evenly over threads; no column-pass slabs"
                )
            for dc, rows in (
                (layout.configs[(dtype, fam + "row")][2], (tr, tc)),
                (layout.configs[(dtype, fam + "col")][2], (cr, cc)),
            ):
                if dc & (dc - 1) or nt % dc or any(r % (nt // dc) for r in rows):
                    raise ValueError(
                        f"layout {layout.name}: DC must be a power of two "
                        f"dividing the threads, and NT / DC divide the tiles"
                    )
        kc = tx * layout.configs[(dtype, "row")][3]
        if 1 << (kc - 1).bit_length() > nt:  # load_operand: a thread per column, rounded up
            raise ValueError(
                f"layout {layout.name}: tx * CY_MAX, rounded up to a power of "
                f"two, exceeds the block's threads"
            )
        tr = layout.configs[(dtype, "setrow")][0]
        cr, cc = layout.configs[(dtype, "setcol")][:2]
        if tr > nt:  # row_stats: thread r < TR owns row r
            raise ValueError(f"layout {layout.name}: TR must not exceed the block's threads")
        if cc + cr > nt:  # center_stats: threads own the columns, then the rows, of a tile
            raise ValueError(f"layout {layout.name}: TC + TR of 'setcol' exceeds the threads")
    return layout


# ----------------------------------------------------------------------- build constants
#: the compile-time constants of one build (shapes of shared and local arrays must be
#: constants): storage type ``FT``, thread grid, both tile configurations of one family
#: (the passes' or the set-up's), operand width
Shape = collections.namedtuple(
    "Shape",
    [
        "FT",
        "F8",
        "TY",
        "TX",
        "NT",
        "TXB",
        "cy",
        "KC",
        "TR",
        "TC",
        "DC",
        "RR",
        "RC",  # "row" tiles and a thread's rows and columns of one
        "NS",
        "SW",
        "SC",  # row pass: slabs of a tile, columns of G and of a thread per slab
        "CR",
        "CC",
        "CD",
        "CRR",
        "CRC",
        "WR",  # "col" tiles; WR: G.T @ Psi rows per thread
        "RG",
        "CG",  # row (col) pass: tiles summed in the compute type before a float64 add
        "LB",
        "CLB",  # launch bounds of the row (col) pass, or None
        "PAD",
        "KPAD",  # columns of padding of the staged points and of the passes' kernel values
    ],
)


def _shape(dtype, cy, layout, family=""):
    # Padding (float32). Rows of an even length let the compiler load two neighbouring
    # features, or two neighbouring kernel values, with one 64-bit shared load (cross-product
    # loop: 87 instructions for 64 multiply-adds, 99 with rows of odd length; sm_90 SASS),
    # and the rows a warp reads still fall in distinct banks. 4 columns in the kernel values
    # leave a warp's stores of a slab (4 rows by 8 columns) in at most 2-way bank conflicts
    # (4-way with 1); 8 (none) spilled the row pass at cy = 6 and took the column pass past
    # 48 KiB. float64 keeps 1 column: 64-bit loads are single already, and pairs took its row
    # pass from 168 to 242 registers.
    ty, tx = layout.ty, layout.tx
    TR, TC, DC, _, NS, MB = layout.configs[(dtype, family + "row")]
    CR, CC, CD, _, _, CMB = layout.configs[(dtype, family + "col")]
    nt = ty * tx
    ft = cuda.types.float32 if dtype == np.float32 else cuda.types.float64
    return Shape(
        FT=ft,
        F8=cuda.types.float64,
        TY=ty,
        TX=tx,
        NT=ty * tx,
        TXB=tx.bit_length() - 1,
        cy=cy,
        KC=tx * cy,
        TR=TR,
        TC=TC,
        DC=DC,
        RR=TR // ty,
        RC=TC // tx,
        NS=NS,
        SW=TC // NS,
        SC=TC // NS // tx,
        CR=CR,
        CC=CC,
        CD=CD,
        CRR=CR // ty,
        CRC=CC // tx,
        WR=CC // ty,
        RG=max(1, layout.row_group // TC),
        CG=max(1, layout.row_group // CR),
        LB=(nt, MB) if MB else None,
        CLB=(nt, CMB) if CMB else None,
        PAD=2 if dtype == np.float32 else 1,
        KPAD=4 if dtype == np.float32 else 1,
    )


# ----------------------------------------------------------------------- device functions
def _device_functions(s):
    """The pieces every kernel shares, for the constants ``s`` (:class:`Shape`)."""
    FT, F8, TY, TX, NT, TXB, cy, KC = s.FT, s.F8, s.TY, s.TX, s.NT, s.TXB, s.cy, s.KC
    PAD = s.PAD
    U8 = cuda.types.uint64
    dev = cuda.jit(device=True, inline="always")

    @dev
    def thread():
        """``(tid, ty, tx)``: the thread's index and its row and column in the block's grid.

        Masks, not division: provably non-negative, so no index wraparound checks.
        """
        tid = cuda.threadIdx.x
        return tid, (tid >> TXB) & (TY - 1), tid & (TX - 1)

    @dev
    def load_points(dst, P, idx, i0, n, c0, d, tid):
        """``dst[r, t] = P[row(i0 + r), c0 + t]`` (zero outside ``i0 + r < n``, ``c0 + t < d``).

        ``row(i) = idx[i]`` when ``idx`` is non-empty (gathered blocks), else ``i``.
        Consecutive threads read consecutive features of a point (coalesced). Each thread
        keeps one feature and walks rows in a counted loop: no division, and the indices
        are unsigned (no negative-index wraparound), so a staged value costs a few
        instructions (it cost about 90 with a flat index).
        """
        nr = dst.shape[0]
        dc = dst.shape[1] - PAD  # PAD columns of padding; a power of two dividing NT
        t = tid & (dc - 1)
        step = NT // dc  # divides nr (_check_layout)
        c = c0 + t
        cu = U8(min(c, d - 1))  # clamped, not branched: every load is in bounds
        last = n - 1
        nq = nr // step
        if idx.shape[0] == 0 and i0 + nr <= n and c0 + dc <= d:
            # a whole chunk (most of them): plain loads, four issued before their stores
            # wait, so that a thread waits for memory once per four values, not per value
            r = tid // dc
            q = 0
            while q + 3 < nq:
                i = U8(i0 + r + step * q)
                v0 = P[i, cu]
                v1 = P[i + U8(step), cu]
                v2 = P[i + U8(2 * step), cu]
                v3 = P[i + U8(3 * step), cu]
                dst[r + step * q, t] = v0
                dst[r + step * (q + 1), t] = v1
                dst[r + step * (q + 2), t] = v2
                dst[r + step * (q + 3), t] = v3
                q += 4
            while q < nq:
                dst[r + step * q, t] = P[U8(i0 + r + step * q), cu]
                q += 1
        elif idx.shape[0] > 0:
            for q in range(nq):
                r = tid // dc + step * q
                i = i0 + r
                v = P[U8(idx[U8(min(i, last))]), cu]
                dst[r, t] = v if c < d and i < n else FT(0.0)
        else:
            for q in range(nq):
                r = tid // dc + step * q
                i = i0 + r
                v = P[U8(min(i, last)), cu]
                dst[r, t] = v if c < d and i < n else FT(0.0)

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
    def mac_step(sA, sB, t, b0, part, ra, ob, ty, tx, rr, transposed):
        """``part[r, c] += A[r, t] * sB[b0 + t, tx + TX c]`` for the thread's rows ``ty + TY r``.

        ``A = sA`` (rows of the tile) or, ``transposed``, ``sA.T`` (columns of the tile).
        """
        for r in range(rr):
            ra[r] = sA[t, ty + TY * r] if transposed else sA[ty + TY * r, t]
        row = U8(b0 + t)  # unsigned: no negative-index wraparound code in the loop
        for c in range(cy):
            ob[c] = sB[row, tx + TX * c]
        for r in range(rr):
            for c in range(cy):
                part[r * cy + c] += ra[r] * ob[c]

    @dev
    def mac(sA, sB, nt, part, ra, ob, ty, tx, rr, transposed, clear=True, b0=0):
        """``part = sum_t A[r, t] * sB[b0 + t, c]`` over ``t < nt`` (compute type, in order);
        ``clear`` False adds to ``part``.

        A plain counted loop, two steps at a time: leaner than ``range`` on the GPU.
        """
        if clear:
            for q in range(rr * cy):
                part[q] = FT(0.0)
        t = 0
        while t + 1 < nt:
            mac_step(sA, sB, t, b0, part, ra, ob, ty, tx, rr, transposed)
            mac_step(sA, sB, t + 1, b0, part, ra, ob, ty, tx, rr, transposed)
            t += 2
        if t < nt:
            mac_step(sA, sB, t, b0, part, ra, ob, ty, tx, rr, transposed)

    @dev
    def cross(
        X, Z, xidx, zidx, i0, n, j0, m, d, sX, sZ, acc, ra, rb, ty, tx, tid, load_x, load_z, rr, rc
    ):
        """``acc[r * rc + c] = x_i . z_j`` for ``i = i0 + ty + TY r``, ``j = j0 + tx + TX c``.

        Sums over the features in order (0, 1, ..., d - 1) whatever the chunking, so every
        pass computes the same bits for the same entry. ``load_x``/``load_z`` False reuses
        the staged points (when ``d <= DC`` and they did not change).
        """
        dc = sX.shape[1] - PAD
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
    def exp_distance(kind, cr, xi, zj):
        """The distance an exp kernel's exponent reads: :func:`distance`, or for softmax
        ``-x.z`` (unclamped: it runs SNE's code with cross products for minus distances)."""
        return -cr if kind == SOFTMAX else distance(cr, xi, zj)

    @dev
    def row_consts(shift, scale, xx, idx, i0, n, tid, sh, sc, xi):
        """The tile's rows' shift, scale and squared norm (0, 1, 0 outside the range), in
        the shared arrays ``sh``, ``sc``, ``xi`` (registers would hold 5 per row: too many
        beside the cross products). The caller syncs before they are read.
        """
        for r in range(tid, sh.shape[0], NT):
            i = i0 + r
            sh[r] = 0.0
            sc[r] = 1.0
            xi[r] = FT(0.0)
            if i < n:
                ii = idx[i] if idx.shape[0] > 0 else i
                sh[r] = shift[ii]
                sc[r] = scale[ii]
                xi[r] = xx[ii]

    @dev
    def values_inplace(
        acc, xi, zz, zidx, j0, m, kind, g, coef0, degree, sh, sc, zj, ty, tx, rr, rc
    ):
        """``acc[r * rc + c]`` (a cross product) becomes the kernel value of its entry.

        As the CPU backend: exp kernels ``exp(min((sh - d) g, 0)) * sc`` (softmax: ``d =
        -cr``), t ``sc / (1 + d g)``, linear ``cr``; the exponent and t in float64. One loop
        per kind, each body small enough that the compiler unrolls it: every index into
        ``acc`` is then a constant, and ``acc`` stays in registers. Poly is left to
        :func:`values_tile` (float64 ``**`` is too long a body to unroll 64 times).
        """
        for c in range(rc):  # clamped loads, not branches: issued together
            j = j0 + tx + TX * c
            jj = U8(min(j, m - 1))
            v = zz[U8(zidx[jj]) if zidx.shape[0] > 0 else jj]
            zj[c] = v if j < m else FT(0.0)
        if kind == T:
            for c in range(rc):
                for r in range(rr):
                    row = ty + TY * r
                    dist = F8(distance(acc[r * rc + c], xi[row], zj[c]))
                    acc[r * rc + c] = FT(sc[row] * (1.0 / (1.0 + dist * g)))
        elif kind == SOFTMAX:  # SNE's loop with -x.z for d: a loop of its own, as small
            for c in range(rc):
                for r in range(rr):
                    row = ty + TY * r
                    x = FT((sh[row] + F8(acc[r * rc + c])) * g)
                    x = x if x < FT(0.0) else FT(0.0)
                    acc[r * rc + c] = FT(math.exp(x)) * FT(sc[row])
        elif kind != LINEAR and kind != POLY:
            for c in range(rc):
                for r in range(rr):
                    row = ty + TY * r
                    x = FT((sh[row] - F8(distance(acc[r * rc + c], xi[row], zj[c]))) * g)
                    x = x if x < FT(0.0) else FT(0.0)  # after the rounding: the same value
                    acc[r * rc + c] = FT(math.exp(x)) * FT(sc[row])

    @dev
    def values_tile(
        acc,
        xi,
        zz,
        zidx,
        j0,
        m,
        i0,
        n,
        kind,
        g,
        coef0,
        degree,
        sh,
        sc,
        zj,
        sK,
        ty,
        tx,
        rr,
        rc,
        c_lo=0,
        nc=-1,
    ):
        """Write the tile's kernel values to ``sK`` (zero outside the matrix): the thread's
        columns ``c_lo <= c < c_lo + nc`` (all ``rc`` when ``nc < 0``) of its cross
        products, column ``tx + TX c`` of the tile to column ``tx + TX (c - c_lo)`` of ``sK``.

        Turns ``acc`` into the values first (:func:`values_inplace`) when ``c_lo == 0``.
        """
        if c_lo == 0:
            values_inplace(
                acc, xi, zz, zidx, j0, m, kind, g, coef0, degree, sh, sc, zj, ty, tx, rr, rc
            )
        c_hi = rc if nc < 0 else c_lo + nc
        for c in range(rc):  # all of them, so that acc's indices are constants (registers)
            if c_lo <= c < c_hi:
                j_ok = j0 + tx + TX * c < m
                for r in range(rr):
                    v = acc[r * rc + c]
                    ok = j_ok and i0 + ty + TY * r < n
                    sK[ty + TY * r, tx + TX * (c - c_lo)] = v if ok else FT(0.0)
        if kind == POLY:  # in place in sK, each thread its own entries: a rolled loop
            ncs = c_hi - c_lo
            for e in range(rr * ncs):
                r = e // ncs
                col = tx + TX * (e - r * ncs)
                if j0 + col + TX * c_lo < m and i0 + ty + TY * r < n:
                    v = sK[ty + TY * r, col]
                    sK[ty + TY * r, col] = FT((F8(v) + coef0) ** degree)

    @dev
    def tile_values(
        X,
        Z,
        zz,
        xidx,
        zidx,
        i0,
        n,
        j0,
        m,
        d,
        kind,
        g,
        coef0,
        degree,
        sh,
        sc,
        xi,
        sX,
        sZ,
        sK,
        acc,
        ra,
        rb,
        ty,
        tx,
        tid,
        load_x,
        load_z,
        rr,
        rc,
    ):
        """The tile step of every pass: ``sK = G[i0:, j0:]`` from the staged points.

        :func:`cross` then :func:`values_tile`; the rows' constants ``sh``, ``sc``, ``xi``
        come from :func:`row_consts`. The caller syncs before reading ``sK``.
        """
        zj = rb  # the columns' squared norms: rb's cross-product role has ended
        cross(
            X,
            Z,
            xidx,
            zidx,
            i0,
            n,
            j0,
            m,
            d,
            sX,
            sZ,
            acc,
            ra,
            rb,
            ty,
            tx,
            tid,
            load_x,
            load_z,
            rr,
            rc,
        )
        values_tile(
            acc, xi, zz, zidx, j0, m, i0, n, kind, g, coef0, degree, sh, sc, zj, sK, ty, tx, rr, rc
        )

    KP = 1 << (KC - 1).bit_length()  # the operand's width rounded up to a power of two
    KPB, KS = KP.bit_length() - 1, NT // KP  # KS: rows a block stages at once (KP <= NT)

    @dev
    def load_operand(dst, V, r0, nr, c0, nc):
        """``dst[t, c] = V[r0 + t, c0 + c]`` for ``c < KC`` (zero outside ``r0 + t < nr``,
        ``c0 + c < nc``).

        Thread ``tid`` keeps column ``tid mod KP`` (idle from KC on) and walks the rows
        ``KS`` apart with unsigned indices: no division, no wraparound code, and on whole
        tiles no clamps. Two loads are issued before their stores (the compiler unrolls
        that to eight in flight; four spilled registers under the row pass's 128). A value
        costs about 5 instructions (about 60 when a flat index was divided by KC; sm_90
        SASS).
        """
        tid = cuda.threadIdx.x
        c = tid & (KP - 1)
        rows = dst.shape[0]
        r = tid >> KPB
        if c >= KC:
            return
        if c0 + c < nc and r0 + rows <= nr:  # a whole tile (most of them): plain loads
            cu = U8(c0 + c)
            while r + KS < rows:
                v0 = V[U8(r0 + r), cu]
                v1 = V[U8(r0 + r + KS), cu]
                dst[U8(r), U8(c)] = v0
                dst[U8(r + KS), U8(c)] = v1
                r += 2 * KS
            while r < rows:
                dst[U8(r), U8(c)] = V[U8(r0 + r), cu]
                r += KS
        else:
            cu = U8(min(c0 + c, nc - 1))
            while r < rows:
                v = V[U8(min(r0 + r, nr - 1)), cu]
                dst[U8(r), U8(c)] = v if c0 + c < nc and r0 + r < nr else FT(0.0)
                r += KS

    @dev
    def store(out, vals, i0, n, off, kc0, k, ty, tx, rr, add):
        """``out[i - off, col] (+)= vals[r, c]`` for the thread's rows ``i = i0 + ty + TY r``
        below ``n`` and columns ``col = kc0 + tx + TX c`` below ``k``."""
        for r in range(rr):
            i = i0 + ty + TY * r
            for c in range(cy):
                col = kc0 + tx + TX * c
                if i < n and col < k:
                    v = vals[r * cy + c]
                    out[i - off, col] = out[i - off, col] + v if add else v

    return types.SimpleNamespace(
        thread=thread,
        cross=cross,
        distance=distance,
        exp_distance=exp_distance,
        row_consts=row_consts,
        values_tile=values_tile,
        tile_values=tile_values,
        load_operand=load_operand,
        mac=mac,
        store=store,
    )


# ----------------------------------------------------------------------- kernels
def _jit(bounds):
    """``cuda.jit``, with launch bounds ``(threads, blocks per SM)`` unless None (the
    simulator takes none: its layouts ask for none)."""
    return cuda.jit if bounds is None else cuda.jit(launch_bounds=bounds)


def _row_pass(s, f):
    FT, F8, TR, TC, KC, RR, RC, cy = s.FT, s.F8, s.TR, s.TC, s.KC, s.RR, s.RC, s.cy
    NS, SW, SC = s.NS, s.SW, s.SC
    DC1, SW1 = s.DC + s.PAD, SW + s.KPAD  # padding: see _shape
    NRC, NRY, RG = RR * RC, RR * cy, s.RG
    thread, row_consts, cross, values_tile = f.thread, f.row_consts, f.cross, f.values_tile
    load_operand, mac, store = f.load_operand, f.mac, f.store

    @_jit(s.LB)
    def row_pass(X, Z, xx, zz, noidx, a, b, d, kind, g, coef0, degree, shift, scale, Om, Y):
        """``Y[i - a] = G[i] @ Om`` for the rows ``[a, b)``; block (row tile, column chunk).

        Each thread holds the cross products of RR rows by RC columns of a tile and owns RR
        rows by ``cy`` columns of ``Y``. The tile's values go through shared memory in NS
        slabs of SW columns, each multiplied into the products at once; the products of
        ``RG`` tiles are summed in the compute type, then added to ``Y`` (float64, in
        global memory), group after group in order. No float64 accumulators in registers:
        they would halve the blocks an SM holds.
        """
        sX = cuda.shared.array((TR, DC1), FT)
        sZ = cuda.shared.array((TC, DC1), FT)
        sK = cuda.shared.array((TR, SW1), FT)
        sO = cuda.shared.array((TC, KC), FT)
        acc = cuda.local.array(NRC, FT)
        ra = cuda.local.array(RR, FT)
        rb = cuda.local.array(RC, FT)
        ob = cuda.local.array(cy, FT)
        part = cuda.local.array(NRY, FT)
        sh = cuda.shared.array(TR, F8)
        sc = cuda.shared.array(TR, F8)
        xi = cuda.shared.array(TR, FT)
        tid, ty, tx = thread()
        i0 = a + cuda.blockIdx.x * TR
        kc0 = cuda.blockIdx.y * KC
        m = Z.shape[0]
        k = Om.shape[1]
        row_consts(shift, scale, xx, noidx, i0, b, tid, sh, sc, xi)
        n_tiles = (m + TC - 1) // TC
        for t in range(n_tiles):
            j0 = t * TC
            load_operand(sO, Om, j0, m, kc0, k)
            cross(
                X,
                Z,
                noidx,
                noidx,
                i0,
                b,
                j0,
                m,
                d,
                sX,
                sZ,
                acc,
                ra,
                rb,
                ty,
                tx,
                tid,
                t == 0,
                True,
                RR,
                RC,
            )
            for h in range(NS):
                values_tile(
                    acc,
                    xi,
                    zz,
                    noidx,
                    j0,
                    m,
                    i0,
                    b,
                    kind,
                    g,
                    coef0,
                    degree,
                    sh,
                    sc,
                    rb,
                    sK,
                    ty,
                    tx,
                    RR,
                    RC,
                    h * SC,
                    SC,
                )
                cuda.syncthreads()
                mac(sK, sO, SW, part, ra, ob, ty, tx, RR, False, t % RG == 0 and h == 0, h * SW)
                cuda.syncthreads()
            if t % RG == RG - 1 or t == n_tiles - 1:
                store(Y, part, i0, b, a, kc0, k, ty, tx, RR, t >= RG)

    return row_pass


def _col_pass(s, f):
    FT, F8, CR, CC, KC, CRR, CRC, WR, cy = (s.FT, s.F8, s.CR, s.CC, s.KC, s.CRR, s.CRC, s.WR, s.cy)
    CD1, CC1 = s.CD + s.PAD, CC + s.KPAD  # padding: see _shape
    NCC, NCY, NWY, RG = CRR * CRC, CRR * cy, WR * cy, s.CG
    thread, row_consts, tile_values = f.thread, f.row_consts, f.tile_values
    load_operand, mac, store = f.load_operand, f.mac, f.store

    @_jit(s.CLB)
    def col_pass(
        X,
        Z,
        xx,
        zz,
        noidx,
        r0,
        r1,
        d,
        kind,
        g,
        coef0,
        degree,
        shift,
        scale,
        Psi,
        W,
        Om,
        Ypart,
        want_y,
        first,
    ):
        """``W += G[r0:r1].T @ Psi`` (``W =`` when ``first``) and, with ``want_y``, the
        partials of ``G[r0:r1] @ Om``.

        One block per (column tile, operand chunk) owns those rows of ``W`` and walks the
        row tiles of ``[r0, r1)`` in order, summing the products of ``RG`` row tiles in the
        compute type before adding them to ``W`` (float64, in global memory, as the row
        pass); ``Ypart[t, i - r0]`` gets ``G[i, tile t] @ Om[tile t]`` (summed over the
        tile in the compute type).
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
        ypart = cuda.local.array(NCY, FT)
        sh = cuda.shared.array(CR, F8)
        sc = cuda.shared.array(CR, F8)
        xi = cuda.shared.array(CR, FT)
        tid, ty, tx = thread()
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
        n_tiles = (r1 - r0 + CR - 1) // CR
        for t in range(n_tiles):
            i0 = r0 + t * CR
            load_operand(sP, Psi, i0 - r0, r1 - r0, kc0, l)
            row_consts(shift, scale, xx, noidx, i0, r1, tid, sh, sc, xi)
            tile_values(
                X,
                Z,
                zz,
                noidx,
                noidx,
                i0,
                r1,
                j0,
                m,
                d,
                kind,
                g,
                coef0,
                degree,
                sh,
                sc,
                xi,
                sX,
                sZ,
                sK,
                acc,
                ra,
                rb,
                ty,
                tx,
                tid,
                True,
                t == 0,
                CRR,
                CRC,
            )
            cuda.syncthreads()
            if has_w:
                mac(sK, sP, CR, part, wa, ob, ty, tx, WR, True, t % RG == 0)
                if t % RG == RG - 1 or t == n_tiles - 1:
                    store(W, part, j0, m, 0, kc0, l, ty, tx, WR, t >= RG or not first)
            if has_y:
                mac(sK, sO, CC, ypart, ra, ob, ty, tx, CRR, False)
                store(Ypart[tile], ypart, i0, r1, r0, kc0, k, ty, tx, CRR, False)
            cuda.syncthreads()

    return col_pass


def _sum_parts(s, f):
    F8 = s.F8

    @cuda.jit
    def sum_parts(parts, n, out, off):
        """``out[off + i, c] = parts[0, i, c] + parts[1, i, c] + ...`` (in order) for ``i < n``."""
        e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        k = parts.shape[2]
        if e < n * k:
            i = e // k
            c = e - i * k
            acc = 0.0
            for t in range(parts.shape[0]):
                acc += F8(parts[t, i, c])
            out[off + i, c] = acc

    return sum_parts


def _row_stats(s, f):
    FT, F8, TY, TX, TR, TC, RR, RC = s.FT, s.F8, s.TY, s.TX, s.TR, s.TC, s.RR, s.RC
    DC1, TC1 = s.DC + s.PAD, TC + 1
    NRC = RR * RC
    thread, cross, exp_distance = f.thread, f.cross, f.exp_distance

    @cuda.jit
    def row_stats(X, Z, xx, zz, noidx, a, b, d, kind, g, shift, rsum, rsq):
        """SNE/t/softmax row statistics of rows ``[a, b)``: smallest distance (softmax: minus
        the largest cross product), sum and sum of squares.

        Thread ``r < TR`` owns row ``i0 + r``. SNE and softmax stream a log-sum-exp: when a
        tile lowers the row's minimum, the sums so far are rescaled, so no term exceeds 1. Sums are
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
        tid, ty, tx = thread()
        i0 = a + cuda.blockIdx.x * TR
        m = Z.shape[0]
        own = tid < TR and i0 + tid < b
        mn = 0.0
        s1 = 0.0
        s2 = 0.0
        for r in range(RR):
            i = i0 + ty + TY * r
            xi[r] = xx[i] if i < b else FT(0.0)
        for j0 in range(0, m, TC):
            cross(
                X,
                Z,
                noidx,
                noidx,
                i0,
                b,
                j0,
                m,
                d,
                sX,
                sZ,
                acc,
                ra,
                rb,
                ty,
                tx,
                tid,
                j0 == 0,
                True,
                RR,
                RC,
            )
            for c in range(RC):
                j = j0 + tx + TX * c
                for r in range(RR):
                    v = _BIG
                    if j < m and i0 + ty + TY * r < b:
                        v = F8(exp_distance(kind, acc[r * RC + c], xi[r], zz[j]))
                    sV[ty + TY * r, tx + TX * c] = v
            cuda.syncthreads()
            if tid < TR:
                if (kind == SNE or kind == SOFTMAX) and own:
                    lo = _BIG
                    for c in range(TC):
                        lo = min(lo, sV[tid, c])
                    if j0 == 0:
                        mn = lo
                    elif lo < mn:
                        w = math.exp((lo - mn) * g)
                        s1 *= w
                        s2 *= w * w
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
                    s1 += v
                    s2 += v * v
            cuda.syncthreads()
        if own:
            shift[i0 + tid - a] = mn
            rsum[i0 + tid - a] = s1
            rsq[i0 + tid - a] = s2

    return row_stats


def _center_stats(s, f):
    FT, F8, CR, CC, CRR, CRC = s.FT, s.F8, s.CR, s.CC, s.CRR, s.CRC
    CD1, CC1 = s.CD + s.PAD, CC + 1
    NCC = CRR * CRC
    thread, row_consts, tile_values = f.thread, f.row_consts, f.tile_values

    @cuda.jit
    def center_stats(
        X, Z, xx, zz, noidx, r0, r1, d, kind, g, coef0, degree, shift, scale, rowpart, colsum, colsq
    ):
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
        sh = cuda.shared.array(CR, F8)
        sc = cuda.shared.array(CR, F8)
        xi = cuda.shared.array(CR, FT)
        tid, ty, tx = thread()
        tile = cuda.blockIdx.x
        j0 = tile * CC
        m = Z.shape[0]
        j = j0 + tid
        s1 = 0.0
        s2 = 0.0
        for i0 in range(r0, r1, CR):
            row_consts(shift, scale, xx, noidx, i0, r1, tid, sh, sc, xi)
            tile_values(
                X,
                Z,
                zz,
                noidx,
                noidx,
                i0,
                r1,
                j0,
                m,
                d,
                kind,
                g,
                coef0,
                degree,
                sh,
                sc,
                xi,
                sX,
                sZ,
                sK,
                acc,
                ra,
                rb,
                ty,
                tx,
                tid,
                True,
                i0 == r0,
                CRR,
                CRC,
            )
            cuda.syncthreads()
            if tid < CC:
                for t in range(CR):
                    v = F8(sK[t, tid])
                    s1 += v
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
            colsum[j] += s1
            colsq[j] += s2

    return center_stats


def _fill(s, f):
    FT, F8, TY, TX, TR, TC, RR, RC = s.FT, s.F8, s.TY, s.TX, s.TR, s.TC, s.RR, s.RC
    DC1, TC1 = s.DC + s.PAD, TC + 1
    NRC = RR * RC
    thread, row_consts, tile_values = f.thread, f.row_consts, f.tile_values

    @cuda.jit
    def fill(
        X,
        Z,
        xx,
        zz,
        ridx,
        cidx,
        n,
        m,
        d,
        kind,
        g,
        coef0,
        degree,
        shift,
        scale,
        rmean,
        cmean,
        gmean,
        center,
        out,
    ):
        """``out[r, c] = G[row(r), col(c)]`` (centred when ``center``); one block per tile.

        ``row(r) = ridx[r]`` (or ``r`` when ``ridx`` is empty), likewise for columns.
        """
        sX = cuda.shared.array((TR, DC1), FT)
        sZ = cuda.shared.array((TC, DC1), FT)
        sK = cuda.shared.array((TR, TC1), FT)
        acc = cuda.local.array(NRC, FT)
        ra = cuda.local.array(RR, FT)
        rb = cuda.local.array(RC, FT)
        sh = cuda.shared.array(TR, F8)
        sc = cuda.shared.array(TR, F8)
        xi = cuda.shared.array(TR, FT)
        tid, ty, tx = thread()
        n_ct = (m + TC - 1) // TC  # a 1-d grid over (row tile, column tile): no y limit
        i0 = (cuda.blockIdx.x // n_ct) * TR
        j0 = (cuda.blockIdx.x % n_ct) * TC
        row_consts(shift, scale, xx, ridx, i0, n, tid, sh, sc, xi)
        tile_values(
            X,
            Z,
            zz,
            ridx,
            cidx,
            i0,
            n,
            j0,
            m,
            d,
            kind,
            g,
            coef0,
            degree,
            sh,
            sc,
            xi,
            sX,
            sZ,
            sK,
            acc,
            ra,
            rb,
            ty,
            tx,
            tid,
            True,
            True,
            RR,
            RC,
        )
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

    return fill


#: ``{name: builder}``: each builder makes its kernel from the constants and the device
#: functions of one build
_BUILDERS = {
    "row_pass": _row_pass,
    "col_pass": _col_pass,
    "sum_parts": _sum_parts,
    "row_stats": _row_stats,
    "center_stats": _center_stats,
    "fill": _fill,
}
_KERNELS = {}
#: the kernels built from the passes' tiles and from the set-up's ("set" configurations)
_PASSES = ("row_pass", "col_pass", "sum_parts")
_SETUP = ("row_stats", "center_stats", "fill")


def kernels(dtype, cy=1, layout=None):
    """``{name: kernel}`` for storage ``dtype`` whose passes handle ``tx * cy`` operand
    columns, in ``layout`` (default: this process's :data:`LAYOUT`).

    Built on first use, once per ``(dtype, cy, layout)``: shared and local arrays need
    their shapes and dtype as constants.
    """
    layout = LAYOUT if layout is None else layout
    key = (np.dtype(dtype), int(cy), layout.name)
    if key not in _KERNELS:
        _check_layout(layout)
        built = {}
        for family, names in (("", _PASSES), ("set", _SETUP)):
            s = _shape(key[0], key[1], layout, family)
            f = _device_functions(s)
            built.update({name: _BUILDERS[name](s, f) for name in names})
        _KERNELS[key] = built
    return _KERNELS[key]


def kernel_signatures(dtype):
    """``{name: argument types}`` of the kernels for storage ``dtype``, as the passes call them.

    ``sum_parts`` has two: float32 partials of ``G @ Omega`` (``sum_parts``) and the float64
    row sums of the centring set-up (``sum_parts_f8``).
    """
    nt = cuda.types
    ft = nt.float32 if np.dtype(dtype) == np.float32 else nt.float64
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
        "fill": (A2, A2, A1, A1, I1, I1, i8, i8, i8, i8, f8, f8, f8, D1, D1, D1, D1, f8, b1, A2),
    }


def variants(layout=GPU_LAYOUT):
    """Every kernel variant the backend can launch in ``layout``: ``(name, dtype, cy,
    python function, argument types, launch bounds)``.

    The kernels of :data:`CY_KERNELS` for every operand width ``cy = 1 .. CY_MAX`` of the
    "row" configuration, the others once (``cy = 1``), in both storage dtypes.
    """
    out = []
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        sigs = kernel_signatures(dtype)
        for cy in range(1, layout.configs[(dtype, "row")][3] + 1):
            built = kernels(dtype, cy, layout)
            for name, sig in sigs.items():
                base = name.removesuffix("_f8")
                if cy == 1 or base in CY_KERNELS:
                    kernel = built[base]
                    out.append(
                        (
                            name,
                            dtype,
                            cy,
                            kernel.py_func,
                            sig,
                            kernel.targetoptions.get("launch_bounds"),
                        )
                    )
    return out
