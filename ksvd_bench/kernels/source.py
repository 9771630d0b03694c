"""KSVD kernel matrices of a data matrix: dense (``ksvd_kernel``) or lazy (``KernelSource``)."""

from __future__ import annotations

import copy
import math
import numbers

import numpy as np
import scipy.sparse as sp

from solvers import check_choice, check_index  # solvers imports nothing from ksvd_bench

from . import leaves as nb
from .backends import backend_class, check_device
from .backends.base import CODES, Params
from .compat import compat_data, resolve_compat
from .joint import joint_kernel_of
from .matrix import (
    _KIND,
    _resolve_dtype,
    check_coef0,
    check_data,
    check_degree,
    check_finite_kernel,
    check_point_pair,
    kernel_matrix,
    prepare_points,
    squared_norms,
)
from .operands import check_operand, check_product
from .ordered import ordered_dot, ordered_sum_squares
from .params import (
    EXP_KERNELS,
    check_gamma,
    check_kernel,
    paper_gamma,
    softmax_gamma,
    structured_kernel_error,
)

#: attributes the set-up pass sets (:meth:`KernelSource.setup_state`)
_SETUP_STATE = ("_shift", "_scale", "_rmean", "_cmean", "_gmean", "_sumsq", "_ready")

__all__ = ["ksvd_kernel", "kernel_source", "KernelSource", "FROBENIUS_RTOL"]

#: default memory budget of the work buffers of one pass (partial sums of the reductions)
DEFAULT_CHUNK_BYTES = 32 * 2**20
#: Largest rounding slack, relative to the value, at which :meth:`KernelSource.frobenius_norm`
#: gives ``||G||_F`` as known (by dtype character). ``||G||_F^2`` is then exact to ``2x`` that,
#: 1% of the smallest Frobenius gap the estimates trust (``solvers.GAP_RTOL`` 1e-8 in float64,
#: ``solvers.GAP_RTOL_FLOAT32`` 1e-3 in float32).
FROBENIUS_RTOL = {"d": 5e-11, "f": 5e-6}
#: bytes of the row blocks of the centred norm's pass
FROBENIUS_BLOCK_BYTES = 8 * 2**20


def _sum_slack(shape):
    """Relative rounding of a float64 sum over an ``N x M`` matrix's entries (typical size)."""
    return 4 * math.sqrt(shape[0] + shape[1]) * np.finfo(np.float64).eps


def _resolve_gamma(A, kernel, gamma, bandwidth_factor):
    if isinstance(bandwidth_factor, bool) or not isinstance(bandwidth_factor, numbers.Real):
        raise TypeError(
            f"bandwidth_factor must be a positive real number, got "
            f"{type(bandwidth_factor).__name__}"
        )
    if not np.isfinite(bandwidth_factor) or bandwidth_factor <= 0:
        raise ValueError(f"bandwidth_factor must be finite and > 0, got {bandwidth_factor}")
    if kernel not in _KIND:
        return None if gamma is None else check_gamma(gamma)
    if gamma is None and kernel == "softmax":
        # every compat map gives points of dimension min(N, M) (compat_data)
        return softmax_gamma(min(A.shape), bandwidth_factor)
    if gamma is None:
        return paper_gamma(A, bandwidth_factor)
    return check_gamma(gamma)


def _check_center(center):
    if not isinstance(center, (bool, np.bool_)):
        raise TypeError(f"center must be a bool, got {type(center).__name__}")
    return bool(center)


def ksvd_kernel(
    A,
    kernel="sne",
    *,
    gamma=None,
    bandwidth_factor=1.0,
    compat="auto",
    center=True,
    random_state=None,
    degree=2,
    coef0=1.0,
    dtype=None,
):
    """Dense KSVD kernel matrix of a data matrix ``A``: ``G[i, j] = k(x_i, z_j)``.

    Parameters
    ----------
    A : array-like or scipy sparse matrix of shape (N, M)
        Data; row data ``x_i = A[i, :]``, column data ``z_j = A[:, j]``.
    kernel : {"sne", "rbf", "t", "linear", "poly", "softmax"}, default="sne"
        See :func:`kernel_matrix`.
    gamma : float, default=None
        Bandwidth; None uses the paper's rule ``bandwidth_factor * sqrt(M * var(A))``
        (:func:`paper_gamma`); softmax's temperature, None giving ``bandwidth_factor *
        sqrt(d)`` with ``d = min(N, M)`` the dimension of the mapped points. Ignored by
        "linear" and "poly".
    bandwidth_factor : float, default=1.0
        Factor of the default rule when ``gamma`` is None.
    compat : {"auto", "pinv", "pca", "random", None}, default="auto"
        Compatibility map between row and column data (:func:`compat_data`).
    center : bool, default=True
        Double-centre G (zero row and column means).
    random_state : None, int or numpy.random.Generator, default=None
        Seed of ``compat="random"``.
    degree, coef0 : float
        Parameters of "poly".
    dtype : {None, float32, float64}, default=None
        Output dtype (None: float32 for float32 ``A``, else float64).

    Returns
    -------
    G : ndarray of shape (N, M)

    Examples
    --------
    >>> import numpy as np
    >>> A = np.random.default_rng(0).normal(size=(6, 4))
    >>> G = ksvd_kernel(A, "linear", compat="pinv", center=False)
    >>> np.allclose(G, A)
    True
    """
    kernel = check_kernel(kernel)
    A = check_data(A, "A")
    dtype = _resolve_dtype(dtype, A)
    compat = resolve_compat(compat, A.shape)
    center = _check_center(center)
    gamma = _resolve_gamma(A, kernel, gamma, bandwidth_factor)
    X, Z = compat_data(A, compat, random_state=random_state)
    return kernel_matrix(
        X, Z, kernel, gamma=gamma, degree=degree, coef0=coef0, center=center, dtype=dtype
    )


def _structured_class():
    try:
        # structured is optional at import time (ksvd_bench.kernels loads it lazily too)
        from .structured import StructuredKernelSource
    except ImportError:
        return None
    return StructuredKernelSource


def _check_chunk_bytes(chunk_bytes):
    if (
        isinstance(chunk_bytes, bool)
        or not isinstance(chunk_bytes, (int, np.integer))
        or chunk_bytes < 1
    ):
        raise ValueError(f"chunk_bytes must be a positive integer, got {chunk_bytes!r}")
    return int(chunk_bytes)


def _check_points(X, Z, kernel, gamma, degree, coef0, dtype, center):
    """Validate two point sets and the kernel's parameters (as :func:`kernel_matrix`)."""
    X, Z, kernel, gamma, dtype = check_point_pair(X, Z, kernel, gamma, dtype)
    return (
        X,
        Z,
        kernel,
        gamma,
        _check_center(center),
        check_degree(degree),
        check_coef0(coef0),
        dtype,
    )


