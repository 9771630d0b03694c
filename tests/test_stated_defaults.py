"""Every default a text states for a solver option is the code's (issue 34 section 1).

The code's defaults are the solvers' signatures, read through ``solvers.SOLVERS``. The texts
are the solvers' own docstrings (``name : type, default=X``), every docstring in the two
packages, the manual, the README and the CLI's ``--help``: wherever one of them writes
``option=value`` or ``option`` next to "default", the value must be a default of that option
in some solver (``n_oversamples`` is 10 in rsvd and 20 in generalized_nystrom).
"""

import argparse
import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import ksvd_bench
import solvers
from ksvd_bench.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def _defaults():
    """``{option: {repr of a default}}``; a None that the docstring resolves ("None means
    ``"stable"``") counts with what it means."""
    out = {}
    for spec in solvers.SOLVERS.values():
        for option in spec.options:
            out.setdefault(option.name, set()).add(repr(option.default))
            means = re.match(r"None means ``(.+?)``", option.meaning)
            if option.default is None and means:
                out[option.name].add(repr(ast.literal_eval(means.group(1))))
    return out


DEFAULTS = _defaults()
_VALUE = r"""(None|True|False|-?\d+(?:\.\d+)?(?:e-?\d+)?|'[^']*'|"[^"]*")(?![%\w.])"""
_NAMES = "|".join(sorted(DEFAULTS, key=len, reverse=True))
#: "default ``name=value``", "``name=value`` (default)" and "``name`` (default value",
#: "``name``, default value" (not a numpydoc entry: the first test reads those)
_STATED = [
    re.compile(rf"default[^.\n]{{0,20}}?`*\b({_NAMES})\s*=\s*{_VALUE}", re.I),
    re.compile(rf"`*\b({_NAMES})\s*=\s*{_VALUE}`*\s*\(default\)", re.I),
    re.compile(rf"`+({_NAMES})`+\s*[(,]\s*(?:by )?default[:=]?\s*{_VALUE}", re.I),
]


def _canonical(value):
    try:
        return repr(ast.literal_eval(value))
    except (ValueError, SyntaxError):
        return value


def _statements(text):
    for pattern in _STATED:
        for m in pattern.finditer(text):
            yield m.group(1), _canonical(m.group(2)), m.group(0)


def _package_docstrings():
    for package in (solvers, ksvd_bench):
        names = [package.__name__]
        names += [
            m.name
            for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
            if "cuda" not in m.name  # the CUDA modules import numba-cuda at the top
        ]
        for name in names:
            module = importlib.import_module(name)
            yield name, inspect.getdoc(module) or ""
            for attr, obj in vars(module).items():
                if getattr(obj, "__module__", None) == name and callable(obj):
                    yield f"{name}.{attr}", inspect.getdoc(obj) or ""


def _help_texts(parser, prog="ksvd-bench"):
    yield prog, parser.format_help()
    for action in parser._actions:  # argparse has no public walk of its sub-commands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _help_texts(sub, f"{prog} {name}")


def _texts():
    yield from _package_docstrings()
    for path in sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]:
        yield str(path.relative_to(ROOT)), path.read_text()
    yield from _help_texts(build_parser())


def test_every_solver_documents_its_own_defaults():
    for name, spec in solvers.SOLVERS.items():
        doc = inspect.getdoc(spec.function)
        for option in spec.options:
            entry = rf"^(?:\w+, )*{option.name}(?:, \w+)* :([^\n]*)$"
            line = re.search(entry, doc, re.M)
            assert line, f"{name}: its docstring does not document {option.name}"
            m = re.search(r"\bdefault=(.+)$", line.group(1))
            if m is None:  # a required option: None in the signature, no default stated
                assert option.default is None, f"{name}: no default stated for {option.name}"
                continue
            assert _canonical(m.group(1).strip()) == repr(option.default), (
                f"{name}'s docstring says {option.name} defaults to {m.group(1)}, "
                f"its signature {option.default!r}"
            )


def test_every_stated_default_is_the_codes():
    wrong, seen = [], 0
    for where, text in _texts():
        for option, value, quote in _statements(text):
            seen += 1
            if value not in DEFAULTS[option]:
                wrong.append(f"{where}: {quote!r} (code: {sorted(DEFAULTS[option])})")
    assert seen >= 3  # the manual and README state some (4 at the time of writing)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("``check_passes`` (default 1) for the check", [("check_passes", "1")]),
        ("(`check_passes`, default 2, one call each", [("check_passes", "2")]),
        ("(`certificate_budget`, by default 10% of the entries", []),
        ("default `n_oversamples=20`;", [("n_oversamples", "20")]),
        ('`core="stable"` (default): oversampled rows', [("core", "'stable'")]),
        ("n_iter=4 with no word about defaults", []),
    ],
)
def test_the_patterns_find_stated_defaults(text, expected):
    assert [(o, v) for o, v, _ in _statements(text)] == expected


def test_the_registry_is_what_svd_and_the_driver_use():
    from ksvd_bench.driver import EFFORT_OPTION

    assert solvers.METHODS == tuple(solvers.SOLVERS)
    for name, spec in solvers.SOLVERS.items():
        params = inspect.signature(spec.function).parameters
        assert solvers.OPTIONS[name] == tuple(
            p for p, v in params.items() if v.kind is v.KEYWORD_ONLY and p != "random_state"
        )
        assert EFFORT_OPTION.get(name) == spec.effort_option
        if spec.effort_option:
            assert spec.effort_option in solvers.OPTIONS[name]
        for option in spec.options:
            assert f"``{option.name}={option.default!r}``" in solvers.svd.__doc__
            assert option.meaning, f"{name}.{option.name} has no meaning in its docstring"


def test_the_driver_schedules_follow_the_declared_effort_kind():
    from ksvd_bench.driver import effort_schedule

    shape, rank = (300, 200), 10
    for name, spec in solvers.SOLVERS.items():
        efforts = effort_schedule(name, rank, shape)
        if spec.effort_kind is None:
            assert efforts == [0]
        elif spec.effort_kind == "samples":
            assert efforts[0] == 2 * rank and efforts[-1] == min(shape)
        elif spec.effort_kind == "oversamples":
            assert efforts[:4] == [0, 5, 10, 20] and efforts[-1] == min(shape) - rank
        else:
            assert spec.effort_kind == "depth" and efforts[:6] == [0, 1, 2, 3, 4, 6]


def test_the_race_entries_are_the_declared_variants():
    from ksvd_bench.race.common import VARIANTS
    from ksvd_bench.race.compare import DEFAULT_METHODS

    declared = {
        f"{name}_{suffix}": (name, options)
        for name, spec in solvers.SOLVERS.items()
        for suffix, options in spec.variants.items()
    }
    assert VARIANTS == declared
    for name, (method, options) in VARIANTS.items():
        assert set(options) <= set(solvers.OPTIONS[method]), name
    assert set(DEFAULT_METHODS) <= set(solvers.METHODS) | set(VARIANTS)
