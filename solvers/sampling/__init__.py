"""Samplers that choose the rows and columns of a cross/Nyström approximation of ``G``.

============== ===========================================================================
``uniform``    uniformly at random, no read (``basic.py``)
``norm``       by squared row/column norms (``basic.py``; a norm pass unless the source
               knows them)
``arp``        adaptive randomized pivoting on the one-pass sketch (``arp.py``): one pass
``aca``        adaptive cross approximation, partial pivoting + ACA+ (``aca.py``): reads the
               chosen rows and columns plus a few reference ones; misses decoupled blocks
``rpcholesky`` not a row/column sampler: :func:`rpcholesky_svd` factors the joint PSD
               kernel of a point source and returns the SVD directly (``rpcholesky.py``)
============== ===========================================================================

:func:`select_rows_cols` returns a :class:`Selection` (indices, what choosing cost, and the
rows/columns already read); ``solvers.asym_nystrom`` then forms its core from it. Every
sampler draws from the given ``numpy.random.Generator`` only, so a seed fixes the choice.
"""

from __future__ import annotations

import numbers

from ..validation import Tracked, check_choice
from . import basic
from ._selection import Selection
from .aca import select_aca
from .arp import arp_pivots, select_arp
from .rpcholesky import rpcholesky, rpcholesky_svd

__all__ = [
    "SAMPLERS",
    "Selection",
    "select_rows_cols",
    "select_arp",
    "select_aca",
    "arp_pivots",
    "rpcholesky",
    "rpcholesky_svd",
]

#: samplings :func:`select_rows_cols` understands ("rpcholesky" goes through rpcholesky_svd)
SAMPLERS = ("uniform", "norm", "arp", "aca")


def _check_count(name, value, high, axis):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 1 <= value <= high:
        raise ValueError(f"{name} must be in [1, {high}] (G has {high} {axis}), got {value}")
    return int(value)


def select_rows_cols(src, n_rows, n_cols, *, sampling, rng, rank):
    """Choose ``n_rows`` rows and ``n_cols`` columns of ``G`` by the named sampler.

    Parameters
    ----------
    src : matrix source (see :mod:`solvers._source`), possibly a counting wrapper
    n_rows, n_cols : int
        ``1 <= n_rows <= N``, ``1 <= n_cols <= M``.
    sampling : {"uniform", "norm", "arp", "aca"}
        Any case (``solvers.check_choice``). ``"rpcholesky"`` is refused here: it returns
        factors, not rows (use :func:`rpcholesky_svd`).
    rng : numpy.random.Generator
    rank : int
        The target rank (samplers may use it to size their sketches).

    Returns
    -------
    Selection
    """
    sampling = check_choice("sampling", sampling, SAMPLERS + ("rpcholesky",))
    if sampling == "rpcholesky":
        raise ValueError(
            'sampling="rpcholesky" chooses no rows and columns of G: it factors '
            "the joint PSD kernel; call rpcholesky_svd(src, rank, n_pivots, ...)"
        )
    N, M = (int(v) for v in src.shape)
    n_rows = _check_count("n_rows", n_rows, N, "rows")
    n_cols = _check_count("n_cols", n_cols, M, "columns")
    if sampling == "arp":
        return select_arp(src, n_rows, n_cols, rng=rng, rank=rank)
    if sampling == "aca":
        return select_aca(src, n_rows, n_cols, rng=rng, rank=rank)
    # uniform or norm: norm sampling reads the norms through the counting wrapper (one pass,
    # or the source's own row/column norms)
    if not isinstance(src, Tracked):
        src = Tracked(src, False)
    return basic.select_basic(src, n_rows, n_cols, sampling=sampling, rng=rng)
