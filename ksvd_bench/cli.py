"""The ``ksvd-bench`` command line: argument parsing only; the studies do the work.

Sub-commands
------------
``compare``         race every solver to each tolerance; ends with the headline, writes
                    report.html (the paper's Tables 3 and 4 with ``--full``)
``spectrum``        asym Nystrom vs RSVD across bandwidths (the paper's spectrum figure)
``residual-study``  how the reference-free residual estimate relates to eta
``scale``           cost against size: seconds, passes, peak memory, accuracy per method
``sampling``        asym Nystrom samplers raced by entries read and by passes (issue 15)
``reproduce``       the paper's feature-learning experiments (tables and figures)
``suite``           race a fixed, versioned problem collection; performance profiles
``roofline``        the fused passes timed against this machine's BLAS

Each sub-command lives in a module with an ``add_*`` / ``add_parser(subparsers)`` function
(:mod:`ksvd_bench.race.compare.cli`, :mod:`ksvd_bench.race.commands`,
:mod:`ksvd_bench.race.scale.cli`, :mod:`ksvd_bench.paper.cli`); a new one is added by
listing its function in :func:`_subcommands`. A leaf parser sets ``func`` (the work) and may
set ``check(args, parser)``, which :func:`main` calls after parsing and before any work, so
that a bad combination of flags or an unwritable ``--out`` is reported at once (exit status 2,
the error on the first line, then a pointer to the sub-command's ``--help``). :func:`main`
also sets ``args.command_line``, the command as typed, which the records keep as the command
that regenerates them, and ``args.given``, the ``dest`` of each flag typed. Shared argument
types and the one default-thread rule: :mod:`ksvd_bench.cliargs`. This layer may import the
studies; they never import it.
"""

from __future__ import annotations

import shlex
import sys

from ksvd_bench.cliargs import Parser, given_dests
from ksvd_bench.threads import quiet_blas_spin

__all__ = ["build_parser", "main"]


def _subcommands():
    """The ``add_parser``-style functions of every sub-command, in ``--help`` order."""
    # order of loading: the sub-commands load numpy, after main() has set OpenBLAS's spin
    from ksvd_bench import roofline_cli
    from ksvd_bench.paper import cli as reproduce_cli
    from ksvd_bench.race import commands
    from ksvd_bench.race.compare import cli as compare_cli
    from ksvd_bench.race.scale import cli as scale_cli
    from ksvd_bench.race.suite import cli as suite_cli

    return (
        compare_cli.add_compare,
        commands.add_spectrum,
        commands.add_residual_study,
        scale_cli.add_parser,
        commands.add_sampling,
        reproduce_cli.add_parser,
        suite_cli.add_parser,
        roofline_cli.add_parser,
    )


def build_parser():
    """The argparse parser of ``ksvd-bench`` (all sub-commands)."""
    parser = Parser(
        prog="ksvd-bench",
        description="Asymmetric-kernel SVD (KSVD) solvers: benchmark and paper reproduction.",
    )
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)
    for add in _subcommands():
        add(sub)
    return parser


def main(argv=None):
    """Entry point of the ``ksvd-bench`` console script.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0, or the status a sub-command returns (argument errors, including the
        checks made before any work, raise ``SystemExit(2)`` through argparse; other errors
        propagate).
    """
    # before any study imports numpy: OpenBLAS reads the variable when it is loaded
    quiet_blas_spin()
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the sub-command, whose --help lists what it takes
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    # the command as typed, for the records that say how to regenerate them
    args.command_line = shlex.join(["ksvd-bench", *argv])
    # the flags typed (a default reads the same as a typed value after parsing)
    args.given = given_dests(getattr(args, "parser", parser), argv)
    check = getattr(args, "check", None)
    if check is not None:
        check(args, getattr(args, "parser", parser))
    status = args.func(args)
    return status if isinstance(status, int) else 0
