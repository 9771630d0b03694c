"""The set-up every ``run_*`` experiment shares: checked counts, the data loader, one seeded
generator and a progress bar.

Each experiment draws the seeds of its splits and solvers from one generator, in a fixed
order, so a run repeats exactly for a given ``random_state``; :class:`RunSetup` holds that
generator and hands out the seeds (:meth:`RunSetup.seed`).
"""

from __future__ import annotations

import numbers

import numpy as np

#: loader name -> function of :mod:`ksvd_bench.datasets` used when none is given
_DEFAULT_LOADERS = {"graph": "load_graph", "table": "load_table"}


def check_count(value, name, minimum=1):
    """``value`` as an int, or a TypeError/ValueError naming ``name`` (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def draw_seed(rng):
    """An int seed for a sub-step (split, solver), drawn from the experiment's generator."""
    return int(rng.integers(2**31 - 1))


def default_loader(loader, kind):
    """``loader``, or :func:`ksvd_bench.datasets.load_graph` / ``load_table`` when None."""
    if loader is not None:
        return loader
    # imported here: the datasets package is only needed when no loader is passed
    from ksvd_bench import datasets

    return getattr(datasets, _DEFAULT_LOADERS[kind])


class RunSetup:
    """Checked counts, loader, seeded generator and progress bars of one experiment run.

    Parameters
    ----------
    random_state : int, Generator or None
        Seed of the experiment's one generator (``np.random.default_rng``).
    progress : bool, default=True
        Show tqdm progress bars.
    loader : callable, optional
        The data loader passed by the caller; ``None`` selects the default of ``kind``.
    kind : {"graph", "table"} or None, default=None
        Which default loader; ``None`` when the experiment loads nothing itself.
    **counts : int
        Positive integer settings (``n_runs=...``, ``n_components=...``), checked in the order
        given with :func:`check_count`; the checked ints are in :attr:`counts`.

    Attributes
    ----------
    counts : dict of str to int
    loader : callable or None
    rng : numpy.random.Generator
    """

    def __init__(self, random_state, *, progress=True, loader=None, kind=None, **counts):
        self.counts = {name: check_count(value, name) for name, value in counts.items()}
        self.loader = default_loader(loader, kind) if kind is not None else loader
        self.progress = progress
        self.rng = np.random.default_rng(random_state)

    def seed(self):
        """The next sub-step seed from the generator (see :func:`draw_seed`)."""
        return draw_seed(self.rng)

    def bar(self, iterable, desc):
        """``iterable`` wrapped in a tqdm progress bar (silent when ``progress`` is False)."""
        # tqdm.auto probes for Jupyter when imported: only when a bar is drawn
        from tqdm.auto import tqdm

        return tqdm(iterable, desc=desc, disable=not self.progress)
