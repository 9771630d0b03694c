"""How the driver scores one answer: its measures, the whole-triplet checks and the estimate.

:class:`Scorer` is the part of :func:`ksvd_bench.driver.solve_to_tolerance` that looks at an
answer after the solver has returned it (nothing here is timed). Per answer it makes one
pass over the residual operator (``sketch`` of ``[V~, Omega_p]`` and ``U~``, or one ``matmat``
and one ``rmatmat`` where there is no ``sketch``) and reads from it

* the triplet residual (:func:`ksvd_bench.metrics.triplet_residual`),
* the reference-free error estimate of ``||G - U~ U~^T G||_F``: the Frobenius gap
  ``||G||_F^2 - ||U~^T G||_F^2`` (:func:`solvers.frobenius_gap`) where ``||G||_F`` is known
  and the gap is resolved, else the solver's own estimate from its sketch where it made one
  (``info["error_estimate"]``: rsvd and block Krylov, *fused* into the solve at no extra
  product; :func:`solvers.leave_one_out_error`), else ``N_PROBES`` Gaussian probes
  (:func:`solvers.probe_error`),

and, with a reference, the singular-value error (:func:`ksvd_bench.metrics.sv_error`) and the
measures eta, low-rank and subspace error. :func:`recording_warnings` and
:func:`warning_fields` turn the warnings of a solve into data.
"""

from __future__ import annotations

import math
import textwrap
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ksvd_bench.metrics import (
    LOWRANK_PASS_MAX_ENTRIES,
    eta,
    frobenius_norm,
    lowrank_error,
    residual_estimate,
    subspace_error,
    sv_error,
    triplet_residual,
)
from ksvd_bench.metrics.common import in_units, unit_of
from solvers import (
    GAP_RTOL,
    GAP_RTOL_FLOAT32,
    SVDResult,
    as_source,
    frobenius_gap,
    probe_error,
    probe_fro2_lower,
)
from solvers.validation import largest_entry

__all__ = [
    "Scorer",
    "lowrank_score",
    "STATUSES",
    "recording_warnings",
    "warning_fields",
    "verification",
    "reemit",
    "exact_fro2",
    "gap_rtol",
    "estimates",
    "estimate_error",
    "solver_estimate",
    "solver_kind",
    "choose_estimate",
    "answer_status",
]

#: The verdict of one answer (``status`` of the driver's history entries and result):
#:
#: * ``"converged"``: accepted; its stopping quantity is within ``eps`` and it meets the
#:   whole-triplet rule (with a reference: the measure within ``eps``, the singular values
#:   within ``sv_tol``; always: the triplet residual within ``triplet_tol``, reliable);
#: * ``"stopped early, wrong"``: a reference-free stop (``"estimate"``, ``"residual"``)
#:   fired, and the reference shows the answer fails the rule (measure or singular values
#:   out of tolerance): what that stop would have returned without a reference;
#: * ``"unreliable"``: the solver marked it unreliable (``info["reliable"] = False``);
#: * ``"not converged"``: anything else (the stop did not fire, or a check failed).
STATUSES = ("converged", "not converged", "unreliable", "stopped early, wrong")

#: longest warning message kept (a message quoting an array can be huge); the solvers' own
#: certificate warnings, about 450 characters with their advice, are kept whole
MAX_MESSAGE = 1000


def clip_message(text, width=MAX_MESSAGE):
    """``text`` on one line (runs of white space made one space), at most ``width``
    characters, cut at a word boundary and marked ``...`` where it is shortened (a cut
    mid-word read as a different word: "or use").

    Examples
    --------
    >>> clip_message("the answer cannot be trusted; to fix, raise n_iter or use rsvd", 40)
    'the answer cannot be trusted; to fix, ...'
    """
    return textwrap.shorten(str(text), width=width, placeholder=" ...")


class recording_warnings(warnings.catch_warnings):  # noqa: N801 (a context manager)
    """Record every warning raised inside, each occurrence (``simplefilter("always")``)."""

    def __init__(self):
        super().__init__(record=True)

    def __enter__(self):
        caught = super().__enter__()
        warnings.simplefilter("always")
        return caught


def accepted(info):
    """The solver's own checks find no evidence against the answer: ``info["reliable"]``
    (True where absent), None (no check ran: ``check_passes=0``), or a certificate whose
    only failure is ``"uncertified"`` (no value off its bounds, no missed direction, but the
    subspace or the values not certified to 0.1, as on a cluster or a flat tail at
    ``s_r``): every stop judges those by its own measure (issue 20)."""
    if not isinstance(info, Mapping):
        return True
    failed = (info.get("certificate") or {}).get("failed")
    reliable = info.get("reliable", True)
    return reliable is None or bool(reliable) or list(failed or ()) == ["uncertified"]


