"""Degenerate problems: a kernel matrix that is zero, or zero to rounding, is refused.

A race on such a G crowns a solver for nothing: every answer of a zero matrix is "right". It
happens after centring (``G = H_N K H_M``) when the kernel ``K`` holds nothing but its row
and column means: a data matrix with one column, constant data, or a compatibility map that
sends every row's kernel mass to the same column (data far from the origin under the
uncentred ``"pca"`` map). Centring subtracts those means, and what is left is the rounding of
the subtraction, about ``eps_mach ||K||_F``; a G below :func:`rounding_floor` of ``||K||_F``
(numpy's ``matrix_rank`` cutoff, ``max(N, M) * eps_mach``) is that rounding. Without centring
G is K itself, and only an exact zero (every kernel value underflowed) is refused.

:func:`kernel_as_raced` builds the kernel of a data matrix (or two point sets) uncentred,
measures ``||K||_F``, centres it in place (bit for bit what ``center=True`` gives) and refuses
it (:class:`~ksvd_bench.datasets.DatasetError`, naming the problem and the reason) where it
is degenerate. Where a compatibility map loses data far from the origin, the refusal says so,
and says whether translating the data to their mean gives a usable G (it is then the fix: the
map keeps the origin shared by the rows and the columns, so a translation changes the
problem, and the user decides).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ksvd_bench.datasets import DatasetError
from solvers import frobenius_of

__all__ = ["rounding_floor", "kernel_as_raced", "check_given_matrix"]


def rounding_floor(shape):
    """``max(N, M) * eps_mach``: a centred G whose ``||G||_F`` is at most this many times the
    uncentred kernel's ``||K||_F`` is zero to rounding."""
    return max(shape) * float(np.finfo(np.float64).eps)


def _timed(build):
    t0 = time.perf_counter()
    out = build()
    return out, time.perf_counter() - t0


def _centre(K):
    from ksvd_bench.kernels import center_matrix  # what center=True runs, on a copy

    return center_matrix(K)


def _is_degenerate(G, norm_k, centred):
    norm_g = frobenius_of(G)
    return norm_g <= (rounding_floor(G.shape) * norm_k if centred else 0.0), norm_g


def kernel_as_raced(build, *, name, center, gamma=None, data=None, rebuild=None, compat=None):
    """The kernel matrix a problem races, timed, or a refusal where it is degenerate.

    Parameters
    ----------
    build : callable
        ``build()`` returns the uncentred dense kernel matrix K (timed).
    name : str
        The problem's name (in the message).
    center : bool
        Centre K in place (timed with the build) before racing it.
    gamma : float, optional
        The bandwidth used (in the message where every kernel value underflowed).
    data : ndarray or sparse matrix, optional
        The data matrix A of a problem built with a compatibility map, and ``rebuild(A)``
        its uncentred kernel: on a refusal, the kernel of ``A - mean(A)`` is tried, and the
        message says whether translating the data is the fix.
    rebuild : callable, optional
    compat : str, optional
        The compatibility map (in the message).

    Returns
    -------
    G : ndarray
        float64, centred when ``center``.
    seconds : float
        Build (and centring) time; measuring ``||K||_F`` is not charged.

    Raises
    ------
    ksvd_bench.datasets.DatasetError
        G is zero, or zero to rounding after centring; the message names the problem, the
        norms and the reason.
    """
    K, seconds = _timed(build)
    K = np.asarray(K, dtype=np.float64)
    norm_k = frobenius_of(K)
    if center:
        K, more = _timed(lambda: _centre(K))
        seconds += more
    degenerate, norm_g = _is_degenerate(K, norm_k, center)
    if degenerate:
        translated = _translated_norms(data, rebuild) if data is not None else None
        _refuse(name, K.shape, norm_g, norm_k, center, gamma, compat, translated)
    return K, seconds


def _translated_norms(A, rebuild):
    """``(mean, standard deviation, ||G||_F, degenerate)`` of A translated to its mean."""
    dense = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=np.float64)
    amax = float(np.max(np.abs(dense), initial=0.0))
    if amax == 0.0:
        return None
    unit = dense / amax  # mean and spread in units of the largest entry: no overflow
    mean, sd = float(np.mean(unit)) * amax, float(np.std(unit)) * amax
    if mean == 0.0:
        return None
    K = np.asarray(rebuild(dense - mean), dtype=np.float64)
    norm_k = frobenius_of(K)
    G = _centre(K)
    degenerate, norm_g = _is_degenerate(G, norm_k, True)
    return mean, sd, norm_g, degenerate


def _refuse(name, shape, norm_g, norm_k, centred, gamma, compat, translated):
    n, m = shape
    if not centred:
        why = "every kernel value underflows to 0"
        if gamma is not None:
            why += (
                f": the points lie farther apart than gamma = {gamma:.3g} resolves; pass a "
                f"larger gamma (--gamma)"
            )
        raise DatasetError(
            f"problem {name!r}: G ({n}x{m}) is zero ({why}). Every answer would be right: "
            f"nothing to race"
        )
    size = (
        "exactly 0"
        if norm_g == 0
        else f"{norm_g:.2g}, {norm_g / norm_k:.2g} of the uncentred kernel's, under the "
        f"rounding floor {rounding_floor(shape):.2g}"
    )
    if min(shape) == 1:
        side = "column" if m == 1 else "row"
        why = (
            f"one {side} is its own mean; race it uncentred (--no-center, center=False) or "
            f"with more {side}s"
        )
    elif norm_k == 0:
        why = "every kernel value underflows to 0; pass a larger gamma (--gamma)"
    else:
        why = "the kernel is nothing but its row and column means (e.g. constant data)"
    if translated is not None and not translated[3]:
        mean, sd, norm_t, _ = translated
        why = (
            f"the data lie far from the origin (mean {mean:.3g}, standard deviation "
            f"{sd:.3g}) and the {compat!r} map, which keeps the origin, sends the rows and "
            f"the columns far apart; translate the data to their mean first (A - {mean:.6g} "
            f"gives ||G||_F = {norm_t:.3g})"
        )
    raise DatasetError(
        f"problem {name!r}: G ({n}x{m}) is zero to rounding after centring (||G||_F = "
        f"{size}): {why}. Every answer would be right: nothing to race"
    )


def check_given_matrix(G, name):
    """Refuse a given kernel matrix G that is exactly zero (its own scale: nothing else)."""
    data = G.data if sp.issparse(G) else G
    if frobenius_of(data) == 0.0:
        raise DatasetError(
            f"problem {name!r}: the kernel matrix G ({G.shape[0]}x{G.shape[1]}) is zero. "
            f"Every answer would be right: nothing to race"
        )
