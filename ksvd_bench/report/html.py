"""One self-contained page, ``report.html``: headline, curves, profiles, failures, record.

The page opens from a file on a machine without network: no script, font, stylesheet or
image is fetched (figures are inline PNG ``data:`` URIs, the style sheet is inline), and the
page names no ``http``/``https`` address at all (text taken from the run that holds one is
shown without its scheme). It has no script, so a browser has nothing to report on its
console.

Input shapes: see :mod:`ksvd_bench.report` (rows, suite records, meta).
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
import re
from pathlib import Path

from ksvd_bench.report.figures import (
    CHECK_WORDS,
    EXACT_PASSES_NOTE,
    curve_marks,
    figure_data_uri,
    profiles_figure,
    solver_colors,
    time_to_accuracy_figure,
)
from ksvd_bench.report.files import write_text
from ksvd_bench.report.messages import message_templates
from ksvd_bench.report.profiles import profile_tables
from ksvd_bench.report.status import (
    NOT_APPLICABLE,
    applies,
    base_solver,
    failures,
    measure_label,
    problem_of,
    row_status,
)
from ksvd_bench.report.winners import seeds_asked, seeds_mark, verdicts, warning_counts

__all__ = ["write_report", "render_report", "problem_id", "curves_caption", "REPORT_NAME"]

#: the page's file name under ``--out``
REPORT_NAME = "report.html"

_SCHEME = re.compile(r"\b(?:https?|ftp)://", re.IGNORECASE)

_STYLE = """
:root { --fg: #1d2329; --muted: #5b6670; --line: #d7dde2; --bg: #ffffff; --band: #f4f6f8;
        --ok: #1a7f37; --bad: #b42318; --warn: #9a6700; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 10px; padding-bottom: 4px;
     border-bottom: 2px solid var(--line); }
h3 { font-size: 16px; margin: 22px 0 6px; }
p.sub, .muted { color: var(--muted); }
nav { margin: 10px 0 0; font-size: 14px; }
nav a { margin-right: 14px; color: #0b5cad; text-decoration: none; }
#headline { background: var(--band); border: 1px solid var(--line); border-radius: 8px;
            padding: 6px 20px 14px; margin-top: 18px; }
#headline h2 { border: 0; margin-top: 10px; }
#headline li { margin: 3px 0; }
.winner { font-weight: 600; }
figure { margin: 10px 0 18px; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid var(--line);
             border-radius: 4px; background: #fff; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 12px; }
td.status { white-space: nowrap; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); text-align: left;
         vertical-align: top; }
