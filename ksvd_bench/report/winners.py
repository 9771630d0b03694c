"""The winners of a race and its headline: per problem, measure and tolerance, the fastest
right answer.

Used by the terminal (``ksvd-bench compare`` ends with :func:`headline`) and by the page
(:func:`ksvd_bench.report.write_report` puts the same sentences at the top).

**Input shape.** ``rows``: the rows of ``compare.json`` (see :mod:`ksvd_bench.report.status`).
A right answer is a row whose :func:`~ksvd_bench.report.status.row_status` is ``"converged"``
and that has ``seconds``; the time compared is ``seconds`` (the solve at the found effort,
median over seeds). The baseline is the row whose ``method`` is exactly ``"rsvd"`` in the same
group."""

from __future__ import annotations

import textwrap

from ksvd_bench.report.status import (
    applies,
    base_solver,
    is_right,
    measure_label,
    problem_of,
    row_status,
)
from ksvd_bench.report.tables import TEXT_WIDTH

__all__ = ["verdicts", "headline", "warning_counts", "seeds_mark", "seeds_asked", "BASELINE"]

#: the solver every speedup is measured against
BASELINE = "rsvd"


def _fmt_seconds(s):
    return f"{s:.3g} s" if s >= 1 else f"{s * 1e3:.3g} ms"


def _fmt_ratio(x):
    return f"{x:.2g}" if x < 10 else f"{x:.0f}"


def _fmt_eps(eps):
    try:
        return f"{float(eps):.0e}".replace("e-0", "e-")
    except (TypeError, ValueError):
        return str(eps)


def _seeds_of(row):
    """``(seeds run, seeds asked)`` of a row; None where the row does not record both."""
    if row is None or row.get("n_seeds") is None or row.get("n_seeds_asked") is None:
        return None
    return int(row["n_seeds"]), int(row["n_seeds_asked"])


def seeds_mark(row, asked=None):
    """What a row's time is a median over, where that is fewer seeds than asked, else ``""``.

    ``"1 of 3 seeds"`` where the row ran fewer seeds than it asked (the cell's budget ran
    out first); with ``asked`` (the race's seeds per cell), ``"1 seed"`` where the row asked
    fewer by design (a stopping rule runs seed 1 only, the exact path at most 3). ``""``
    where the row ran what was asked, or does not record it.
    """
    seeds = _seeds_of(row)
    if seeds is None:
        return ""
    run, row_asked = seeds
    if run < row_asked:
        return f"{run} of {row_asked} seeds"
    if asked is not None and run < asked:
        return f"{run} seed{'s' * (run != 1)}"
    return ""


def seeds_asked(rows):
    """The seeds a race asked per cell: the most any raced row asked (None: not recorded)."""
    asked = [s[1] for r in rows if r.get("stop") == "reference" and (s := _seeds_of(r)) is not None]
    return max(asked) if asked else None


def _timed(seconds, row, asked):
    """A time, with the seeds behind it where they are fewer than the race asked."""
    mark = seeds_mark(row, asked)
    return _fmt_seconds(seconds) + (f" on {mark}" if mark else "")


def verdicts(rows):
    """One verdict per (problem, measure, tolerance), in the order the rows first show them.

    Parameters
    ----------
    rows : iterable of dict
        The rows of ``compare.json``. Rows whose solver does not apply to the problem
        (``stop == "n/a"``) are left out.

    Returns
    -------
    list of dict
        With ``problem``, ``measure``, ``eps``, ``winner`` (solver name or None),
        ``seconds`` (winner's time or None), ``baseline_seconds`` (RSVD's time where RSVD's
        answer is right, else None), ``baseline_status``, ``speedup`` (baseline time over
        winner time, or None), ``n_seeds`` and ``n_seeds_asked`` (the winner's seeds, run
        and asked; None where the rows do not record them: a time on fewer seeds than the
        race asked says so in the finding, ``"429 ms on 1 of 3 seeds"`` (:func:`seeds_mark`),
        the winner's, RSVD's and the fastest raced solver's alike), ``n_right`` and
        ``n_solvers`` (rows in the group),
        ``raced_winner`` (where the winner is an exact path, ``stop == "exact"``: the fastest
        right solver among the raced ones, or None), ``what`` (measure and tolerance in
        words), ``finding`` (the verdict without the
        problem, measure and tolerance) and ``sentence``
        (the verdict in one sentence: ``"<problem>, <measure>, eps <eps>: <finding>"``).
    """
    rows = list(rows)
    asked = seeds_asked(rows)
    groups = {}
    for row in rows:
        if not applies(row):
            continue
        key = (problem_of(row), measure_label(row), row.get("eps"))
        groups.setdefault(key, []).append(row)
    out = []
    for (problem, measure, eps), group in groups.items():
        right = sorted((r for r in group if is_right(r)), key=lambda r: float(r["seconds"]))
        base = next((r for r in group if r.get("method") == BASELINE), None)
        base_status = row_status(base) if base is not None else None
        base_s = float(base["seconds"]) if base is not None and is_right(base) else None
        v = {
            "problem": problem,
            "measure": measure,
            "eps": eps,
            "winner": None,
            "seconds": None,
            "baseline_seconds": base_s,
            "baseline_status": base_status,
            "speedup": None,
            "n_seeds": None,
            "n_seeds_asked": None,
            "n_right": len(right),
            "n_solvers": len(group),
        }
        v["what"] = f"{measure}, eps {_fmt_eps(eps)}"
        if not right:
            v["finding"] = f"no solver's answer is right (0/{len(group)})."
            v["sentence"] = f"{problem}, {v['what']}: {v['finding']}"
            out.append(v)
            continue
        best = right[0]
        v["winner"], v["seconds"] = str(best["method"]), float(best["seconds"])
        v["n_seeds"], v["n_seeds_asked"] = _seeds_of(best) or (None, None)
        if best.get("method") == BASELINE:
            tail = "RSVD itself is the fastest"
        elif base_s is not None and v["seconds"] > 0:
            v["speedup"] = base_s / v["seconds"]
            rsvd = _timed(base_s, base, asked)
            tail = (
                f"{_fmt_ratio(v['speedup'])}x faster than RSVD ({rsvd})"
                if v["speedup"] >= 1
                else f"{_fmt_ratio(1 / v['speedup'])}x slower than RSVD ({rsvd})"
            )
        elif base is None:
            tail = "no RSVD row to compare with"
        else:
            tail = f"RSVD's answer is not right ({base_status})"
        # An exact path (the structured operator's SVD, ``stop == "exact"``) answers a
        # question the race does not ask: which solver to use where no such path exists.
        # Name the fastest raced solver beside it.
        raced = next((r for r in right if r.get("stop") != "exact"), None)
        if best.get("stop") == "exact":
            v["raced_winner"] = None if raced is None else str(raced["method"])
            tail += (
                "; no raced solver is right"
                if raced is None
                else f"; fastest raced solver: {raced['method']} "
                f"{_timed(float(raced['seconds']), raced, asked)}"
            )
        v["finding"] = (
            f"{v['winner']} {_timed(v['seconds'], best, asked)}, {tail}; "
            f"{len(right)}/{len(group)} right."
        )
        v["sentence"] = f"{problem}, {v['what']}: {v['finding']}"
        out.append(v)
    return out


