"""What a backend of :class:`~ksvd_bench.kernels.KernelSource` implements, and what a
scale-out backend may call on the source.

Two protocols, each documented once here:

* :class:`Backend`, the device backends (``cpu``, ``cuda``): the tile work of a range of
  rows, described below.
* :class:`RowSource`, the row-range protocol of the in-process source: what the Dask backend
  (:mod:`.dask`) runs on row blocks, on pickled copies of the source on its workers.

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

import abc
import collections
import typing

import numpy as np

__all__ = [
    "RBF",
    "SNE",
    "T",
    "LINEAR",
    "POLY",
    "SOFTMAX",
    "CODES",
    "Params",
    "Backend",
    "RowSource",
]

RBF, SNE, T, LINEAR, POLY, SOFTMAX = 0, 1, 2, 3, 4, 5
#: kernel name -> code of :class:`Params`
CODES = {"rbf": RBF, "sne": SNE, "t": T, "linear": LINEAR, "poly": POLY, "softmax": SOFTMAX}
#: kernel code and parameters: inv_g2 = 1 / gamma^2 on the stored (scaled) points (softmax:
#: 1 / gamma, its temperature)
Params = collections.namedtuple("Params", ["kind", "inv_g2", "coef0", "degree"])


class Backend(abc.ABC):
    """Base of the device backends: holds the stored points; a backend implements the three
    hooks (``setup_rows``, ``products``, ``block``: the module docstring).

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

    @abc.abstractmethod
    def setup_rows(self, a, b, normalised, center):
        """Set-up statistics of rows ``[a, b)`` (the module docstring)."""

    @abc.abstractmethod
    def products(self, a, b, shift, scale, Omega, Psi):
        """Uncentred ``(G[a:b] @ Omega, G[a:b].T @ Psi)`` from one pass (the module docstring)."""

    @abc.abstractmethod
    def block(self, ridx, cidx, shift, scale, rmean, cmean, gmean, center):
        """``G[ridx][:, cidx]`` in the storage dtype (the module docstring)."""


@typing.runtime_checkable
class RowSource(typing.Protocol):
    """The row-range (scale-out) protocol of an in-process lazy source.

    :class:`~ksvd_bench.kernels.KernelSource` implements it; the Dask backend drives a
    source through these members only (the structured source has none: it stays in
    process). Every pass is work on a row range ``[a, b)`` plus a reduction in a fixed
    order, so the row ranges can run anywhere, on pickled copies of the source (which
    pickles as its points and per-row constants). Besides the members below a row source
    has the attributes ``shape``, ``dtype``, ``chunk_rows`` (row ranges handed to the hooks
    start at its multiples) and ``n_passes``.

    The set-up pass: :meth:`setup_rows` on row ranges that tile ``[0, N)``, anywhere, then
    :meth:`finish_setup` with their results. A worker that holds the points without the
    per-row constants gets a ready copy from :meth:`with_setup_state` of the client's
    :meth:`setup_state`.
    """

    def setup_rows(self, a, b):
        """Partial set-up statistics of rows ``[a, b)``: a dict with keys ``"rows"``
        (``(a, b)``), ``"shift"``, ``"scale"``, ``"rowsum"``, ``"colsum"`` and
        ``"sumsq"`` (:meth:`Backend.setup_rows`)."""

    def finish_setup(self, parts):
        """Combine :meth:`setup_rows` results whose ranges tile ``[0, N)``, added in list
        order (so a fixed list gives fixed bits); the source is then set up."""

    def is_set_up(self):
        """Whether the set-up pass has run."""

    def ensure_setup(self):
        """Run a pending lazy set-up pass; raise ``RuntimeError`` if it never ran."""

    def setup_state(self):
        """The per-row constants of the set-up pass, a dict (small: O(N + M))."""

    def with_setup_state(self, state):
        """A shallow copy (points shared) with ``state`` from :meth:`setup_state` attached."""

    def pass_rows(self, a, b, Omega=None, Psi_rows=None):
        """``(G[a:b] @ Omega, G[a:b].T @ Psi_rows)``, centred, float64, from one pass over
        rows ``[a, b)`` (either operand None: its result is None). Stacking the first parts
        of consecutive ranges gives ``G @ Omega``; adding the second parts gives
        ``G.T @ Psi``."""

    def block_rows(self, a, b, cidx):
        """``G[a:b][:, cidx]``, centred, in the storage dtype."""

    def product_result(self, R, V, vec, name, transpose=False):
        """A reduced product ``R`` with the operand ``V`` (called ``name``) as the source's
        ``matmat``/``rmatmat`` return it: in the result dtype, checked finite, a vector
        where ``vec``."""

    def frobenius_slack(self, block_of_rows=None, counter=None):
        """``(value, slack)`` of ``||G||_F``; a centred pass reads ``block_of_rows(a, b)``
        (a wrapper's rows) and counts itself in ``counter.n_passes``."""

    def known_frobenius(self, measured):
        """``||G||_F`` from a measured ``(value, slack)``, or None where not known."""
