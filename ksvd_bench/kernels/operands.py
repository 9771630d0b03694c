"""Checks of the dense operands and products of the lazy kernel sources' ``matmat``/``rmatmat``.

Shared by :class:`~ksvd_bench.kernels.KernelSource` and the structured source, so that both
refuse the same operands with the same messages.
"""

from __future__ import annotations

import numpy as np

from .ordered import count_nonfinite


def check_operand(V, n, name):
    """``V`` as a 2-d array of ``n`` rows, checked real and finite; and whether it was a vector.

    Parameters
    ----------
    V : array-like of shape (n,) or (n, k)
        The operand (its dtype is kept: the product's dtype is ``np.result_type`` of the
        source's dtype and this one).
    n : int
        Rows it must have.
    name : str
        Its name in error messages ("X", "Y", "Omega", ...).

    Returns
    -------
    V2 : ndarray of shape (n, k)
        ``V`` (a vector as one column).
    vector : bool
        Whether ``V`` was 1-d.

    Raises
    ------
    TypeError
        For masked entries (their hidden values would be used), complex, object or other
        non-numeric dtypes.
    ValueError
        For a wrong shape, NaN or Inf.
    """
    if isinstance(V, np.ma.MaskedArray) and np.ma.getmaskarray(V).any():
        raise TypeError(
            f"{name} is a masked array with masked entries: their hidden "
            f"values would be used; fill them ({name}.filled(value)) first"
        )
    V = np.asarray(V)
    if np.iscomplexobj(V):
        raise TypeError(
            f"{name} is complex (dtype {V.dtype}); G is real: multiply the real "
            f"and imaginary parts separately"
        )
    if V.dtype == object or not (np.issubdtype(V.dtype, np.number) or V.dtype == np.bool_):
        raise TypeError(f"{name} must hold real numbers, got dtype {V.dtype}")
    vector = V.ndim == 1
    V2 = V[:, None] if vector else V
    if V2.ndim != 2 or V2.shape[0] != n:
        raise ValueError(f"{name} must have {n} rows, got shape {V.shape}")
    if not np.all(np.isfinite(V2)):
        raise ValueError(f"{name} contains NaN or Inf")
    return V2, vector


def check_product(R, V, name, norm_bound, transpose=False):
    """Raise if the product ``R`` of G (or G.T) with the finite operand ``V`` overflowed.

    Kernel values are bounded (the sources refuse kernels whose norm bound overflows), so a
    non-finite product comes from an operand too large for G. ``norm_bound`` is called only
    to word the error.
    """
    if R.size and count_nonfinite(R):
        product = f"G{'.T' if transpose else ''} @ {name}"
        amax = float(np.max(np.abs(V))) if V.size else 0.0
        raise ValueError(
            f"{product} overflows the {R.dtype} range: {name} has entries up "
            f"to {amax:.3g} and ||G||_2 <= {norm_bound():.3g}; rescale {name}"
        )
