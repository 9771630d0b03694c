"""Certificates that see both sides of an answer: inflated values and missed directions.

Contract: :func:`certify` judges an answer ``(U, s, V)`` of ``G`` from ``n_passes`` products
with ``G`` (block power iteration on the deflated operator ``D = (I - U U^T) G (I - V
V^T)``, fused with the inflation check of :mod:`solvers._check`) and a budget of sampled
rows and columns of the residual. It returns lower bounds ``l_i <= sigma_i(G)`` and a
certificate (``info["certificate"]``): bounds on ``||D||`` (the smaller of two valid upper
bounds, named in ``upper_kind`` with its failure probability ``upper_failure``), on the
angles of both subspaces (Wedin, Davis & Kahan, and a tangent bound weighted by
``(U^T G V)^-1``) and on the values (Weyl), and the vectors' orthonormality and pairing.
Each bound rests on a deterministic inequality; randomness only decides whether the
evidence is found, with the stated probability. An answer is certified only where every
bound holds within its tolerance; a quantity that cannot be computed (a non-finite residual,
an empty sample) never vouches for it, and a gap ``max(sigma_r(M), l_r) - ||D||`` that is not
positive leaves the subspace unknown (a clustered spectrum, ``s_r ~ s_{r+1}``, is not
determined by a few passes).

Advice: two check passes (the default) certify right answers at a gap of ``s_r / s_{r+1}
>= 1.5`` nearly always (5% false alarms on the grown sweep,
``benchmarks/recorded/certificates/grown.md``); more passes sharpen the bound on ``||D||``
(its constant sits under the ``j``-th root of a chain of ``j`` products); where ``||G||_F``
is known the deterministic Frobenius split competes too. Ask for a rank at a gap of the
spectrum: no number of passes certifies the top-r subspace inside a cluster.

The reasoning behind each bound, its failure probability and the references are in the
manual, "Why the certificate holds" (``docs/guide/certificates.md``).

>>> import numpy as np, solvers
>>> rng = np.random.default_rng(0)
>>> Q1, Q2 = (np.linalg.qr(rng.normal(size=(n, 40)))[0] for n in (60, 50))
>>> G = (Q1 * 0.5 ** np.arange(40)) @ Q2.T
>>> res = solvers.svd(G, 5, method="rsvd", random_state=0)
>>> cert = res.info["certificate"]
>>> res.info["reliable"], cert["upper_kind"], cert["sin_theta_bound"] < 1e-12
(True, 'split_probes', True)
"""

from __future__ import annotations

import functools
import time
import warnings

import numpy as np
from scipy import linalg

from ._check import CHECK_FACTOR, N_EXTRA, flag_inflated, lower_bounds
from ._source import as_source

__all__ = [
    "MISS_SLACK",
    "DEFAULT_BUDGET",
    "sampled_certificate",
    "power_miss_probability",
    "catch_probability",
    "judge",
    "SUBSPACE_TOL",
    "VALUE_TOL",
    "POWER_FAILURE",
    "power_certificate",
    "triplet_bounds",
    "certify",
    "known_fro2",
    "probe_scale",
    "PROBE_FAILURE",
    "CHAIN_PROBES",
    "power_probe_bound",
    "power_probe_constants",
    "fused_probes",
    "fused_known",
]

#: A value more than this fraction below a proven lower bound, or a deflated norm this much
#: above ``s_r``, makes an answer unreliable.
MISS_SLACK = 0.1

#: A reliable answer is certified to ``sin theta <= SUBSPACE_TOL`` (top-r subspaces, both
#: sides) and ``|s_i - sigma_i(G)| <= VALUE_TOL sigma_1(G)`` (:func:`triplet_bounds`).
SUBSPACE_TOL = 0.1
VALUE_TOL = 0.1

#: Where ``||G||_F`` is unknown, the upper bound on the deflated norm is the power
#: iteration's lower bound inflated so that it fails with at most this probability.
POWER_FAILURE = 0.01

#: Gaussian probes per side of :func:`power_certificate`'s upper bound (:func:`probe_scale`,
#: kept for callers; the certificate's own probes are the chains of :func:`power_probe_bound`).
N_PROBES = 10

#: Columns of each probe chain of :func:`power_certificate` (:func:`power_probe_bound`):
#: wider chains tighten the anticoncentration constant (``c_block`` 1.60 at 20 and a
#: failure of 1e-6), at ``2 * CHAIN_PROBES`` more columns per pass.
CHAIN_PROBES = 20

#: The probability that :func:`power_probe_bound` fails (the bound on the norm of ``G``
#: outside the answer is below the truth): a false "reliable" costs far more than a false
#: alarm, and the constant sits under the ``j``-th root (1.26x at one in a million against
#: 1% with two products of 20 probes).
PROBE_FAILURE = 1e-6

#: Orthonormal power-iteration starts of :func:`certify` beyond the rank, where the source
#: knows ``||G||_F``: the block holds ``rank + CERT_EXTRA`` directions of the deflated
#: operator, so that after one power step the Frobenius split's remainder is only its tail
#: beyond them (see :func:`power_certificate`; tight to 1e-4 on fast-decaying spectra).
#: Where ``||G||_F`` is unknown the block has no upper bound to serve: the probe chains
#: (:data:`CHAIN_PROBES` columns) alone find missed directions and bound ``||D||``.
CERT_EXTRA = 15

#: Default budget of :func:`sampled_certificate`: this fraction of the entries the solve's
#: own sample read.
DEFAULT_BUDGET = 0.1


def _basis(U):
    """``(Q, R)``: an orthonormal basis ``Q`` of ``span(U)`` and ``U = Q R`` (the raw
    extension's vectors are not orthogonal); NaN where ``U`` is not finite."""
    U = np.asarray(U, dtype=np.float64)
    k = U.shape[1]
    if not np.all(np.isfinite(U)):
        return np.full_like(U, np.nan), np.full((k, k), np.nan)
    if k == 0:
        return U, np.zeros((0, 0))
    return linalg.qr(U, mode="economic", check_finite=False)


def _deflate(Q, X):
    """``(I - Q Q^T) X``, twice (classical Gram-Schmidt twice is orthogonal to rounding)."""
    for _ in range(2):
        X = X - Q @ (Q.T @ X)
    return X


def _gram(X):
    """``(Y^T Y, s, Y)`` for ``Y = X / s`` (``s = max |X|``, so the products cannot
    overflow), or ``(None, 0.0, None)`` for a zero ``X``."""
    s = float(np.max(np.abs(X), initial=0.0))
    if s == 0.0:
        return None, 0.0, None
    Y = X / s
    return Y.T @ Y, s, Y


