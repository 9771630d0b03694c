"""Reporting: terminal tables, result files, figures, the headline and the HTML page.

The modules:

- :mod:`~ksvd_bench.report.tables`: :func:`format_table`, :func:`wrap_note`,
  :func:`progress_bar`, :data:`TEXT_WIDTH` (the terminal).
- :mod:`~ksvd_bench.report.files`: :func:`write_json`, :func:`write_csv`, :func:`write_text`,
  :func:`atomic_path`, :func:`check_out_dir` (result files, written atomically).
- :mod:`~ksvd_bench.report.record`: :func:`machine_info` (the record of a run).
- :mod:`~ksvd_bench.report.status`: :func:`row_status`, :func:`failures` (a row's verdict:
  one of :data:`STATUSES`).
- :mod:`~ksvd_bench.report.winners`: :func:`verdicts`, :func:`headline` (the fastest right
  answer per problem, measure and tolerance; the terminal and the page say the same).
- :mod:`~ksvd_bench.report.messages`: warning messages for a person, grouped by template
  with their numbers that vary shown as a range, cut at a word boundary (the terminal's
  :func:`~ksvd_bench.report.messages.warning_summary`, the page's warnings table).
- :mod:`~ksvd_bench.report.profiles`: :func:`performance_profile` (Dolan & Moré),
  :func:`data_profile` (Moré & Wild), :func:`profile_tables` (suite records -> both).
- :mod:`~ksvd_bench.report.figures`: :func:`save_figure`, :func:`figure_data_uri`, and the
  figures of the page.
- :mod:`~ksvd_bench.report.html`: :func:`write_report` (one self-contained ``report.html``).

**Input shapes.** *Rows* (``rows``) are the rows of ``compare.json``: dicts with ``dataset``
(or ``problem``), ``method``, ``measure``, ``weights``, ``eps``, ``stop``, ``converged``,
``seconds``, ``n_passes``, ``sv_error``, ``reliable``, ``note``, ``n_warnings``, ``warnings``
and, where present:

- ``status``: one of ``"converged"``, ``"not converged"``, ``"unreliable"``,
  ``"stopped early, wrong"`` (derived from the older fields when absent);
- ``n_seeds`` and ``n_seeds_asked``: the seeds the row ran, of those asked; a time on fewer
  is marked in the headline and the page (:func:`~ksvd_bench.report.winners.seeds_mark`);
- ``history``: the effort sweep, a list of points, one per (seed, effort) tried::

      {"seed": int, "effort": int, "seconds": float, "passes": float,
       "entries_read": float or None, "value": float, "sv_error": float or None,
       "triplet_residual": float or None, "status": str}

  ``value`` is the row's measure at that effort, ``status`` that answer's verdict at the
  row's eps. The page draws ``value`` against ``seconds`` and against ``passes`` (median
  over seeds, min-max band), with the marks of
  :func:`~ksvd_bench.report.figures.curve_marks` (where the whole answer is first right,
  the winner, the points that meet eps on the measure only); rows without a history are
  drawn as one point at their found effort.

*Suite records* (``records``), one per (problem, solver, measure, tolerance)::

      {"problem": str, "solver": str, "measure": str, "eps": float,
       "seconds": float (inf if unsolved), "passes": float, "entries_read": float or None,
       "status": one of STATUSES, "reason": str or None, "shape": [N, M] (optional)}

*Meta* (``meta``): the ``meta`` dict of ``compare.json`` (``command_line``, ``seeds``,
``machine``, ``load_average``, ``threads``, ...); shown as the run's record, whatever it
holds.
"""

from ksvd_bench.report.figures import figure_data_uri, save_figure
from ksvd_bench.report.files import atomic_path, check_out_dir, write_csv, write_json, write_text
from ksvd_bench.report.html import REPORT_NAME, render_report, write_report
from ksvd_bench.report.profiles import data_profile, performance_profile, profile_tables
from ksvd_bench.report.record import machine_info
from ksvd_bench.report.status import STATUSES, failures, row_status
from ksvd_bench.report.tables import TEXT_WIDTH, format_table, progress_bar, wrap_note
from ksvd_bench.report.winners import headline, verdicts, warning_counts

__all__ = [
    "format_table",
    "wrap_note",
    "write_json",
    "write_csv",
    "write_text",
    "atomic_path",
    "save_figure",
    "figure_data_uri",
    "check_out_dir",
    "progress_bar",
    "machine_info",
    "TEXT_WIDTH",
    "STATUSES",
    "row_status",
    "failures",
    "headline",
    "verdicts",
    "warning_counts",
    "performance_profile",
    "data_profile",
    "profile_tables",
    "write_report",
    "render_report",
    "REPORT_NAME",
]
