"""The CUDA backend: the lazy kernel passes on one GPU (Numba CUDA), ``G`` never stored.

:class:`CudaBackend` keeps the stored points ``X`` (N, d) and ``Z`` (M, d), their squared
norms and the per-row constants on the GPU for the source's life, and runs the three hooks
of :mod:`.base` there: the set-up statistics, the products ``G[a:b] @ Omega`` and
``G[a:b].T @ Psi`` (both from one pass over the tiles), and blocks of ``G``. Operands come
in and results go out as numpy arrays. The kernels (tiles, register blocking, reduction
order, precision) are in :mod:`._cuda_kernels`; the CUDA target is imported in
:mod:`._cuda_import` only, and this module's import fails with its clear error where no GPU
(or the simulator) is usable.

Deterministic: every output has one owner that adds its terms in a fixed order, and no sum
uses atomics, so two runs give the same bits. Results agree with the CPU backend to about
1e-6 relative in float32 (the GPU computes the kernel values in float32, see
:mod:`._cuda_kernels`) and 1e-13 in float64.

Memory. The GPU holds ``X``, ``Z`` and their norms, four (N,) or (M,) float64 vectors of
per-row and per-column constants, a pass's operands (in the storage dtype) and float64
results, and the partials of a two-sided pass (at most ``GPU_BUDGET_FACTOR * chunk_bytes``,
256 MiB by default): O((N + M)(d + k)), never ``G`` (unless asked for all of it: ``dense``).
For N = M = 1e6, d = 64, k = l = 40 in float32: 512 MB of points, 40 MB of norms and
constants, 320 MB of operands, 640 MB of results and 268 MB of partials, about 1.8 GB,
where ``G`` itself would take 4 TB.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import scipy.sparse as sp

from ._cuda_import import load_cuda
from ._cuda_kernels import CONFIGS, NT, SUM_THREADS, TX, kernels
from .base import Backend

__all__ = ["CudaBackend", "CONFIGS", "GPU_BUDGET_FACTOR"]

cuda = load_cuda()  # ImportError / CudaUnavailableError, each saying what is missing

#: the partials of a two-sided pass may take this many times the source's ``chunk_bytes``
#: (a GPU has room, and fewer, longer launches fill it better)
GPU_BUDGET_FACTOR = 8


def _ceil_div(a, b):
    return -(-a // b)


# ----------------------------------------------------------------------- host side
def _quiet(hook):
    """Run a hook without Numba's low-occupancy warnings (small grids of small blocks).

    A small ``block`` or set-up is a small grid by nature; its warning would count among
    the warnings of the solver's answer (``ksvd_bench.driver``) and say nothing about it.
    """

    @functools.wraps(hook)
    def run(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore",
                message=r"Grid size \d+ will likely result in "
                r"GPU under-utilization",
            )
            return hook(*args, **kwargs)

    return run


class CudaBackend(Backend):
    """The lazy kernel passes on one GPU (see the module docstring).

    Parameters are those of :class:`~.base.Backend`; ``X`` and ``Z`` must be dense.
    ``chunk_bytes`` bounds the partials of a two-sided pass (times
    :data:`GPU_BUDGET_FACTOR`); tiles are constants of the storage dtype
    (:data:`CONFIGS`).

    Raises
    ------
    ValueError
        Sparse points (not supported on the GPU: densify them or use ``device="cpu"``).
    """

    name = "cuda"

    def __init__(self, X, Z, xx, zz, params, chunk_bytes):
        if sp.issparse(X) or sp.issparse(Z):
            raise ValueError(
                "device='cuda' needs dense points: X and Z (or A) must not be "
                "scipy sparse matrices (densify them with .toarray(), or use "
                "device='cpu')"
            )
        super().__init__(X, Z, xx, zz, params, chunk_bytes)
        self.tiles = CONFIGS[(self.dtype, "row")][:2]
        self._budget = GPU_BUDGET_FACTOR * self.chunk_bytes
        self._dX = cuda.to_device(np.ascontiguousarray(X, dtype=self.dtype))
        self._dZ = cuda.to_device(np.ascontiguousarray(Z, dtype=self.dtype))
        self._dxx = cuda.to_device(np.ascontiguousarray(xx, dtype=self.dtype))
        self._dzz = cuda.to_device(np.ascontiguousarray(zz, dtype=self.dtype))
        self._noidx = cuda.to_device(np.empty(0, dtype=np.int64))
        self._cache = {}

    # -------------------------------------------------------------- helpers
    def __reduce__(self):
        # device arrays do not pickle: a copy re-uploads the points (on a GPU there)
        return _rebuild, (
            self._dX.copy_to_host(),
            self._dZ.copy_to_host(),
            self.xx,
            self.zz,
            self.params,
            self.chunk_bytes,
        )

    def _const(self, name, host):
        """Device copy of a per-row or per-column constant, uploaded again only if changed."""
        host = np.ascontiguousarray(host, dtype=np.float64)
        hit = self._cache.get(name)
        if hit is not None and hit[0].shape == host.shape and np.array_equal(hit[0], host):
            return hit[1]
        dev = cuda.to_device(host)
        self._cache[name] = (host.copy(), dev)
        return dev

    def _operand(self, V):
        """An operand on the GPU in the storage dtype (the compute type of the products)."""
        return cuda.to_device(np.ascontiguousarray(V, dtype=self.dtype))

    def _args(self):
        return (self._dX, self._dZ, self._dxx, self._dzz, self._noidx)

    def _band(self, n_tiles, k, itemsize, rows):
        """Rows of one band of a column-owning pass: its partials fit the budget."""
        tr = CONFIGS[(self.dtype, "col")][0]
        band = self._budget // (itemsize * n_tiles * max(k, 1))
        return max(1, min(rows, max(tr, band // tr * tr)))

    # -------------------------------------------------------------- hooks
    @_quiet
    def setup_rows(self, a, b, normalised, center):
        """Set-up statistics of rows ``[a, b)`` (see :mod:`.base`)."""
        n, m = self.shape
        p = self.params
        d = self.n_features
        shift = np.zeros(b - a)
        scale = np.ones(b - a)
        part = {"rows": (a, b), "rowsum": None, "colsum": None, "sumsq": None}
        if normalised and b > a:
            K = kernels(self.dtype)
            tr = CONFIGS[(self.dtype, "setrow")][0]
            dsh = cuda.device_array(b - a, np.float64)
            drs = cuda.device_array(b - a, np.float64)
            drq = cuda.device_array(b - a, np.float64)
            K["row_stats"][_ceil_div(b - a, tr), NT](
                *self._args(), a, b, d, p.kind, p.inv_g2, dsh, drs, drq
            )
            shift = dsh.copy_to_host()
            rsq = drq.copy_to_host()
            scale = 1.0 / drs.copy_to_host()
            part["sumsq"] = float(np.sum(rsq * scale**2))
        if center:
            full_shift = np.zeros(n)
            full_scale = np.ones(n)
            full_shift[a:b] = shift
            full_scale[a:b] = scale
            rowsum, colsum, colsq = self._center_sums(a, b, full_shift, full_scale)
            part.update(rowsum=rowsum, colsum=colsum, sumsq=float(np.sum(colsq)))
        part.update(shift=shift, scale=scale)
        return part

    def _center_sums(self, a, b, shift, scale):
        n, m = self.shape
        p = self.params
        K = kernels(self.dtype)
        cc = CONFIGS[(self.dtype, "setcol")][1]
        n_tiles = _ceil_div(m, cc)
        dshift = cuda.to_device(shift)
        dscale = cuda.to_device(scale)
        colsum = cuda.to_device(np.zeros(m))
        colsq = cuda.to_device(np.zeros(m))
        rowsum = cuda.device_array((b - a, 1), np.float64)
        band = self._band(n_tiles, 1, 8, b - a)
        rowpart = cuda.device_array((n_tiles, band, 1), np.float64)
        for r0 in range(a, b, band):
            r1 = min(r0 + band, b)
            K["center_stats"][n_tiles, NT](
                *self._args(),
                r0,
                r1,
                self.n_features,
                p.kind,
                p.inv_g2,
                p.coef0,
                p.degree,
                dshift,
                dscale,
                rowpart,
                colsum,
                colsq,
            )
            K["sum_parts"][_ceil_div(r1 - r0, SUM_THREADS), SUM_THREADS](
                rowpart, r1 - r0, rowsum, r0 - a
            )
        return rowsum.copy_to_host()[:, 0], colsum.copy_to_host(), colsq.copy_to_host()

    @_quiet
    def products(self, a, b, shift, scale, Omega, Psi):
        """Uncentred ``(G[a:b] @ Omega, G[a:b].T @ Psi)`` from one pass (see :mod:`.base`)."""
        n, m = self.shape
        p = self.params
        k = 0 if Omega is None else Omega.shape[1]
        l = 0 if Psi is None else Psi.shape[1]
        cymax = CONFIGS[(self.dtype, "row")][3]
        cy = max(1, min(cymax, _ceil_div(max(k, l), TX)))
        kc = TX * cy
        K = kernels(self.dtype, cy)
        dshift = self._const("shift", shift)
        dscale = self._const("scale", scale)
        common = self._args()
        if b == a:
            return (
                None if Omega is None else np.zeros((0, k)),
                None if Psi is None else np.zeros((m, l)),
            )
        if Psi is None:
            Y = cuda.device_array((b - a, k), np.float64)
            tr = self.tiles[0]
            grid = (_ceil_div(b - a, tr), _ceil_div(k, kc))
            K["row_pass"][grid, NT](
                *common,
                a,
                b,
                self.n_features,
                p.kind,
                p.inv_g2,
                p.coef0,
                p.degree,
                dshift,
                dscale,
                self._operand(Omega),
                Y,
            )
            return Y.copy_to_host(), None
        cc = CONFIGS[(self.dtype, "col")][1]
        n_tiles = _ceil_div(m, cc)
        grid = (n_tiles, _ceil_div(max(k, l), kc))
        W = cuda.device_array((m, l), np.float64)  # the first band writes every entry
        dPsi = self._operand(Psi)
        want_y = Omega is not None
        if want_y:
            dOm = self._operand(Omega)
            band = self._band(n_tiles, k, self.dtype.itemsize, b - a)
            Ypart = cuda.device_array((n_tiles, band, k), self.dtype)
            Y = cuda.device_array((b - a, k), np.float64)
        else:
            dOm = self._operand(np.zeros((1, 1)))
            band = b - a
            Ypart = cuda.device_array((1, 1, 1), self.dtype)
        for r0 in range(a, b, band):
            r1 = min(r0 + band, b)
            K["col_pass"][grid, NT](
                *common,
                r0,
                r1,
                self.n_features,
                p.kind,
                p.inv_g2,
                p.coef0,
                p.degree,
                dshift,
                dscale,
                dPsi[r0 - a : r1 - a],
                W,
                dOm,
                Ypart,
                want_y,
                r0 == a,
            )
            if want_y:
                K["sum_parts"][_ceil_div((r1 - r0) * k, SUM_THREADS), SUM_THREADS](
                    Ypart, r1 - r0, Y, r0 - a
                )
        return (Y.copy_to_host() if want_y else None), W.copy_to_host()

    @_quiet
    def block(self, ridx, cidx, shift, scale, rmean, cmean, gmean, center):
        """``G[ridx][:, cidx]`` in the storage dtype, centred when ``center`` (see :mod:`.base`)."""
        n, m = self.shape
        p = self.params
        # a slice (a block of rows, as the CPU backend also takes) as the index array it means
        ridx = np.arange(n)[ridx] if isinstance(ridx, slice) else ridx
        cidx = np.arange(m)[cidx] if isinstance(cidx, slice) else cidx
        nr = n if ridx is None else len(ridx)
        nc = m if cidx is None else len(cidx)
        out = cuda.device_array((nr, nc), self.dtype)
        if nr and nc:
            K = kernels(self.dtype)
            tr, tc = CONFIGS[(self.dtype, "setrow")][:2]
            dr = self._noidx if ridx is None else cuda.to_device(np.asarray(ridx, np.int64))
            dc = self._noidx if cidx is None else cuda.to_device(np.asarray(cidx, np.int64))
            rm = self._const("rmean", rmean)
            cm = self._const("cmean", cmean)
            K["fill"][_ceil_div(nr, tr) * _ceil_div(nc, tc), NT](
                self._dX,
                self._dZ,
                self._dxx,
                self._dzz,
                dr,
                dc,
                nr,
                nc,
                self.n_features,
                p.kind,
                p.inv_g2,
                p.coef0,
                p.degree,
                self._const("shift", shift),
                self._const("scale", scale),
                rm,
                cm,
                float(gmean),
                bool(center),
                out,
            )
        return out.copy_to_host()


def _rebuild(X, Z, xx, zz, params, chunk_bytes):
    return CudaBackend(X, Z, xx, zz, params, chunk_bytes)
