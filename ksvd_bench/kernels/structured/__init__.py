"""Exact KSVD in O(nnz) for a sparse square data matrix: the structured kernel operator.

For a sparse square ``A`` with row data ``x_i = A[i, :]`` and column data ``z_j = A[:, j]``,

    ``|x_i - z_j|^2 = r_i + c_j - 2 P_ij``,  ``r_i = |A[i, :]|^2``, ``c_j = |A[:, j]|^2``,
    ``P = A @ A`` (sparse),

so ``exp(-|x_i - z_j|^2 / gamma^2) = e^{-r_i/gamma^2} e^{-c_j/gamma^2} (1 + S_ij)`` with
``S_ij = expm1(2 P_ij / gamma^2)`` non-zero only on the pattern of ``P``. The RBF matrix is
``D_a (1 1^T + S) D_b`` and the SNE matrix ``D_rho^-1 (1 1^T + S) D_b`` (row sums ``rho``);
centring ``H_N G H_M`` adds rank-one terms. :class:`StructuredKernelSource` stores ``G`` exactly
as a sparse matrix plus a rank-``q`` term (``q = 1`` uncentred, ``3`` centred),

    ``G = T + L R^T``,  ``T`` with the pattern of ``P``,  ``L`` (N x q),  ``R`` (M x q),

and :func:`structured_svd` computes its exact top singular triplets after an exact compression
of the duplicated rows and columns of ``G`` (when it pays; otherwise on ``G`` itself). The
source offers it to ``solvers.tsvd`` as the optional protocol member
:meth:`StructuredKernelSource.exact_svd`, so ``solvers.svd(source, r, method="tsvd")`` takes
this path.
"""

from .operator import (
    MAX_CONDITION,
    StructuredKernelSource,
    StructureIllConditioned,
    supports_structure,
)
from .svd import structured_svd

__all__ = [
    "MAX_CONDITION",
    "StructureIllConditioned",
    "StructuredKernelSource",
    "structured_svd",
    "supports_structure",
]