def _orth_against(Q, X, drop=1e-6, deflated=False):
    """An orthonormal basis of the part of ``range(X)`` orthogonal to the orthonormal ``Q``.

    From the Gram matrix of the deflated ``X`` (matrix products and a small eigenproblem:
    an SVD or QR of a tall block costs several times as much): directions below ``drop``
    times the largest singular value are dropped, since the Gram matrix cannot resolve
    them, so the basis may be narrower than ``X``. A narrower block only weakens the
    bounds built on it, never breaks them (every lower bound holds for any orthonormal
    block, and the upper bounds' probes cover the rest). Then one Cholesky QR and a second
    deflation make ``[Q, X]`` orthonormal to rounding, as the interlacing behind every lower
    bound needs (a QR would complete a rank-deficient ``X`` with arbitrary unit vectors,
    not orthogonal to ``Q``). ``deflated``: ``X`` is already ``_deflate(Q, X)``, so the
    first deflation is skipped (the second, after the eigenproblem, stays).
    """
    floor = 0.0
    if not deflated:
        # what deflation leaves of an X inside span(Q) is rounding: directions below
        # ``drop`` times X's own size are dropped too (rescaled, they would be unit vectors
        # far from orthogonal to Q, and the interlacing bounds built on them wrong)
        floor = float(np.linalg.norm(X)) if np.all(np.isfinite(X)) else 0.0
        X = _deflate(Q, X)
    if X.shape[1] == 0 or not np.all(np.isfinite(X)):
        return X[:, :0]
    W, scale, Y = _gram(X)
    if W is None:
        return X[:, :0]
    lam, E = linalg.eigh(W, check_finite=False)
    keep = (lam > lam[-1] * drop**2) & (np.sqrt(np.maximum(lam, 0.0)) * scale > drop * floor)
    B = _deflate(Q, Y @ (E[:, keep] / np.sqrt(lam[keep])))
    # B is orthonormal to about eps / drop^2: one Cholesky QR step finishes it
    try:
        R = linalg.cholesky(B.T @ B, lower=False, check_finite=False)
    except linalg.LinAlgError:  # not seen; an empty block only weakens the bounds (fail safe)
        return X[:, :0]
    return B @ linalg.solve_triangular(R, np.eye(R.shape[0]), check_finite=False)


def _orth_coefficients(W, drop=1e-4):
    """``T`` with ``W T`` orthonormal to rounding (``||T^T W^T W T - I||`` about ``N eps``).

    From the eigenvectors of the scaled Gram matrix, directions below ``drop`` times the
    largest singular value left out (orthonormal to about ``sqrt(N) eps / drop^2``), then
    one Cholesky QR step on ``W T``. ``G (W T) = (G W) T`` then gives interlacing lower bounds
    and the Frobenius split from a product with the raw ``W`` (a narrower basis only weakens
    them; an empty one, where the Cholesky factor fails, too)."""
    if W.shape[1] == 0 or not np.all(np.isfinite(W)):
        return np.zeros((W.shape[1], 0))
    Gram, scale, _ = _gram(W)
    if Gram is None:
        return np.zeros((W.shape[1], 0))
    lam, E = linalg.eigh(Gram, check_finite=False)
    keep = lam > lam[-1] * drop**2
    T = E[:, keep] / (np.sqrt(lam[keep]) * scale)
    Q = W @ T
    try:
        R = linalg.cholesky(Q.T @ Q, lower=False, check_finite=False)
    except linalg.LinAlgError:  # not seen; an empty basis only weakens the bounds
        return np.zeros((W.shape[1], 0))
    return linalg.solve_triangular(R, T.T, trans="T", check_finite=False).T


def _top_sv(X):
    """The largest singular value of ``X``, from the Gram matrix of its thinner side
    (relative error about ``k eps`` for ``k`` columns, as an SVD's)."""
    if X.size == 0:
        return 0.0
    if not np.all(np.isfinite(X)):
        return np.nan
    X = np.asarray(X, dtype=np.float64)
    W, scale, _ = _gram(X if X.shape[0] >= X.shape[1] else X.T)
    if W is None:
        return 0.0
    return float(scale * np.sqrt(max(linalg.eigvalsh(W, check_finite=False)[-1], 0.0)))


def known_fro2(src):
    """``||G||_F^2`` from the source's ``frobenius_norm()`` (exact to rounding, no pass), else
    None (no member, None, or not a finite number >= 0).

    ``src`` may be the counting wrapper of ``check_args``: the member is read from the source
    it wraps (a cached number, or one the source's set-up pass measured).
    """
    member = getattr(getattr(src, "source", src), "frobenius_norm", None)
    if not callable(member):
        return None
    value = member()
    if value is None:
        return None
    value = float(value)
    if not (np.isfinite(value) and value >= 0):
        return None
    square = value * value
    # A square that overflows, or underflows into the subnormals, has lost the norm.
    return square if value == 0 or np.finfo(np.float64).tiny <= square < np.inf else None


def _column_norms(X):
    """The columns' 2-norms, computed in units of the largest entry (the squares of tiny or
    huge entries underflow or overflow)."""
    unit = float(np.max(np.abs(X), initial=0.0))
    if unit == 0 or not np.isfinite(unit):
        return np.linalg.norm(X, axis=0)
    return unit * np.linalg.norm(X / unit, axis=0)


def probe_scale(n_probes, n_bounds=2, failure=POWER_FAILURE):
    """``c`` with ``||B||_2 <= c max_i ||B omega_i||`` for ``n_probes`` standard Gaussian
    ``omega_i``, except with probability ``failure / n_bounds``.

    For the top right singular vector ``v`` of ``B``, ``||B omega|| >= ||B|| |v^T omega|``
    and ``P(|v^T omega| < t) <= sqrt(2 / pi) t``; independent probes all fall below with
    probability at most ``(sqrt(2 / pi) t)^n_probes`` (Halko, Martinsson & Tropp 2011,
    Lemma 4.1, with ``alpha = (n_bounds / failure)^(1 / n_probes)``): ``c = alpha
    sqrt(2 / pi)``; 1.36 for 10 probes, two bounds and 1% in all.
    """
    if n_probes < 1:
        return np.inf
    return float((n_bounds / failure) ** (1.0 / n_probes) * np.sqrt(2 / np.pi))


@functools.lru_cache(maxsize=64)
def power_probe_constants(n_probes, failure=PROBE_FAILURE):
    """``(c_block, c_max)``: the anticoncentration constants of :func:`power_probe_bound`.

    For a standard Gaussian block ``W`` (``n_probes`` columns) and a unit vector ``v``,
    ``v^T W`` is a standard Gaussian vector of ``n_probes`` entries, so

    * ``P(||v^T W||_2 < c_block) = F_chi2(c_block^2; n_probes) = failure / 2``: ``c_block =
      sqrt(chi2.ppf(failure / 2, n_probes))``;
    * ``P(max_i |v^T w_i| < c_max) = erf(c_max / sqrt(2))^n_probes = failure / 2``:
      ``c_max = sqrt(2) erfinv((failure / 2)^(1 / n_probes))`` (the issue-32 constant ``f =
      1 / c_max``: 1.48 at 20 probes and ``failure / 2 = 1e-6``).

    Both laws are exact (equalities), so a rank-one ``D`` meets each failure probability
    exactly; each of the two bounds fails with at most ``failure / 2``, both together with
    at most ``failure``.
    """
    # start-up: scipy.stats loads most of SciPy (optimize, spatial, interpolate, special)
    from scipy.special import erfinv
    from scipy.stats import chi2

    if n_probes < 1:
        return 0.0, 0.0
    half = failure / 2
    return (
        float(np.sqrt(chi2.ppf(half, n_probes))),
        float(np.sqrt(2) * erfinv(half ** (1.0 / n_probes))),
    )


