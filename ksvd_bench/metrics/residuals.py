"""Residuals without a reference: the triplets' residuals and the triplet residual that
ties ``U~``, ``s~`` and ``V~`` together."""

from __future__ import annotations

import math
import numbers

import numpy as np

from solvers import as_source

from .common import _check_reference_values, _check_scored_rank, _triplets, in_units, unit_of

__all__ = ["residuals", "triplet_residual"]


# ---------------------------------------------------------------------------------------------
# residuals and the residual estimate of eta
# ---------------------------------------------------------------------------------------------


def _products(G, approx, products=None):
    """The source, the triplets and ``(G V~, G^T U~)``: given, or two products; and the
    unit (:func:`~ksvd_bench.metrics.common.unit_of` of ``max s~``) the source, ``s~`` and
    the products are returned in."""
    src = as_source(G)
    U, s, V = _triplets(approx, "approx")
    if tuple(src.shape) != (U.shape[0], V.shape[0]):
        raise ValueError(
            f"approx has U with {U.shape[0]} rows and V with {V.shape[0]} rows, but G has "
            f"shape {tuple(src.shape)}"
        )
    unit = unit_of(np.max(np.abs(s)))
    src, s = in_units(src, unit), s * unit
    if products is not None:
        GV, GtU = _check_products(products, U, V)
        return src, U, s, V, GV * unit, GtU * unit, unit
    GV = np.asarray(src.matmat(V), dtype=np.float64)
    GtU = np.asarray(src.rmatmat(U), dtype=np.float64)
    return src, U, s, V, GV, GtU, unit


def residuals(G, approx) -> dict:
    """Residuals of approximate singular triplets, relative to the top approximate value.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
        The matrix (anything :func:`solvers.as_source` accepts); used through one ``matmat``
        and one ``rmatmat`` with ``k`` columns.
    approx : SVDResult or object with ``U`` (N, k), ``s`` (k,), ``V`` (M, k)

    Returns
    -------
    res : dict
        ``"u"``: ``|G v~_i - s~_i u~_i| / s~_1`` per triplet, shape ``(k,)``;
        ``"v"``: ``|G^T u~_i - s~_i v~_i| / s~_1``; ``"max"``: the largest of both (float).
        Vectors are used as given (not renormalised). All zero for an exact SVD.
    """
    _, U, s, V, GV, GtU, _ = _products(G, approx)
    scale = s[0] if s[0] > 0 else 1.0
    ru = np.linalg.norm(GV - U * s, axis=0) / scale
    rv = np.linalg.norm(GtU - V * s, axis=0) / scale
    return {"u": ru, "v": rv, "max": float(max(ru.max(), rv.max()))}


def _check_scale(scale):
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a number or None, got {type(scale).__name__}")
    if not (math.isfinite(scale) and scale >= 0):
        raise ValueError(f"scale must be a finite number >= 0 or None, got {scale!r}")
    return float(scale)


def _check_products(products, U, V):
    try:
        GV, GtU = products
    except (TypeError, ValueError):
        raise TypeError("products must be a pair (G @ V~, G.T @ U~)") from None
    GV = np.asarray(GV, dtype=np.float64)
    GtU = np.asarray(GtU, dtype=np.float64)
    if GV.shape != U.shape or GtU.shape != V.shape:
        raise ValueError(
            f"products must have shapes {U.shape} (G @ V~) and {V.shape} (G.T @ U~), got "
            f"{GV.shape} and {GtU.shape}"
        )
    return GV, GtU