def verification(info):
    """What the solver's own certificate says of an answer, in a word (issue 32):
    ``"certified"`` (``info["reliable"]`` True: its product certificate vouches for it),
    ``"flagged"`` (False: a check failed or could not certify it) or ``"unverified"`` (None or
    absent: no check ran, e.g. ``check_passes=0``). An unverified answer is never shown as
    right by the solver's word; only a reference can say it is."""
    reliable = info.get("reliable") if isinstance(info, Mapping) else None
    return "unverified" if reliable is None else "certified" if reliable else "flagged"


def warning_fields(caught, info):
    """``n_warnings``, ``warnings`` (deduplicated messages), ``reliable`` (:func:`accepted`)
    and ``verified`` (:func:`verification`) of one solve."""
    messages = list(dict.fromkeys(clip_message(w.message) for w in caught))
    return {
        "n_warnings": len(caught),
        "warnings": messages,
        "reliable": accepted(info),
        "verified": verification(info),
    }


def reemit(caught):
    """Issue each distinct recorded warning once more, with its category and origin.

    They pass through the caller's warning filters again: recording them never hides them.
    """
    seen = set()
    for w in caught:
        key = (w.category, str(w.message))
        if key in seen:
            continue
        seen.add(key)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def exact_fro2(src):
    """``||G||_F^2`` where the source knows it exactly, else None (unknown).

    Read from an exact ``frobenius_norm()`` member (the dense and sparse adapters; the lazy
    kernel sources, whose centred norm costs one pass on the first call and which answer
    None where rounding could have lost it) or the row or column norms;
    ``norm_bound()`` is only an upper bound of ``||G||_2``, so it is not used. A zero is
    never returned: a norm that reads 0 cannot be told from one lost to rounding, and
    every answer's relative error would read 0.
    """
    value = None
    member = getattr(src, "frobenius_norm", None)
    if callable(member):
        value = member()  # None: the source cannot tell
    if value is None and any(
        callable(getattr(src, m, None)) for m in ("col_norms_sq", "row_norms_sq")
    ):
        value = frobenius_norm(src)
    if value is None:
        return None
    value = float(value)
    value = value * value  # inf, not OverflowError, where the square overflows
    return value if math.isfinite(value) and value > 0 else None


def _times(result, unit):
    """``result`` (an SVD) with its values multiplied by ``unit``; itself when that is 1."""
    if unit == 1.0:
        return result
    return SVDResult(result.U, np.asarray(result.s) * unit, result.V, result.info)


def gap_rtol(src):
    """The smallest ``E^2 / ||G||_F^2`` at which the Frobenius gap is trusted on ``src``.

    :data:`solvers.GAP_RTOL` in float64; :data:`solvers.GAP_RTOL_FLOAT32` for a float32
    source (its ``||G||_F`` is given as known to ``5e-6`` relative,
    :data:`ksvd_bench.kernels.source.FROBENIUS_RTOL`).
    """
    dtype = getattr(src, "dtype", np.float64)
    return GAP_RTOL_FLOAT32 if np.dtype(dtype) == np.float32 else GAP_RTOL


def _fused_pass(src, U, V, Omega):
    """``(G V, G^T U, G Omega)`` in one ``sketch`` pass where the source has it."""
    right = np.hstack([V, Omega])
    sketch = getattr(src, "sketch", None)
    if callable(sketch):
        GR, GtU = sketch(right, U)
    else:
        GR, GtU = src.matmat(right), src.rmatmat(U)
    GR = np.asarray(GR, dtype=np.float64)
    r = V.shape[1]
    return GR[:, :r], np.asarray(GtU, dtype=np.float64), GR[:, r:]