def power_probe_bound(chain, n_probes, failure=PROBE_FAILURE):
    """An upper bound on ``||D||_2`` from a chain of products of a Gaussian block.

    ``chain`` holds, for ``j = 1, 2, ...``, ``(j, log ||W_j||_2, log max_i ||W_j e_i||)``
    where ``W_j = D^(j) W`` is ``W`` (a standard Gaussian block of ``n_probes`` columns in
    the space ``D`` acts on, or that ``D^T`` acts on) multiplied ``j`` times alternately by
    ``D`` and ``D^T`` (``W_1 = D W``, ``W_2 = D^T D W``, ...). With ``v`` the top singular
    vector of ``D`` on the start's side, ``||D^(j) w|| >= ||D||^j |v^T w|`` for every
    ``w``, hence for every ``j`` at once

        ``||D||_2 <= (||W_j||_2 / c_block)^(1 / j)`` unless ``||v^T W||_2 < c_block``,
        ``||D||_2 <= (max_i ||W_j e_i|| / c_max)^(1 / j)`` unless ``max_i |v^T w_i| < c_max``

    (:func:`power_probe_constants`; each event has probability ``failure / 2``, and one
    event covers every ``j``: the minimum over ``j`` and both kinds fails with probability
    at most ``failure``). The constant and the stable-rank inflation (``||W_j|| / ||D||^j``
    grows like ``sqrt(sum_k (sigma_k / sigma_1)^(2 j))``) sit under the ``j``-th root, so
    every product sharpens the bound. Returns ``(bound, j)`` (``inf, 0`` for an empty
    chain); ``log`` entries of ``-inf`` (a zero product) give 0.
    """
    c_block, c_max = power_probe_constants(n_probes, failure)
    best, best_j = np.inf, 0
    for j, log_block, log_col in chain:
        for logn, c in ((log_block, c_block), (log_col, c_max)):
            if not (c > 0) or np.isnan(logn):
                continue
            value = float(np.exp((logn - np.log(c)) / j))
            if value < best:
                best, best_j = value, j
    return best, best_j


