"""Typed records that read as dicts: the machinery, and the product certificate's record.

A record is a ``dict`` subclass declared as a dataclass: each field is an attribute that
reads and writes the dict's own entry of that name (one storage, no copy to drift), so
``cert.gap`` and ``cert["gap"]`` are the same value. :class:`solvers.SolveInfo` (an answer's
``info``) and :class:`Certificate` (its ``info["certificate"]``) are records.

Why a ``dict`` subclass, not a ``MutableMapping`` on a dataclass: ``info`` has been a dict
since the first solver, and its readers rely on that. ``json.dump`` writes only real dicts
(the race's records, ``ksvd_bench.report.files.write_json``), about twenty readers test
``isinstance(x, dict)`` (``solvers._check.final_reliable`` on the certificate among them),
``_result._unscaled`` walks nested dicts, and ``pickle``/``copy`` must keep working across
the race's worker processes. A dict subclass keeps every one of them as it was, with no
conversion at any boundary; the dataclass declaration adds the typed, documented fields
(``dataclasses.fields`` lists them).

A declared field that was never set is not an entry: ``"fro2" in info`` is False and
``info["fro2"]`` raises KeyError as before, while the attribute ``info.fro2`` reads None.
Assigning the attribute sets the entry. Entries that no field declares (a method's echoed
options, as ``n_iter``) stay entries; ``Record.extra`` lists them.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Certificate", "Record", "record"]


class _Entry:
    """A declared field: the attribute reads the record's entry of that name (None where
    absent) and an assignment writes it."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        # None on the class is the field's default (what dataclasses reads)
        return None if obj is None else dict.get(obj, self.name)

    def __set__(self, obj, value):
        dict.__setitem__(obj, self.name, value)


def record(cls):
    """Declare ``cls`` (a :class:`Record` subclass) a record: every annotated name becomes a
    field stored as the dict's entry of that name, default None (absent)."""
    for name in cls.__dict__.get("__annotations__", {}):
        entry = _Entry()
        setattr(cls, name, entry)
        entry.__set_name__(cls, name)
    # init=False: the constructor is dict's (any mapping or keywords, extra entries kept);
    # eq and repr stay dict's, so records compare and print as the dicts they replace
    return dataclasses.dataclass(init=False, eq=False, repr=False)(cls)


class Record(dict):
    """A dict with declared, typed fields (see the module docstring)."""

    __slots__ = ()  # no instance attributes: a mistyped field name raises AttributeError

    @classmethod
    def field_names(cls):
        """The declared fields' names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @property
    def extra(self):
        """The entries no field declares (a new dict: writing it changes nothing)."""
        names = set(self.field_names())
        return {k: v for k, v in self.items() if k not in names}


@record
class Certificate(Record):
    """The product certificate of an answer, ``info["certificate"]``.

    Built by :func:`solvers._certificate.certify` (``check_passes`` passes of products on the
    answer, then a sampled check within a budget of entries); the proofs are in the manual,
    "Why the certificate holds". Every number is in the units of ``G``; NaN where a product
    was not finite or the quantity was not computed, never 0. A field is absent where the
    certificate did not compute it (``check_passes=0`` leaves only ``check_passes``,
    ``sampled``, ``threshold`` and ``failed``).

    Attributes
    ----------
    check_passes : int
        Passes over ``G`` the product certificate spent (0: it did not run).
    deflated : float
        Lower bound on ``||D||_2``, the norm of ``G`` outside the answer's subspaces, from the
        power iteration's Gaussian starts.
    deflated_upper : float
        The smallest valid upper bound on ``||D||_2``.
    upper_kind : str or None
        Which bound gave ``deflated_upper``: ``"power_probes"`` (probabilistic),
        ``"frobenius"`` (deterministic, ``||G||_F`` known) or ``"empty"``.
    upper_failure : float or None
        The failure probability of ``deflated_upper`` (0 for ``"frobenius"``).
    residual : float
        ``max(||(I - U U^T) G V||_2, ||U^T G (I - V V^T)||_2)`` (NaN until both sides were
        multiplied).
    gap : float
        ``rho_r - ||D||``: the gap the Wedin bound divides by (``inf`` where not positive).
    sin_theta_bound : float
        Upper bound on the sine of the largest angle between the answer's subspaces and
        ``G``'s top ones (NaN where not computed).
    sv_error_bound : float
        Upper bound on the singular values' error, relative to a lower bound on ``s_1``.
    orthonormality_error : float
        How far the answer's ``U``, ``V`` are from orthonormal (absent where the bounds were
        not computed).
    pairing_error : float
        How far ``U^T G V`` is from diagonal (absent where the bounds were not computed).
    starts : int
        Gaussian starts per side of the power iteration.
    probes : int
        Gaussian probes of the fused chains.
    miss_probability : float
        Upper bound on the chance that a direction of ``G`` outside the answer, twice the
        threshold, went unseen.
    threshold : float
        The value a missed direction must exceed to fail the answer, ``(1 + MISS_SLACK)
        s_r``.
    sampled : dict or None
        The sampled rows-and-columns check (:func:`solvers._certificate.sampled_certificate`:
        ``rows``, ``cols``, ``entries``, ``budget``, ``deflated``, ``fro_error``,
        ``fro_error_se``, ``catch_1pct``, ``seconds``; ``skipped`` where it could not run);
        None when off.
    failed : list of str
        Names of the checks that failed (:func:`solvers._certificate.judge`); ``["uncertified"]``
        alone: no evidence against the answer, but it is not certified to 0.1.
    certified_values : bool
        ``asym_nystrom``: whether its core's own check certifies the values.
    seconds : float
        Wall time of the certificate's own work (its check passes, the sampled check and the
        judging); probes fused into the solve's last product count to the solve.
    """

    __slots__ = ()

    check_passes: int
    deflated: float
    deflated_upper: float
    upper_kind: str | None
    upper_failure: float | None
    residual: float
    gap: float
    sin_theta_bound: float
    sv_error_bound: float
    orthonormality_error: float
    pairing_error: float
    starts: int
    probes: int
    miss_probability: float
    threshold: float
    sampled: dict | None
    failed: list
    certified_values: bool
    seconds: float