def estimates(U, GtU, G_Omega, fro2, rtol=GAP_RTOL):
    """``(gap, probe)`` estimates of ``||G - Un Un^T G||_F`` (``Un``: ``U`` with unit columns).

    ``gap`` is NaN where ``fro2`` (``||G||_F^2``) is None or 0 (unknown) or the gap is
    below ``rtol * fro2`` (not resolved).
    """
    nu = np.linalg.norm(U, axis=0)
    nu[nu == 0] = 1.0
    Un, GtUn = U / nu, GtU / nu
    gap = math.nan
    if fro2:
        # ||G - Un Un^T G||_F^2 = fro2 - (2 ||Un^T G||^2 - <Un^T G, Un^T Un Un^T G>)
        captured = 2.0 * float(np.einsum("ij,ij->", GtUn, GtUn)) - float(
            np.sum((GtUn @ (Un.T @ Un)) * GtUn)
        )
        gap = frobenius_gap(fro2, min(max(captured, 0.0), fro2), rtol=rtol)
    return gap, probe_error(G_Omega, Un)


def choose_estimate(gap, solver, solver_kind, probe, safety):
    """``(estimate, kind, factor)``: the driver's choice among its estimates of one answer.

    The Frobenius gap where resolved (exact; factor 1), else the solver's own estimate
    (kind ``"fused_" + solver_kind``: factor 1 for its exact gap or truncation, ``safety``
    for its leave-one-out estimate), else the probes (factor ``safety``).
    """
    if math.isfinite(gap):
        return gap, "gap", 1.0
    if math.isfinite(solver):
        kind = f"fused_{solver_kind or 'loo'}"
        return solver, kind, 1.0 if solver_kind in ("gap", "exact") else safety
    return probe, "probes", safety


def estimate_error(G, approx, *, rank=None, fro2=None, n_probes=10, random_state=None, safety=2.0):
    """Reference-free estimates of ``||G - U~ U~^T G||_F`` for one answer (one pass).

    Parameters
    ----------
    G : matrix source
    approx : SVDResult
    rank : int, optional
        Leading triplets used, default all.
    fro2 : float, optional
        ``||G||_F^2`` if known exactly (enables the gap estimate).
    n_probes : int, default=10
    random_state : None, int or numpy.random.Generator
        The probes.
    safety : float, default=2.0
        Stopping factor of a randomized estimate (see :func:`choose_estimate`).

    Returns
    -------
    out : dict
        ``gap`` (NaN without ``fro2`` or when unresolved), ``probes``, ``solver`` (the
        solver's ``info["error_estimate"]``, NaN without), ``estimate`` and ``kind`` (the
        driver's choice, :func:`choose_estimate`), ``factor`` (its stopping factor),
        ``probe_norm_fro`` (the probes' estimate of ``||G||_F``) and ``products``
        (``(G V~, G^T U~)``, for :func:`~ksvd_bench.metrics.triplet_residual`).
    """
    U = np.asarray(approx.U, dtype=np.float64)
    V = np.asarray(approx.V, dtype=np.float64)
    if rank is not None:
        U, V = U[:, :rank], V[:, :rank]
    Omega = np.random.default_rng(random_state).standard_normal((V.shape[0], n_probes))
    GV, GtU, G_Omega = _fused_pass(G, U, V, Omega)
    gap, probe = estimates(U, GtU, G_Omega, fro2, gap_rtol(G))
    solver = solver_estimate(approx.info, rank=U.shape[1], n_triplets=len(approx.s))
    estimate, kind, factor = choose_estimate(gap, solver, solver_kind(approx.info), probe, safety)
    return {
        "gap": gap,
        "probes": probe,
        "solver": solver,
        "estimate": estimate,
        "kind": kind,
        "factor": factor,
        "probe_norm_fro": float(np.linalg.norm(G_Omega) / math.sqrt(n_probes)),
        "products": (GV, GtU),
    }


def solver_estimate(info, *, rank=None, n_triplets=None):
    """The solver's own ``info["error_estimate"]`` (absolute), NaN where it gave none.

    Also NaN when ``rank`` is given and smaller than ``n_triplets``: the solver's estimate
    refers to all the triplets it returned, not to a leading part of them.
    """
    if rank is not None and n_triplets is not None and rank != n_triplets:
        return math.nan
    value = info.get("error_estimate") if isinstance(info, Mapping) else None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value if math.isfinite(value) and value >= 0 else math.nan


def solver_kind(info):
    """The solver's ``info["error_estimate_kind"]`` (``"exact"``, ``"gap"``, ``"loo"``)."""
    kind = info.get("error_estimate_kind") if isinstance(info, Mapping) else None
    return kind if isinstance(kind, str) else None


def _nan_measures():
    nan = float("nan")
    return {
        "eta": nan,
        "lowrank": nan,
        "subspace": nan,
        "residual_estimate": nan,
        "sv_error": nan,
        "triplet_residual": nan,
        "error_estimate": nan,
        "relative_error_estimate": nan,
        "estimate_kind": None,
        "solver_error_estimate": nan,
    }