def power_certificate(
    src,
    U,
    V,
    k,
    n_passes,
    rng,
    n_extra=N_EXTRA,
    fro2=None,
    n_probes=CHAIN_PROBES,
    known=None,
    starts=None,
):
    """Everything ``n_passes`` products with ``G`` tell about the answer ``(U, V)``.

    Block power iteration on the deflated ``D = (I - U U^T) G (I - V V^T)`` from ``n_extra``
    Gaussian starts, fused with the products the bounds need. Where the source has
    ``sketch`` every pass is ONE call ``(G [V, X, P], G^T [U, Y, Q])`` (``X``, ``Y``: the
    right and left iterates, orthogonal to ``V`` and ``U``; the next ``X`` is the
    orthonormal basis of ``D^T Y``, the next ``Y`` of ``D X``); otherwise the passes
    alternate ``G [V, X, P]``, ``G^T [U, X, P]`` (one iterate, changing sides). ``P``,
    ``Q``: the probe chains of :func:`power_probe_bound`, ``n_probes`` Gaussian columns
    drawn once and carried from pass to pass, unnormalised (one scalar per chain keeps
    them representable): after ``j`` products a chain holds ``D^(j) W``. Each call is one
    pass (counted by the caller's counting source).

    ``known`` (from a solve whose last pass already multiplied ``G^T`` by ``[U, W]``, or
    ``G`` by ``[V, W]``, with ``W`` a fresh standard Gaussian block): a dict with ``side``
    (``"left"``: ``GtU`` = ``G^T U`` and ``GtW`` = ``G^T W``, ``W`` (N x t); ``"right"``:
    ``GV`` and ``GW``, ``W`` (M x t)). The chain then starts one product ahead (``D^T W =
    (I - V V^T) (G^T W - G^T U U^T W)``, no pass), the known residual is taken as is, and
    the passes alternate starting on the other side: one pass gives both residuals and a
    two-product chain.

    ``starts`` (``(X0, Y0)``, M x b and N x b, or None): the iterates' first blocks in place
    of Gaussian ones (orthonormalised against ``V`` and ``U``), e.g. the directions a
    Nystrom sample saw outside the answer. They must not depend on this call's randomness;
    with them the split's fresh probes (``"split_probes"``: ``||D||^2 <= ||D X||^2 + ||D (I
    - X X^T)||^2``, the second term from one product of Gaussian probes of the complement
    of ``[V, X]``) are drawn from the first pass on, so that ONE pass already bounds
    ``||D||`` by the part of ``D`` the starts did not see.

    Returns a dict:

    * ``lower`` (k,): lower bounds on ``sigma_i(G)`` (interlacing, elementwise best);
    * ``deflated``: the lower bound on ``||D||_2`` (the manual: "Why the certificate holds");
    * ``residual``: ``max(||(I - U U^T) G V||_2, ||U^T G (I - V V^T)||_2)``, exact to
      rounding (NaN until both sides were multiplied);
    * ``rayleigh``: the singular values of ``U^T G V`` (lower bounds on ``sigma_i(G)``);
    * ``deflated_upper``, ``upper_kind`` and ``upper_failure``: the smallest valid upper
      bound on ``||D||_2``: ``"power_probes"`` (:func:`power_probe_bound` on the chains,
      fails with probability at most ``PROBE_FAILURE``; two chains (two-sided passes)
      share it, half each) or ``"frobenius"`` (deterministic, where ``fro2 = ||G||_F^2`` is
      known: from the last iterate ``X`` (orthonormal), ``||D||^2 <= ||D X||^2 + ||D (I -
      X X^T)||^2`` and ``||D (I - X X^T)||_F^2 = ||D||_F^2 - ||D X||_F^2`` with ``||D||_F^2
      = fro2 - ||G^T U||_F^2 - ||(I - U U^T) G V||_F^2`` plus a rounding slack);
      ``upper_failure`` is the winner's failure probability (0 for ``"frobenius"``);
    * ``width`` (the Gaussian starts per side), ``probes``, ``passes``, ``two_sided``.

    NaN anywhere means a product was not finite: the bound is unknown, never 0.
    """
    N, M = src.shape
    (U, Ru), (V, Rv) = _basis(U), _basis(V)
    r = V.shape[1]
    b = max(0, min(n_extra, M - V.shape[1], N - U.shape[1]))
    room = min(M - V.shape[1], N - U.shape[1])
    q = n_probes if room > 0 else 0
    # one pass from given starts: a chain of one product (f ||D W||) is never below the
    # split's (its probes see the starts' part of D too), so its columns go to the split
    n_fresh = N_PROBES
    if starts is not None and known is None and n_passes == 1:
        q, n_fresh = 0, n_probes
    two_sided = hasattr(src, "sketch") and known is None
    eps = np.finfo(np.result_type(src.dtype, np.float32)).eps
    bases = {"right": V, "left": U}
    other_side = {"right": "left", "left": "right"}

    def new_chain(side):
        n = M if side == "right" else N
        return {"on": side, "W": rng.standard_normal((n, q)), "log": 0.0, "norms": []}

    def advance(chain, product):
        """The chain's next element from ``product`` (``G`` or ``G^T`` times its input)."""
        side = other_side[chain["on"]]
        Wn = _deflate(bases[side], product)
        before = chain["W"]
        top_in = _top_sv(before)
        top = _top_sv(Wn)
        cols = _column_norms(Wn)
        j = len(chain["norms"]) + 1
        with np.errstate(divide="ignore"):
            chain["norms"].append(
                (j, chain["log"] + np.log(top), chain["log"] + np.log(float(np.max(cols))))
            )
        # lower bounds on ||D||: ||D B||_2 <= ||D|| ||B||_2 for any block, and per column
        low = top / top_in if top_in > 0 else 0.0
        in_cols = _column_norms(before)
        ok = in_cols > 0
        if np.any(ok):
            low = max(low, float(np.max(cols[ok] / in_cols[ok])))
        T = chain.get("T")
        # D Q for the orthonormal Q = W T of the input (the Frobenius split's block)
        chain["DQ"] = Wn @ T if T is not None and T.shape[1] else None
        unit = float(np.max(np.abs(Wn), initial=0.0))
        if unit > 0 and np.isfinite(unit):
            Wn = Wn / unit
            chain["log"] += np.log(unit)
        chain.update(on=side, W=Wn)
        return low

    if starts is not None and known is None:
        X = _orth_against(V, np.asarray(starts[0], np.float64))
        Y = _orth_against(U, np.asarray(starts[1], np.float64)) if two_sided else None
        b = X.shape[1]
    else:
        starts = None
        X = _orth_against(V, rng.standard_normal((M, b)))
        Y = _orth_against(U, rng.standard_normal((N, b))) if two_sided else None
    out = {
        "lower": np.zeros(k),
        "deflated": 0.0,
        "residual": np.nan,
        "rayleigh": np.full(r, np.nan),
        "deflated_upper": np.inf,
        "upper_kind": None,
        "upper_failure": None,
        "width": int(b),
        "probes": int(q),
        "passes": 0,
        "two_sided": bool(two_sided),
    }
    GV = GtU = None
    chains = []
    right = True
    if known is not None:
        side = known["side"]
        if side == "left":
            GtU = np.asarray(known["GtU"], np.float64) @ np.linalg.inv(Ru) if r else known["GtU"]
        else:
            GV = np.asarray(known["GV"], np.float64) @ np.linalg.inv(Rv) if r else known["GV"]
        if q:
            W = np.asarray(known["W"], np.float64)
            q = W.shape[1]
            out["probes"] = int(q)
            basis = U if side == "left" else V
            near = GtU if side == "left" else GV
            GW = np.asarray(known["GtW" if side == "left" else "GW"], np.float64)
            chain = {"on": side, "W": W, "log": 0.0, "norms": []}
            # (G^T or G) (I - Q Q^T) W = G^T W - (G^T Q)(Q^T W), Q = U (or V): no product
            out["deflated"] = max(out["deflated"], advance(chain, GW - near @ (basis.T @ W)))
            chains.append(chain)
        right = side == "left"  # the next pass multiplies the other side
        if not right:  # the iterate starts on the side that pass multiplies
            X = _orth_against(U, rng.standard_normal((N, b)))
    elif q:
        chains.append(new_chain("right"))
        if two_sided:
            chains.append(new_chain("left"))
    for i_pass in range(n_passes):
        todo = ["right", "left"] if two_sided else ["right" if right else "left"]
        inputs = {}
        for side in todo:
            basis = bases[side]
            mine = [c for c in chains if c["on"] == side]
            Xs = X if side == "right" or not two_sided else Y
            for c in mine:
                c["W"] = _deflate(basis, c["W"])
                c["T"] = _orth_coefficients(c["W"])
            # the last pass: fresh probes of the complement of [basis, X], for the split
            # ||D||^2 <= ||D X||^2 + ||D (I - X X^T)||^2 (X was fixed before they were
            # drawn); a random first X sees nothing yet, given starts may
            fresh = (
                [_deflate(np.hstack([basis, Xs]), rng.standard_normal((basis.shape[0], n_fresh)))]
                if i_pass == n_passes - 1 and Xs.shape[1] and (i_pass > 0 or starts is not None)
                else []
            )
            blk = np.hstack([basis, Xs] + [c["W"] for c in mine] + fresh)
            inputs[side] = (mine, Xs, blk, bool(fresh))
        if two_sided:
            A, B = src.sketch(inputs["right"][2], inputs["left"][2])
            products = {"right": np.asarray(A, np.float64), "left": np.asarray(B, np.float64)}
        else:
            side = todo[0]
            blk = inputs[side][2]
            products = {
                side: np.asarray(
                    src.matmat(blk) if side == "right" else src.rmatmat(blk), np.float64
                )
            }
        out["passes"] += 1
        if not all(np.all(np.isfinite(P)) for P in products.values()):  # unknown, never 0
            out.update(
                lower=np.full(k, np.nan), deflated=np.nan, residual=np.nan, deflated_upper=np.nan
            )
            return out
        last = []  # per side: (||D X||, D X, scale of the product) for the upper bounds
        split = []  # per side with fresh probes: (||D X||, D (I - X X^T) P)
        for side in todo:
            P = products[side]
            mine, Xs, _, has_fresh = inputs[side]
            other = bases[other_side[side]]
            w = Xs.shape[1]
            out["lower"] = np.maximum(out["lower"], lower_bounds(P[:, : r + w], k))
            at = r + w
            for c in mine:  # [basis, the chain's orthonormal basis], through the same product
                T = c.get("T")  # (not orthogonal to X: a block of its own)
                if T is not None and T.shape[1]:
                    block = np.hstack([P[:, :r], P[:, at : at + q] @ T])
                    out["lower"] = np.maximum(out["lower"], lower_bounds(block, k))
                at += q
            if side == "left":
                GtU = P[:, :r]
            else:
                GV = P[:, :r]
            DX = _deflate(other, P[:, r : r + w])
            top = _top_sv(DX)
            last.append((top, DX, float(np.max(_column_norms(P[:, : r + w]), initial=0.0))))
            out["deflated"] = max(out["deflated"], top)
            at = r + w
            for c in mine:
                # the chain's own input is the deflated one: W itself is already deflated
                out["deflated"] = max(out["deflated"], advance(c, P[:, at : at + q]))
                at += q
            if has_fresh:
                split.append((top, _deflate(other, P[:, at:])))
        if i_pass == n_passes - 1:  # the last pass: no next iterate to orthonormalise
            pass
        elif two_sided:
            X = _orth_against(V, last[1][1], deflated=True)
            Y = _orth_against(U, last[0][1], deflated=True)
        else:
            X = _orth_against(U if right else V, last[0][1], deflated=True)
            right = not right
    out["chain_products"] = max((len(ch["norms"]) for ch in chains), default=0)
    if GV is None or GtU is None:
        return out
    Mc = U.T @ GV
    E21, E12 = GV - U @ Mc, GtU - V @ Mc.T
    out["rayleigh"] = linalg.svd(Mc, compute_uv=False, check_finite=False)
    out["triplet"] = (Mc, Ru, Rv)  # Q_U^T G Q_V and U = Q_U R_U, V = Q_V R_V (_triplet_errors)
    e21, e12 = _top_sv(E21), _top_sv(E12)
    out["residual"] = max(e21, e12)
    # for the Davis-Kahan bounds on G G^T and G^T G (triplet_bounds): ||E21 M^T|| and
    # ||E12^T M|| over ||M||, which stay of G's magnitude (their products would square it)
    c = float(out["rayleigh"][0]) if out["rayleigh"].size else 0.0
    m = Mc / c if c > 0 else Mc
    out["sides"] = (e21, e12, _top_sv(E21 @ m.T), _top_sv(E12 @ m), c if c > 0 else 1.0)
    out["pulls"] = _pulls(Mc, E21, E12)
    if room == 0:  # U or V fills its side: D = 0
        out.update(deflated_upper=0.0, upper_kind="empty", upper_failure=0.0)
        return out
    # rounding in the deflated products: sqrt(N + M) ulps of the largest product column
    # of G times an orthonormal block (the typical accumulation; a worst-case N + M would
    # leave every direction near rounding level uncertified, the full-sample tests' 1e-14)
    scale = max(
        [s for _, _, s in last]
        + [float(np.max(_column_norms(P), initial=0.0)) for P in (GV, GtU) if P.size]
    )
    slack = np.sqrt(N + M) * eps * scale
    bounds = []
    # PROBE_FAILURE is shared by every random bound: the chains and the split's probes
    share = PROBE_FAILURE / max(1, len(chains) * bool(q) + len(split))
    if chains and q:
        best = min(power_probe_bound(ch["norms"], q, share)[0] for ch in chains)
        bounds.append((best + slack, "power_probes", PROBE_FAILURE))
    for top, DP in split:
        # ||D (I - X X^T)|| from one product of fresh probes (power_probe_bound at j = 1)
        with np.errstate(divide="ignore"):
            one = [(1, np.log(_top_sv(DP)), np.log(float(np.max(_column_norms(DP)))))]
        rest = power_probe_bound(one, DP.shape[1], share)[0]
        bounds.append((float(np.hypot(top, rest)) + slack, "split_probes", PROBE_FAILURE))
    if fro2 is not None and fro2 > 0:
        # in units of ||G||_F: the squares of the products' entries stay representable
        unit = np.sqrt(fro2)
        fro_D2 = (
            1
            - np.sum((GtU / unit) ** 2)
            - np.sum((E21 / unit) ** 2)
            + (N + M + 10 * (r + b + q)) * eps
        )
        # every orthonormal block multiplied last: the iterate X, the chains' bases (their
        # orthonormality holds to about 1e-8: the slack 1e-6 ||D Q||^2 covers it)
        blocks = [DX for _, DX, _ in last[-1:]]
        blocks += [ch["DQ"] for ch in chains if ch.get("DQ") is not None]
        for DQ in blocks or [np.zeros((1, 0))]:
            top = _top_sv(DQ)
            rest = fro_D2 - np.sum((DQ / unit) ** 2) * (1 - 1e-6)
            split = unit * np.sqrt(max((top / unit) ** 2 + rest, 0.0))
            bounds.append((split, "frobenius", 0.0))
    if not bounds:
        return out
    upper, kind, fail = min(bounds, key=lambda x: x[0])
    if upper < out["deflated"] - slack:
        # below the lower bound on the same norm: the arithmetic lost it, so it is unknown
        upper = np.nan
    out.update(deflated_upper=float(upper), upper_kind=kind, upper_failure=fail)
    return out


