"""Warning messages for a person (issue 33, section 5): grouped by template with their numbers
abstracted, never cut mid-word, and the same per-solver counts in the terminal and the
headline."""

import re
import warnings

import pytest

from ksvd_bench.report import headline, render_report
from ksvd_bench.report.messages import message_templates, warning_summary
from ksvd_bench.scoring import MAX_MESSAGE, clip_message, warning_fields

#: a certificate warning of the solvers' kind (about 450 characters with its advice)
CERTIFICATE = (
    "{m}: sin theta of the top-20 subspaces is only bounded by {x} > 0.1 (residual {y} over "
    "the certified gap 0.0297): the answer cannot be trusted (info['reliable'] = False). To "
    "fix, raise n_iter or n_oversamples (or use block_krylov); where s_r ~ s_(r+1) no effort "
    "certifies the top-r subspace: ask for a rank at a gap of the spectrum, or sample more "
    "rows/columns (n_samples, n_rows), try another sampling (norm, arp, rpcholesky)"
)


def _rows():
    rows = []
    for i, (method, x) in enumerate(
        [("rsvd", 0.525), ("rsvd [stop=residual]", 1.32), ("block_krylov", 0.61), ("tsvd", 0)]
    ):
        message = CERTIFICATE.format(m=method.split(" ")[0], x=x, y=0.01 * (i + 1))
        rows.append(
            {
                "dataset": "cora",
                "method": method,
                "measure": "eta",
                "weights": "uniform",
                "eps": 0.1,
                "converged": False,
                "status": "unreliable",
                "seconds": 0.01,
                "sv_error": 0.2,
                "reliable": False,
                "n_warnings": 0 if method == "tsvd" else 3,
                "warnings": [] if method == "tsvd" else [message],
            }
        )
    return rows


def test_messages_that_differ_in_numbers_make_one_template_with_their_range():
    groups = message_templates(
        [
            ("s_10 = 0.135 is below a lower bound 0.165 on sigma_10(G) (top-20)", 2, "rsvd"),
            ("s_10 = 0.121 is below a lower bound 0.165 on sigma_10(G) (top-20)", 1, "sym"),
            ("s_10 = 1.5e-3 is below a lower bound 0.165 on sigma_10(G) (top-20)", 1, "rsvd"),
            ("an unrelated message", 5, None),
        ]
    )
    assert [g["count"] for g in groups] == [5, 4]
    assert groups[1] == {
        # names keep their digits (s_10, sigma_10, top-20); a constant stays as written
        "text": "s_10 = {0.0015..0.135} is below a lower bound 0.165 on sigma_10(G) (top-20)",
        "count": 4,
        "n_messages": 3,
        "tags": ["rsvd", "sym"],
    }
    assert groups[0]["tags"] == [] and groups[0]["text"] == "an unrelated message"


def test_a_kept_message_is_never_cut_mid_word():
    # the certificate warnings (about 420 characters) were cut at 400: "... or use (1 row)"
    long = CERTIFICATE.format(m="rsvd", x=0.5, y=0.02)
    assert 400 < len(long) <= MAX_MESSAGE
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn(long, RuntimeWarning, stacklevel=1)
        warnings.warn("x " * 2000 + "unfinishedword", RuntimeWarning, stacklevel=1)
    kept = warning_fields(caught, {})["warnings"]
    assert kept[0] == long
    assert len(kept[1]) <= MAX_MESSAGE and kept[1].endswith("x ...")
    assert clip_message("raise n_iter or use block_krylov", 24) == "raise n_iter or use ..."


def test_terminal_groups_warnings_and_agrees_with_the_headline():
    rows = _rows()
    others = [CERTIFICATE.format(m="rsvd", x=x, y=0.5) for x in (0.2, 0.3, 0.3)]
    lines = warning_summary(rows, others=others + [rows[0]["warnings"][0]])
    assert all(len(line) <= 100 for line in lines), lines
    # per-solver counts: the headline's (a stopping rule's rows count as their solver's)
    assert lines[0].startswith("warnings of the answers returned: 9 (rsvd 6, block_krylov 3)")
    assert headline(rows)[-1] == "warnings (messages in the report): rsvd 6, block_krylov 3"
    # three rows' messages differ only in their numbers: one line, not three
    assert len([line for line in lines if "rows (" in line]) == 1
    assert lines[1] == (
        "  3 rows (2 solvers): sin theta of the top-20 subspaces is only bounded by "
        "{0.525..1.32} > 0.1 ..."
    )
    # the messages raised on the way, apart from the one an answer carries: one template
    assert lines[2].startswith("also raised on the way") and len(lines) == 4
    assert lines[3].startswith(
        "  2 messages: rsvd: sin theta of the top-20 subspaces is only bounded by {0.2..0.3} > 0.1"
    )
    words = set(re.findall(r"[\w.'()\[\]=~,:;-]+", " ".join(rows[0]["warnings"] + others)))
    for line in lines[1:2] + lines[3:]:  # a clipped line ends on a whole word, then "..."
        assert line.endswith("...") and line[:-4].split()[-1] in words | {"{0.2..0.3}"}


def test_report_lists_each_template_once_with_its_range_and_rows():
    page = render_report(rows=_rows(), meta={"command_line": "ksvd-bench compare"})
    section = page[page.index('id="failures"') :]
    assert section.count("sin theta of the top-20 subspaces") == 2  # rsvd, block_krylov
    assert "only bounded by {0.525..1.32} &gt; 0.1" in section and "(2 rows)" in section
    assert "(n_samples, n_rows)" in section  # whole, where a cut at 400 characters fell


@pytest.mark.parametrize("width", [60, 100])
def test_summary_keeps_to_its_lines_and_width(width):
    rows = _rows()
    others = [f"solver: message {'abcdefghijklmnopqrstuvwxyz'[i]} says" for i in range(20)]
    lines = warning_summary(rows, others=others, width=width, most=8)
    assert len(lines) == 8 and all(len(line) <= width for line in lines)
    assert lines[-1].startswith("... ") and "more lines of warnings" in lines[-1]