def answer_status(*, fired, triplet_ok, reference_ok, reliable, stop):
    """The verdict of one answer, one of :data:`STATUSES`.

    ``fired``: its stopping quantity is within ``eps``; ``triplet_ok``: the reference-free
    check (triplet residual) holds; ``reference_ok``: with a reference, the measure and the
    singular values are within tolerance (True without one: nothing to check).
    """
    if not reliable:
        return "unreliable"
    if fired and triplet_ok and reference_ok:
        return "converged"
    if fired and triplet_ok and stop != "reference":
        return "stopped early, wrong"
    return "not converged"


def lowrank_score(src, res_src, reference, answer, *, rank, fro2=None):
    """``(low-rank error, fro2)`` of ``answer``, as the driver and the race measure it.

    One pass over ``src`` where G has at most ``LOWRANK_PASS_MAX_ENTRIES`` entries, else
    products with ``res_src`` (the cheapest exact operator), which need ``||G||_F``:
    ``fro2`` where known, else one pass computes it and it is returned for the next call
    (None where it is not finite and positive; the error is then NaN, never 0).
    """
    N, M = src.shape
    if N * M <= LOWRANK_PASS_MAX_ENTRIES:
        return float(lowrank_error(src, reference, answer, rank=rank, method="pass")), fro2
    if fro2 is None:  # once per sweep: the products route needs ||G||_F (a pass)
        value = frobenius_norm(res_src) ** 2
        fro2 = value if math.isfinite(value) and value > 0 else None
    if fro2 is None:
        return math.nan, None
    value = lowrank_error(
        res_src, reference, answer, rank=rank, method="products", norm_fro=math.sqrt(fro2)
    )
    return float(value), fro2


