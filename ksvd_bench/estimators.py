"""KSVD as a scikit-learn transformer: nonlinear SVD with asymmetric kernels.

The estimator fits the SVD of the (centred) asymmetric kernel matrix
``G_ij = k(C^T x_i, z_j)`` built from the rows ``x_i`` and columns ``z_j`` of a data matrix
``A`` (Tao et al., "Nonlinear SVD with Asymmetric Kernels"). The left singular vectors are the
row (source) features, the right singular vectors the column (target) features. New rows are
embedded by the out-of-sample extension of the paper's eq. 9, the Nystrom formula
``e(x) = k(C^T x, Z) V S^-1`` with the training column data ``Z`` and the matrix ``C`` of the
compatibility map that the fit used (identity when the map acts on the columns, ``N > M``, or
there is none).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

import solvers
from ksvd_bench.kernels import compat_maps, kernel_matrix, kernel_source
from ksvd_bench.kernels.params import (
    COMPATS,
    KERNELS,
    check_gamma,
    paper_gamma,
    softmax_gamma,
)
from solvers import (  # random_state: None, int, Generator
    SVDResult,
    check_int,
    check_random_state,
    fix_signs,
)

__all__ = ["KSVD"]

#: entries of one block of new-row kernel values evaluated at once in ``transform`` (128 MB f64)
_TRANSFORM_BLOCK_ENTRIES = 1 << 24


def _reject_masked(A, name):
    """Refuse a masked array with masked entries: their mask would be dropped, not honoured."""
    if isinstance(A, np.ma.MaskedArray) and np.ma.getmaskarray(A).any():
        raise TypeError(
            f"{name} is a masked array with {int(np.ma.getmaskarray(A).sum())} masked "
            f"entries; KSVD has no notion of missing values and would read the hidden data: "
            f"fill them ({name}.filled(value)) or drop those rows first"
        )


def _all_triplets(source, r):
    """The r = min(N, M) triplets of the kernel matrix by LAPACK on its dense form.

    A complete set is no job for a Krylov solver: a centred kernel has rank <= min(N, M) - 1,
    and PROPACK then stops on the invariant subspace or returns a spurious last value
    (SciPy's ``svds(..., solver="propack")`` gives 433 for the zero singular value of a rank-one
    80 x 2 matrix). Here G has min(N, M) = r rows or columns, so it is no larger than the
    features themselves.
    """
    t0 = time.perf_counter()
    G = np.asarray(source.dense(), dtype=np.float64)
    try:
        U, s, Vt = scipy.linalg.svd(G, full_matrices=False, lapack_driver="gesdd")
    except np.linalg.LinAlgError:
        # gesdd's divide and conquer can fail to converge where the slower QR iteration does not
        U, s, Vt = scipy.linalg.svd(G, full_matrices=False, lapack_driver="gesvd")
    U, V = fix_signs(U[:, :r].copy(), Vt[:r].T.copy())
    info = dict(
        method="tsvd",
        backend="lapack",
        effort=r,
        n_matvec=0,
        n_block_entries=int(G.size),
        n_products=0,
        n_passes=1.0,
        seconds=time.perf_counter() - t0,
    )
    return SVDResult(U, s[:r], V, info)


class KSVD(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel SVD with asymmetric kernels (KSVD) as a scikit-learn transformer.

    Parameters
    ----------
    n_components : int
        Number of singular triplets r to compute.
    kernel : {"sne", "rbf", "t", "linear", "poly", "softmax"}, default="sne"
        Kernel between row data and column data (see :func:`ksvd_bench.kernels.kernel_matrix`).
        ``"sne"``, ``"t"`` and ``"softmax"`` are row-normalised and therefore asymmetric even
        for square data.
    gamma : float, optional
        Bandwidth: ``exp(-|x - z|^2 / gamma^2)``. Default: the paper's rule
        ``bandwidth_factor * sqrt(M * var(A))``. For ``"softmax"``, ``exp(x . z / gamma)``,
        the temperature: default ``bandwidth_factor * sqrt(d)``, ``d = min(N, M)`` the
        dimension of the mapped data. Ignored by ``"linear"`` and ``"poly"``.
    bandwidth_factor : float, default=1.0
        Multiplier of the default rule, used only when ``gamma`` is None.
    compat : {"auto", "pinv", "pca", "random", None}, default="auto"
        Compatibility map making rows and columns comparable when ``A`` is not square (the
        paper's a0 = ``"pinv"``, a1 = ``"pca"``, a2 = ``"random"``); ``"auto"`` is None for
        square ``A`` and ``"pca"`` otherwise.
    center : bool, default=True
        Centre the kernel matrix, ``H_N G H_M``.
    solver : {"tsvd", "rsvd", "sym_nystrom", "asym_nystrom"}, default="tsvd"
        Any method of :func:`solvers.svd`; ``"asym_nystrom"`` gives the fast approximate KSVD.
    solver_options : dict, optional
        Keyword options passed to :func:`solvers.svd` (e.g. ``{"n_samples": 500}`` for the
        Nystrom methods).
    degree, coef0 : int, float, default=2, 1.0
        Parameters of the ``"poly"`` kernel ``(x.z + coef0)^degree``.
    random_state : None, int >= 0 or numpy.random.Generator, default=None
        Seeds the compatibility map ``"random"`` and randomised solvers; anything else raises
        an error naming ``random_state`` at ``fit``.

    Attributes
    ----------
    left_features_ : ndarray of shape (N, r)
        Left singular vectors of G (row / source features of the training rows).
    right_features_ : ndarray of shape (M, r)
        Right singular vectors of G (column / target features of the training columns).
    singular_values_ : ndarray of shape (r,)
        Singular values, largest first.
    gamma_ : float or None
        Bandwidth actually used (None for kernels without one).
    compat_ : str or None
        Resolved compatibility map.
    column_data_ : ndarray or sparse matrix of shape (M, d)
        Training column data ``z_j`` (after the compatibility map) used by ``transform``.
    row_map_ : ndarray of shape (n_features_in_, d) or None
        Linear map taking a raw row ``a`` to its kernel argument ``a @ row_map_``: the matrix
        ``C`` of the compatibility map when it maps the rows (``M >= N``; ``pinv(A)`` for
        ``"pinv"``), None (identity) when the rows enter unchanged (``N > M`` or no map).
    column_means_ : ndarray of shape (M,) or None
        Column means of the uncentred training G (centring statistics for ``transform``).
    grand_mean_ : float or None
        Mean of all entries of the uncentred training G.
    solver_info_ : dict
        The solver's ``info`` (effort, matrix-vector products, seconds, ...).
    n_features_in_ : int
        Number of columns M of the training data.

    Notes
    -----
    With ``solver="tsvd"`` and ``n_components == min(N, M)`` the complete SVD is computed by
    LAPACK on the dense kernel matrix (no larger than the features then; ARPACK needs fewer
    triplets than the smaller dimension and PROPACK fails on the rank-deficient centred kernel)
    unless ``solver_options`` names a backend; ``solver_info_["backend"]`` is then ``"lapack"``.

    A matrix whose centred kernel is zero (for example an all-zero ``A`` with an explicit
    ``gamma``; the bandwidth rule itself refuses a zero-variance ``A``) has no direction to
    learn: the fit gives singular values 0 and ``transform`` returns zero features.
    Masked arrays with masked entries are refused (``TypeError`` naming the input), not read
    with their mask silently dropped.

    ``transform`` of a training row returns the corresponding row of ``left_features_`` up to
    the solver's accuracy, because ``G_c V S^-1 = U`` for exact singular triplets; with the
    approximate solvers (``"rsvd"``, Nystrom) it returns the Nystrom extension instead.
    Components whose singular value is numerically zero (rank-deficient G) are extended as 0.

    References
    ----------
    Q. Tao, F. Tonin, A. Lambert, Y. Chen, P. Patrinos, J. A. K. Suykens. Nonlinear SVD with
    asymmetric kernels: feature learning and asymmetric Nystrom method. arXiv:2306.07040, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from ksvd_bench.estimators import KSVD
    >>> A = np.random.default_rng(0).random((40, 40))
    >>> est = KSVD(3, kernel="sne", random_state=0).fit(A)
    >>> est.left_features_.shape, est.right_features_.shape
    ((40, 3), (40, 3))
    """

    def __init__(
        self,
        n_components,
        *,
        kernel="sne",
        gamma=None,
        bandwidth_factor=1.0,
        compat="auto",
        center=True,
        solver="tsvd",
        solver_options=None,
        degree=2,
        coef0=1.0,
        random_state=None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.bandwidth_factor = bandwidth_factor
        self.compat = compat
        self.center = center
        self.solver = solver
        self.solver_options = solver_options
        self.degree = degree
        self.coef0 = coef0
        self.random_state = random_state

    # ------------------------------------------------------------------ validation
    def _validate_params_ksvd(self, n_rows, n_cols):
        r = check_int("n_components", self.n_components, 1)
        if r > min(n_rows, n_cols):
            raise ValueError(
                f"n_components must be <= min(n_samples, n_features) = {min(n_rows, n_cols)}, "
                f"got {r} (n_samples = {n_rows}, n_features = {n_cols})"
            )
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")
        if self.compat != "auto" and self.compat not in COMPATS:
            raise ValueError(f"compat must be 'auto' or one of {COMPATS}, got {self.compat!r}")
        if self.compat is None and n_rows != n_cols:
            raise ValueError(
                f"compat=None needs a square data matrix, got shape ({n_rows}, {n_cols})"
            )
        if not isinstance(self.center, (bool, np.bool_)):
            raise TypeError(f"center must be a bool, got {type(self.center).__name__}")
        if self.solver not in solvers.METHODS:
            raise ValueError(f"solver must be one of {solvers.METHODS}, got {self.solver!r}")
        if self.solver_options is not None and not isinstance(self.solver_options, dict):
            raise TypeError(
                f"solver_options must be a dict or None, got {type(self.solver_options).__name__}"
            )
        if self.gamma is not None:
            check_gamma(self.gamma)
        check_gamma(self.bandwidth_factor)
        if self.kernel == "poly":
            check_int("degree", self.degree, 1)
        return r

    def _resolved_compat(self, n_rows, n_cols):
        if self.compat == "auto":
            return None if n_rows == n_cols else "pca"
        return self.compat

    # ------------------------------------------------------------------ fit
    def fit(self, A, y=None):
        """Fit the KSVD of the kernel matrix of ``A``.

        Parameters
        ----------
        A : array-like or sparse matrix of shape (N, M)
            Data matrix; rows are the source data, columns the target data.
        y : None
            Ignored.

        Returns
        -------
        self : KSVD
        """
        self._fit(A)
        return self

    def fit_transform(self, A, y=None):
        """Fit and return the left singular vectors (the training row features).

        Parameters
        ----------
        A : array-like or sparse matrix of shape (N, M)
        y : None
            Ignored.

        Returns
        -------
        features : ndarray of shape (N, n_components)
        """
        self._fit(A)
        return self.left_features_.copy()

    def _fit(self, A):
        _reject_masked(A, "A")
        A = validate_data(
            self, A, accept_sparse="csr", dtype=[np.float64, np.float32], ensure_min_samples=2
        )
        n_rows, n_cols = A.shape
        r = self._validate_params_ksvd(n_rows, n_cols)
        rng = check_random_state(self.random_state)
        compat = self._resolved_compat(n_rows, n_cols)
        if self.kernel in ("linear", "poly"):
            gamma = None
        elif self.gamma is not None:
            gamma = check_gamma(self.gamma)
        elif self.kernel == "softmax":
            # every compat map gives points of dimension min(N, M)
            gamma = softmax_gamma(min(n_rows, n_cols), self.bandwidth_factor)
        else:
            gamma = paper_gamma(A, self.bandwidth_factor)
        # one seed drawn for the compatibility map, so that the solve and the stored column data
        # see the same random projection
        compat_seed = int(rng.integers(2**63 - 1))
        common = dict(
            kernel=self.kernel,
            gamma=gamma,
            compat=compat,
            random_state=compat_seed,
            degree=self.degree,
            coef0=self.coef0,
        )
        source = kernel_source(A, center=bool(self.center), **common)
        options = dict(self.solver_options or {})
        if self.solver == "tsvd" and r >= min(n_rows, n_cols) and "backend" not in options:
            result = _all_triplets(source, r)
        else:
            result = solvers.svd(source, r, method=self.solver, random_state=rng, **options)

        # the map C itself, not recovered from X = A C: pinv(A) X is only C's part in the row
        # space of A, wrong for new rows with the Gaussian map (a2) or a rank-deficient A
        maps = compat_maps(A, compat, random_state=compat_seed)
        self.row_map_ = maps.row_map
        self.column_data_ = maps.Z
        if self.center:
            raw = kernel_source(A, center=False, **common)
            col_sums = np.asarray(raw.rmatmat(np.ones((n_rows, 1), dtype=raw.dtype))).ravel()
            self.column_means_ = col_sums / n_rows
            self.grand_mean_ = float(self.column_means_.mean())
        else:
            self.column_means_ = None
            self.grand_mean_ = None
        self.left_features_ = np.asarray(result.U)
        self.right_features_ = np.asarray(result.V)
        self.singular_values_ = np.asarray(result.s)
        self.gamma_ = gamma
        self.compat_ = compat
        self.solver_info_ = dict(result.info)
        self._n_features_out = r
        return self

    # ------------------------------------------------------------------ transform
    def _negligible_components(self):
        """Mask of the components whose singular value is rounding error, not signal.

        Relative to the largest singular value and, for a centred kernel, to the part the
        centring removed (norm >= ``sqrt(N) |column_means_|``): when ``G`` is constant (an
        all-zero ``A``) the centred matrix is pure rounding error of that part, and dividing
        by its "singular values" would amplify noise into features.
        """
        s = self.singular_values_
        n_rows, n_cols = self.left_features_.shape[0], self.right_features_.shape[0]
        scale = float(s.max(initial=0.0))
        if self.column_means_ is not None:
            scale = max(scale, np.sqrt(n_rows) * float(np.linalg.norm(self.column_means_)))
        return s <= max(n_rows, n_cols) * np.finfo(np.float64).eps * scale

    def transform(self, A):
        """Embed new rows by the out-of-sample extension (eq. 9 of the paper).

        ``e(a) = g_c(a) V S^-1`` with ``g(a)_j = k(C^T a, z_j)`` over all training columns
        ``z_j``, normalised like the training rows (SNE/t) and centred with the training column
        means: ``g_c = g - mean(g) - column_means_ + grand_mean_``.

        Parameters
        ----------
        A : array-like or sparse matrix of shape (n, M)

        Returns
        -------
        features : ndarray of shape (n, n_components)
        """
        check_is_fitted(self, "left_features_")
        _reject_masked(A, "A")
        A = validate_data(self, A, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False)
        X = A if self.row_map_ is None else A @ self.row_map_
        if sp.issparse(X) and not sp.issparse(self.column_data_):
            X = X.toarray()
        n_cols = self.right_features_.shape[0]
        s = self.singular_values_
        # numerically zero singular values carry no direction to extend: their features are 0
        tiny = self._negligible_components()
        proj = self.right_features_ / np.where(tiny, 1.0, s)
        proj[:, tiny] = 0.0
        out = np.empty((A.shape[0], proj.shape[1]), dtype=np.result_type(proj.dtype, A.dtype))
        step = max(1, _TRANSFORM_BLOCK_ENTRIES // max(n_cols, 1))
        for start in range(0, A.shape[0], step):
            stop = min(start + step, A.shape[0])
            g = kernel_matrix(
                X[start:stop],
                self.column_data_,
                self.kernel,
                # linear and poly ignore gamma; any positive value passes the check
                gamma=1.0 if self.gamma_ is None else self.gamma_,
                degree=self.degree,
                coef0=self.coef0,
            )
            g = np.asarray(g, dtype=np.float64)
            if self.center:
                g = g - g.mean(axis=1, keepdims=True) - self.column_means_ + self.grand_mean_
            out[start:stop] = g @ proj
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
