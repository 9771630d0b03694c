"""The joint PSD kernel of two point sets, whose off-diagonal block is (a scaling of) ``G``.

For the distance kernels ``k(x, z) = f(|x - z|^2)`` with ``f`` positive definite (RBF
``exp(-r^2 / gamma^2)``, Student-t ``1 / (1 + r^2 / gamma^2)``) and for the inner-product
kernels (linear ``x.z``; poly ``(x.z + c)^p`` with ``c >= 0`` and an integer ``p``), the
kernel on the stacked points ``P = [X; Z]``, ``K = [k(p_a, p_b)]``, is positive
semidefinite and ``K[:N, N:] = K_XZ``. The matrices of :class:`KernelSource` derive from it:

* rbf, linear, poly: ``G = K_XZ``;
* sne, t: ``G = D^-1 K_XZ``, ``D = diag(K_XZ 1)`` (rows normalised over all of Z);
* softmax: ``G = D^-1 K_XZ`` with ``k(u, v) = exp((u.v - c) / gamma)``, the exponential of
  the linear kernel (PSD) times the constant ``exp(-c / gamma)``, ``c`` the largest squared
  norm of the stacked points, so no entry exceeds 1 (the normalisation removes the
  constant, and the source's translation of Z, a factor per row, alike);
* then, when centring, ``H_N G H_M``.

:class:`JointKernel` evaluates columns, blocks and the diagonal of K on demand (float64),
which is the protocol ``solvers.sampling.rpcholesky_svd`` consumes (see
:mod:`solvers.sampling.rpcholesky`). Linear and poly kernels are supported only where K is
PSD (a poly kernel with ``coef0 < 0`` or a non-integer degree is not); any other request
raises ``ValueError``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from solvers import check_index

from .matrix import squared_norms

__all__ = ["JointKernel", "joint_kernel_of"]

_EXP, _T, _LINEAR, _POLY, _SOFTMAX = "exp", "t", "linear", "poly", "softmax"
_FORM = {"rbf": _EXP, "sne": _EXP, "t": _T, "linear": _LINEAR, "poly": _POLY, "softmax": _SOFTMAX}
#: columns evaluated per chunk (bounds the float64 work buffer to (N + M) x this)
_CHUNK_COLS = 256


def _dense64(V):
    return V.toarray().astype(np.float64) if sp.issparse(V) else np.asarray(V, np.float64)


class JointKernel:
    """PSD kernel ``K`` on the stacked points ``[X; Z]`` (module docstring).

    Parameters
    ----------
    X : ndarray of shape (N, d) or CSR matrix
    Z : ndarray of shape (M, d) or CSR matrix
    kernel : {"rbf", "sne", "t", "linear", "poly", "softmax"}
    inv_g2 : float
        ``1 / gamma^2`` on the scale of the given points (distance kernels; softmax:
        ``1 / gamma``).
    degree, coef0 : float
        Parameters of "poly" (integer degree >= 1, coef0 >= 0).
    center : bool
        Whether G is double-centred (reported, not applied: see ``rpcholesky_svd``).

    Attributes
    ----------
    n_x, n_z : int
        N and M.
    normalise : bool
        True for "sne", "t" and "softmax": ``G = D^-1 K_XZ``.
    center : bool
    n_entries : int
        Entries of K evaluated so far (``diag`` counts N + M).
    """

    def __init__(self, X, Z, kernel, *, inv_g2=0.0, degree=2.0, coef0=1.0, center=False):
        if kernel not in _FORM:
            raise ValueError(f"kernel must be one of {tuple(_FORM)}, got {kernel!r}")
        if kernel == "poly" and (coef0 < 0 or float(degree) != int(degree)):
            raise ValueError(
                "a joint PSD kernel exists for 'poly' only with coef0 >= 0 and an integer "
                f"degree, got coef0={coef0}, degree={degree}: sampling='rpcholesky' does not "
                "apply; use another sampling"
            )
        if X.shape[1] != Z.shape[1]:
            raise ValueError(
                f"X and Z must have the same number of columns, got {X.shape[1]} and {Z.shape[1]}"
            )
        self.kernel = kernel
        self._form = _FORM[kernel]
        self.n_x, self.n_z = int(X.shape[0]), int(Z.shape[0])
        self.normalise = kernel in ("sne", "t", "softmax")
        self.center = bool(center)
        self.inv_g2 = float(inv_g2)
        self.degree = float(degree)
        self.coef0 = float(coef0)
        # float64 copies: columns are computed from cross products in float64
        self._X = X.astype(np.float64) if sp.issparse(X) else np.ascontiguousarray(X, np.float64)
        self._Z = Z.astype(np.float64) if sp.issparse(Z) else np.ascontiguousarray(Z, np.float64)
        self._xx = squared_norms(self._X)
        self._zz = squared_norms(self._Z)
        #: softmax's exponent offset: the largest squared norm (module docstring)
        self._c = max(float(np.max(self._xx)), float(np.max(self._zz)))
        self.n_entries = 0

    @property
    def shape(self):
        n = self.n_x + self.n_z
        return (n, n)

    def _points(self, idx):
        """Dense float64 rows of the stacked points at ``idx`` and their squared norms."""
        ix = idx[idx < self.n_x]
        iz = idx[idx >= self.n_x] - self.n_x
        P = np.empty((idx.size, self._X.shape[1]))
        sel_x = idx < self.n_x
        P[sel_x] = _dense64(self._X[ix])
        P[~sel_x] = _dense64(self._Z[iz])
        pp = np.empty(idx.size)
        pp[sel_x] = self._xx[ix]
        pp[~sel_x] = self._zz[iz]
        return P, pp

    def _apply(self, C, aa, bb):
        """Kernel values from the cross products ``C`` and the squared norms (in place)."""
        if self._form == _LINEAR:
            return C
        if self._form == _POLY:
            C += self.coef0
            return C**self.degree
        if self._form == _SOFTMAX:
            C -= self._c
            C *= self.inv_g2
            return np.exp(C, out=C)
        C *= -2.0
        C += aa[:, None]
        C += bb[None, :]
        np.maximum(C, 0.0, out=C)  # cancellation can make a squared distance negative
        C *= self.inv_g2
        if self._form == _EXP:
            return np.exp(-C, out=C)
        C += 1.0
        return np.reciprocal(C, out=C)

    def diag(self):
        """The diagonal of K, shape (N + M,)."""
        self.n_entries += self.n_x + self.n_z
        if self._form in (_EXP, _T):
            return np.ones(self.n_x + self.n_z)
        d = np.concatenate([self._xx, self._zz])
        if self._form == _SOFTMAX:
            return np.exp((d - self._c) * self.inv_g2)
        return d if self._form == _LINEAR else (d + self.coef0) ** self.degree

    def columns(self, idx):
        """``K[:, idx]``, shape (N + M, len(idx)), float64."""
        idx = check_index(idx, self.n_x + self.n_z, "idx")
        out = np.empty((self.n_x + self.n_z, idx.size))
        for a in range(0, idx.size, _CHUNK_COLS):
            P, pp = self._points(idx[a : a + _CHUNK_COLS])
            for V, vv, rows in (
                (self._X, self._xx, slice(0, self.n_x)),
                (self._Z, self._zz, slice(self.n_x, None)),
            ):
                C = np.asarray(V @ P.T, dtype=np.float64)
                out[rows, a : a + P.shape[0]] = self._apply(C, vv, pp)
        self.n_entries += out.size
        return out

    def block(self, ridx, cidx):
        """``K[ridx][:, cidx]``, float64."""
        n = self.n_x + self.n_z
        ridx = check_index(ridx, n, "ridx")
        cidx = check_index(cidx, n, "cidx")
        P, pp = self._points(ridx)
        Q, qq = self._points(cidx)
        self.n_entries += ridx.size * cidx.size
        return self._apply(P @ Q.T, pp, qq)

    def __repr__(self):
        return (
            f"JointKernel(n_x={self.n_x}, n_z={self.n_z}, kernel={self.kernel!r}, "
            f"normalise={self.normalise}, center={self.center})"
        )


def _stored_points(backend):
    """``(X, Z)`` as (N, d) and (M, d) from a CPU backend's storage layout."""
    X, Z = backend._X, backend._Z
    mode = getattr(backend, "mode", None)
    # start-up: the CPU kernels load with their module (a CPU backend has loaded it here)
    from .backends import cpu

    if mode == cpu.Z_SPARSE:
        X = X.T
    elif mode == cpu.X_SPARSE:
        Z = Z.T
    return X, Z


def joint_kernel_of(src):
    """The :class:`JointKernel` of a :class:`~ksvd_bench.kernels.KernelSource`.

    Works without the set-up pass (only the points and the kernel's parameters are used),
    so ``KernelSource._from_arrays(..., setup=False).joint_psd()`` costs no pass over G.

    Raises
    ------
    ValueError
        A kernel with no joint PSD form ("poly" with ``coef0 < 0`` or a non-integer degree),
        or a source whose points are not held in this process (a CUDA or Dask backend).
    """
    backend = getattr(src, "_backend", None)
    if backend is None or not (hasattr(backend, "_X") and hasattr(backend, "_Z")):
        raise ValueError(
            'sampling="rpcholesky" needs the points in this process (the CPU backend of '
            f"KernelSource); this source's backend is {getattr(backend, 'name', None)!r}"
        )
    X, Z = _stored_points(backend)
    return JointKernel(
        X,
        Z,
        src.kernel,
        inv_g2=backend.params.inv_g2,
        degree=src.degree,
        coef0=src.coef0,
        center=src.center,
    )