def _pulls(Mc, E21, E12):
    """``(||E21 Mc^-1||_2, ||E12 Mc^-T||_2)``, the tangents of the angles between the answer's
    spans and one step of subspace iteration from the other side (``range(G V) = range(U +
    E21 Mc^-1)``, ``range(G^T U) = range(V + E12 Mc^-T)``); ``inf`` where ``Mc`` is singular
    or a solve is not finite (:func:`_tangent_bounds` then falls back on the others). Each
    is raised by ``100 r eps cond(Mc)`` relative, the rounding of the solves; ``inf`` where
    that reaches 1 (an ``Mc`` too ill-conditioned for the solves to mean anything)."""
    r = Mc.shape[0]
    if r == 0:
        return 0.0, 0.0
    sv = linalg.svd(Mc, compute_uv=False, check_finite=False) if np.all(np.isfinite(Mc)) else []
    rel = 100 * r * np.finfo(np.float64).eps * (sv[0] / sv[-1]) if len(sv) and sv[-1] > 0 else 1
    if not rel < 1:
        return np.inf, np.inf
    try:
        a = linalg.solve(Mc.T, E21.T, check_finite=False).T  # E21 Mc^-1
        b = linalg.solve(Mc, E12.T, check_finite=False).T  # E12 Mc^-T
    except (linalg.LinAlgError, ValueError):
        return np.inf, np.inf
    out = tuple(_top_sv(X) if np.all(np.isfinite(X)) else np.inf for X in (a, b))
    return tuple(float(x) * (1 + rel) if np.isfinite(x) else np.inf for x in out)


def _tangent_bounds(sin_u, sin_v, pulls, rho_r, d_up, e21, e12, n_iter=50):
    """Sharper ``(sin theta_U, sin theta_V)`` bounds from the answer's own block structure.

    In the answer's bases ``G = [[M, F], [E, D]]`` (``M = Q_U^T G Q_V``), let ``U_1``, ``V_1``
    be exact top-r singular subspaces of ``G`` with ``G V_1 = U_1 Sigma_1`` and write ``V_1 =
    V C_V + V_perp S_V``, ``U_1 = U C_U + U_perp S_U``. Where ``sin theta_V < 1`` and ``sin
    theta_U < 1`` (``C_U``, ``C_V`` invertible; the starting bounds ``sin_u``, ``sin_v``
    below 1 prove it), ``T_V = S_V C_V^-1`` has ``||T_V|| = tan theta_V`` and, from the
    blocks of ``G V_1 = U_1 Sigma_1``,

        ``tan theta_U = ||(E + D T_V)(M + F T_V)^-1||
                      <= (||E M^-1|| + ||D|| tan theta_V / rho) / (1 - ||F|| tan theta_V / rho)``

    with ``rho = sigma_r(M)`` (``(M + F T)^-1 = M^-1 (I + F T M^-1)^-1``; valid while the
    denominator is positive), and likewise ``tan theta_V <= (||F^T M^-T|| + ||D|| tan
    theta_U / rho) / (1 - ||E|| tan theta_U / rho)`` from ``G^T U_1 = V_1 Sigma_1``. Both
    right-hand sides grow with the other tangent, so starting from valid bounds (Wedin's or
    Davis-Kahan's) and alternating, taking the minimum, keeps every iterate valid. ``||E
    M^-1||`` is exact (``pulls``, :func:`_pulls`); ``||D|| <= d_up``. Unlike ``||E|| / gap``
    it weighs the residual by ``M^-1`` direction by direction, and the coupling term
    shrinks with ``||D|| / rho ~ sigma_{r+1} / sigma_r``: on the issue-32 sweep's Nystrom
    answers ``||E M^-1||`` was within 5% of the true ``tan theta_U`` where Wedin's bound read
    1.5-3x. Returns the two sines (the inputs where the structure proves nothing better).
    """
    a, b = pulls
    if not (rho_r > 0 and np.isfinite(a) and np.isfinite(b) and np.isfinite(d_up)):
        return sin_u, sin_v
    if not (sin_u < 1 and sin_v < 1):
        return sin_u, sin_v
    kap, f_e, f_f = d_up / rho_r, e21 / rho_r, e12 / rho_r
    t_u, t_v = (x / np.sqrt((1 - x) * (1 + x)) for x in (sin_u, sin_v))
    for _ in range(n_iter):
        new_u = (a + kap * t_v) / (1 - f_f * t_v) if f_f * t_v < 1 else np.inf
        new_v = (b + kap * t_u) / (1 - f_e * t_u) if f_e * t_u < 1 else np.inf
        new_u, new_v = min(t_u, new_u), min(t_v, new_v)
        done = new_u >= t_u * (1 - 1e-9) and new_v >= t_v * (1 - 1e-9)
        t_u, t_v = new_u, new_v
        if done:
            break
    return (min(x, t / np.sqrt(1 + t * t)) for x, t in ((sin_u, t_u), (sin_v, t_v)))


