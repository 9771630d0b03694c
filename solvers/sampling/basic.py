"""Uniform and squared-norm row/column sampling for the Nyström solvers.

``sampling="uniform"`` draws rows and columns uniformly without replacement and reads nothing
while choosing. ``sampling="norm"`` draws them without replacement, with inclusion probabilities
proportional to the squared row and column norms of ``G`` (length-squared sampling, Drineas,
Kannan & Mahoney 2006, capped at certainty; systematic sampling on a random order, so that
the probabilities are exact), which costs one pass over ``G`` for the norms (``N * M``
entries, counted by the counting wrapper, see ``solvers.validation.Tracked.norms_sq``)
unless the caller already has them.

Both report the exact inclusion probability of every chosen index (``Selection.info``'s
``"row_prob"`` and ``"col_prob"``), the weights an importance-sampling (Horvitz-Thompson)
estimator divides by.

References
----------
P. Drineas, R. Kannan, M. W. Mahoney, "Fast Monte Carlo algorithms for matrices II: computing
a low-rank approximation to a matrix", SIAM J. Comput. 36(1), 2006.

W. G. Madow, "On the theory of systematic sampling, II", Ann. Math. Statist. 20(3), 1949.

Y. Tillé, "Sampling Algorithms", Springer, 2006 (sec. 7.2, systematic sampling with unequal
probabilities).
"""

from __future__ import annotations

import numpy as np

from ._selection import Selection

__all__ = ["sample_indices", "select_basic", "inclusion_probabilities"]


def sample_indices(n_total, n, weights, rng):
    """``n`` distinct sorted indices in ``range(n_total)``, uniform or with ``weights``.

    Uniform: ``Generator.choice`` without replacement. Weighted: systematic sampling with
    probabilities proportional to size on a random order (Madow 1949; Tillé 2006, sec. 7.2),
    whose inclusion probability is exactly :func:`inclusion_probabilities`'
    ``pi_i = min(1, c w_i)`` (``sum(pi) = n``): the units are put in a random order, laid
    end to end as intervals of length ``pi_i`` on ``[0, n)``, and the unit under each of the
    points ``u, u + 1, ..., u + n - 1`` (``u`` uniform on ``[0, 1)``) is taken. An interval
    is at most 1 long, so it holds at most one point: the ``n`` units are distinct, and unit
    ``i`` is taken with probability ``pi_i`` exactly. (Successive draws with ``p``, as
    ``Generator.choice(p=..., replace=False)`` makes them, have no closed-form inclusion
    probabilities; ``min(1, n p_i)`` is far off once a few units are near certain, which
    biased the importance weights of issue 20.) Indices of zero weight (zero rows/columns)
    are only drawn, uniformly, when fewer than ``n`` indices have positive weight.
    """
    if weights is None:
        return np.sort(rng.choice(n_total, size=n, replace=False)).astype(np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(weights)):
        raise ValueError(
            "norm sampling needs finite squared row and column norms of G, but some "
            "overflow float64 (G's entries reach about 1e154 or more): scale G by a power of "
            "two (and the singular values back), or use sampling='uniform'"
        )
    positive = np.flatnonzero(weights > 0)
    if positive.size <= n:
        zero = np.flatnonzero(weights <= 0)
        fill = rng.choice(zero, size=n - positive.size, replace=False)
        return np.sort(np.concatenate([positive, fill])).astype(np.int64)
    pi = inclusion_probabilities(weights, n, n_total)
    order = rng.permutation(n_total)
    ends = np.cumsum(pi[order])
    ends *= n / ends[-1]  # sum(pi) = n up to rounding: make the last end exactly n
    points = rng.random() + np.arange(n)
    pos = np.minimum(np.searchsorted(ends, points, side="right"), n_total - 1)
    idx = np.unique(order[pos])
    if idx.size < n:  # two points in one interval: only by rounding of a pi_i = 1 end
        rest = np.setdiff1d(positive, idx)
        more = rng.choice(rest, size=n - idx.size, replace=False, p=pi[rest] / pi[rest].sum())
        idx = np.concatenate([idx, more])
    return np.sort(idx).astype(np.int64)


def inclusion_probabilities(weights, n, n_total):
    """Probability that each index is among the ``n`` that :func:`sample_indices` draws.

    Exact for the designs :func:`sample_indices` uses. Uniform (``weights`` None):
    ``n / n_total``. Weighted, more than ``n`` positive weights: ``pi_i = min(1, c w_i)``
    with ``c`` such that ``sum(pi) = n`` (the units with ``c w_i >= 1`` are taken with
    certainty and the rest share the remaining ``n - #certain`` in proportion to their
    weights). At most ``n`` positive weights: those indices have ``1``, the zero-weight
    ones the uniform fill rate ``(n - #positive) / #zero``.
    """
    if weights is None:
        return np.full(n_total, n / n_total)
    weights = np.asarray(weights, dtype=np.float64)
    positive = weights > 0
    n_pos = int(np.count_nonzero(positive))
    if n_pos <= n:
        prob = np.ones(n_total)
        if n_pos < n_total:
            prob[~positive] = (n - n_pos) / (n_total - n_pos)
        return prob
    weights = weights / weights.max()  # only ratios matter: keep their sums finite
    prob = np.zeros(n_total)
    certain = np.zeros(n_total, dtype=bool)
    while True:  # at most n rounds: each one adds a unit to the certain ones or stops
        free = positive & ~certain
        left = n - int(np.count_nonzero(certain))
        prob[free] = left * weights[free] / weights[free].sum()
        over = free & (prob >= 1)
        if not over.any():
            break
        certain |= over
        prob[certain] = 1.0
    return prob


def select_basic(src, n_rows, n_cols, *, sampling, rng, row_indices=None, col_indices=None):
    """Rows and columns by ``"uniform"`` or ``"norm"`` sampling (given indices are kept).

    Parameters
    ----------
    src : counting source (``solvers.validation.Tracked``)
        Only asked for its norms (``norms_sq()``), and only for ``sampling="norm"`` when a
        side is still to be drawn.
    n_rows, n_cols : int
        Sample sizes (``<= N`` and ``<= M``).
    sampling : {"uniform", "norm"}
    rng : numpy.random.Generator
    row_indices, col_indices : ndarray or None
        Given samples; only the other side is drawn.

    Returns
    -------
    Selection
        ``entries_read`` is ``N * M`` when the norms were read, else 0 (the wrapper counted
        them already: the caller must not add them again); ``info`` has ``row_prob`` and
        ``col_prob``, the inclusion probabilities of the chosen indices (1-d arrays).
    """
    N, M = src.shape
    rw = cw = None
    read = 0
    if sampling == "norm" and (row_indices is None or col_indices is None):
        rw, cw = src.norms_sq()
        read = N * M
    ridx = sample_indices(N, n_rows, rw, rng) if row_indices is None else row_indices
    cidx = sample_indices(M, n_cols, cw, rng) if col_indices is None else col_indices
    ridx = np.asarray(ridx, dtype=np.int64)
    cidx = np.asarray(cidx, dtype=np.int64)
    row_prob = inclusion_probabilities(rw, ridx.size, N)[ridx]
    col_prob = inclusion_probabilities(cw, cidx.size, M)[cidx]
    return Selection(
        row_indices=ridx,
        col_indices=cidx,
        entries_read=read,
        n_passes=read / (N * M),
        info={"row_prob": row_prob, "col_prob": col_prob},
    )
