"""The gap-robust measure: the low-rank approximation error against the optimum, and
``||G||_F`` by a pass over ``G``."""

from __future__ import annotations

import math
import numbers

import numpy as np

from solvers import as_source

from .common import _pair, in_units, unit_of
from .measures import _normalised_columns

__all__ = ["LOWRANK_FLOOR_RTOL", "LOWRANK_PASS_MAX_ENTRIES", "frobenius_norm", "lowrank_error"]

#: Default floor of :func:`lowrank_error`'s denominator, relative to ``||G||_F``, per method.
LOWRANK_FLOOR_RTOL = {"pass": 1e-6, "products": 1e-4}
#: Largest ``N * M`` for which :func:`lowrank_error`'s ``method="auto"`` makes a pass over ``G``.
LOWRANK_PASS_MAX_ENTRIES = 40_000_000
# Columns per chunk of a pass over G: about 8 MiB of float64 per chunk.
_PASS_CHUNK_BYTES = 8 * 2**20


# ---------------------------------------------------------------------------------------------
# low-rank approximation error
# ---------------------------------------------------------------------------------------------


def _column_chunks(src, chunk=None):
    """Consecutive column blocks of ``G`` as float64 arrays: one pass, never all of ``G``."""
    N, M = (int(n) for n in src.shape)
    step = chunk if chunk is not None else max(1, _PASS_CHUNK_BYTES // (8 * max(N, 1)))
    whole = getattr(src, "G", None)  # the dense adapter: slices cost nothing
    for start in range(0, M, step):
        stop = min(M, start + step)
        if isinstance(whole, np.ndarray):
            block = whole[:, start:stop]
        else:
            block = src.cols(np.arange(start, stop))
        yield np.asarray(block, dtype=np.float64)


def _check_chunk(chunk):
    if chunk is not None and (
        isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1
    ):
        raise ValueError(f"chunk must be a positive int or None, got {chunk!r}")


def frobenius_norm(G, *, chunk=None) -> float:
    """``||G||_F`` of any matrix source, without forming ``G`` unless it is dense already.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
    chunk : int, optional
        Columns per block of the pass (default: blocks of about 8 MiB).

    Returns
    -------
    norm : float
        From the source's own ``frobenius_norm()`` if it has one and it returns a number (an
        optional member that must be exact to rounding: an upper bound such as
        ``norm_bound()`` will not do; None where the source cannot tell), else
        its ``col_norms_sq()`` or ``row_norms_sq()`` (dense and sparse inputs), else one pass
        over column blocks (``cols``: as many kernel evaluations as forming ``G``).
    """
    _check_chunk(chunk)
    src = as_source(G)
    if callable(getattr(src, "frobenius_norm", None)):
        value = src.frobenius_norm()  # None: the source cannot tell without a pass
        if value is not None:
            return float(value)
    for member in ("col_norms_sq", "row_norms_sq"):
        if callable(getattr(src, member, None)):
            return float(math.sqrt(max(float(np.sum(getattr(src, member)())), 0.0)))
    return float(
        math.sqrt(sum(float(np.einsum("ij,ij->", C, C)) for C in _column_chunks(src, chunk)))
    )


def _projection_errors_pass(src, bases, chunk):
    """``||G||_F^2`` and ``||G - B B^T G||_F^2`` for each basis ``B``, in one column pass."""
    fro2 = 0.0
    errs = [0.0] * len(bases)
    for C in _column_chunks(src, chunk):
        fro2 += float(np.einsum("ij,ij->", C, C))
        for k, B in enumerate(bases):
            R = C - B @ (B.T @ C)
            errs[k] += float(np.einsum("ij,ij->", R, R))
    return fro2, errs


def _projection_error_products(src, B, fro2):
    """``||G - B B^T G||_F^2`` from one rmatmat (the identity is in :func:`lowrank_error`)."""
    Gt_B = np.asarray(src.rmatmat(B), dtype=np.float64)
    return fro2 - 2.0 * float(np.sum(Gt_B * Gt_B)) + float(np.sum((Gt_B @ (B.T @ B)) * Gt_B))


def _resolve_lowrank_method(method, shape):
    if method not in ("auto", "pass", "products"):
        raise ValueError(f"method must be 'auto', 'pass' or 'products', got {method!r}")
    if method == "auto":
        return "pass" if shape[0] * shape[1] <= LOWRANK_PASS_MAX_ENTRIES else "products"
    return method


def _check_norm_fro(norm_fro):
    if norm_fro is None:
        return None
    if isinstance(norm_fro, bool) or not isinstance(norm_fro, numbers.Real):
        raise TypeError(f"norm_fro must be a number or None, got {norm_fro!r}")
    if not (math.isfinite(norm_fro) and norm_fro >= 0):
        raise ValueError(f"norm_fro must be a finite number >= 0, got {norm_fro!r}")
    return float(norm_fro)


def _check_floor_rtol(floor_rtol, method):
    if floor_rtol is None:
        return LOWRANK_FLOOR_RTOL[method]
    if isinstance(floor_rtol, bool) or not isinstance(floor_rtol, numbers.Real):
        raise TypeError(f"floor_rtol must be a number or None, got {floor_rtol!r}")
    if not (math.isfinite(floor_rtol) and 0 <= floor_rtol <= 1):
        raise ValueError(f"floor_rtol must be in [0, 1] or None, got {floor_rtol!r}")
    return float(floor_rtol)


def _excess(error, optimum, floor):
    """``(error - optimum) / max(optimum, floor)``, 0 when both scales vanish (G = 0)."""
    scale = max(optimum, floor)
    if scale <= 0:
        return 0.0
    # error >= optimum by Eckart-Young; rounding can dip a hair below.
    return max(0.0, (error - optimum) / scale)


def lowrank_error(
    G,
    reference,
    approx,
    *,
    rank=None,
    method="auto",
    norm_fro=None,
    floor_rtol=None,
    chunk=None,
    return_terms=False,
):
    """Excess of the rank-``r`` approximation error over the optimum: a gap-robust measure.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
        The matrix; used through column blocks (``cols``) or one ``rmatmat``, never formed
        unless it is dense already.
    reference : SVDResult or object with ``U`` (N, k), ``s`` (k,), ``V`` (M, k)
        The exact SVD (at least ``r`` triplets); gives the optimum ``||G - G_r||_F``.
    approx : SVDResult or object with ``U`` (N, k'), ``s``, ``V`` (M, k'), ``k' >= r``
        Its first ``r`` left vectors, each divided by its norm, form ``U~``.
    rank : int, optional
        ``r``, default all ``k`` triplets of the reference.
    method : {"auto", "pass", "products"}, default="auto"
        ``"pass"``: one pass over column blocks of ``G`` computes ``||G - U~ U~^T G||_F`` and
        ``||G - U U^T G||_F = ||G - G_r||_F`` (reference vectors) directly, accurate to
        rounding. ``"products"``: one ``rmatmat`` with ``U~`` and the identities
        ``||G - U~ U~^T G||_F^2 = ||G||_F^2 - 2 ||U~^T G||_F^2 + <U~^T G, U~^T U~ U~^T G>``
        and ``||G - G_r||_F^2 = ||G||_F^2 - sum_{i <= r} s_i^2``; cheap, but the subtraction
        loses about ``eps_mach (||G||_F / error)^2`` relative accuracy. ``"auto"``: a pass
        up to :data:`LOWRANK_PASS_MAX_ENTRIES` entries, products beyond.
    norm_fro : float, optional
        ``||G||_F`` if known (``"products"`` only; saves the norm's pass on sources without
        ``col_norms_sq``; see :func:`frobenius_norm`).
    floor_rtol : float, optional
        Floor of the denominator relative to ``||G||_F`` (Returns); default
        :data:`LOWRANK_FLOOR_RTOL` of the method: ``1e-6`` for a pass, ``1e-4`` for products.
    chunk : int, optional
        Columns per block of a pass.
    return_terms : bool, default=False
        Also return a dict: ``error``, ``optimum``, ``norm_fro``, ``floor``, ``method``.

    Returns
    -------
    excess : float
        ``(||G - U~ U~^T G||_F - ||G - G_r||_F) / max(||G - G_r||_F, floor_rtol ||G||_F)``,
        ``>= 0``. An answer meets ``||G - U~ U~^T G||_F <= (1 + eps) ||G - G_r||_F`` (the
        criterion of Halko, Martinsson and Tropp 2011 and Musco and Musco 2015) exactly when
        ``excess <= eps``, as long as the optimum is above the floor.
    terms : dict
        Only if ``return_terms``.

    Notes
    -----
    *Gap-robust.* Unlike eta, the measure needs no pairing of vectors: any basis of any
    optimal subspace scores 0, however the singular values repeat or cluster.

    *Exact low rank.* When ``||G - G_r||_F`` vanishes (``rank(G) <= r``) the ratio is
    undefined and, in floating point, both norms are rounding noise. The floor makes the
    measure ``(error - optimum) / (floor_rtol ||G||_F)`` there: an error below
    ``eps * floor_rtol * ||G||_F`` passes. The defaults sit well above each method's rounding
    noise (about ``1e-15 ||G||_F`` for a pass, ``1e-8 ||G||_F`` through products), so every
    exact answer scores below ``1e-8`` with a pass. A zero ``G`` scores 0.

    *Vectors as given.* ``U~`` is used with unit columns but not re-orthogonalised, so
    nearly parallel vectors are penalised (Eckart-Young still gives ``excess >= 0``). The
    measure checks the left subspace only (``V~`` is not read); pair it with
    :func:`residuals` for the vectors and values.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> G = np.diag([3.0, 2.0, 2.0, 1.0])
    >>> ref = SimpleNamespace(U=np.eye(4)[:, :2], s=np.array([3.0, 2.0]), V=np.eye(4)[:, :2])
    >>> other = SimpleNamespace(U=np.eye(4)[:, [0, 2]], s=ref.s, V=np.eye(4)[:, [0, 2]])
    >>> lowrank_error(G, ref, other)  # the other basis of the repeated value is as good
    0.0
    """
    _check_chunk(chunk)
    src = as_source(G)
    U, s, _, Ua, Va, r = _pair(reference, approx, rank)
    shape = tuple(int(n) for n in src.shape)
    if shape != (U.shape[0], Va.shape[0]):
        raise ValueError(
            f"approx and reference have {U.shape[0]} rows in U and {Va.shape[0]} in V, but G "
            f"has shape {shape}"
        )
    method = _resolve_lowrank_method(method, shape)
    norm_fro = _check_norm_fro(norm_fro)
    floor_rtol = _check_floor_rtol(floor_rtol, method)
    Un = _normalised_columns(Ua)
    unit = unit_of(s[0])  # every norm below in units of ||G||_2 where that is extreme
    src = in_units(src, unit)
    s = s * unit
    norm_fro = None if norm_fro is None else norm_fro * unit
    if method == "pass":
        fro2, (err2, opt2) = _projection_errors_pass(src, [Un, U[:, :r]], chunk)
    else:
        fro2 = (norm_fro if norm_fro is not None else frobenius_norm(src, chunk=chunk)) ** 2
        err2 = _projection_error_products(src, Un, fro2)
        opt2 = fro2 - float(np.sum(s[:r] ** 2))
    fro = math.sqrt(max(fro2, 0.0))
    error, optimum = math.sqrt(max(err2, 0.0)), math.sqrt(max(opt2, 0.0))
    floor = floor_rtol * fro
    excess = _excess(error, optimum, floor)
    if return_terms:
        return excess, {
            "error": error / unit,
            "optimum": optimum / unit,
            "norm_fro": fro / unit,
            "floor": floor / unit,
            "method": method,
        }
    return excess