def triplet_bounds(s, cert):
    """Upper bounds on the answer's ``sin theta`` and value error, from a certificate.

    In the answer's bases ``G = [[M, F], [E, D]]`` (``M = U^T G V``, ``rho_i`` its singular
    values, ``||D|| <= cert["deflated_upper"]``, ``||E||``, ``||F||``, ``||E M^T||``,
    ``||F^T M||`` measured), ``sigma_r(G) >= rho := max(rho_r, l_r)`` by interlacing, and:

    * Wedin's theorem, with the roles of ``G`` and ``G - [[0, F], [E, 0]]`` (whose top-r
      subspaces are ``span(U)``, ``span(V)``) swapped: ``max(sin theta_U, sin theta_V) <=
      max(||E||, ||F||) / (rho - ||D||)``;
    * Davis & Kahan's theorem on ``G G^T`` in the bases ``[U, U_perp]`` (off-diagonal block
      ``E M^T + D F^T``, lower block ``E E^T + D D^T``): ``sin theta_U <= (||E M^T|| + ||D||
      ||F||) / (rho^2 - ||E||^2 - ||D||^2)``, and on ``G^T G`` likewise for ``V``. Where the
      residual sits on the small values (the usual case: top directions converge first)
      this is far below Wedin's; the smaller of the two is used for each side;
    * the tangent bounds of :func:`_tangent_bounds` (``tan theta_U <= (||E M^-1|| + ||D||
      tan theta_V / rho_r) / (1 - ||F|| tan theta_V / rho_r)`` and the same for ``V``),
      iterated from the smaller of the two above for each side;
    * Weyl's inequality: ``max(rho_i, l_i) <= sigma_i(G) <= max(rho_i, ||D||) + max(||E||,
      ||F||)``, which bounds ``|s_i - sigma_i(G)|``.

    Returns ``(sin_theta, sv_error, gap)``: the sv bound relative to ``max(rho_1, l_1)`` (a
    lower bound on ``sigma_1(G)``), ``gap = rho - ||D||``; ``inf`` where the gap is not
    positive (the subspace is unknown), NaN where a bound could not be computed.
    """
    s = np.asarray(s, dtype=np.float64)
    rho = np.zeros(s.size)
    rho[: cert["rayleigh"].size] = cert["rayleigh"][: s.size]
    low = np.maximum(rho, np.nan_to_num(np.asarray(cert["lower"], np.float64)[: s.size]))
    e, d_up = cert["residual"], cert["deflated_upper"]
    if not (np.isfinite(e) and np.isfinite(d_up) and np.all(np.isfinite(rho))):
        return np.nan, np.nan, np.nan
    gap = float(low[-1] - d_up)
    # E = 0 with D = 0 (G is the answer's block: G = 0, or U, V fill a side) is exact
    sin = e / gap if gap > 0 else (0.0 if e == 0 and gap == 0 else np.inf)
    e21, e12, e21m, e12m, c = cert.get("sides", (e, e, np.inf, np.inf, 1.0))
    # Davis-Kahan's terms are squares: in units of the largest magnitude they cannot
    # overflow, and what underflows is negligible beside the terms of order 1.
    unit = max(float(low[0]), d_up, e)
    unit = unit if 0 < unit < np.inf else 1.0
    lo, dn = low[-1] / unit, d_up / unit
    dk = []
    for prod, near, other in ((e21m, e12, e21), (e12m, e21, e12)):
        num = (prod / unit) * (c / unit) + dn * (near / unit)
        den = lo * lo - (other / unit) ** 2 - dn * dn
        dk.append(num / den if den > 0 else np.inf)
    sin_u, sin_v = min(sin, dk[0]), min(sin, dk[1])
    if "pulls" in cert and cert["rayleigh"].size == s.size:
        sin_u, sin_v = _tangent_bounds(sin_u, sin_v, cert["pulls"], float(rho[-1]), d_up, e21, e12)
    sin = max(sin_u, sin_v)
    off = float(np.max(np.maximum(s - low, np.maximum(rho, d_up) + e - s)))
    err = off / low[0] if low[0] > 0 else (0.0 if off <= 0 else np.inf)
    return float(sin), float(err), gap


