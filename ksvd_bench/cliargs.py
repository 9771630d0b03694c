"""Argument types and checks shared by every ``ksvd-bench`` sub-command.

A sub-command module defines ``add_parser(subparsers)``; it uses these types so that a bad
value is refused by argparse with a message naming the flag (``argument --threads: ...``), and
:func:`add_run_arguments` for the options every run shares. Checks that involve two flags, or
the file system, go into a ``check(args, parser)`` function set with ``set_defaults(check=...)``;
:func:`ksvd_bench.cli.main` calls it after parsing and before any work, and it reports through
``parser.error``: exit status 2, the one-line error first, then a pointer to ``--help``
(:class:`Parser`).
"""

from __future__ import annotations

import argparse
import math

from ksvd_bench.threads import DEFAULT_THREADS, max_threads

__all__ = [
    "Parser",
    "given_dests",
    "positive_int",
    "nonnegative_int",
    "positive_float",
    "nonnegative_float",
    "unit_interval",
    "int_list",
    "thread_count",
    "out_dir",
    "add_run_arguments",
    "check_out",
    "check_scheduler",
    "THREADS_HELP",
    "print_result",
]


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors lead with the problem.

    argparse prints the whole usage block (about 24 lines for ``compare``) and then the
    error, so the one line a person needs scrolls up out of view. Here the error comes
    first, and a one-line pointer to ``--help`` replaces the usage block. Sub-parsers made
    through ``add_subparsers`` inherit the class.

    Examples
    --------
    >>> parser = Parser(prog="ksvd-bench demo")
    >>> _ = parser.add_argument("--rank", type=positive_int)
    >>> parser.parse_args(["--rank", "x"])  # doctest: +SKIP
    ksvd-bench demo: error: argument --rank: expected a positive integer, got 'x'
    (run 'ksvd-bench demo --help' for the options)
    """

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n(run '{self.prog} --help' for the options)\n")


def given_dests(parser, argv):
    """The ``dest`` of every option of ``parser`` that ``argv`` names.

    A default and a value typed by the user read the same after parsing; this tells them
    apart (so that a flag with no effect on the run can be recorded as ignored). Covers
    ``--flag value``, ``--flag=value`` and argparse's unambiguous abbreviations.

    Examples
    --------
    >>> parser = Parser(prog="demo")
    >>> _ = parser.add_argument("--kernel", default="sne")
    >>> sorted(given_dests(parser, ["--kern", "rbf"])), sorted(given_dests(parser, []))
    (['kernel'], [])
    """
    options = {o: a.dest for a in parser._actions for o in a.option_strings}
    given = set()
    for token in argv:
        name = token.split("=", 1)[0]
        if not name.startswith("--") or name == "--":
            continue
        hits = {d for o, d in options.items() if o == name} or {
            d for o, d in options.items() if o.startswith(name)
        }
        if len(hits) == 1:
            given |= hits
    return given


def _number(text, kind, what):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def positive_int(text):
    """An int >= 1."""
    value = _number(text, int, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def nonnegative_int(text):
    """An int >= 0."""
    value = _number(text, int, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def positive_float(text):
    """A finite float > 0."""
    value = _number(text, float, "a positive number")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {value}")
    return value


def nonnegative_float(text):
    """A finite float >= 0."""
    value = _number(text, float, "a number >= 0")
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {value}")
    return value


def unit_interval(text):
    """A float in [0, 1]."""
    value = _number(text, float, "a number in [0, 1]")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {value}")
    return value


def int_list(text):
    """Comma-separated positive ints, e.g. ``50,100,200`` (no value dropped, no empty list)."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(p == "" for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers, got {text!r}"
        )
    return tuple(positive_int(p) for p in parts)


def thread_count(text):
    """An int in ``[1, NUMBA_NUM_THREADS]``: Numba cannot run more threads than its pool."""
    value = positive_int(text)
    if value > max_threads():
        raise argparse.ArgumentTypeError(
            f"expected at most {max_threads()} (the size of Numba's thread pool, "
            f"NUMBA_NUM_THREADS, normally the number of CPUs), got {value}"
        )
    return value


def out_dir(text):
    """A non-empty directory name (writability is checked by :func:`check_out` before work)."""
    if text.strip() == "":
        raise argparse.ArgumentTypeError(
            "expected a directory, got an empty string (use '.' for the current directory)"
        )
    return text


def print_result(text, paths):
    """Print a study's terminal text, then each file it wrote; exit status 0."""
    print(text)
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return 0


def check_out(args, parser, flag="--out"):
    """Create ``args.out`` and probe it with a test file now, or stop with a usage error."""
    # order of loading: ksvd_bench.report loads numpy, after main() has set OpenBLAS's spin
    from ksvd_bench.report import check_out_dir

    try:
        check_out_dir(args.out, flag)
    except ValueError as exc:
        parser.error(str(exc))


def check_scheduler(address, parser, flag="--scheduler"):
    """Connect once to a Dask scheduler before any work: unreachable is a usage error."""
    # dask: an optional dependency (ksvd-bench[dask]), needed with --scheduler only
    from ksvd_bench.kernels.distributed import connect

    try:
        connect(address).close()
    except (ConnectionError, TypeError) as exc:
        parser.error(f"argument {flag}: {exc}")


#: the one rule for ``--threads`` of every study (``compare``, ``spectrum``, ``scale``)
THREADS_HELP = (
    "Numba and BLAS threads, the same for every solver and cell, at most "
    "NUMBA_NUM_THREADS (default: 1 in every study, which keeps timings steady on a "
    "shared machine; pass more to use more cores)"
)


def add_run_arguments(p, *, out_default):
    """``--threads``, ``--seed``, ``--out`` and ``--no-progress``, shared by the studies."""
    p.add_argument("--threads", type=thread_count, default=DEFAULT_THREADS, help=THREADS_HELP)
    p.add_argument(
        "--seed",
        type=nonnegative_int,
        default=0,
        help="root seed; per-run seeds are derived from it and recorded",
    )
    p.add_argument(
        "--out",
        type=out_dir,
        default=out_default,
        help="directory for the JSON/CSV (and PNG) outputs, checked before any "
        "work (default: %(default)s)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
