"""Argument checking shared by every solver (in the spirit of scipy's ``svds._iv``).

Every public solver calls :func:`check_args` first with its own validator (a ``_validate``
function beside the solver); together they validate and normalise all arguments up front, so
the numerical code after it can assume sane input. Error messages name the offending
parameter and the allowed values. The small checkers here (:func:`check_int`, ...) are what
the validators are made of.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ._source import DenseSource, SparseSource, as_source, check_real_dtype
from .scaling import power_of_two_scale

__all__ = [
    "check_args",
    "check_choice",
    "check_random_state",
    "Tracked",
]

BACKENDS = ("arpack", "propack", "lobpcg")
SAMPLINGS = ("uniform", "norm")
ASYM_SAMPLINGS = ("uniform", "norm", "arp", "rpcholesky", "aca")
CORES = ("rank", "full")
ASYM_CORES = ("stable", "paper")
NORMALIZERS = ("auto", "QR", "LU", "none")
_NORM_CHUNK_ENTRIES = 1 << 22  # entries per streamed block when norms must be computed
_OPTIONAL_MEMBERS = ("sketch", "dense", "norm_bound", "row_norms_sq", "col_norms_sq")


class Tracked:
    """Wrap a matrix source to count what a solver reads and to check what it returns.

    Counters:

    * ``n_matvec``: vectors multiplied (a ``matmat`` with k columns counts k; a ``sketch``
      counts the columns of both operands);
    * ``n_products``: calls of ``matmat``, ``rmatmat`` and ``sketch``; each is one pass over
      ``G``, whatever its width (a one-vector product too: it reads all of ``G``);
    * ``n_block_entries``: entries of ``G`` returned by ``rows``, ``cols``, ``block`` and
      ``dense``, plus ``N * M`` for a norm pass (``row_norms_sq``/``col_norms_sq``, see
      :meth:`norms_sq`);
    * ``n_passes`` (property): ``n_products + n_block_entries / (N * M)``, the cost in whole
      passes over ``G``, the one currency in which every method's reads compare.

    Every returned array is checked for its shape and for real numbers (a custom source that
    answers with the wrong shape fails here, with a message naming the member, rather than
    giving a wrong-sized answer later). With ``check_finite=True`` (lazy sources, whose
    entries were not checked up front) it is checked for NaN and inf too, which costs one
    pass over data the solver reads anyway.

    The optional protocol members ``sketch``, ``norm_bound``, ``dense``, ``row_norms_sq`` and
    ``col_norms_sq`` exist on the wrapper exactly when the wrapped source has them, so
    ``hasattr(tracked, "sketch")`` tells whether a one-pass sketch is available.

    ``value_scale`` is the power of two by which :func:`check_args` multiplied a concrete
    ``G`` of extreme magnitude (1.0 otherwise): the source holds ``value_scale * G``.
    """

    def __init__(self, source, check_finite, value_scale=1.0):
        self.source = source
        self.value_scale = value_scale
        self.shape = tuple(int(d) for d in source.shape)
        self.dtype = np.dtype(source.dtype)
        self.check_finite = check_finite
        self.n_matvec = 0
        self.n_products = 0
        self.n_block_entries = 0
        for name in _OPTIONAL_MEMBERS:
            if hasattr(source, name):
                setattr(self, name, getattr(self, "_" + name))
        if hasattr(source, "setup_pending"):
            # a question about the source's cost, not a read: passed through uncounted
            self.setup_pending = source.setup_pending
        if hasattr(source, "joint_psd"):
            # Entries of the joint kernel are not entries of G: the sampler that uses it
            # reports what it read (``Selection.entries_read``), so it passes through uncounted.
            self.joint_psd = source.joint_psd

    @property
    def n_passes(self):
        """Products plus entries read divided by ``N * M`` (see the class docstring)."""
        N, M = self.shape
        return self.n_products + self.n_block_entries / (N * M)

    def _checked(self, out, what, shape):
        out = np.asarray(out)
        if out.dtype.kind not in "biuf":
            if out.dtype.kind == "c":
                raise ValueError(f"G.{what} returned complex values; complex G is not supported")
            raise TypeError(f"G.{what} must return real numbers, got dtype {out.dtype}")
        if out.shape != shape:
            raise ValueError(
                f"G.{what} returned an array of shape {out.shape}, expected {shape} "
                f"(G has shape {self.shape})"
            )
        if self.check_finite and not np.isfinite(out).all():
            raise ValueError(f"G must contain only finite values; {what} returned NaN or inf")
        return out

    def rows(self, idx):
        n = len(idx)
        self.n_block_entries += n * self.shape[1]
        return self._checked(self.source.rows(idx), "rows(idx)", (n, self.shape[1]))

    def cols(self, idx):
        n = len(idx)
        self.n_block_entries += n * self.shape[0]
        return self._checked(self.source.cols(idx), "cols(idx)", (self.shape[0], n))

    def block(self, ridx, cidx):
        shape = (len(ridx), len(cidx))
        self.n_block_entries += shape[0] * shape[1]
        return self._checked(self.source.block(ridx, cidx), "block(ridx, cidx)", shape)

    def matmat(self, X):
        self.n_matvec += X.shape[1]
        self.n_products += 1
        return self._checked(self.source.matmat(X), "matmat(X)", (self.shape[0], X.shape[1]))

    def rmatmat(self, Y):
        self.n_matvec += Y.shape[1]
        self.n_products += 1
        return self._checked(self.source.rmatmat(Y), "rmatmat(Y)", (self.shape[1], Y.shape[1]))

    # Optional members: bound to the public names in __init__ only when the source has them.

    def _sketch(self, Omega, Psi):
        self.n_matvec += Omega.shape[1] + Psi.shape[1]
        self.n_products += 1
        left, right = self.source.sketch(Omega, Psi)
        left = self._checked(left, "sketch(Omega, Psi)[0]", (self.shape[0], Omega.shape[1]))
        right = self._checked(right, "sketch(Omega, Psi)[1]", (self.shape[1], Psi.shape[1]))
        return left, right

    def _dense(self):
        self.n_block_entries += self.shape[0] * self.shape[1]
        return self._checked(self.source.dense(), "dense()", self.shape)

    def _norm_bound(self):
        bound = float(self.source.norm_bound())
        if not (np.isfinite(bound) and bound >= 0):
            raise ValueError(f"G.norm_bound() must be a finite number >= 0, got {bound!r}")
        return bound

    def _row_norms_sq(self):
        # The norms are a function of every entry: asking for them costs a pass (N * M
        # entries), whether the source computes them now or computed them earlier.
        self.n_block_entries += self.shape[0] * self.shape[1]
        return self._checked(self.source.row_norms_sq(), "row_norms_sq()", self.shape[:1])

    def _col_norms_sq(self):
        self.n_block_entries += self.shape[0] * self.shape[1]  # as row_norms_sq
        return self._checked(self.source.col_norms_sq(), "col_norms_sq()", self.shape[1:])

    def norms_sq(self):
        """Squared row and column norms ``(N,), (M,)``, counted as ONE pass (N * M entries).

        From the source's ``row_norms_sq()``/``col_norms_sq()`` when it has both, else by
        streaming every row through ``rows`` in chunks (which the row counter records).
        """
        if hasattr(self, "row_norms_sq") and hasattr(self, "col_norms_sq"):
            N, M = self.shape
            self.n_block_entries += N * M  # one pass reads both
            row = self._checked(self.source.row_norms_sq(), "row_norms_sq()", (N,))
            col = self._checked(self.source.col_norms_sq(), "col_norms_sq()", (M,))
            return np.asarray(row, np.float64), np.asarray(col, np.float64)
        N, M = self.shape
        row, col = np.zeros(N), np.zeros(M)
        step = max(1, _NORM_CHUNK_ENTRIES // M)
        for start in range(0, N, step):
            idx = np.arange(start, min(N, start + step))
            sq = np.square(self.rows(idx), dtype=np.float64)
            row[idx] = sq.sum(axis=1)
            col += sq.sum(axis=0)
        return row, col


@dataclass
class Checked:
    """What :func:`check_args` returns: a tracked source, the rank, a Generator, the options."""

    source: Tracked
    rank: int
    rng: np.random.Generator
    options: dict
    dtype: np.dtype
    #: ``max |G_ij|`` of a dense or sparse ``G`` (of the caller's ``G``, before any
    #: rescaling); None for a lazy source
    amax: float | None = None


def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def check_int(name, value, low, high=None, *, high_text=None):
    """An integer ``low <= value (<= high)`` as an int; errors name ``name``."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        if high is None:
            raise ValueError(f"{name} must be >= {low}, got {name}={value}")
        raise ValueError(
            f"{name} must satisfy {low} <= {name} <= {high_text or high}, got {name}={value}"
        )
    return value


