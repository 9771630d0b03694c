"""The :class:`Selection` every row/column sampler returns (shared with ``basic.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Selection"]


@dataclass
class Selection:
    """Row and column indices chosen by a sampler, with what choosing them cost.

    Attributes
    ----------
    row_indices : ndarray of int64
        Chosen rows of ``G`` (distinct).
    col_indices : ndarray of int64
        Chosen columns of ``G`` (distinct).
    entries_read : int
        Entries of ``G`` read while choosing (a product or sketch pass counts ``N * M``),
        NOT counting the entries of ``rows``/``cols`` below nor the caller's later reads of
        ``G[rows, :]`` and ``G[:, cols]``: the caller counts those once.
    n_passes : float
        Whole passes over ``G`` used while choosing (``entries_read / (N * M)``, a sketch or
        product counting one).
    info : dict
        Extra keys for ``SVDResult.info``.
    rows : ndarray of shape (len(row_indices), M) or None
        ``G[row_indices, :]`` when the sampler read it already (then it is not read again).
    cols : ndarray of shape (N, len(col_indices)) or None
        ``G[:, col_indices]`` when the sampler read it already.
    """

    row_indices: np.ndarray
    col_indices: np.ndarray
    entries_read: int
    n_passes: float
    info: dict = field(default_factory=dict)
    rows: np.ndarray | None = None
    cols: np.ndarray | None = None