th { background: var(--band); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.s-converged { color: var(--ok); }
.s-not-converged, .s-unreliable, .s-stopped-early-wrong { color: var(--bad); font-weight: 600; }
.s-warning, .s-short { color: var(--warn); }
.s-does-not-apply { color: var(--muted); }
details { margin: 6px 0 14px; }
summary { cursor: pointer; color: #0b5cad; }
ul.msgs { margin: 2px 0; padding-left: 18px; color: var(--muted); font-size: 12px; }
dl.record { display: grid; grid-template-columns: max-content 1fr; gap: 2px 18px;
            font-size: 13px; }
dl.record dt { font-weight: 600; }
dl.record dd { margin: 0; font-family: ui-monospace, "DejaVu Sans Mono", monospace;
               word-break: break-word; }
"""


def _text(value):
    """``value`` as escaped HTML text, with any URL scheme taken out (the page names no
    network address)."""
    return html.escape(_SCHEME.sub("", str(value)))


def problem_id(name):
    """The HTML id of a problem's section: ``problem-`` and the name in [a-z0-9-]."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")
    return f"problem-{slug or 'x'}"


def _num(value, digits=3):
    if value is None or isinstance(value, bool):
        return "-"
    try:
        value = float(value)
    except (TypeError, ValueError):
        return _text(value)
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.{digits}g}"


def _status_cell(status):
    cls = "s-" + re.sub(r"[^a-z]+", "-", status).strip("-")
    return f'<td class="status {cls}">{_text(status)}</td>'


def _table(header, body_rows):
    head = "".join(f"<th>{_text(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body_rows)}</tbody></table>"


def _figure(fig, alt, caption):
    uri = figure_data_uri(fig)
    return (
        f'<figure><img src="{uri}" alt="{_text(alt)}">'
        f"<figcaption>{_text(caption)}</figcaption></figure>"
    )


def _seeds_sentence(rows, meta):
    """What the times are medians over: the seeds asked, and why a row may have fewer."""
    asked = seeds_asked(rows)
    if asked is None:
        return "median over seeds"
    budget = (meta or {}).get("budget_seconds")
    why = f"the cell's {budget:g} s budget" if isinstance(budget, (int, float)) else "its budget"
    return (
        f"median over the seeds its row ran: {asked} asked per cell; a time on fewer, where "
        f"{why} ran out first, says so (&ldquo;1 of {asked} seeds&rdquo;)"
    )


def _headline_section(rows, extra_lines, meta=None):
    items = []
    for v in verdicts(rows):
        finding = _text(v["finding"])
        if v["winner"] and v["finding"].startswith(v["winner"]):
            w = _text(v["winner"])
            finding = f'<span class="winner">{w}</span>{finding[len(w) :]}'
        items.append(
            f'<li class="verdict">{_text(v["problem"])}, {_text(v["what"])}: {finding}</li>'
        )
    warn = warning_counts(rows)
    if warn:
        listed = ", ".join(
            f"{_text(s)} {n} ({d} distinct)"
            for s, (n, d) in sorted(warn.items(), key=lambda kv: (-kv[1][0], kv[0]))
        )
        items.append(
            '<li class="s-warning">Warnings per solver (its stopping-rule rows '
            f"included), summed over rows: {listed}. Messages under "
            '<a href="#failures">Failures</a>.</li>'
        )
    items += [f"<li>{_text(line)}</li>" for line in extra_lines]
    return (
        '<section id="headline"><h2>Headline</h2>'
        '<p class="muted">Per problem, measure and tolerance: the fastest solver whose '
        "answer is right (measure, singular values and triplets within eps, answer "
        f"reliable), its solve time ({_seeds_sentence(rows, meta)}) and its speedup over "
        "RSVD.</p>"
        f"<ul>{''.join(items)}</ul></section>"
    )


def _seeds_cell(row):
    """The seeds a row ran, of those asked; marked where fewer (the budget ran out first)."""
    run, asked = row.get("n_seeds"), row.get("n_seeds_asked")
    if run is None:
        return "<td class='num'>-</td>"
    if seeds_mark(row):
        return f"<td class='num s-short'>{int(run)} of {int(asked)}</td>"
    return f"<td class='num'>{int(run)}</td>"


def _rows_table(rows):
    body = []
    for r in rows:
        speed = r.get("speedup_vs_rsvd")
        # a solver that does not apply ran nothing: it did not fail to converge
        status = row_status(r) if applies(r) else NOT_APPLICABLE
        body.append(
            "<tr>"
            + f"<td>{_text(r.get('method', '?'))}</td>"
            + f"<td class='num'>{_num(r.get('eps'))}</td>"
            + _status_cell(status)
            + _seeds_cell(r)
            + f"<td class='num'>{_num(r.get('seconds'))}</td>"
            + f"<td class='num'>{_num(r.get('cert_share'))}</td>"
            + f"<td class='num'>{_num(r.get('n_passes'))}</td>"
            + f"<td class='num'>{_num(r.get('effort'))}</td>"
            + f"<td class='num'>{_num(r.get('value'))}</td>"
            + f"<td class='num'>{_num(r.get('sv_error'))}</td>"
            + f"<td class='num'>{_num(speed)}</td></tr>"
        )
    return _table(
        [
            "solver",
            "eps",
            "status",
            "seeds",
            "seconds",
            "certificate share",
            "passes",
            "effort",
            "value",
            "sv error",
            "speedup vs RSVD",
        ],
        body,
    )


def _listed(items):
    return ", ".join(str(i) for i in items)


def curves_caption(rows, measure):
    """The caption of one problem's time-to-accuracy figure under ``measure``: how the curves
    are drawn, where the whole answer is first right, the winner, the checks the hollow points
    fail, the band (none on one seed), an exact path's passes, what does not apply."""
    marks = curve_marks(rows)
    if any(r.get("history") for r in rows):
        how = (
            "along each solver's effort sweep: median over seeds, band from the best to the "
            "worst seed"
        )
        drawn = [s for s in dict.fromkeys(base_solver(r.get("method", "?")) for r in rows)]
        drawn = [s for s in drawn if s not in marks["not_applicable"]]
        several = [s for s in drawn if s not in marks["one_seed"]]
        if not several:
            how += " (one seed per solver here: no band)"
        elif 2 * len(several) < len(drawn):
            how += f" (only {_listed(several)} ran more than one seed: the others have no band)"
        elif marks["one_seed"]:
            how += f" (no band where one seed ran: {_listed(marks['one_seed'])})"
    else:
        how = (
            "one point per solver and tolerance at the effort found (this run recorded no "
            "effort sweep)"
        )
    parts = [
        f"Error reached under {measure} against solve time (left) and passes over G "
        f"(right), {how}; dashed lines: eps."
    ]
    if any(m["ring"] for m in marks["right"]):
        parts.append(
            "Rings: where a solver's whole answer is first right at an eps (the measure, "
            "singular values and triplets within eps, and reliable)."
        )
    winners = sorted(marks["winners"].items(), reverse=True)
    if winners:
        parts.append(
            "Star: the winner, the fastest right answer ("
            + "; ".join(f"eps {e:g}: {w}" for e, (w, _) in winners)
            + ")."
        )
    raced = [(e, r) for e, (_, r) in winners if r]
    if raced:
        parts.append(
            "White star: the fastest raced solver beside an exact path ("
            + "; ".join(f"eps {e:g}: {r}" for e, r in raced)
            + ")."
        )
    if marks["checks"]:
        parts.append(
            "Hollow points meet eps on the measure but fail another check there: "
            + "; ".join(
                f"{solver} ({_listed(CHECK_WORDS[c] for c in CHECK_WORDS if c in checks)})"
                for solver, checks in marks["checks"].items()
            )
            + "."
        )
    for solver in marks["exact"]:
        parts.append(f"{solver} is the exact structured SVD: its passes are {EXACT_PASSES_NOTE}.")
    if marks["not_applicable"]:
        parts.append(f"Not drawn: {_listed(marks['not_applicable'])} ({NOT_APPLICABLE}).")
    return " ".join(parts)


def _problem_sections(rows, colors):
    by_problem = {}
    for r in rows:
        by_problem.setdefault(problem_of(r), []).append(r)
    out = []
    for problem, prows in by_problem.items():
        first = prows[0]
        facts = []
        if first.get("shape"):
            facts.append(" x ".join(str(n) for n in first["shape"]))
        if first.get("kernel"):
            facts.append(f"kernel {first['kernel']}")
        parts = [
            f'<section class="problem" id="{problem_id(problem)}" '
            f'data-problem="{_text(problem)}"><h2>Problem: {_text(problem)}</h2>'
        ]
        if facts:
            parts.append(f'<p class="muted">{_text(", ".join(facts))}</p>')
        by_measure = {}
        for r in prows:
            by_measure.setdefault(measure_label(r), []).append(r)
        for measure, mrows in by_measure.items():
            fig = time_to_accuracy_figure(mrows, colors=colors)
            parts.append(f"<h3>{_text(measure)}</h3>")
            parts.append(
                _figure(
                    fig,
                    f"time to accuracy, {problem}, {measure}",
                    curves_caption(mrows, measure),
                )
            )
            parts.append(
                f"<details><summary>All {len(mrows)} rows of {_text(measure)}"
                f"</summary>{_rows_table(mrows)}</details>"
            )
        parts.append("</section>")
        out.append("".join(parts))
    return out


def _profiles_section(records, colors):
    tables = profile_tables(records)
    parts = [
        '<section id="profiles"><h2>Performance and data profiles</h2>'
        '<p class="muted">Performance profile (Dolan &amp; Mor&eacute; 2002): for each '
        "solver, the fraction of problems it solves within tau times the fastest "
        "solver's time on that problem; tau = 1 counts its wins, the right end the "
        "problems it solves at all. An unsolved problem never counts. Data profiles "
        "(Mor&eacute; &amp; Wild 2009): the fraction solved within a budget of passes "
        "over G or of entries of G read.</p>"
    ]
    fails = []
    for (measure, eps), table in tables.items():
        title = f"{measure}, eps {eps:g} ({len(table['problems'])} problems)"
        parts.append(f"<h3>{_text(title)}</h3>")
        parts.append(
            _figure(
                profiles_figure(table, colors=colors),
                f"profiles, {measure}, eps {eps:g}",
                f"{measure} within eps {eps:g}; problems: " + ", ".join(table["problems"]) + ".",
            )
        )
    for rec in sorted(records, key=lambda r: (str(r.get("solver")), str(r.get("problem")))):
        status = rec.get("status", "converged")
        if status != "converged":
            fails.append(
                "<tr>" + f"<td>{_text(rec.get('solver'))}</td>"
                f"<td>{_text(rec.get('problem'))}</td>"
                f"<td>{_text(rec.get('measure'))}</td>"
                f"<td class='num'>{_num(rec.get('eps'))}</td>"
                + _status_cell(status)
                + f"<td>{_text(rec.get('reason') or '')}</td></tr>"
            )
    parts.append("<h3>Problems each solver fails</h3>")
    parts.append(
        _table(["solver", "problem", "measure", "eps", "status", "reason"], fails)
        if fails
        else "<p>Every solver solves every problem.</p>"
    )
    parts.append("</section>")
    return "".join(parts)


def _failures_section(rows):
    found = failures(rows)
    wrong = [f for f in found if f["status"] != "converged" and f["applies"]]
    not_run = {}
    for f in found:
        if not f["applies"]:
            not_run.setdefault((f["problem"], base_solver(f["solver"])), f["reason"] or "")
    warned = [f for f in found if f["warnings"] or f["n_warnings"]]
    parts = ['<section id="failures"><h2>Failures</h2>']
    counts = {}
    for f in wrong:
        counts[f["status"]] = counts.get(f["status"], 0) + 1
    parts.append(
        "<p>"
        + (", ".join(f"{n} {_text(s)}" for s, n in counts.items()) if counts else "No failed row.")
        + "</p>"
    )
    if wrong:
        body = [
            "<tr>" + f"<td>{_text(f['problem'])}</td><td>{_text(f['solver'])}</td>"
            f"<td>{_text(f['measure'])}</td><td class='num'>{_num(f['eps'])}</td>"
            + _status_cell(f["status"])
            + f"<td class='num'>{_num(f['sv_error'])}</td>"
            f"<td>{_text(f['reason'] or '')}</td></tr>"
            for f in wrong
        ]
        parts.append(
            _table(["problem", "solver", "measure", "eps", "status", "sv error", "reason"], body)
        )
    if not_run:
        items = "".join(
            f"<li>{_text(solver)} on {_text(problem)}: {_text(reason)}</li>"
            for (problem, solver), reason in not_run.items()
        )
        parts.append(f"<h3>Not run (does not apply)</h3><ul>{items}</ul>")
    parts.append("<h3>Warnings</h3>")
    if warned:
        by_solver = {}
        for f in warned:
            entry = by_solver.setdefault((f["problem"], base_solver(f["solver"])), [0, []])
            entry[0] += f["n_warnings"]
            entry[1] += [(m, 1, None) for m in f["warnings"]]
        body = []
        for (problem, solver), (n, msgs) in by_solver.items():
            # one item per template: numbers that vary between rows shown as their range
            items = "".join(
                f"<li>{_text(g['text'])} <span class='muted'>({g['count']} "
                f"row{'s' * (g['count'] != 1)})</span></li>"
                for g in message_templates(msgs)
            )
            body.append(
                f"<tr><td>{_text(problem)}</td><td>{_text(solver)}</td>"
                f"<td class='num'>{n}</td><td><ul class='msgs'>{items}</ul></td></tr>"
            )
        parts.append(
            _table(
                ["problem", "solver", "warnings", "messages (a number that varies: its range)"],
                body,
            )
        )
    else:
        parts.append("<p>No warning.</p>")
    parts.append("</section>")
    return "".join(parts)


def _rounded(value):
    """Floats to 4 significant digits, in nested containers too (the record is for reading)."""
    if isinstance(value, float):
        return float(f"{value:.4g}") if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _record_value(value):
    value = _rounded(value)
    if isinstance(value, (dict, list, tuple)):
        return _text(json.dumps(value, default=str))
    return _text(value)


def _record_section(meta):
    meta = dict(meta or {})
    first = [
        "command_line",
        "collection",
        "seeds",
        "n_seeds",
        "seeds_run",
        "budget_seconds",
        "threads",
        "blas_threads",
        "load_average",
        "started_at",
        "finished_at",
        "timing",
        "dtype",
    ]
    keys = [k for k in first if k in meta] + [
        k for k in meta if k not in first and k not in ("machine", "reference")
    ]
    items = [f"<dt>{_text(k)}</dt><dd>{_record_value(meta[k])}</dd>" for k in keys]
    machine = meta.get("machine") or {}
    items += [
        f"<dt>machine: {_text(k)}</dt><dd>{_record_value(v)}</dd>" for k, v in machine.items()
    ]
    body = "".join(items) if items else "<dt>record</dt><dd>none given</dd>"
    return (
        f'<section id="record"><h2>Record of the run</h2><dl class="record">{body}</dl></section>'
    )


def render_report(*, rows=(), meta=None, records=None, title=None, headline_extra=()):
    """The page as a string (see :func:`write_report`)."""
    rows = [dict(r) for r in rows]
    records = list(records or [])
    if not rows and not records:
        raise ValueError("a report needs result rows or suite records; got neither")
    meta = dict(meta or {})
    names = {base_solver(r.get("method", "?")) for r in rows}
    names |= {base_solver(r.get("solver", "?")) for r in records}
    colors = solver_colors(names)
    title = title or f"ksvd-bench {meta.get('command', 'report')}"
    problems = list(dict.fromkeys(problem_of(r) for r in rows))
    when = meta.get("finished_at") or _dt.datetime.now(_dt.timezone.utc).isoformat(
        timespec="seconds"
    )
    nav = '<a href="#profiles">profiles</a>' if records else ""
    nav += "".join(f'<a href="#{problem_id(p)}">{_text(p)}</a>' for p in problems)
    nav += '<a href="#failures">failures</a><a href="#record">record</a>'
    body = [
        f"<header><h1>{_text(title)}</h1><p class='sub'>"
        f"{_text(meta.get('command_line', ''))} &middot; {_text(when)}</p>"
        f"<nav>{nav}</nav></header>"
    ]
    # the answer first: the headline, then (a suite) the profiles over all problems, then
    # each problem's curves
    if rows or records:
        # a suite given only its records still gets its headline from them
        body.append(
            _headline_section(
                rows
                or [
                    {
                        "problem": r.get("problem"),
                        "method": r.get("solver"),
                        "measure": r.get("measure"),
                        "eps": r.get("eps"),
                        "seconds": r.get("seconds"),
                        "status": r.get("status", "converged"),
                    }
                    for r in records
                ],
                headline_extra,
                meta,
            )
        )
    if records:
        body.append(_profiles_section(records, colors))
    if rows:
        body += _problem_sections(rows, colors)
    body.append(_failures_section(rows))
    body.append(_record_section(meta))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        # an empty inline icon: the browser asks for no favicon file
        "<link rel='icon' href='data:,'>"
        f"<title>{_text(title)}</title><style>{_STYLE}</style></head>"
        f"<body><main>{''.join(body)}</main></body></html>\n"
    )


def write_report(
    out_dir,
    *,
    rows=(),
    meta=None,
    records=None,
    title=None,
    headline_extra=(),
    filename=REPORT_NAME,
):
    """Write the self-contained page ``out_dir/report.html``; returns its path.

    Parameters
    ----------
    out_dir : str or Path
        The run's ``--out`` directory (created if needed).
    rows : iterable of dict, optional
        The rows of ``compare.json`` (see :mod:`ksvd_bench.report`): the headline, one
        section per problem with its time-to-accuracy curves, and the failures.
    meta : dict, optional
        The run's ``meta`` (command line, seeds, machine, load, versions, threads): the
        record at the bottom.
    records : iterable of dict, optional
        Suite records, one per (problem, solver, measure, tolerance) (see
        :func:`ksvd_bench.report.profiles.profile_tables`): the performance and data
        profiles and the table of problems each solver fails.
    title : str, optional
        The page title; default ``"ksvd-bench <command>"``.
    headline_extra : sequence of str, optional
        More lines for the headline box (e.g. the collection's name and version).
    filename : str, default="report.html"

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        When neither rows nor records are given, or a row holds an unknown status.
    """
    page = render_report(
        rows=rows, meta=meta, records=records, title=title, headline_extra=headline_extra
    )
    return write_text(Path(out_dir) / filename, page)