def _check_device_client(device, client):
    """The device; a cluster runs the CPU passes on its workers (no device there)."""
    device = check_device(device)
    if client is not None and device != "cpu":
        raise ValueError(
            f"device={device!r} runs in this process: pass client=None, or "
            f"device='cpu' with a client"
        )
    return device


def _log_sum_pow(v, p):
    """``log(sum_i v_i ** p)`` for ``v >= 0`` without overflow (``-inf`` for all zeros)."""
    with np.errstate(divide="ignore"):
        t = p * np.log(v)
    top = float(np.max(t))
    if not np.isfinite(top):
        return top
    return top + float(np.log(np.sum(np.exp(t - top))))


def _check_bounded(kernel, xx, zz, degree, coef0, dtype):
    """Log of the analytic bound on ``||G||_2`` of "linear" and "poly" (None for the others).

    ``||X||_F ||Z||_F`` for linear, ``sqrt(sum_i (|x_i|^2 + |c|)^p sum_j (|z_j|^2 +
    |c|)^p)`` for poly (Cauchy-Schwarz: every ``|x.z + c|^p`` is at most its two factors'
    geometric mean), computed in logs. Raises when it overflows: the kernel's entries could
    then overflow and the solvers could not bound G (``xx``, ``zz``: float64 squared norms).
    """
    if kernel not in ("linear", "poly"):
        return None
    p = 1.0 if kernel == "linear" else degree
    c = 0.0 if kernel == "linear" else abs(coef0)
    with np.errstate(over="ignore"):
        log_bound = 0.5 * (_log_sum_pow(xx + c, p) + _log_sum_pow(zz + c, p))
    # linear: the cross products x.z themselves are stored in the storage dtype
    limit = np.log(np.finfo(dtype if kernel == "linear" else np.float64).max)
    if not log_bound < limit:
        what = (
            "||X||_F ||Z||_F"
            if kernel == "linear"
            else f"sqrt(sum_i (|x_i|^2 + |coef0|)^{p:g} sum_j (|z_j|^2 + |coef0|)^{p:g})"
        )
        size = f"10^{log_bound / np.log(10):.0f}" if np.isfinite(log_bound) else "inf"
        fix = "rescale X and Z" + ("" if kernel == "linear" else f" or lower degree={p:g}")
        raise ValueError(
            f"kernel {kernel!r} may overflow for these points: its bound on "
            f"||G||_2, {what} = {size}, exceeds the {np.dtype(dtype)} range; "
            f"{fix}"
        )
    return float(log_bound)


def _as_float64(V):
    return np.ascontiguousarray(V, dtype=np.float64)


def _restore(cls, state):
    """Unpickle a :class:`KernelSource` without running ``__init__`` (no pass, no checks)."""
    obj = object.__new__(cls)
    obj.__dict__.update(state)
    return obj


