"""What a backend of :class:`~ksvd_bench.kernels.KernelSource` implements.

The source validates, translates and scales the points, casts them to the storage dtype,
measures their squared norms, and keeps the per-row constants and the centring algebra. A
backend only evaluates uncentred kernel tiles over a range of rows and reduces them. Three
hooks, all on host (numpy) arrays in and out:

``setup_rows(a, b, normalised, center) -> dict``
    Set-up statistics of rows ``[a, b)``: keys ``"rows"`` = ``(a, b)``; ``"shift"``,
    ``"scale"`` (b - a,) float64 (SNE: the row's smallest squared distance on the stored
    scale and ``1 / sum_j exp((shift - d_ij) inv_g2)``; softmax: the same with ``d_ij =
    -x_i . z_j``, so minus the row's largest cross product; t: 0 and ``1 / sum_j 1 / (1 +
    d_ij inv_g2)``; other kernels 0 and 1); ``"rowsum"`` (b - a,) and ``"colsum"`` (M,) float64
    sums of the normalised uncentred kernel when ``center``, else None; ``"sumsq"`` float,
    the sum of squares of the normalised uncentred rows ``[a, b)``, or None when neither
    ``normalised`` nor ``center``.
``products(a, b, shift, scale, Omega, Psi) -> (Y, W)``
    Uncentred ``Y = G[a:b] @ Omega`` (b - a, k) and ``W = G[a:b].T @ Psi`` (M, l) from one
    pass, float64 C-contiguous. ``Omega`` (M, k) and ``Psi`` (b - a, l) are float64
    C-contiguous with at least one column, or None (its result is then None; never both).
    ``shift`` and ``scale`` are the full (N,) float64 arrays of :meth:`setup_rows`.
``block(ridx, cidx, shift, scale, rmean, cmean, gmean, center) -> ndarray``
    ``G[ridx][:, cidx]`` in the storage dtype, centred when ``center``
    (``G_ij - (rmean_i - gmean) - cmean_j``). ``ridx``/``cidx`` are int64 index arrays, a
    ``slice`` (a block of rows or columns: the centred-norm pass) or None (all rows / all
    columns); ``shift``, ``scale``, ``rmean`` (N,) and ``cmean`` (M,) are full float64
    arrays, ``gmean`` a float.

Kernel values (exp kernels shifted by the row's smallest distance, softmax by its largest
cross product, see :func:`~ksvd_bench.kernels.kernel_matrix`) come from cross products in
the storage dtype; a
backend may compute a tile in the storage dtype (the CPU backend does), but every sum across
tiles accumulates in float64. A backend must give the same answer for any thread count.
"""

from __future__ import annotations

import collections

import numpy as np

__all__ = ["RBF", "SNE", "T", "LINEAR", "POLY", "SOFTMAX", "CODES", "Params", "Backend"]

RBF, SNE, T, LINEAR, POLY, SOFTMAX = 0, 1, 2, 3, 4, 5
#: kernel name -> code of :class:`Params`
CODES = {"rbf": RBF, "sne": SNE, "t": T, "linear": LINEAR, "poly": POLY, "softmax": SOFTMAX}
#: kernel code and parameters: inv_g2 = 1 / gamma^2 on the stored (scaled) points (softmax:
#: 1 / gamma, its temperature)
Params = collections.namedtuple("Params", ["kind", "inv_g2", "coef0", "degree"])


class Backend:
    """Base of the backends: holds the stored points and names the three hooks.

    Parameters
    ----------
    X : ndarray of shape (N, d) or CSR matrix
        Row points as stored (translated and scaled by the source), in the storage dtype
        (float32 or float64), C-contiguous.
    Z : ndarray of shape (M, d) or CSR matrix
        Column points, same dtype.
    xx, zz : ndarray of shape (N,), (M,)
        Squared norms of the stored points, in the storage dtype.
    params : Params
    chunk_bytes : int
        Budget of one pass's work buffers (the backend sizes its tiles from it and the
        shape only).

    Attributes
    ----------
    name : str
        ``"cpu"`` or ``"cuda"``.
    tiles : (int, int)
        Rows and columns of one tile. Row ranges handed to the hooks by a scale-out
        wrapper start at multiples of ``tiles[0]``.
    """

    name = "base"

    def __init__(self, X, Z, xx, zz, params, chunk_bytes):
        self.shape = (X.shape[0], Z.shape[0])
        self.n_features = X.shape[1]
        self.dtype = np.dtype(X.dtype)
        self.params = params
        self.chunk_bytes = int(chunk_bytes)
        self.xx, self.zz = xx, zz

    def setup_rows(self, a, b, normalised, center):  # pragma: no cover - interface
        raise NotImplementedError

    def products(self, a, b, shift, scale, Omega, Psi):  # pragma: no cover - interface
        raise NotImplementedError

    def block(
        self, ridx, cidx, shift, scale, rmean, cmean, gmean, center
    ):  # pragma: no cover - interface
        raise NotImplementedError