def _budget_split(budget, shape):
    """Rows and columns a budget of entries buys, split evenly, at least one of each."""
    N, M = shape
    n_r = int(min(N, max(1, budget // (2 * M))))
    n_c = int(min(M, max(1, budget // (2 * N))))
    return n_r, n_c


def sampled_certificate(src, U, s, V, budget, rng):
    """The missed-direction test and an error estimate from random rows and columns.

    Reads ``n_r`` uniformly random rows and ``n_c`` columns (``budget`` entries split evenly
    between the sides, at least one of each) through the source's ``rows``/``cols``, which
    lazy sources compute in tiles. The manual ("Why the certificate holds") says what is
    proven.

    Returns a dict: ``rows``, ``cols``, ``entries``, ``seconds``, ``deflated`` (the lower
    bound on ``max(||(I - U U^T) G||, ||G (I - V V^T)||)``), ``fro_error`` (estimate of
    ``||G - U S V^T||_F``), ``fro_error_se`` (its standard error) and ``catch_1pct`` (the
    probability of catching a missed cluster holding 1% of the rows, or of the columns).
    """
    t0 = time.perf_counter()
    if not hasattr(src, "rows"):
        src = as_source(src)
    N, M = src.shape
    n_r, n_c = _budget_split(budget, (N, M))
    U, V = np.asarray(U, dtype=np.float64), np.asarray(V, dtype=np.float64)
    Qu, Qv = _basis(U)[0], _basis(V)[0]
    s = np.asarray(s, dtype=np.float64)
    I_s = np.sort(rng.choice(N, n_r, replace=False))
    J_s = np.sort(rng.choice(M, n_c, replace=False))
    R = np.asarray(src.rows(I_s), dtype=np.float64)
    C = np.asarray(src.cols(J_s), dtype=np.float64)
    right = _deflate(Qv, R.T).T  # rows of G (I - V V^T)
    left = _deflate(Qu, C)  # columns of (I - U U^T) G
    deflated = max(_top_sv(right), _top_sv(left))
    if not np.isfinite(deflated):
        deflated = np.nan
    # ||G - U S V^T||_F^2 from each side, each unbiased under uniform sampling.
    row_res = np.sum((R - (U[I_s] * s) @ V.T) ** 2, axis=1)
    col_res = np.sum((C - (U * s) @ V[J_s].T) ** 2, axis=0)
    est_r, est_c = N * row_res.mean(), M * col_res.mean()
    var_r = N**2 * row_res.var(ddof=1) / n_r * (1 - n_r / N) if n_r > 1 else np.inf
    var_c = M**2 * col_res.var(ddof=1) / n_c * (1 - n_c / M) if n_c > 1 else np.inf
    fro2 = (est_r + est_c) / 2
    se2 = (var_r + var_c) / 4
    return {
        "kind": "sampled",
        "rows": int(n_r),
        "cols": int(n_c),
        "entries": int(n_r * M + n_c * N),
        "budget": int(budget),
        "deflated": float(deflated),
        "fro_error": float(np.sqrt(max(fro2, 0.0))) if np.isfinite(fro2) else np.nan,
        "fro_error_se": float(np.sqrt(se2) / (2 * np.sqrt(fro2))) if fro2 > 0 else np.nan,
        "catch_1pct": float(max(catch_probability(0.01, n_r, N), catch_probability(0.01, n_c, M))),
        "seconds": time.perf_counter() - t0,
    }


def power_miss_probability(ratio, n_passes, dim, width=N_EXTRA):
    """Bound on the chance that ``n_passes`` products from ``width`` Gaussian starts in a
    ``dim``-dimensional space all stay below ``theta`` when ``||D||_2 = ratio * theta``
    (Kuczynski & Wozniakowski 1992; see the manual, "Why the certificate holds")."""
    if ratio <= 1 or n_passes < 1 or width < 1:
        return 1.0
    single = min(1.0, 0.824 * np.sqrt(dim) * ratio ** (-float(n_passes)))
    return float(single**width)


def catch_probability(weight, n, total):
    """Chance that ``n`` rows drawn without replacement from ``total`` hit a cluster that
    holds a fraction ``weight`` of them (at least one of its ``ceil(weight total)`` rows)."""
    size = int(np.ceil(weight * total))
    if size <= 0:
        return 0.0
    if n + size > total:
        return 1.0
    # hypergeometric: P(no hit) = prod_{i<n} (total - size - i) / (total - i)
    i = np.arange(n)
    return float(1.0 - np.exp(np.sum(np.log1p(-size / (total - i)))))


def _threshold(s, shape, dtype):
    """``(1 + MISS_SLACK) s_r`` plus the rounding a residual can carry."""
    s = np.asarray(s, dtype=np.float64)
    top = float(np.max(s, initial=0.0))
    return (1 + MISS_SLACK) * float(s[-1]) + max(shape) * np.finfo(dtype).eps * top


def judge(method, s, shape, dtype, *, lower=None, deflated=(), bounds=None, advice="", failed=None):
    """``reliable`` from every bound at hand, with one ``RuntimeWarning`` saying why not.

    ``lower``: lower bounds on ``sigma_i(G)`` (inflation above ``CHECK_FACTOR`` times them, or
    values ``MISS_SLACK`` below them, are flagged). ``deflated``: ``(value, how)`` pairs, lower
    bounds on the deflated norm (see the manual, "Why the certificate holds"). ``bounds``: the
    dict of :func:`certify` with ``sin_theta_bound`` and ``sv_error_bound``
    (:func:`triplet_bounds`; above ``SUBSPACE_TOL`` / ``VALUE_TOL``, infinite or NaN:
    unreliable). NaN anywhere is a check that could not run: unreliable. ``failed`` (a list)
    receives the names of the checks that failed: ``"values"``, ``"missed"`` and ``"vectors"``
    (evidence that the answer is wrong: a value off its bounds, a direction outside the answer,
    vectors that are not orthonormal or not paired with the values: ``bounds``'
    ``orthonormality_error`` above ``SUBSPACE_TOL`` or ``pairing_error`` above ``VALUE_TOL``)
    and ``"uncertified"`` (no evidence, but :func:`triplet_bounds` does not certify the subspace
    or the values to 0.1, as on a cluster or a flat tail at ``s_r``; checked only when the
    others pass). A ``deflated`` value of None is a check that was not run (the sampled
    certificate of a source whose set-up pass is pending): ``"not_run"``, and where nothing
    else spoke the verdict is None (unknown), not False. Returns True, False or None; the
    warning ends with the value it returns.
    """
    s = np.asarray(s, dtype=np.float64)
    failed = [] if failed is None else failed
    reasons = []
    if lower is not None:
        lower = np.asarray(lower, dtype=np.float64)[: s.size]
        bad = flag_inflated(s, lower, shape, dtype)
        if bad.size:
            i = int(bad[0])
            failed.append("values")
            reasons.append(
                f"s_{i + 1} = {s[i]:.3g} is above {CHECK_FACTOR} times a lower bound "
                f"{lower[i]:.3g} on sigma_{i + 1}(G) ({bad.size} of {s.size} values)"
            )
        low = np.flatnonzero(
            ~(
                lower
                <= (1 + MISS_SLACK) * s
                + max(shape) * np.finfo(dtype).eps * max(s.max(), lower.max())
            )
        )
        if low.size:
            i = int(low[0])
            failed.append("values")
            reasons.append(
                f"s_{i + 1} = {s[i]:.3g} is below a lower bound {lower[i]:.3g} on "
                f"sigma_{i + 1}(G) ({low.size} of {s.size} values more than "
                f"{MISS_SLACK:.0%} below their bound)"
            )
    if bounds is not None:
        orth, pairing = bounds.get("orthonormality_error"), bounds.get("pairing_error")
        if orth is not None and not orth <= SUBSPACE_TOL:
            failed.append("vectors")
            reasons.append(
                f"the vectors are not orthonormal (max(||U^T U - I||, ||V^T V - I||)"
                f" = {orth:.3g} > {SUBSPACE_TOL})"
            )
        if pairing is not None and not pairing <= VALUE_TOL:
            failed.append("vectors")
            reasons.append(
                f"U^T G V is {pairing:.3g} s_1 away from diag(s) (> {VALUE_TOL}): "
                "the vectors and values do not form singular triplets"
            )
    theta = _threshold(s, shape, dtype) if s.size else 0.0
    for value, how in deflated:
        if value is None:  # a check that was not run: it rules nothing out, nothing in
            failed.append("not_run")
            reasons.append(
                f"the norm of G outside the answer's span ({how}) was not measured: a "
                "missing top direction is not ruled out"
            )
        elif not value <= theta:  # NaN: the check could not run
            # a check that could not run proves nothing missing: it only rules nothing out
            what = (
                "could not be computed (not finite): a missing top direction is not ruled out"
                if not np.isfinite(value)
                else f"is {value:.3g}, above (1 + {MISS_SLACK}) s_{s.size} = {theta:.3g}: a "
                "top direction is missing"
            )
            failed.append("missed")
            reasons.append(f"the norm of G outside the answer's span ({how}) {what}")
    if bounds is not None and not reasons:
        more = _bound_reasons(s.size, bounds)
        if more:  # no evidence against the answer: the bounds do not certify it
            failed.append("uncertified")
        reasons += more
    if reasons and failed == ["uncertified"]:
        # no evidence against the answer: sharper bounds may certify it as it is
        advice = "raise check_passes (each pass sharpens the bounds)" + (
            f", or {advice}" if advice else ""
        )
    # only checks that were not run spoke: no evidence either way, the answer is unknown
    verdict = None if reasons and set(failed) == {"not_run"} else not reasons
    if verdict is None:
        advice = ""  # the check that was not run names its own remedy
    if reasons:
        said = (
            "is unverified (info['reliable'] = None)"
            if verdict is None
            else "cannot be trusted (info['reliable'] = False)"
        )
        warnings.warn(
            f"{method}: "
            + "; ".join(reasons)
            + f": the answer {said}"
            + (f". To fix, {advice}" if advice else ""),
            RuntimeWarning,
            stacklevel=4,
        )
    return verdict


def _bound_reasons(r, b):
    """The sentences for :func:`judge` where :func:`triplet_bounds` does not certify."""
    out = []
    sin, err, gap = b["sin_theta_bound"], b["sv_error_bound"], b["gap"]
    if not np.isfinite(gap):
        return [f"the subspace and values are unknown: {b['why_unknown']}"]
    if not sin <= SUBSPACE_TOL:
        if gap > 0:
            out.append(
                f"sin theta of the top-{r} subspaces is only bounded by {sin:.3g} > "
                f"{SUBSPACE_TOL} (residual {b['residual']:.3g} over the certified gap "
                f"{gap:.3g})"
            )
        else:
            # no numbers (they are in info["certificate"]: gap, deflated_upper): the same
            # finding on many answers reads as one message
            out.append(
                f"the top-{r} subspace is unknown: no positive gap between "
                f"sigma_{r}(G) and the norm of G outside the answer could be "
                f"certified (a cluster around s_{r}, or too few check passes to "
                "resolve it; the bounds are in info['certificate'])"
            )
    if not err <= VALUE_TOL:
        out.append(f"the values are only certified to within {err:.3g} sigma_1(G) (> {VALUE_TOL})")
    return out


def _triplet_errors(s, Mc, Ru, Rv):
    """How far ``(U, s, V)`` is from a set of singular triplets, whatever its span.

    From the Rayleigh block ``Mc = Q_U^T G Q_V`` of :func:`power_certificate` and the
    factors of its bases, ``U = Q_U R_U`` and ``V = Q_V R_V`` (no product, no pass):
    ``orthonormality_error`` is ``max(||U^T U - I||_2, ||V^T V - I||_2)`` with
    ``U^T U = R_U^T R_U``, and ``pairing_error`` is ``||U^T G V - diag(s)||_2 / s_1`` with
    ``U^T G V = R_U^T Mc R_V``. The bounds of :func:`triplet_bounds` judge the spans alone,
    which a raw Nyström extension can get right with vectors that are neither orthonormal
    nor paired with ``s``.
    """
    r = s.size
    orth = max(float(np.linalg.norm(R.T @ R - np.eye(r), 2)) for R in (Ru, Rv))
    off = Ru.T @ Mc @ Rv - np.diag(np.asarray(s, dtype=np.float64))
    top = float(np.max(np.abs(s), initial=0.0))
    pairing = float(np.linalg.norm(off, 2)) / top if top > 0 else float(np.abs(off).max() > 0)
    return orth, pairing


def fused_probes(n, rng, check_passes, n_probes=CHAIN_PROBES):
    """The Gaussian block (n x ``n_probes``; none when ``check_passes`` is 0) that a solve
    appends to its last product, so that :func:`certify` starts its probe chain one product
    ahead (see ``known`` in :func:`power_certificate`) at the price of a few columns."""
    return rng.standard_normal((n, n_probes if check_passes else 0))


def fused_known(basis_product, probe_product, W, transposed):
    """``known`` for :func:`certify` from a solve's last pass ``work^T [Q, W]``.

    ``basis_product`` is ``work^T U_work`` (the last pass's product with the basis, times
    the small factor that makes ``U_work``), ``probe_product`` is ``work^T W``. ``work`` is
    ``G`` (then these are ``G^T U`` and ``G^T W``, the left side) or, when ``transposed``,
    ``G^T`` (then ``G V`` and ``G W``, the right side). None when no probes were drawn.
    """
    if W.shape[1] == 0:
        return None
    if transposed:
        return {"side": "right", "GV": basis_product, "GW": probe_product, "W": W}
    return {"side": "left", "GtU": basis_product, "GtW": probe_product, "W": W}


def certify(
    method,
    src,
    U,
    s,
    V,
    rng,
    dtype,
    n_passes,
    budget,
    advice,
    n_extra=None,
    known=None,
    starts=None,
):
    """Run the certificates an answer's options ask for; ``lower, reliable, cert``.

    ``n_passes`` passes of :func:`power_certificate` (lower bounds, missed directions and,
    once both ``G V`` and ``G^T U`` are known, the bounds of :func:`triplet_bounds`), then
    :func:`sampled_certificate` within ``budget`` entries (0: off), then :func:`judge`.
    ``starts``: the power iteration's first blocks (see :func:`power_certificate`).
    ``cert`` is ``info["certificate"]``: ``check_passes`` (passes spent), ``deflated``,
    ``deflated_upper``, ``upper_kind``, ``residual``, ``gap``, ``sin_theta_bound``,
    ``sv_error_bound`` (NaN where not computed), ``orthonormality_error`` and
    ``pairing_error`` (:func:`_triplet_errors`; absent where the bounds were not computed),
    ``starts``, ``miss_probability``,
    ``threshold``, ``seconds`` (its wall time), ``sampled`` (None when off) and ``failed``
    (the names of the checks that
    failed, see :func:`judge`; ``["uncertified"]`` alone: no evidence against the answer,
    but its subspace or values are not certified to 0.1, as on a cluster at ``s_r``).
    """
    t0 = time.perf_counter()
    N, M = src.shape
    rank = s.size
    lower, deflated, bounds = None, [], None
    cert = {"check_passes": 0, "sampled": None}
    if n_passes:
        before = src.n_products
        fro2 = known_fro2(src)
        if n_extra is not None:  # (given starts set the width themselves)
            width = n_extra
        else:  # the block's upper bound (the Frobenius split) needs ||G||_F
            width = rank + CERT_EXTRA if fro2 is not None else 0
        pc = power_certificate(
            src, U, V, rank, n_passes, rng, width, fro2=fro2, known=known, starts=starts
        )
        lower, d, width = pc["lower"], pc["deflated"], pc["width"]
        passes = int(src.n_products - before)
        kind = "Gaussian" if starts is None else "sampled"
        deflated.append((d, f"{passes} product(s) of power iteration from {width} {kind} starts"))
        sin, err, gap = triplet_bounds(s, pc)
        bounds = {
            "residual": float(pc["residual"]),
            "deflated_upper": pc["deflated_upper"],
            "upper_kind": pc["upper_kind"],
            "upper_failure": pc["upper_failure"],
            "gap": gap,
            "sin_theta_bound": sin,
            "sv_error_bound": err,
        }
        if "triplet" in pc and all(np.all(np.isfinite(X)) for X in pc["triplet"]):
            orth, pairing = _triplet_errors(s, *pc["triplet"])
            bounds.update(orthonormality_error=orth, pairing_error=pairing)
        if not np.isfinite(gap):
            bounds["why_unknown"] = (
                "a product was not finite"
                if np.isnan(d)
                else f"{passes} pass(es) multiplied only one side (G V or G^T U), both are needed; "
                "raise check_passes"
                if not np.isfinite(pc["residual"])
                else "no bound on the norm of G outside the answer"
            )
        cert.update(
            check_passes=passes,
            deflated=float(d),
            starts=int(width),
            miss_probability=min(
                power_miss_probability(2.0, passes, M - rank, width),
                power_miss_probability(2.0, pc.get("chain_products", 0), M - rank, pc["probes"]),
            ),
            probes=int(pc["probes"]),
            **{k: v for k, v in bounds.items() if k != "why_unknown"},
        )
    pending = getattr(src, "setup_pending", None)
    if budget >= 1 and callable(pending) and pending():
        # Its first row would cost a whole pass over G, far over the budget: the check
        # cannot run, and a check that cannot run leaves the answer unverified (NaN below).
        reason = (
            f"not run: reading any row or column of this source first runs its set-up "
            f"pass ({N * M} entries), over the certificate's budget of {int(budget)}"
        )
        cert["sampled"] = {"kind": "sampled", "skipped": reason, "budget": int(budget)}
        deflated.append(
            (
                None,
                "the sampled certificate (" + reason + "; run the set-up "
                "first, e.g. setup='eager', or raise check_passes)",
            )
        )
    elif budget >= 1:
        sampled = sampled_certificate(src, U, s, V, int(budget), rng)
        deflated.append(
            (
                sampled["deflated"],
                f"{sampled['rows']} random rows and {sampled['cols']} random columns",
            )
        )
        cert["sampled"] = sampled
    cert["threshold"] = (1 + MISS_SLACK) * float(s[-1])
    failed = []
    reliable = judge(
        method,
        s,
        (N, M),
        dtype,
        lower=lower,
        deflated=deflated,
        bounds=bounds,
        advice=advice,
        failed=failed,
    )
    cert["failed"] = sorted(set(failed))
    cert["seconds"] = time.perf_counter() - t0
    return lower, reliable, cert