class KernelSource:
    """Lazy matrix source of a kernel matrix ``G`` that is never stored.

    ``KernelSource(A, ...)`` is the KSVD kernel matrix of a data matrix ``A`` (as
    :func:`ksvd_kernel`: compat map, then ``G_ij = k(x_i, z_j)``);
    :meth:`KernelSource.from_points` is the kernel matrix of two given point sets (as
    :func:`kernel_matrix`). Both evaluate rows, columns, blocks and whole-matrix products of
    ``G`` on demand, normalised and centred exactly as the dense matrix. To let the library
    pick the structured source of a sparse graph, or run the passes on a Dask cluster, build
    it with :func:`kernel_source`.

    Parameters
    ----------
    A, kernel, gamma, bandwidth_factor, compat, center, random_state, degree, coef0, dtype
        As in :func:`ksvd_kernel`.
    chunk_bytes : int, default=32 MiB
        Memory budget of a pass's work buffers: the per-tile partial sums that keep results
        independent of the thread count. A budget below one cache tile (16 bytes per entry
        of a 256 x 1024 tile) also shrinks the tiles (for tests).
    device : {"cpu", "cuda"}, default="cpu"
        Where the tile passes run (:mod:`ksvd_bench.kernels.backends`): ``"cuda"`` runs them
        on one GPU (needs numba-cuda and a GPU). The GPU holds O((N + M)(d + k)), never G:
        about 1.8 GB at N = M = 1e6, d = 64, k = 40, float32
        (:mod:`ksvd_bench.kernels.backends.cuda`).
    structured, client : None
        Not taken here: ``KernelSource(...)`` always builds this general lazy source (any
        other value raises ``TypeError``). :func:`kernel_source` takes both and returns the
        structured source of a sparse graph or a source whose passes run on a Dask
        cluster where they apply.

    Attributes
    ----------
    shape : (int, int)
    dtype : numpy.dtype
        Storage dtype of the points and of returned blocks; products accumulate in float64.
    kernel : str
    gamma : float or None
        The bandwidth used (None for "linear" and "poly").
    compat : str or None
        The compat map used (None for :meth:`from_points`).
    center : bool
    n_features : int
        Dimension d of the points (after the compat map for ``KernelSource(A)``).
    device : str
        The backend running the passes ("cpu" or "cuda").
    chunk_rows, chunk_cols : int
        Rows and columns of one tile of the fused passes.
    n_entries : int
        Entries of G evaluated through ``rows``, ``cols`` and ``block`` so far.
    n_matmat : int
        Products with G or G.T so far (``matmat`` and ``rmatmat`` count 1, ``sketch`` 2).
    n_passes : int
        Whole passes over G so far (``matmat``, ``rmatmat``, ``sketch`` and ``dense`` count
        1 each; the set-up pass is not counted).

    Notes
    -----
    *Fused passes.* ``matmat``, ``rmatmat`` and ``sketch`` walk G in tiles of
    ``chunk_rows x chunk_cols``: each tile's cross products come from BLAS, its kernel
    values are computed in a float64 buffer while in cache and multiplied at once, so no
    block of G is ever written. Float32 storage keeps float32 points and cross products;
    kernel values and every sum are float64. Tiles are sized from the shape only and each
    output is summed by one owner in a fixed order, so results are bitwise independent of
    the number of Numba threads.

    *Points.* The source stores its own copy of the points, so later writes to the caller's
    arrays never change G. For the distance kernels two dense point sets are stored
    translated by their common mean: distances do not change, and float32 points far from
    the origin keep their accuracy (points at ``100 + N(0, 1)``, d = 64, ``gamma^2 = 128``:
    1e-6 relative, 3e-3 without); for softmax only the keys ``Z`` are, by their own mean (a
    constant per row, which the normalisation removes). A "linear" or "poly" kernel whose
    analytic norm bound overflows (below) is refused at construction; a product that
    overflows because of its operand raises ``ValueError`` naming the operand, and a complex
    operand ``TypeError``.

    *Set-up pass.* SNE, t and softmax rows need their shift (SNE: the smallest distance,
    softmax: minus the largest cross product, for a stable ``exp``) and normaliser: one
    streaming pass computes them, with the row sums of squares. Centring needs the row,
    column and grand means of the normalised kernel: one more pass (or the only one, for
    rbf, linear and poly). It also gives ``||H G H||_F^2 = sum G^2 -
    M sum r_i^2 - N sum c_j^2 + N M g^2`` for :meth:`norm_bound`. Centring is then applied
    algebraically to products, ``(G - r 1^T - 1 c^T + g 1 1^T) V = G V - (r - g) (1^T V)
    - 1 (c^T V)``, and entry by entry to blocks.

    *Extreme scales.* Exp, t and softmax kernels rescale the points by a power of two when
    their magnitude or ``gamma`` is extreme (exact), so ``|x|^2`` and ``1/gamma^2`` cannot
    overflow; a ``gamma`` too small for any float64 kernel raises ``ValueError``. A linear
    or poly kernel whose norm bound (:meth:`norm_bound`, computed in logs) overflows raises
    ``ValueError`` at construction.

    *Scale-out protocol.* :meth:`setup_rows`, :meth:`finish_setup`, :meth:`pass_rows` and
    :meth:`block_rows` express every pass as work on a range of rows plus a reduction in a
    fixed order; :meth:`setup_state` and :meth:`with_setup_state` move the per-row
    constants, and the object pickles as its points and per-row constants. These members
    are the row-source protocol, documented once in
    :class:`~ksvd_bench.kernels.backends.base.RowSource`: the Dask backend
    (:mod:`ksvd_bench.kernels.backends.dask`) runs them on row blocks; in process they run
    on ``[0, N)``. Each hook hands the tile work to the device backend of ``device``
    (:class:`~ksvd_bench.kernels.backends.base.Backend`: ``setup_rows``, ``products``,
    ``block``) and keeps the centring algebra here. ``_from_arrays(..., setup=False)``
    builds a source without the set-up pass.
    """

    def __init__(
        self,
        A,
        kernel="sne",
        *,
        gamma=None,
        bandwidth_factor=1.0,
        compat="auto",
        center=True,
        random_state=None,
        degree=2,
        coef0=1.0,
        dtype=None,
        chunk_bytes=DEFAULT_CHUNK_BYTES,
        device="cpu",
        structured=None,
        client=None,
    ):
        if structured is not None or client is not None:
            name = "structured" if structured is not None else "client"
            raise TypeError(
                f"KernelSource(A, ...) always builds the general lazy source and takes no "
                f"{name}=: call kernel_source(A, ..., {name}=...), which returns the "
                f"structured or distributed source where it applies"
            )
        self._init_data(
            A,
            kernel,
            gamma=gamma,
            bandwidth_factor=bandwidth_factor,
            compat=compat,
            center=center,
            random_state=random_state,
            degree=degree,
            coef0=coef0,
            dtype=dtype,
            chunk_bytes=chunk_bytes,
            device=device,
        )
        self._run_setup()

    def _init_data(
        self,
        A,
        kernel,
        *,
        gamma,
        bandwidth_factor,
        compat,
        center,
        random_state,
        degree,
        coef0,
        dtype,
        chunk_bytes,
        device,
    ):
        """Validate ``A`` and the parameters, store the points; no pass is run."""
        device = check_device(device)
        kernel = check_kernel(kernel)
        A = check_data(A, "A")
        dtype = _resolve_dtype(dtype, A)
        compat = resolve_compat(compat, A.shape)
        center = _check_center(center)
        degree = check_degree(degree)
        coef0 = check_coef0(coef0)
        gamma = _resolve_gamma(A, kernel, gamma, bandwidth_factor)
        chunk_bytes = _check_chunk_bytes(chunk_bytes)
        X, Z = compat_data(A, compat, random_state=random_state)
        self._init_points(X, Z, kernel, gamma, center, degree, coef0, dtype, chunk_bytes, device)
        self.compat = compat

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_points(
        cls,
        X,
        Z,
        kernel="sne",
        *,
        gamma=None,
        center=False,
        degree=2,
        coef0=1.0,
        dtype=None,
        chunk_bytes=DEFAULT_CHUNK_BYTES,
        client=None,
        device="cpu",
        setup="eager",
    ):
        """Lazy kernel matrix of two point sets, ``G_ij = k(x_i, z_j)``.

        Equal to ``kernel_matrix(X, Z, kernel, ...)`` to rounding (SNE, t and softmax rows
        are normalised over all of ``Z``), without ever storing it.

        Parameters
        ----------
        X : array-like or scipy sparse matrix of shape (N, d)
            Row points ``x_i``; sparse input stays sparse.
        Z : array-like or scipy sparse matrix of shape (M, d)
            Column points ``z_j``.
        kernel : {"sne", "rbf", "t", "linear", "poly", "softmax"}, default="sne"
            See :func:`kernel_matrix`.
        gamma : float
            Bandwidth (> 0); required for "sne", "rbf" and "t"; softmax's temperature,
            default ``sqrt(d)``; ignored by the others.
        center : bool, default=False
            Double-centre G, ``H_N G H_M`` (as ``kernel_matrix(..., center=True)``).
        degree, coef0 : float
            Parameters of "poly".
        dtype : {None, float32, float64}, default=None
            Storage dtype; None gives float32 when both inputs are float32, else float64.
            Products accumulate in float64 either way.
        chunk_bytes : int, default=32 MiB
            Memory budget of a pass's work buffers (see the class docstring).
        client : distributed.Client, default=None
            Run the set-up pass and every pass as tasks over row blocks on this Dask
            cluster: returns a
            :class:`~ksvd_bench.kernels.distributed.DistributedKernelSource`.
        device : {"cpu", "cuda"}, default="cpu"
            Where the tile passes run (see :class:`KernelSource`).
        setup : {"eager", "lazy"}, default="eager"
            When the set-up pass (SNE/t/softmax normalisers, centring means, sum of squares: one
            whole pass over G) runs: now, or the first time a member needs it. "lazy" lets
            a caller that needs only the points (``sampling="rpcholesky"``, through
            :meth:`joint_psd`) skip it; in process only (not with ``client``).

        Returns
        -------
        KernelSource
            Its set-up pass has run (``setup="eager"``) or runs on first use.

        Raises
        ------
        ValueError
            Non-finite or empty ``X``/``Z``, a different number of features, a missing or
            non-positive ``gamma`` (exp and t kernels), bad ``degree``/``dtype``, ``setup``
            not "eager"/"lazy", or ``setup="lazy"`` with a ``client``.

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X, Z = rng.normal(size=(50, 3)), rng.normal(size=(40, 3))
        >>> S = KernelSource.from_points(X, Z, "sne", gamma=1.0)
        >>> G = kernel_matrix(X, Z, "sne", gamma=1.0)
        >>> V = rng.normal(size=(40, 2))
        >>> bool(np.allclose(S.matmat(V), G @ V))
        True
        """
        device = _check_device_client(device, client)
        setup = check_choice("setup", setup, ("eager", "lazy"))
        if setup == "lazy" and client is not None:
            raise ValueError(
                "setup='lazy' runs in process only: the cluster runs the set-up "
                "pass when the source is built (pass setup='eager' with client)"
            )
        if client is not None:
            # dask: an optional dependency (ksvd-bench[dask]), needed with client= only
            from .backends.dask import DistributedKernelSource, check_client

            check_client(client)
        src = cls._from_arrays(
            X,
            Z,
            kernel,
            gamma=gamma,
            center=center,
            degree=degree,
            coef0=coef0,
            dtype=dtype,
            chunk_bytes=chunk_bytes,
            setup=client is None and setup == "eager",
            device=device,
        )
        src._lazy_setup = setup == "lazy"
        return src if client is None else DistributedKernelSource(src, client)

    @classmethod
    def _from_arrays(
        cls,
        X,
        Z,
        kernel="sne",
        *,
        gamma=None,
        center=False,
        degree=2,
        coef0=1.0,
        dtype=None,
        chunk_bytes=DEFAULT_CHUNK_BYTES,
        setup=True,
        device="cpu",
    ):
        """:meth:`from_points` with the set-up pass optional (scale-out hook).

        With ``setup=False`` the source holds its points but no per-row constants: run
        :meth:`setup_rows` on row ranges covering ``[0, N)`` (anywhere, e.g. as tasks on
        pickled copies) and hand the results to :meth:`finish_setup` before any product.
        """
        args = _check_points(X, Z, kernel, gamma, degree, coef0, dtype, center)
        obj = object.__new__(cls)
        obj._init_points(*args, _check_chunk_bytes(chunk_bytes), check_device(device))
        obj.compat = None
        if setup:
            obj._run_setup()
        return obj

    def _init_points(
        self, X, Z, kernel, gamma, center, degree, coef0, dtype, chunk_bytes, device="cpu"
    ):
        """Store the points and hand them to the backend of ``device``; no pass is run."""
        self.kernel = kernel
        self.gamma = gamma
        self.center = center
        self.degree = degree
        self.coef0 = coef0
        self.dtype = np.dtype(dtype)
        self.device = device
        self.shape = (X.shape[0], Z.shape[0])
        self.n_features = X.shape[1]
        inv_g2 = 0.0
        if kernel in _KIND:
            # translated (distances do not change, their float32 rounding does) and scaled;
            # the tiles work in the storage dtype: float32 keeps 1 / gamma^2 in its range
            X, Z, inv_g2 = prepare_points(X, Z, kernel, gamma, self.dtype, self.dtype)
        params = Params(CODES[kernel], float(inv_g2), float(coef0), float(degree))
        self._inv_g2 = float(inv_g2)
        X, Z = self._cast(X), self._cast(Z)
        # norms of the stored (rounded) points, so that d = |x|^2 + |z|^2 - 2 x.z cancels
        xx, zz = squared_norms(X), squared_norms(Z)
        self._log_bound = _check_bounded(kernel, xx, zz, degree, coef0, self.dtype)
        self._xx = xx.astype(self.dtype)
        self._zz = zz.astype(self.dtype)
        self._backend = backend_class(device)(X, Z, self._xx, self._zz, params, chunk_bytes)
        self.chunk_rows, self.chunk_cols = self._backend.tiles
        self.n_entries = 0
        self.n_matmat = 0
        self.n_passes = 0
        n = self.shape[0]
        self._shift = np.zeros(n)
        self._scale = np.ones(n)
        self._rmean = np.zeros(n)
        self._cmean = np.zeros(self.shape[1])
        self._gmean = 0.0
        self._sumsq = None  # sum of squares of the uncentred G, when a pass gave it
        self._measured_fro = None  # (value, slack) of the centred norm's pass, once made
        self._ready = False
        self._lazy_setup = False  # from_points(..., setup="lazy"): run it on first use

    def _cast(self, V):
        """A copy of ``V`` in the storage dtype: CSR, or a C-contiguous array.

        Always a copy: the source must not change when the caller later writes to the
        points it was built from.
        """
        if sp.issparse(V):
            return sp.csr_matrix(V, dtype=self.dtype, copy=True)
        return np.array(V, dtype=self.dtype, order="C", copy=True)

    def _run_setup(self):
        self.finish_setup([self.setup_rows(0, self.shape[0])])

    def __reduce__(self):
        return _restore, (type(self), dict(self.__dict__))

    # ----------------------------------------------------------------- internals
    @property
    def _normalised(self):
        return self.kernel in ("sne", "t", "softmax")

    def setup_pending(self):
        """True while a ``setup="lazy"`` source has not run its set-up pass.

        Reading any row, column or block then runs that whole pass over G first (a protocol
        hook of :mod:`solvers._source`: a check held to a budget of entries, as the sampled
        certificate of ``asym_nystrom``, cannot run within it).
        """
        return bool(self._lazy_setup and not self._ready)

    def is_set_up(self):
        """Whether the set-up pass has run (its per-row constants are set)."""
        return bool(self._ready)

    def setup_state(self):
        """The per-row constants of the set-up pass, as a dict (:meth:`with_setup_state`)."""
        return {name: self.__dict__[name] for name in _SETUP_STATE}

    def with_setup_state(self, state):
        """A shallow copy of this source with ``state`` (from :meth:`setup_state`) attached.

        No point is copied: the copy shares them, so a worker holding the points builds a
        ready source from the small per-row constants alone.
        """
        missing = [name for name in _SETUP_STATE if name not in state]
        if missing:
            raise ValueError(f"state lacks the set-up constant(s) {missing}")
        src = copy.copy(self)  # a KernelSource copies as its __dict__: no data copied
        src.__dict__.update({name: state[name] for name in _SETUP_STATE})
        return src

    def ensure_setup(self):
        """Run a pending ``setup="lazy"`` set-up pass; raise if the set-up never ran."""
        if not self._ready and self._lazy_setup:
            self._run_setup()
        if not self._ready:
            raise RuntimeError(
                "the set-up pass has not run: call finish_setup with the "
                "results of setup_rows over [0, N) first"
            )

    def _check_range(self, a, b):
        n = self.shape[0]
        if not (
            isinstance(a, (int, np.integer))
            and isinstance(b, (int, np.integer))
            and 0 <= a <= b <= n
        ):
            raise ValueError(f"row range must satisfy 0 <= a <= b <= {n}, got ({a!r}, {b!r})")
        return int(a), int(b)

    def _eval(self, ridx, cidx):
        """Block ``G[ridx][:, cidx]``; None stands for all rows / all columns."""
        self.ensure_setup()
        B = self._backend.block(
            ridx, cidx, self._shift, self._scale, self._rmean, self._cmean, self._gmean, self.center
        )
        check_finite_kernel(B, self.kernel, self.degree)
        return B

    def _empty(self, r, c):
        return np.empty((r, c), dtype=self.dtype)

    # ----------------------------------------------------------------- scale-out hooks
    def setup_rows(self, a, b):
        """Partial set-up results of rows ``[a, b)`` (a scale-out hook; any process).

        Returns
        -------
        dict
            ``"rows"``: ``(a, b)``; ``"shift"``, ``"scale"``: per-row SNE/t/softmax shift and
            normaliser, shape (b - a,) (0 and 1 for other kernels); ``"rowsum"``: row sums
            of the normalised kernel (b - a,) or None when not centring; ``"colsum"``: this
            range's column sums (M,) or None; ``"sumsq"``: this range's sum of squares of the
            normalised, uncentred G, or None when no pass was needed (uncentred rbf, linear,
            poly: then nothing is computed).
        """
        a, b = self._check_range(a, b)
        if not (self._normalised or self.center):
            return {
                "rows": (a, b),
                "shift": np.zeros(b - a),
                "scale": np.ones(b - a),
                "rowsum": None,
                "colsum": None,
                "sumsq": None,
            }
        return self._backend.setup_rows(a, b, self._normalised, self.center)

    def finish_setup(self, parts):
        """Combine :meth:`setup_rows` results whose ranges tile ``[0, N)`` (list order).

        Column sums and sums of squares are added in the order of ``parts``, so a fixed
        list gives a fixed result.
        """
        n, m = self.shape
        ranges = sorted(p["rows"] for p in parts)
        if (
            not ranges
            or ranges[0][0] != 0
            or ranges[-1][1] != n
            or any(r[1] != s[0] for r, s in zip(ranges[:-1], ranges[1:], strict=True))
        ):
            raise ValueError(f"the row ranges of parts must tile [0, {n}) exactly, got {ranges}")
        shift, scale, rowsum = np.zeros(n), np.ones(n), np.zeros(n)
        colsum = np.zeros(m)
        sumsq = 0.0
        for p in parts:
            a, b = p["rows"]
            shift[a:b] = p["shift"]
            scale[a:b] = p["scale"]
            if self.center:
                rowsum[a:b] = p["rowsum"]
                colsum += p["colsum"]
            sumsq = None if sumsq is None or p["sumsq"] is None else sumsq + p["sumsq"]
        self._shift, self._scale, self._sumsq = shift, scale, sumsq
        self._measured_fro = None  # new constants: the centred norm is measured again
        if self.center:
            self._rmean = rowsum / m
            self._cmean = colsum / n
            self._gmean = nb.ordered_sum(self._rmean) / n
        self._ready = True

    def pass_rows(self, a, b, Omega=None, Psi_rows=None):
        """``(G[a:b] @ Omega, G[a:b].T @ Psi_rows)`` from one pass (scale-out hook).

        Centring included: stacking the first parts of consecutive ranges gives
        ``G @ Omega``, and summing the second parts (in order) gives ``G.T @ Psi``.
        ``Omega`` is (M, k), ``Psi_rows`` is (b - a, k'); either may be None (its result is
        then None). Results are float64.
        """
        self.ensure_setup()
        a, b = self._check_range(a, b)
        Om = None if Omega is None else _as_float64(Omega)
        Psi = None if Psi_rows is None else _as_float64(Psi_rows)
        if Om is not None and (Om.ndim != 2 or Om.shape[0] != self.shape[1]):
            raise ValueError(f"Omega must be 2-d with {self.shape[1]} rows, got {Om.shape}")
        if Psi is not None and (Psi.ndim != 2 or Psi.shape[0] != b - a):
            raise ValueError(f"Psi_rows must be 2-d with {b - a} rows, got {Psi.shape}")
        # operands without columns have empty products and need no pass
        Y = None if Om is None else np.zeros((b - a, Om.shape[1]))
        W = None if Psi is None else np.zeros((self.shape[1], Psi.shape[1]))
        Om = Om if Om is not None and Om.shape[1] else None
        Psi = Psi if Psi is not None and Psi.shape[1] else None
        if Om is None and Psi is None:
            return Y, W
        Yp, Wp = self._backend.products(a, b, self._shift, self._scale, Om, Psi)
        Y = Y if Yp is None else Yp
        W = W if Wp is None else Wp
        if self.center:
            # an operand too large for G overflows here: the protocol front names it
            with np.errstate(over="ignore", invalid="ignore"):
                self._center_products(a, b, Om, Psi, Yp, Wp)
        return Y, W

    def _center_products(self, a, b, Om, Psi, Y, W):
        """Apply ``H G H`` to uncentred products in place: ``G V - (r - g)(1^T V) - 1 (c^T V)``."""
        r = self._rmean[a:b] - self._gmean
        if Y is not None:
            Y -= np.outer(r, ordered_dot(np.ones(Om.shape[0]), Om))
            Y -= ordered_dot(self._cmean, Om)[None, :]
        if W is not None:
            W -= ordered_dot(r, Psi)[None, :]
            W -= np.outer(self._cmean, ordered_dot(np.ones(Psi.shape[0]), Psi))

    def block_rows(self, a, b, cidx):
        """``G[a:b][:, cidx]`` (a scale-out hook for ``cols``)."""
        a, b = self._check_range(a, b)
        c = check_index(cidx, self.shape[1], "column indices")
        if b == a or c.size == 0:
            return self._empty(b - a, c.size)
        return self._eval(slice(a, b), c)

    # ----------------------------------------------------------------- protocol
    def rows(self, idx):
        """``G[idx, :]`` as a dense ``(len(idx), M)`` array.

        On a ``setup="lazy"`` source whose set-up has not run, a normalised, uncentred row
        (SNE, t) carries its own normaliser: it is read from the row's own M entries
        (counted, twice the row's), never by the set-up pass over all of G
        (:meth:`rows_without_setup`).
        """
        idx = check_index(idx, self.shape[0], "row indices")
        if idx.size == 0:
            return self._empty(0, self.shape[1])
        if self.rows_without_setup() and self.setup_pending():
            return self._own_rows(idx)
        self.n_entries += idx.size * self.shape[1]
        return self._eval(idx, None)

    def rows_without_setup(self):
        """Whether :meth:`rows` reads rows without the set-up pass (a protocol hook).

        True for a normalised (SNE, t), uncentred kernel: a row's normaliser is its own sum.
        Columns, products and centred rows need every row's constants: the set-up pass.
        """
        return bool(self._normalised and not self.center)

    def _own_rows(self, idx):
        """Rows ``idx`` before the set-up pass: each normalised by its own sum (see rows)."""
        n, m = self.shape
        own = getattr(self._backend, "setup_of_rows", None)
        if own is not None:
            sh, sc = own(idx)
        else:  # a backend without it: the set-up of one-row ranges
            parts = [self._backend.setup_rows(int(i), int(i) + 1, True, False) for i in idx]
            sh = np.array([p["shift"][0] for p in parts])
            sc = np.array([p["scale"][0] for p in parts])
        shift, scale = np.zeros(n), np.ones(n)
        shift[idx], scale[idx] = sh, sc
        self.n_entries += 2 * idx.size * m  # the normalisers' entries, then the rows'
        B = self._backend.block(idx, None, shift, scale, np.zeros(n), np.zeros(m), 0.0, False)
        check_finite_kernel(B, self.kernel, self.degree)
        return B

    def cols(self, idx):
        """``G[:, idx]`` as a dense ``(N, len(idx))`` array."""
        idx = check_index(idx, self.shape[1], "column indices")
        if idx.size == 0:
            return self._empty(self.shape[0], 0)
        self.n_entries += idx.size * self.shape[0]
        return self._eval(None, idx)

    def block(self, ridx, cidx):
        """``G[np.ix_(ridx, cidx)]`` as a dense array."""
        r = check_index(ridx, self.shape[0], "row indices")
        c = check_index(cidx, self.shape[1], "column indices")
        if r.size == 0 or c.size == 0:
            return self._empty(r.size, c.size)
        self.n_entries += r.size * c.size
        return self._eval(r, c)

    def product_result(self, R, V, vec, name, transpose=False):
        """``R`` (a product with the operand ``V`` called ``name``; ``vec``: ``V`` was a
        vector) in the result dtype, checked finite
        (:func:`~ksvd_bench.kernels.operands.check_product`)."""
        R = R.astype(np.result_type(self.dtype, V), copy=False)
        check_product(R, V, name, self.norm_bound, transpose)
        return R[:, 0] if vec else R

    def matmat(self, X):
        """``G @ X`` for a dense ``(M, k)`` array (or a vector): one fused pass."""
        V, vec = check_operand(X, self.shape[1], "X")
        Y, _ = self.pass_rows(0, self.shape[0], V, None)
        self.n_matmat += 1
        self.n_passes += 1
        return self.product_result(Y, V, vec, "X")

    def rmatmat(self, Y):
        """``G.T @ Y`` for a dense ``(N, k)`` array (or a vector): one fused pass."""
        U, vec = check_operand(Y, self.shape[0], "Y")
        _, W = self.pass_rows(0, self.shape[0], None, U)
        self.n_matmat += 1
        self.n_passes += 1
        return self.product_result(W, U, vec, "Y", transpose=True)

    def sketch(self, Omega, Psi):
        """``(G @ Omega, G.T @ Psi)`` from ONE fused pass over G.

        Parameters
        ----------
        Omega : ndarray of shape (M, k) or (M,)
        Psi : ndarray of shape (N, l) or (N,)

        Returns
        -------
        Y : ndarray of shape (N, k) or (N,)
        W : ndarray of shape (M, l) or (M,)
        """
        Om, vo = check_operand(Omega, self.shape[1], "Omega")
        Ps, vp = check_operand(Psi, self.shape[0], "Psi")
        Y, W = self.pass_rows(0, self.shape[0], Om, Ps)
        self.n_matmat += 2
        self.n_passes += 1
        return (
            self.product_result(Y, Om, vo, "Omega"),
            self.product_result(W, Ps, vp, "Psi", transpose=True),
        )

    def dense(self):
        """All of G as a dense array (O(N M) memory; one pass)."""
        self.n_passes += 1
        return self._eval(None, None)

    def norm_bound(self):
        """A cheap upper bound on the spectral norm ``||G||_2``.

        The Frobenius norm of the (normalised, centred) G where the set-up pass measured it
        (SNE, t, or any centred kernel), padded for rounding; otherwise an analytic bound
        from the points, O(N + M): ``sqrt(N M)`` for rbf (entries in [0, 1]),
        ``||X||_F ||Z||_F`` for linear, ``sqrt(sum_i (|x_i|^2 + |c|)^p sum_j (|z_j|^2 +
        |c|)^p)`` for poly (Cauchy-Schwarz). Centring never raises the norm (``H`` is a
        projection), so an uncentred bound also bounds ``H G H``. A ``setup="lazy"`` source
        whose set-up pass has not run yet answers from the kernel alone and does not run it
        (``sqrt(N)`` for sne, t and softmax: their rows are probability vectors, so ``||G||_2 <=
        sqrt(||G||_1 ||G||_inf) <= sqrt(N)``).
        """
        n, m = self.shape
        pad = 1e-5 if self.dtype == np.float32 else 1e-10
        if not self._ready and self._lazy_setup:
            return float(self._analytic_bound() * (1 + pad))
        self.ensure_setup()
        if self._sumsq is None or not np.isfinite(self._sumsq):  # inf: entries near overflow
            bound = self._analytic_bound()
        elif self.center:
            # the four terms are each at most sum G^2: cancellation error is below this slack
            slack = 8 * (n + m) * np.finfo(np.float64).eps * self._sumsq
            bound = min(np.sqrt(max(self._fro2(), 0.0) + slack), np.sqrt(self._sumsq))
        else:
            bound = np.sqrt(self._sumsq)
        return float(bound * (1 + pad))

    def _fro2(self):
        """``||G||_F^2`` from the set-up pass's sums (centred: ``sum G^2 - M sum r_i^2 - N sum
        c_j^2 + N M g^2``). The centred form cancels for points far from the origin: only
        :meth:`norm_bound` uses it, with a slack that covers the cancellation."""
        if not self.center:
            return self._sumsq
        n, m = self.shape
        return (
            self._sumsq
            - m * ordered_sum_squares(self._rmean)
            - n * ordered_sum_squares(self._cmean)
            + n * m * self._gmean**2
        )

    def frobenius_norm(self):
        """``||G||_F`` of the (normalised, centred) G, exact to rounding, or None (unknown).

        Uncentred SNE, t and softmax: from the sum of squares of the set-up pass (free). Centred
        kernels: from one pass over G that centres each entry, ``G_ij - r_i - c_j + g``,
        before squaring it (:meth:`_centred_sum_of_squares`: float64, compensated), made on
        the first call and counted in ``n_passes``; later calls are free. The sum of squares
        minus the means' squares would cancel for points far from the origin (a linear
        kernel at offset 3000 gave 0.0 for a norm of 965). None where no pass measured it
        (uncentred rbf, linear, poly: :meth:`norm_bound` is only an analytic bound there),
        where a sum overflowed, and where the rounding slack is not small against the
        value: above :data:`FROBENIUS_RTOL` of it (:meth:`frobenius_slack`), so a norm lost
        to cancellation, and a zero norm (always within its slack), are never given as
        known. A ``setup="lazy"`` source runs its set-up pass here. ``rsvd`` and
        ``block_krylov`` use it for their Frobenius-gap error estimate, the driver for
        ``stop="estimate"``.
        """
        return self.known_frobenius(self.frobenius_slack())

    def known_frobenius(self, measured):
        """:meth:`frobenius_norm` of a measured ``(value, slack)`` (a scale-out wrapper's
        :meth:`frobenius_slack`): the value, or None where its slack is too large."""
        value, slack = measured
        if value is None or not (value > 0 and slack <= FROBENIUS_RTOL[self.dtype.char] * value):
            return None
        return value

    def frobenius_slack(self, block_of_rows=None, counter=None):
        """``(value, slack)``: the measured ``||G||_F`` and a bound on its rounding error.

        ``(None, inf)`` where nothing measured it. The slack models first-order rounding
        of the entries the sum squares, against the operator the source's products apply:
        the centring subtraction (``3 eps`` of ``|G_ij| + |r_i| + |c_j| + |g|``, at most
        ``12 eps sqrt(sum G^2)`` in Frobenius norm, uncentred ``G``), the float32 cast of
        a returned block, and the summations (``sqrt(N + M) eps`` each, their typical
        size). Runs the pass of :meth:`frobenius_norm` where it has not run: it reads
        ``block_of_rows(a, b)``, the centred ``G[a:b]`` (default: evaluated in this
        process; a scale-out wrapper passes its own), and counts one pass in
        ``counter.n_passes`` (default: this source).
        """
        if not self._ready and self._lazy_setup:
            self._run_setup()
        if not self._ready or self._sumsq is None or not np.isfinite(self._sumsq):
            return None, np.inf
        if not self.center:
            value = float(np.sqrt(self._sumsq))
            return value, _sum_slack(self.shape) * value + self._evaluation_slack()
        if getattr(self, "_measured_fro", None) is None:
            total = self._centred_sum_of_squares(block_of_rows or self._block_of_rows)
            (counter or self).n_passes += 1
            self._measured_fro = self._frobenius_from_sum(total)
        return self._measured_fro

    def _block_of_rows(self, a, b):
        return self._eval(slice(a, b), None)

    def _centred_sum_of_squares(self, block_of_rows):
        """``sum_ij G_ij^2`` over ``block_of_rows(a, b)`` (``G[a:b]``, centred by the source).

        Row blocks of about :data:`FROBENIUS_BLOCK_BYTES`; each row's sum in float64
        (numpy's pairwise sum), the rows' sums added exactly (``math.fsum``): the result
        does not depend on the block size or on who evaluates the blocks.
        """
        n, m = self.shape
        step = max(1, FROBENIUS_BLOCK_BYTES // (8 * max(m, 1)))
        parts = []
        for a in range(0, n, step):
            B = np.asarray(block_of_rows(a, min(n, a + step)), dtype=np.float64)
            parts.extend(np.sum(B * B, axis=1).tolist())
        return math.fsum(parts)

    def _frobenius_from_sum(self, total):
        """``(value, slack)`` of a measured centred sum of squares (see frobenius_slack)."""
        if not np.isfinite(total):
            return None, np.inf
        value = math.sqrt(total)
        eps = np.finfo(np.float64).eps
        uncentred = math.sqrt(self._sumsq)
        slack = (
            12 * eps * uncentred
            + _sum_slack(self.shape) * (uncentred + value)
            + self._evaluation_slack()
        )
        if self.dtype != np.float64:
            slack += np.finfo(self.dtype).eps * value  # the block's cast, entry by entry
        return value, float(slack)

    def _evaluation_slack(self):
        """First-order bound on ``||G~ - G||_F`` for the uncentred kernel values ``G~`` the
        tiles compute (cross products in the storage dtype, ``u`` its machine epsilon).

        Linear and poly (degree ``p``): ``|x.z|`` rounds by ``(d + 2) u |x| |z|``, raised to
        ``p``: at most ``p (d + 2) u`` times the analytic bound (Cauchy-Schwarz). Exp and t
        kernels: the exponent ``t = (|x|^2 + |z|^2 - 2 x.z) / gamma^2`` rounds by
        ``(d + 2) u T`` with ``T = 2 (max |x|^2 + max |z|^2) / gamma^2`` (translated, scaled
        points), and ``|dk/dt| <= k``; the row normalisation of SNE and t adds ``M`` float64
        roundings. The centring that follows is a projection: it does not enlarge it.
        """
        n, m = self.shape
        u = float(np.finfo(self.dtype).eps)
        d = self.n_features
        if self.kernel in ("linear", "poly"):
            p = self.degree if self.kernel == "poly" else 1
            return p * (d + 2) * u * self._analytic_bound()
        xmax = float(np.max(self._xx)) if self._xx.size else 0.0
        zmax = float(np.max(self._zz)) if self._zz.size else 0.0
        T = 2.0 * getattr(self, "_inv_g2", 0.0) * (xmax + zmax)
        rel = (d + 2) * u * (1.0 + T) + (m + 4) * np.finfo(np.float64).eps
        return rel * float(np.sqrt(self._sumsq))

    def _analytic_bound(self):
        n, m = self.shape
        if self.kernel in ("linear", "poly"):
            return float(np.exp(self._log_bound))  # finite: checked at construction
        if self._normalised:
            return float(np.sqrt(n))  # sne, t, softmax: row-stochastic (see norm_bound)
        return float(np.sqrt(n) * np.sqrt(m))  # rbf: entries in [0, 1]

    def joint_psd(self):
        """The PSD kernel on ``X ∪ Z`` whose block G is (``sampling="rpcholesky"``).

        See :class:`~ksvd_bench.kernels.joint.JointKernel`; needs no set-up pass.
        """
        return joint_kernel_of(self)

    def __repr__(self):
        return (
            f"KernelSource(shape={self.shape}, kernel={self.kernel!r}, gamma={self.gamma}, "
            f"compat={self.compat!r}, center={self.center}, dtype={self.dtype})"
        )


def _structured_or_none(A, kernel, structured, *, gamma, bandwidth_factor, compat, center, dtype):
    """The structured source of :func:`kernel_source` where it applies, else None."""
    kernel_ok = isinstance(kernel, str) and kernel in EXP_KERNELS
    shape = getattr(A, "shape", None)
    square = shape is not None and len(shape) == 2 and shape[0] == shape[1]
    compat_ok = compat is None or (isinstance(compat, str) and compat == "auto")
    if not (sp.issparse(A) and square and kernel_ok and compat_ok):
        if structured is True and not kernel_ok:
            raise structured_kernel_error(kernel)
        if structured is True:
            raise ValueError(
                "structured=True needs a sparse square A, kernel 'sne' or 'rbf' and "
                "compat None/'auto'"
            )
        return None
    klass = _structured_class()
    if klass is None:
        if structured is True:
            raise ImportError("structured=True but ksvd_bench.kernels.structured is missing")
        return None
    # structured is optional at import time (ksvd_bench.kernels loads it lazily too)
    from .structured import StructureIllConditioned

    A = check_data(A, "A")
    out_dtype = _resolve_dtype(dtype, A)  # float32 A or dtype=float32 keep float32
    # gamma from A as given, exactly as KernelSource and ksvd_kernel resolve it
    gamma = _resolve_gamma(A, kernel, gamma, bandwidth_factor)
    try:
        return klass(
            A.astype(np.float64), kernel, gamma=gamma, center=_check_center(center), dtype=out_dtype
        )
    except StructureIllConditioned:
        # Signed data whose sparse-plus-rank-one form would cancel: the general lazy
        # source is exact for every input (it recomputes A's checks).
        if structured is True:
            raise
        return None


def kernel_source(
    A,
    kernel="sne",
    *,
    gamma=None,
    bandwidth_factor=1.0,
    compat="auto",
    center=True,
    random_state=None,
    degree=2,
    coef0=1.0,
    dtype=None,
    structured="auto",
    chunk_bytes=DEFAULT_CHUNK_BYTES,
    client=None,
    device="cpu",
):
    """The lazy KSVD kernel matrix of a data matrix ``A``, as the source that suits it.

    The one entry that chooses among the lazy sources of ``ksvd_kernel(A, ...)``'s matrix;
    :class:`KernelSource` itself always builds the general lazy source.

    Parameters
    ----------
    A, kernel, gamma, bandwidth_factor, compat, center, random_state, degree, coef0, dtype
        As in :func:`ksvd_kernel`.
    structured : {"auto", True, False}, default="auto"
        Whether a sparse square ``A`` with an exp kernel ("sne", "rbf") and no compat map
        (``compat`` None or "auto") gets the structured source (below). ``"auto"``: where
        it applies, the module is available and the structured form is well conditioned;
        ``True`` requires it (an error otherwise, including
        :class:`~ksvd_bench.kernels.structured.StructureIllConditioned`); ``False`` never.
    chunk_bytes : int, default=32 MiB
        Memory budget of a pass's work buffers (:class:`KernelSource`).
    client : distributed.Client, default=None
        Run the general lazy source's set-up pass and passes as tasks over row blocks on
        this Dask cluster. The structured source stays in process: its products cost about
        as much as moving their operands to the workers and back
        (``benchmarks/scripts/bench_distributed.py``).
    device : {"cpu", "cuda"}, default="cpu"
        Where the general source's tile passes run (:class:`KernelSource`); ``"cuda"``
        needs ``client=None``, and the structured source (a CPU source) is then never
        chosen: ``structured=True`` raises.

    Returns
    -------
    StructuredKernelSource or DistributedKernelSource or KernelSource
        - :class:`~ksvd_bench.kernels.structured.StructuredKernelSource` when ``structured``
          is ``"auto"`` or ``True``, ``device="cpu"``, and ``A`` is sparse and square with
          kernel "sne" or "rbf" and ``compat`` None or "auto" (exact, works from the
          sparsity of ``A @ A`` and never evaluates dense rows; float32 kept as ``dtype``
          resolves), whether or not ``client`` is given. With ``"auto"``, an
          ill-conditioned structured form (some signed data) falls back to the next cases.
        - :class:`~ksvd_bench.kernels.distributed.DistributedKernelSource` otherwise when
          ``client`` is given (its set-up pass ran on the cluster).
        - :class:`KernelSource` otherwise (``KernelSource(A, ..., device=device)``).

        All three are matrix sources: every solver in :mod:`solvers` takes them.

    Raises
    ------
    ValueError
        ``structured`` not "auto"/True/False, ``structured=True`` where the structured
        source does not apply, ``device`` other than "cpu" with a ``client``, and every
        error of :class:`KernelSource`.
    TypeError
        ``client`` is not a ``distributed.Client``.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> A = sp.random(30, 30, density=0.2, random_state=0, format="csr")
    >>> type(kernel_source(A, "sne")).__name__
    'StructuredKernelSource'
    >>> type(kernel_source(A.toarray(), "sne")).__name__
    'KernelSource'
    """
    if structured not in ("auto", True, False):
        raise ValueError(f"structured must be 'auto', True or False, got {structured!r}")
    device = _check_device_client(device, client)
    kernel = check_kernel(kernel)  # canonical name before it picks the structured class
    if device != "cpu" and structured is True:
        raise ValueError("structured=True runs in process on the CPU: use device='cpu'")
    if client is not None:
        from .backends.dask import DistributedKernelSource, check_client

        check_client(client)
    if structured is not False and device == "cpu":
        src = _structured_or_none(
            A,
            kernel,
            structured,
            gamma=gamma,
            bandwidth_factor=bandwidth_factor,
            compat=compat,
            center=center,
            dtype=dtype,
        )
        if src is not None:
            return src
    params = dict(
        gamma=gamma,
        bandwidth_factor=bandwidth_factor,
        compat=compat,
        center=center,
        random_state=random_state,
        degree=degree,
        coef0=coef0,
        dtype=dtype,
        chunk_bytes=chunk_bytes,
        device=device,
    )
    if client is None:
        return KernelSource(A, kernel, **params)
    src = object.__new__(KernelSource)
    src._init_data(A, kernel, **params)  # the cluster runs the set-up pass
    return DistributedKernelSource(src, client)