@dataclass
class Scorer:
    """Every measure and check of one answer, as the driver records it.

    ``fro2`` is ``||G||_F^2`` when known exactly (None: the probes estimate it, pooled over
    the answers scored so far). ``safety`` multiplies a probe-based estimate in the stopping
    value; the gap needs none. ``gap_rtol`` is where the gap is trusted (:func:`gap_rtol`).
    """

    src: object
    res_src: object
    reference: object
    rank: int
    weights: str
    metric: str
    stop: str
    track: set
    track_residual: bool
    cluster_rtol: float | None
    fro2: float | None = None
    n_probes: int = 10
    safety: float = 2.0
    eps: float = 0.0
    sv_tol: float = 0.0
    triplet_tol: float = 0.0
    gap_rtol: float = GAP_RTOL
    _probe_sum: float = field(default=0.0, repr=False)
    _probe_cols: int = field(default=0, repr=False)

    def __post_init__(self):
        # Every norm in units of G's size where that is extreme (G near 1e+-300, whose
        # squared norms overflow or underflow), as the solvers do: the sources, the reference
        # values and ||G||_F^2 here, each answer's values in __call__.
        self.unit = unit_of(self._magnitude())
        self.ref_in_units = self.reference
        if self.unit != 1.0:
            given = self.fro2
            self.src = in_units(as_source(self.src), self.unit)
            self.res_src = in_units(as_source(self.res_src), self.unit)
            self.fro2 = exact_fro2(self.res_src)
            if self.fro2 is None and given is not None:
                value = given * self.unit * self.unit
                self.fro2 = value if math.isfinite(value) and value > 0 else None
            if self.reference is not None:
                self.ref_in_units = _times(self.reference, self.unit)

    def _magnitude(self):
        """``||G||_2`` from the reference, else ``||G||_F`` where known, else ``max |G_ij|``
        of a dense or sparse G (0 for a lazy one: it stays in its own units)."""
        if self.reference is not None:
            return float(np.max(self.reference.s, initial=0.0))
        if self.fro2 is not None:
            return math.sqrt(self.fro2)
        return largest_entry(as_source(self.res_src)) or 0.0  # a dense G's fro2 overflowed

    def _lowrank(self, out):
        value, self.fro2 = lowrank_score(
            self.src, self.res_src, self.ref_in_units, out, rank=self.rank, fro2=self.fro2
        )
        return value

    def _estimate(self, U, GtU, G_Omega, out):
        """``(absolute estimate, relative estimate, kind, stopping factor)``.

        The relative estimate is NaN where ``||G||_F`` is 0 or unknown: never 0.
        """
        if self.fro2 is None:
            # ||G Omega||_F^2 pooled over all answers so far; the denominator of a relative
            # error is its lower confidence bound (failure NORM_FAILURE), never the unbiased
            # estimate, which is as often high as low (issue 32)
            self._probe_sum += float(np.einsum("ij,ij->", G_Omega, G_Omega))
            self._probe_cols += G_Omega.shape[1]
            fro2 = probe_fro2_lower(self._probe_sum, self._probe_cols)
        else:
            fro2 = self.fro2
        gap, probe = estimates(U, GtU, G_Omega, self.fro2, self.gap_rtol)
        solver = solver_estimate(out.info, rank=self.rank, n_triplets=len(out.s)) * self.unit
        error, kind, factor = choose_estimate(
            gap, solver, solver_kind(out.info), probe, self.safety
        )
        norm = math.sqrt(fro2) if math.isfinite(fro2) and fro2 > 0 else math.nan
        return error / self.unit, error / norm, kind, factor

    def _read_solver_fro2(self, info):
        if self.fro2 is None and isinstance(info, Mapping) and "fro2" in info:
            # the solver knew ||G||_F^2 exactly (in G's units: inf where it overflowed)
            value = float(info["fro2"]) * self.unit * self.unit
            self.fro2 = value if math.isfinite(value) and value > 0 else None

    def _reference_measures(self, original, out, m):
        """The measures against the reference: ``original`` the answer, ``out`` in units."""
        ref = self.reference
        m["sv_error"] = sv_error(ref, original, rank=self.rank)
        m["eta"] = eta(
            ref, original, weights=self.weights, rank=self.rank, cluster_rtol=self.cluster_rtol
        )
        if "lowrank" in self.track:
            m["lowrank"] = self._lowrank(out)
        if "subspace" in self.track:
            m["subspace"] = max(
                subspace_error(ref, out, rank=self.rank, cluster_rtol=self.cluster_rtol)
            )

    def _stopping(self, m, factor):
        if self.stop == "reference":
            return m["value"]
        if self.stop == "estimate":
            return factor * m["relative_error_estimate"]
        return m["residual_estimate"]

    def __call__(self, out, probe_seed):
        """``(measures, stopping value, ranking score, status)`` of one answer.

        ``status`` is one of :data:`STATUSES`; ``"converged"`` accepts the answer.
        """
        m = _nan_measures()
        original, out = out, _times(out, self.unit)  # out in units; eta and sv_error need none
        U = np.asarray(out.U, dtype=np.float64)[:, : self.rank]
        V = np.asarray(out.V, dtype=np.float64)[:, : self.rank]
        self._read_solver_fro2(out.info)
        rng = np.random.default_rng(probe_seed)
        Omega = rng.standard_normal((V.shape[0], self.n_probes))
        GV, GtU, G_Omega = _fused_pass(self.res_src, U, V, Omega)
        ref = self.reference
        m["triplet_residual"] = triplet_residual(
            self.res_src, out, rank=self.rank, reference=self.ref_in_units, products=(GV, GtU)
        )
        error, relative, kind, factor = self._estimate(U, GtU, G_Omega, out)
        m.update(
            error_estimate=error,
            relative_error_estimate=relative,
            estimate_kind=kind,
            solver_error_estimate=solver_estimate(out.info),
        )
        if ref is not None:
            self._reference_measures(original, out, m)
        if self.track_residual:
            # the scoring pass made G V~ and G^T U~ already when it saw every triplet
            whole = np.shape(out.U)[1] == U.shape[1]
            m["residual_estimate"] = residual_estimate(
                self.res_src,
                out,
                weights=self.weights,
                cluster_rtol=self.cluster_rtol,
                products=(GV, GtU) if whole else None,
            )
            if self.weights == "singular_values":  # weighted by the values: G's own units
                m["residual_estimate"] /= self.unit
        m["value"] = m[self.metric]
        stopping = self._stopping(m, factor)
        if ref is not None:
            ranking = m["value"]
        elif self.stop == "residual":
            ranking = m["residual_estimate"]
        else:
            ranking = relative
        reliable = accepted(out.info)
        # NaN compares False: a quantity that could not be computed never passes
        reference_ok = ref is None or bool(m["value"] <= self.eps and m["sv_error"] <= self.sv_tol)
        status = answer_status(
            fired=bool(stopping <= self.eps),
            triplet_ok=bool(m["triplet_residual"] <= self.triplet_tol),
            reference_ok=reference_ok,
            reliable=reliable,
            stop=self.stop,
        )
        return m, stopping, ranking, status
