"""Accuracy of approximate singular triplets: eta, subspace angles, low-rank error, residuals.

Three weightings of eta
-----------------------
The paper measures an approximate top-``r`` SVD ``(U~, s~, V~)`` of ``G`` against the exact one
``(U, s, V)`` by

::

    eta = (1/r) sum_i w_i (1 - |u_i . u~_i| / |u~_i|) + (1/r) sum_i w_i (1 - |v_i . v~_i| / |v~_i|)

with ``w_i = lambda_i`` the exact singular values (``weights="singular_values"``, the literal
definition). Each bracket lies in ``[0, 1]``, so ``0 <= eta <= 2 * mean(w)``.

The literal weighting makes eta depend on the scale of ``G`` and lets the leading triplet decide
almost everything. On the SNE kernels of Cora and Citeseer (the paper's graph benchmarks,
uncentred) ``sigma_1 ~ 1.15`` while ``sigma_2 .. sigma_20 ~ 0.008 .. 0.002``: the top singular
vector of a row-stochastic matrix is found by any method, and an answer whose other 19 vectors
are pure noise still scores ``eta ~ (1/20) * 19 * 0.005 * 2 ~ 1e-2``. Centred, every
``sigma_i`` is below 0.01, so ``eta <= 2 * mean(sigma) < 1e-2`` holds for *any* answer.
Measured on Cora (top 20, eps = 1e-2): the asymmetric Nyström method meets the literal
tolerance with 40 sampled columns, while its uniform eta is still 1.86 (nearly orthogonal
vectors) with 380. A tolerance met by nearly any answer ranks solvers by speed alone. Hence two
more weightings:

* ``"relative"``: ``w_i = lambda_i / lambda_1``; scale-free, same emphasis on the top triplet.
* ``"uniform"``: ``w_i = 1``; every requested vector counts equally (the strict variant used for
  the headline tolerance benchmarks).

Repeated and clustered singular values
--------------------------------------
eta pairs ``u_i`` with ``u~_i``. When ``lambda_i = lambda_j`` the exact vectors are any
orthonormal basis of their common subspace, so two exact answers can score eta ~ 1. Every
measure here therefore groups the reference values into *clusters*
(:func:`singular_value_groups`): consecutive values belong to one cluster when
``lambda_i - lambda_{i+1} <= cluster_rtol * lambda_1``. The default :data:`CLUSTER_RTOL`
(``1e-6``) is measured against ``lambda_1 = ||G||_2`` because every solver's backward error
scales with ``||G||_2``: an answer with relative residual ``rho`` determines a vector up to
``rho / gap``, so gaps above ``1e-6 ||G||_2`` are resolved by any answer that is accurate
enough to be scored at all, and only values equal to about six digits are grouped. A simple
(one-value) cluster keeps the paper's literal term. Inside a cluster of ``m`` values eta uses
the reference basis of the cluster's subspace that best matches the answer (orthogonal
Procrustes): with ``X`` the ``m`` reference vectors and ``Y`` the ``p`` normalised approximate
ones scored there, the cluster contributes ``sum_j w_j - ||X^T Y diag(w)||_*`` (nuclear norm).
That is zero exactly when ``Y`` is an orthonormal basis of a subspace of ``span(X)``, equals
``sum_l w (1 - cos theta_l)`` over the principal angles when ``Y`` is orthonormal and the
weights equal, reduces to the literal term for ``m = p = 1``, and keeps ``0 <= eta <= 2 *
mean(w)`` and the invariance to sign flips. A cluster cut by ``r`` (``p < m``: the reference
holds triplets beyond ``r``) compares the ``p`` scored approximate vectors with the *whole*
cluster's reference subspace, so any ``p``-dimensional part of it scores zero. The reference
must hold those extra triplets: :func:`ksvd_bench.driver.reference_svd` with ``cluster_rtol``
returns them. The last cluster, when it reaches down to ``cluster_rtol * lambda_1`` (the
*null cluster*: exact low rank, or the zero values of a rectangular ``G``), contains every
smaller singular value, including those the reference does not hold, so its subspace is the
orthogonal complement of the reference vectors before it. As in the literal definition, the
``U`` and ``V`` parts are scored separately.

A gap-robust measure
--------------------
:func:`lowrank_error` does not look at individual vectors: it compares the rank-``r``
approximation ``U~ U~^T G`` with the optimum ``G_r``, the criterion of randomized numerical
linear algebra (Halko, Martinsson and Tropp 2011; Musco and Musco 2015).

Accuracy without a reference
----------------------------
:func:`residuals` and :func:`residual_estimate` need only products with ``G`` and ``G^T``; see
:func:`residual_estimate` for the derivation of the eta estimate and its caveats.

Whole triplets
--------------
eta, :func:`subspace_error` and :func:`lowrank_error` read only the vectors (the last only
``U~``): an answer with the right left subspace but wrong singular values or a random ``V~``
passes them. :func:`sv_error` scores the values against the reference
(``max_i |s~_i - s_i| / s_1``) and :func:`triplet_residual` ties ``U~``, ``s~`` and ``V~``
together (``max(||G V~ - U~ S~||_F, ||G^T U~ - V~ S~||_F) / ||G_r||_F``); the driver accepts an
answer only when these are within tolerance too.

Modules, by job
---------------
* :mod:`.measures`: against a reference, vector by vector and cluster by cluster:
  :func:`eta`, :func:`subspace_error`, :func:`sv_error`;
* :mod:`.lowrank`: the gap-robust :func:`lowrank_error` and :func:`frobenius_norm`;
* :mod:`.residuals`: without a reference: :func:`residuals`, :func:`triplet_residual`;
* :mod:`.estimates`: the residual estimate of eta, :func:`residual_estimate`;
* :mod:`.common`: argument checks, the pairing of an answer with its reference, and
  :func:`singular_value_groups`.
"""

from .common import CLUSTER_RTOL, WEIGHTS, singular_value_groups
from .estimates import residual_estimate
from .lowrank import LOWRANK_FLOOR_RTOL, LOWRANK_PASS_MAX_ENTRIES, frobenius_norm, lowrank_error
from .measures import eta, subspace_error, sv_error
from .residuals import residuals, triplet_residual

__all__ = [
    "WEIGHTS",
    "CLUSTER_RTOL",
    "LOWRANK_FLOOR_RTOL",
    "LOWRANK_PASS_MAX_ENTRIES",
    "singular_value_groups",
    "eta",
    "subspace_error",
    "lowrank_error",
    "frobenius_norm",
    "residuals",
    "residual_estimate",
    "sv_error",
    "triplet_residual",
]