def warning_counts(rows):
    """Warnings per solver: ``{solver: (warnings summed over its rows, distinct messages)}``.

    A solver's rows under a stopping rule (``rsvd [stop=residual]``) count as that solver's.
    """
    counts = {}
    for row in rows:
        messages = row.get("warnings") or []
        n = int(row.get("n_warnings") or len(messages))
        if not n:
            continue
        solver = base_solver(row.get("method", "?"))
        total, distinct = counts.get(solver, (0, set()))
        counts[solver] = (total + n, distinct | {str(m) for m in messages})
    return {s: (total, len(distinct)) for s, (total, distinct) in counts.items()}


def _warning_line(warn, width=TEXT_WIDTH):
    """One line: warnings per solver, most first, as many solvers as fit in ``width``."""
    items = [f"{s} {n}" for s, (n, _) in sorted(warn.items(), key=lambda kv: (-kv[1][0], kv[0]))]
    head = "warnings (messages in the report): "
    for keep in range(len(items), 0, -1):
        more = len(items) - keep
        line = head + ", ".join(items[:keep]) + (f", +{more} more" if more else "")
        if len(line) <= width:
            return line
    return head + f"{len(items)} solvers"


def headline(rows, *, max_lines=30, report_path=None):
    """The headline of a race as terminal lines: at most ``max_lines`` lines.

    One sentence per (problem, measure, tolerance): the fastest solver whose answer is right,
    its time, and its speedup over RSVD; a time whose row ran fewer seeds than the race asked
    says so (``"429 ms on 1 of 3 seeds"``: the cell's budget ran out first), and the title
    says how many were asked; then one line of warnings per solver; then where
    the page is. Verdicts that do not fit are counted on the last line, never dropped
    silently.

    Parameters
    ----------
    rows : list of dict
        The rows of ``compare.json``.
    max_lines : int, default=30
        The most lines returned (at least 3).
    report_path : str or Path, optional
        The page holding the full result, named on the last line.

    Returns
    -------
    list of str
    """
    if not isinstance(max_lines, int) or max_lines < 3:
        raise ValueError(f"max_lines must be an int >= 3, got {max_lines!r}")
    rows = list(rows)
    if not rows:
        raise ValueError("headline needs at least one result row")
    found = verdicts(rows)
    warn = warning_counts(rows)
    tail = []
    if warn:
        tail.append(_warning_line(warn))
    if report_path is not None:
        tail.append(f"report: {report_path}")
    asked = seeds_asked(rows)
    over = "seeds" if asked is None else f"{asked} seed{'s' * (asked != 1)} unless marked"
    head = [f"Fastest right answer (whole triplet within eps; solve time, median over {over}):"]
    room = max_lines - len(head) - len(tail)
    blocks, problem = [], None
    for v in found:
        block = []
        if v["problem"] != problem:
            problem = v["problem"]
            block.append(f"{problem}:")
        block += textwrap.wrap(
            f"{v['what']}: {v['finding']}",
            width=TEXT_WIDTH,
            initial_indent="  ",
            subsequent_indent="      ",
        )
        blocks.append(block)
    body = []
    for i, block in enumerate(blocks):
        last = i == len(blocks) - 1
        # keep a line free to say how many verdicts are left out, unless this is the last
        if len(body) + len(block) + (0 if last else 1) > room:
            more = len(blocks) - i
            body.append(f"  ... {more} more verdict{'s' * (more != 1)} in the report")
            break
        body += block
    return head + body + tail
