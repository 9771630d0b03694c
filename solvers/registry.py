"""Each solver declared once: its name, function, effort knob, cost and what it certifies.

A :class:`SolverSpec` holds the facts about one solver that are not already in its code;
the rest is read from the code: the options and their defaults from the function's
signature (its keyword-only parameters but ``random_state``), their meanings from its
numpydoc docstring. Everything that lists solvers derives from :data:`SOLVERS`:
:data:`METHODS` and :data:`OPTIONS` (the ``method=`` switch of :func:`solvers.svd` and its
option check), the options table in :func:`solvers.svd`'s docstring, the driver's effort
schedules (``ksvd_bench.driver.EFFORT_OPTION``), the race's and the CLI's choices, and the
solver table of the manual (``docs/guide/library.md``, filled in when the manual builds).

>>> import solvers
>>> spec = solvers.SOLVERS["block_krylov"]
>>> spec.effort_option, spec.defaults["n_iter"]
('n_iter', 4)
>>> "check_passes" in solvers.OPTIONS["rsvd"]
True
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .generalized_nystrom import generalized_nystrom
from .krylov import block_krylov
from .nystrom import asym_nystrom, sym_nystrom
from .rsvd import rsvd
from .tsvd import tsvd
from .validation import ASYM_SAMPLINGS, check_choice

__all__ = [
    "METHODS",
    "OPTIONS",
    "SOLVERS",
    "Option",
    "SolverSpec",
    "check_method_options",
    "options_summary",
    "solver_table",
]


@dataclass(frozen=True)
class Option:
    """One option of a solver: its name, default (from the signature) and meaning (from the
    docstring's first sentence about it)."""

    name: str
    default: object
    meaning: str


@dataclass(frozen=True)
class SolverSpec:
    """What the code of a solver cannot say about itself.

    Attributes
    ----------
    name : str
        The ``method=`` name.
    function : callable
        ``function(G, rank, *, random_state=None, **options) -> SVDResult``.
    summary : str
        One line: what the method computes.
    effort_option : str or None
        The option the driver grows until the answer is accurate enough (None: the method
        has no effort knob; the driver runs it once).
    effort_kind : {"samples", "oversamples", "depth"} or None
        How that effort grows (``ksvd_bench.driver.effort_schedule``): sampled columns from
        ``2 rank``, geometric up to ``min(N, M)``; oversampling 0, 5, 10, 20, ... up to a
        sketch as wide as ``G``; Krylov depth 0, 1, 2, 3, 4, 6, 8, 12, ... up to a basis
        that spans ``G``'s range. None with no effort knob.
    cost : str
        Its cost in passes over ``G`` for a rank-``r`` call (``info["n_passes"]``).
    certifies : str
        What ``info["reliable"] = True`` promises, and when it is None (unknown).
    variants : dict of str to dict
        Named settings worth racing beside the defaults: suffix -> options (the race's entry
        ``f"{name}_{suffix}"``).
    """

    name: str
    function: Callable
    summary: str
    effort_option: str | None
    effort_kind: str | None
    cost: str
    certifies: str
    variants: dict = field(default_factory=dict)

    @property
    def options(self):
        """The options :func:`solvers.svd` passes on, in signature order (tuple of
        :class:`Option`)."""
        meanings = _parameter_meanings(self.function)
        return tuple(
            Option(p.name, p.default, meanings.get(p.name, ""))
            for p in inspect.signature(self.function).parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.name != "random_state"
        )

    @property
    def defaults(self):
        """``{option: default}`` as the function's signature declares them."""
        return {o.name: o.default for o in self.options}


def _parameter_meanings(function):
    """``{name: first sentence}`` from the Parameters section of a numpydoc docstring
    (``a, b : type`` documents both names)."""
    doc = inspect.getdoc(function) or ""
    section = re.search(r"^Parameters\n-+\n(.*?)(?:^\w[^\n]*\n-+\n|\Z)", doc, re.S | re.M)
    entry = r"^(\w+(?:, \w+)*) :[^\n]*\n((?:[ \t]+[^\n]*\n?)*)"
    meanings = {}
    for names, text in re.findall(entry, section[1] if section else "", re.M):
        first = re.split(r"(?<=[.;])\s", " ".join(text.split()), maxsplit=1)[0]
        meanings.update(dict.fromkeys(names.split(", "), first.rstrip(";")))
    return meanings


_CERTIFIED = (
    "the product certificate (``check_passes`` of block power iteration on G, "
    "rank-revealing bounds on the values and the two subspaces, and checks that U and V are "
    "orthonormal and paired with s) proved the whole triplet within its tolerance; False "
    "(with a RuntimeWarning) where the evidence goes against the answer; None where nothing "
    "could be proved either way, ``check_passes=0`` included"
)

#: Every solver, in the order :func:`solvers.svd` documents them.
SOLVERS = {
    spec.name: spec
    for spec in (
        SolverSpec(
            "tsvd",
            tsvd,
            "Truncated SVD by a Lanczos or block eigensolver (ARPACK, PROPACK, LOBPCG) "
            "converged to ``tol``, or the source's own exact SVD",
            None,
            None,
            "one per ARPACK/PROPACK/LOBPCG product (often hundreds); 0 on a source's exact path",
            "the eigensolver converged (an eigensolver that stops short raises "
            "``RuntimeError`` instead of answering)",
        ),
        SolverSpec(
            "rsvd",
            rsvd,
            "Randomized SVD (Halko, Martinsson & Tropp) with power iterations",
            "n_oversamples",
            "oversamples",
            "``2 n_iter + 2``, plus ``check_passes``",
            _CERTIFIED,
        ),
        SolverSpec(
            "block_krylov",
            block_krylov,
            "Randomized block Krylov (Musco & Musco): Rayleigh-Ritz on the left Krylov space",
            "n_iter",
            "depth",
            "``2 n_iter + 2`` (the same as rsvd at equal ``n_iter``), plus ``check_passes``",
            _CERTIFIED,
        ),
        SolverSpec(
            "generalized_nystrom",
            generalized_nystrom,
            "Generalized Nystrom (Nakatsukasa): one two-sided sketch and an oblique projection",
            "n_oversamples",
            "oversamples",
            "1 through ``sketch`` (two products counted as one pass: a lazy source reads G "
            "once), else 2; plus ``check_passes``",
            _CERTIFIED + "; with ``check_passes=0`` the free estimate of the oblique "
            "projection's excess can still say False (values may be inflated beyond 1.5x)",
        ),
        SolverSpec(
            "sym_nystrom",
            sym_nystrom,
            "Nystrom on G G^T for U, then one product G^T U and a small SVD for s and V",
            "n_samples",
            "samples",
            "``2 + n M / (N M)``: 2 products and n rows, plus ``check_passes``",
            _CERTIFIED,
        ),
        SolverSpec(
            "asym_nystrom",
            asym_nystrom,
            "Asymmetric Nystrom: the SVD of a sampled block extended by the sampled rows and "
            "columns (stable or paper core; uniform, norm, ARP, RPCholesky or ACA sampling)",
            "n_samples",
            "samples",
            "``(n M + N m) / (N M)``, a fraction of one pass, plus ``check_passes``; "
            '``sampling="arp"`` adds its sketch pass, ``"rpcholesky"`` reads '
            "``(m + 1)(N + M)`` entries of its joint kernel instead of rows and columns",
            _CERTIFIED,
            {
                # the paper's method: its core (eq. (10)) and no check pass, as its tables ran
                "paper": {"core": "paper", "check_passes": 0},
                # every other sampler with the default core and check
                **{s: {"sampling": s} for s in ASYM_SAMPLINGS if s != "uniform"},
            },
        ),
    )
}

#: Method names, for ``solvers.svd(..., method=)``.
METHODS = tuple(SOLVERS)

#: Options each method accepts through ``solvers.svd(..., **options)``.
OPTIONS = {name: tuple(o.name for o in spec.options) for name, spec in SOLVERS.items()}


def check_method_options(method, options):
    """``method``'s canonical name (case-insensitive), after checking that every option
    belongs to it (used by :func:`solvers.svd`)."""
    method = check_choice("method", method, METHODS)
    for name in options:
        if name in OPTIONS[method]:
            continue
        owners = [m for m in METHODS if name in OPTIONS[m]]
        if owners:
            raise TypeError(
                f"option {name!r} belongs to method {' / '.join(map(repr, owners))}, not to "
                f"method {method!r} (valid options: {', '.join(OPTIONS[method])})"
            )
        raise TypeError(
            f"unknown option {name!r} for method {method!r} "
            f"(valid options: {', '.join(OPTIONS[method])})"
        )
    return method


def options_summary(indent=""):
    """One bullet per solver: its options with their defaults (for :func:`solvers.svd`'s
    docstring); lines after the first start with ``indent``."""
    lines = []
    for name, spec in SOLVERS.items():
        items = ", ".join(f"``{o.name}={o.default!r}``" for o in spec.options)
        lines.append(f"* {name}: {items}.")
    return ("\n" + indent).join(lines)


def solver_table():
    """The manual's solver table (Markdown): name, what it computes, effort knob, cost in
    passes, options with defaults, and what ``reliable`` certifies."""
    rows = [
        "| method | computes | effort knob | passes over G | options (default) | "
        "`reliable=True` means |",
        "|---|---|---|---|---|---|",
    ]
    for name, spec in SOLVERS.items():
        opts = ", ".join(f"`{o.name}={o.default!r}`" for o in spec.options)
        knob = f"`{spec.effort_option}`" if spec.effort_option else "none"
        cells = (f"`{name}`", spec.summary, knob, spec.cost, opts, spec.certifies)
        rows.append("| " + " | ".join(c.replace("``", "`") for c in cells) + " |")
    return "\n".join(rows)
