"""Uniform and squared-norm row/column sampling for the Nyström solvers.

``sampling="uniform"`` draws rows and columns uniformly without replacement and reads nothing
while choosing. ``sampling="norm"`` draws them with probabilities proportional to the squared
row and column norms of ``G`` (length-squared sampling, Drineas, Kannan & Mahoney 2006),
which costs one pass over ``G`` for the norms (``N * M`` entries, counted by the
counting wrapper, see ``solvers._validation.Tracked.norms_sq``) unless the caller already
has them.

Both report the inclusion probability of every chosen index (``Selection.info``'s
``"row_prob"`` and ``"col_prob"``), the weights an importance-sampling estimator divides by.

References
----------
P. Drineas, R. Kannan, M. W. Mahoney, "Fast Monte Carlo algorithms for matrices II: computing
a low-rank approximation to a matrix", SIAM J. Comput. 36(1), 2006.
"""

from __future__ import annotations

import numpy as np

from ._selection import Selection

__all__ = ["sample_indices", "select_basic", "inclusion_probabilities"]


def sample_indices(n_total, n, weights, rng):
    """``n`` distinct sorted indices in ``range(n_total)``, uniform or with ``weights``.

    Weighted draws are successive sampling without replacement (``Generator.choice`` with
    ``p``). Indices of zero weight (zero rows/columns) are only drawn, uniformly, when fewer
    than ``n`` indices have positive weight.
    """
    if weights is None:
        idx = rng.choice(n_total, size=n, replace=False)
    else:
        positive = np.flatnonzero(weights > 0)
        if positive.size >= n:
            idx = rng.choice(n_total, size=n, replace=False, p=weights / weights.sum())
        else:
            zero = np.flatnonzero(weights <= 0)
            fill = rng.choice(zero, size=n - positive.size, replace=False)
            idx = np.concatenate([positive, fill])
    return np.sort(idx).astype(np.int64)


def inclusion_probabilities(weights, n, n_total):
    """Approximate probability that each index is among ``n`` drawn without replacement.

    Uniform (``weights`` None): exactly ``n / n_total``. Weighted: ``min(1, n p_i)`` with
    ``p = weights / sum(weights)``, the with-replacement rate capped at certainty (exact for
    ``n = 1`` and for indices drawn with certainty; a standard approximation otherwise).
    Indices of zero weight that had to be drawn get ``n / n_total``.
    """
    if weights is None:
        return np.full(n_total, n / n_total)
    total = float(weights.sum())
    if total <= 0:
        return np.full(n_total, n / n_total)
    prob = np.minimum(1.0, n * weights / total)
    prob[prob <= 0] = n / n_total
    return prob


def select_basic(src, n_rows, n_cols, *, sampling, rng, row_indices=None, col_indices=None):
    """Rows and columns by ``"uniform"`` or ``"norm"`` sampling (given indices are kept).

    Parameters
    ----------
    src : counting source (``solvers._validation.Tracked``)
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