def check_real(name, value, low, high=None, *, high_open=False):
    """A finite real ``low <= value`` (``< high`` or ``<= high``) as a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    above = high is not None and (value >= high if high_open else value > high)
    if not np.isfinite(value) or value < low or above:
        upper = "" if high is None else (f" and < {high}" if high_open else f" and <= {high}")
        raise ValueError(f"{name} must be a finite number >= {low}{upper}, got {name}={value!r}")
    return value


def check_choice(name, value, choices):
    """The member of ``choices`` that the string ``value`` names, ignoring case.

    The one rule for every string option of ``solvers`` and ``ksvd_bench`` (``method``,
    ``sampling``, ``core``, ``backend``, ``device``, ``setup``, ``kernel``, ...): names are
    case-insensitive, and the canonical spelling (the one in ``choices``) is returned, so
    ``"RSVD"``, ``"Rsvd"`` and ``"rsvd"`` all run, and are recorded, as ``"rsvd"``.
    Anything else (another name, a non-string) is a ValueError that lists the choices.
    """
    if isinstance(value, str):
        folded = value.casefold()
        for c in choices:
            if isinstance(c, str) and folded == c.casefold():
                return c
    raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def check_no_core(core, orthogonalize):
    """Refuse ``core``/``orthogonalize`` with ``sampling="rpcholesky"``, which has no core.

    RPCholesky returns the exact SVD of its own factorisation of the joint kernel: neither
    the stable nor the paper's core runs, so a ``core`` other than None (or the paper's raw
    extension, ``orthogonalize=False``) would be recorded without applying.
    """
    if core is not None or not orthogonalize:
        given = f"core={core!r}" if core is not None else "orthogonalize=False"
        raise ValueError(
            f'{given} does not apply to sampling="rpcholesky": it factors the joint PSD '
            "kernel and returns the exact SVD of that factorisation, with no core "
            "(leave core=None and orthogonalize=True; info['core'] is then None)"
        )


def check_bool(name, value):
    """``value`` as a bool; anything but True/False (1, "yes", ...) is a TypeError."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_random_state(random_state):
    """Return a Generator for ``random_state`` (None, a non-negative int or a Generator)."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if _is_int(random_state):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return np.random.default_rng(int(random_state))
    raise TypeError(
        "random_state must be None, a non-negative int or a numpy.random.Generator; "
        f"got {type(random_state).__name__}"
    )


def check_indices(name, idx, n, axis_name):
    idx = np.asarray(idx)
    if idx.ndim != 1 or idx.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array of indices, got shape {idx.shape}")
    if not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {idx.dtype}")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"{name} must lie in [0, {n}) (the number of {axis_name} of G)")
    if np.unique(idx).size != idx.size:
        raise ValueError(f"{name} must not contain repeated indices")
    return idx.astype(np.intp)


def largest_entry(source):
    """``max |G_ij|`` of a concrete source, checked finite up front (cheap); None for a lazy
    source, whose blocks are checked as they are read."""
    if isinstance(source, DenseSource):
        data = source.G
    elif isinstance(source, SparseSource):
        data = source.csr.data
    else:
        return None
    if data.size == 0:
        return 0.0
    # min and max see NaN and inf as isfinite would, without a temporary of G's size
    low, high = float(data.min()), float(data.max())
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError("G must contain only finite values (found NaN or inf)")
    return max(high, -low)


def _scaled_source(source, scale):
    """A copy of a concrete source with every entry multiplied by ``scale`` (exact)."""
    if isinstance(source, DenseSource):
        return DenseSource(source.G * scale)
    return SparseSource(source.csr * scale)


def check_args(method, G, rank, random_state, validate, *, rescale=True, **options):
    """Validate and normalise the arguments of one solver call.

    The checks every method shares happen here (``G``, ``rank``, ``random_state``; the
    option names are the function's own keywords, and :func:`solvers.svd` checks those it
    is given against :data:`solvers.OPTIONS`); the method's own options are checked by
    ``validate``, the validator that lives beside each solver.

    Parameters
    ----------
    method : str
        One of :data:`solvers.METHODS`.
    G : array_like, sparse matrix, LinearOperator or matrix source
    rank : int
    random_state : None, int or numpy.random.Generator
    validate : callable
        ``validate(options, rank, shape) -> options``: checks and normalises the method's
        options (a dict it may change in place), raising errors that name the option.
    rescale : bool, default=True
        Solve a dense or sparse ``G`` whose largest entry lies outside
        ``[2^-SAFE_EXPONENT, 2^SAFE_EXPONENT]`` as ``2^-e G``, an exact copy near 1: products
        with ``G^T G`` and every squared norm of the method and its certificates then stay
        representable. The tracked source's ``value_scale`` is ``2^-e``, and :func:`finish`
        divides the values and the magnitudes in ``info`` by it. False for a method that
        scales on its own (``tsvd``).
    **options
        The method's options with their values (defaults already filled in by the caller).

    Returns
    -------
    Checked
        ``source`` (a :class:`Tracked` source), ``rank``, ``rng``, normalised ``options``,
        the working ``dtype`` (float32 for float32 sources, float64 otherwise) and ``amax``
        (the largest ``|G_ij|`` of a dense or sparse ``G``, None for a lazy source).
    """
    source = as_source(G)
    check_real_dtype(source.dtype)
    shape = tuple(source.shape)
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"G must be a non-empty 2-d matrix, got shape {shape}")
    shape = tuple(int(d) for d in shape)
    kmax = min(shape)
    rank = check_int("rank", rank, 1, kmax, high_text=f"min(N, M) = {kmax}")
    rng = check_random_state(random_state)
    dtype = np.dtype(np.float32) if np.dtype(source.dtype) == np.float32 else np.dtype(np.float64)
    opts = validate(dict(options), rank, shape)
    amax = largest_entry(source)
    scale = 1.0 if amax is None or not rescale else power_of_two_scale(amax)
    if scale == 1.0:
        return Checked(Tracked(source, amax is None), rank, rng, opts, dtype, amax)
    tracked = Tracked(_scaled_source(source, scale), False, value_scale=scale)
    return Checked(tracked, rank, rng, opts, dtype, amax)


def check_sample_size(rank, sizes):
    """Raise unless ``rank`` fits every sample size in ``sizes`` (a name -> size dict)."""
    for name, size in sizes.items():
        if rank > size:
            raise ValueError(f"rank must be <= the sample size ({name} = {size}), got rank={rank}")