def triplet_residual(
    G, approx, *, rank=None, reference=None, scale=None, products=None, return_terms=False
):
    """How well ``U~``, ``s~`` and ``V~`` fit together as singular triplets of ``G``.

    Parameters
    ----------
    G : ndarray, sparse matrix, LinearOperator or matrix source
        Used through one ``matmat`` with ``V~`` and one ``rmatmat`` with ``U~`` (fused into
        one ``sketch`` pass where the source has it), unless ``products`` are given.
    approx : SVDResult or object with ``U`` (N, k), ``s`` (k,), ``V`` (M, k)
        The answer; its first ``r`` triplets are scored, vectors as given (not
        renormalised: a vector of the wrong length is an error of the triplet).
    rank : int, optional
        ``r``, default all ``k`` triplets of ``approx``.
    reference : SVDResult, optional
        The exact SVD: its values give the scale ``||G_r||_F = sqrt(sum_{i <= r} s_i^2)``.
    scale : float, optional
        The scale to divide by, overriding the reference's. Without both, the answer's own
        ``sqrt(sum_{i <= r} s~_i^2)`` (an inflated ``s~`` then also inflates the scale, but
        not the residual of the vectors, so a wrong answer still scores about 1 or more).
    products : tuple of ndarray, optional
        ``(G @ V~[:, :r], G.T @ U~[:, :r])`` if already computed (the driver computes them in
        one pass with its probes); then ``G`` is not multiplied.
    return_terms : bool, default=False
        Also return a dict with ``"u"`` (``||G V~ - U~ S~||_F``), ``"v"``
        (``||G^T U~ - V~ S~||_F``, both absolute) and ``"scale"``.

    Returns
    -------
    residual : float
        ``max(||G V~ - U~ S~||_F, ||G^T U~ - V~ S~||_F) / scale``; 0 for exact triplets (to
        rounding). Meaningful with either sign convention of a triplet only if ``u~_i`` and
        ``v~_i`` are paired as the solver returned them (a flipped ``v~_i`` alone is a wrong
        triplet and scores ``2 s_i``).
    terms : dict
        Only if ``return_terms``.

    Raises
    ------
    TypeError, ValueError
        On bad shapes, non-finite entries, a bad ``rank`` or ``scale``.

    Notes
    -----
    Cost: one ``matmat`` with ``r`` columns and one ``rmatmat`` with ``r`` columns (a pass
    over a lazy ``G``), plus ``O((N + M) r)``. The residual is first order in the error of the
    vectors (``~ s_{r+1} sin theta`` for Rayleigh-Ritz answers), where eta,
    :func:`lowrank_error` and :func:`sv_error` are second order; measured against
    ``||G_r||_F`` (not ``s_1``) it stayed below ``eps`` wherever those met ``eps`` (1e-2 and
    1e-1, every randomized solver, a decaying and an RBF spectrum, rank 10), so the driver
    holds it to the same ``eps`` by default (see
    :func:`ksvd_bench.driver.solve_to_tolerance`). A wrong pairing (a random ``V~``, two
    vectors of a repeated value combined differently on the two sides) scores about 1.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> G = np.diag([3.0, 2.0, 1.0])
    >>> I = np.eye(3)[:, :2]
    >>> triplet_residual(G, SimpleNamespace(U=I, s=np.array([3.0, 2.0]), V=I))
    0.0
    >>> swapped = SimpleNamespace(U=I, s=np.array([3.0, 2.0]), V=I[:, ::-1])
    >>> round(triplet_residual(G, swapped), 3)
    1.414
    """
    U, s, V = _triplets(approx, "approx")
    k = U.shape[1]
    r = k if rank is None else _check_scored_rank(rank, k)
    U, s, V = U[:, :r], s[:r], V[:, :r]
    scale = _check_scale(scale)
    ref_s = None
    if scale is None and reference is not None:
        ref_s = _triplets(reference, "reference")[1]
        _check_reference_values(ref_s)
        if ref_s.size < r:
            raise ValueError(f"reference holds {ref_s.size} triplets, fewer than rank={r}")
    # every norm in units of the largest value where that is extreme (G near 1e+-300)
    magnitude = max(float(np.max(np.abs(s))), 0.0 if ref_s is None else float(ref_s[0]))
    unit = unit_of(magnitude if scale is None else max(magnitude, scale))
    s = s * unit
    if ref_s is not None:
        scale = float(np.linalg.norm(ref_s[:r] * unit))
    elif scale is None:
        scale = float(np.linalg.norm(s))
    else:
        scale = scale * unit
    if products is None:
        src = in_units(as_source(G), unit)
        if tuple(src.shape) != (U.shape[0], V.shape[0]):
            raise ValueError(
                f"approx has U with {U.shape[0]} rows and V with {V.shape[0]} rows, but G "
                f"has shape {tuple(src.shape)}"
            )
        sketch = getattr(src, "sketch", None)
        if callable(sketch):
            GV, GtU = sketch(V, U)
        else:
            GV, GtU = src.matmat(V), src.rmatmat(U)
        GV, GtU = _check_products((GV, GtU), U, V)
    else:
        GV, GtU = _check_products(products, U, V)
        GV, GtU = GV * unit, GtU * unit
    ru = float(np.linalg.norm(GV - U * s))
    rv = float(np.linalg.norm(GtU - V * s))
    worst = max(ru, rv)
    residual = worst / scale if scale > 0 else worst
    if return_terms:
        return residual, {"u": ru / unit, "v": rv / unit, "scale": scale / unit}
    return residual
