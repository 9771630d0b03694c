"""What the race's page and headline say about "right" and about seeds: the right-point rings,
hollow points, winner stars and the exact path's passes on the time-to-accuracy figure, its
caption, the rows that do not apply, and the rows that ran fewer seeds than asked (issue 33,
sections 3 and 4)."""

import re

import numpy as np
import pytest

from ksvd_bench.report import headline, render_report, verdicts
from ksvd_bench.report.figures import EXACT_PASSES_NOTE, curve_marks, time_to_accuracy_figure
from ksvd_bench.report.html import curves_caption

EPS = (0.1, 0.01)
#: the figure draws errors below eps_min * 1e-5 at that level
FLOOR = 0.01 * 1e-5


def _point(effort, seconds, passes, value, eps, *, sv_error=1e-4, reliable=True, seed=7):
    """A sweep point judged at ``eps`` as the race judges it (measure, values, triplets,
    reliable; None counts as not certified)."""
    right = value <= eps and sv_error <= eps and reliable is True
    status = "converged" if right else ("not converged" if reliable else "unreliable")
    return {
        "seed": seed,
        "effort": effort,
        "seconds": seconds,
        "passes": passes,
        "entries_read": None,
        "value": value,
        "sv_error": sv_error,
        "triplet_residual": 1e-4,
        "status": status,
    }


def _row(method, eps, sweep, *, stop="reference", n_seeds=1, asked=3, right_at=None):
    """A row of one cell at ``eps`` whose sweep is ``[(effort, seconds, passes, value, sv
    error, reliable)]``; ``right_at``: the index of its first right answer (None: a miss)."""
    history = [_point(e, t, p, v, eps, sv_error=sv, reliable=rel) for e, t, p, v, sv, rel in sweep]
    hit = None if right_at is None else sweep[right_at]
    return {
        "dataset": "graph",
        "shape": [300, 300],
        "kernel": "sne",
        "measure": "lowrank",
        "weights": None,
        "eps": eps,
        "method": method,
        "stop": stop,
        "n_seeds": n_seeds,
        "n_seeds_asked": asked,
        "converged": hit is not None,
        "status": "converged" if hit is not None else "not converged",
        "effort": (hit or sweep[-1])[0],
        "seconds": None if hit is None else hit[1],
        "n_passes": (hit or sweep[-1])[2],
        "value": None if hit is None else hit[3],
        "sv_error": (hit or sweep[-1])[4],
        "reliable": True,
        "n_warnings": 0,
        "warnings": [],
        "note": None,
        "history": history,
    }


def _rows():
    """One problem under lowrank at eps 0.1 and 0.01, each solver on one seed of 3 asked:

    - ``fast`` meets both eps on the measure from effort 10 on, its singular values never
      (hollow, never right);
    - ``unsure`` meets 0.1 on the measure, its answer not certified (``reliable`` None);
    - ``rsvd`` is right at 0.1 from effort 5 (0.1 s) and at 0.01 from effort 10 (0.2 s):
      the fastest raced solver at both;
    - ``tsvd (structured)`` is exact (5 ms, 180 products with the sparse operator, 3 seeds
      of 3): the winner;
    - ``asym_nystrom_rpcholesky`` does not apply.
    """
    fast = [(5, 0.01, 1, 0.5, 0.3, True), (10, 0.02, 2, 0.05, 0.3, True)]
    fast.append((20, 0.04, 3, 0.005, 0.3, True))
    unsure = [(5, 0.03, 1, 0.5, 1e-3, None), (10, 0.06, 2, 0.05, 1e-3, None)]
    rsvd = [(5, 0.1, 4, 0.05, 1e-3, True), (10, 0.2, 6, 0.001, 1e-3, True)]
    exact = [(None, 0.005, 180, 1e-14, 1e-15, True)]
    rows = []
    for eps in EPS:
        rows.append(_row("fast", eps, fast))
        rows.append(_row("unsure", eps, unsure))
        rows.append(_row("rsvd", eps, rsvd, right_at=0 if eps == 0.1 else 1))
        rows.append(
            _row("tsvd (structured)", eps, exact, stop="exact", n_seeds=3, asked=3, right_at=0)
        )
        rows.append(
            {
                **_row("asym_nystrom_rpcholesky", eps, fast, stop="n/a", n_seeds=0, asked=0),
                "status": None,
                "history": [],
                "effort": None,
                "n_passes": None,
                "note": "n/a: sampling='rpcholesky' needs two point sets",
            }
        )
    return rows


def _lines(ax):
    return {line.get_gid(): line for line in ax.lines if line.get_gid()}


def test_figure_marks_right_points_hollow_points_and_the_winner():
    fig = time_to_accuracy_figure(_rows())
    time_ax, passes_ax = fig.axes[:2]
    lines = _lines(time_ax)
    # fast meets eps on the measure at efforts 10 and 20, its singular values never: hollow
    hollow = lines["hollow:fast"]
    np.testing.assert_allclose(hollow.get_xdata(), [0.02, 0.04])
    np.testing.assert_allclose(hollow.get_ydata(), [0.05, 0.005])
    assert hollow.get_markerfacecolor() == "white"
    np.testing.assert_allclose(lines["point:fast"].get_xdata(), [0.01])
    # an unverified answer (reliable None) is no right answer either
    np.testing.assert_allclose(lines["hollow:unsure"].get_xdata(), [0.06])
    assert "hollow:rsvd" not in lines and "right:fast:0.1" not in lines
    # a ring where the whole answer is first right, per eps, at the row's time and value
    assert lines["right:rsvd:0.1"].get_xydata().tolist() == [[0.1, 0.05]]
    assert lines["right:rsvd:0.01"].get_xydata().tolist() == [[0.2, 0.001]]
    # the winner (exact, its value drawn at the floor) and the fastest raced solver
    assert lines["winner:tsvd (structured):0.1"].get_xydata().tolist() == [[0.005, FLOOR]]
    assert lines["raced-winner:rsvd:0.01"].get_xydata().tolist() == [[0.2, 0.001]]
    assert lines["raced-winner:rsvd:0.01"].get_markerfacecolor() == "white"
    # the passes panel puts the rings at the row's passes
    assert _lines(passes_ax)["right:rsvd:0.01"].get_xydata().tolist() == [[6, 0.001]]
    labels = fig.legends[0].get_texts()
    assert {"first right (whole)", "eps met, a check not", "winner", "fastest raced"} <= {
        t.get_text() for t in labels
    }
    # a solver that does not apply is not drawn
    assert "asym_nystrom_rpcholesky" not in {t.get_text() for t in labels}
    assert not [g for ax in fig.axes for g in _lines(ax) if "rpcholesky" in g]


def test_exact_path_says_its_passes_are_not_over_g():
    fig = time_to_accuracy_figure(_rows())
    time_ax, passes_ax = fig.axes[:2]
    notes = [t for t in passes_ax.texts if t.get_gid() == "exact-passes:tsvd (structured)"]
    assert len(notes) == 1
    assert " ".join(notes[0].get_text().split()) == ("tsvd (structured): " + EXACT_PASSES_NOTE)
    assert notes[0].xy == (180, FLOOR)
    # only in the passes panel: its seconds are seconds
    assert not [t for t in time_ax.texts if (t.get_gid() or "").startswith("exact-passes")]


def test_curve_marks_name_the_failed_checks():
    marks = curve_marks(_rows())
    assert marks["checks"] == {"fast": {"sv_error"}, "unsure": {"reliable"}}
    assert set(marks["hollow"]["fast"]) == {10, 20}
    assert marks["winners"] == {
        0.1: ("tsvd (structured)", "rsvd"),
        0.01: ("tsvd (structured)", "rsvd"),
    }
    assert marks["exact"] == ["tsvd (structured)"]
    assert marks["not_applicable"] == ["asym_nystrom_rpcholesky"]
    assert marks["one_seed"] == ["fast", "unsure", "rsvd"]


def test_caption_says_what_right_means_the_checks_the_winner_and_the_band():
    text = curves_caption(_rows(), "lowrank")
    assert "Rings: where a solver's whole answer is first right at an eps" in text
    assert "(eps 0.1: tsvd (structured); eps 0.01: tsvd (structured))" in text
    assert "fastest raced solver beside an exact path (eps 0.1: rsvd; eps 0.01: rsvd)" in text
    assert (
        "Hollow points meet eps on the measure but fail another check there: fast "
        "(singular values off by > eps); unsure (not certified reliable)."
    ) in text
    assert (
        "tsvd (structured) is the exact structured SVD: its passes are products with the "
        "sparse operator, not passes over G."
    ) in text
    assert "Not drawn: asym_nystrom_rpcholesky (does not apply)." in text
    # one seed each but the exact path: only it has a band
    assert "(only tsvd (structured) ran more than one seed: the others have no band)" in text
    one = [r for r in _rows() if r["method"] == "rsvd"]
    assert "(one seed per solver here: no band)" in curves_caption(one, "lowrank")
    three = [{**r, "n_seeds": 3} for r in one]
    assert "no band" not in curves_caption(three, "lowrank")
    page = render_report(rows=_rows())
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", page)
    assert captions == [text.replace("'", "&#x27;").replace(">", "&gt;")]


def test_rows_that_do_not_apply_read_so_and_short_rows_are_marked():
    page = render_report(rows=_rows(), meta={"budget_seconds": 3.0})
    table_rows = re.findall(
        r"<tr><td>([^<]*)</td><td class='num'>[^<]*</td>(<td[^>]*>[^<]*</td>)"
        r"(<td[^>]*>[^<]*</td>)",
        page,
    )
    by_method = {}
    for method, status, seeds in table_rows:
        by_method.setdefault(method, set()).add((status, seeds))
    assert by_method["asym_nystrom_rpcholesky"] == {
        ('<td class="status s-does-not-apply">does not apply</td>', "<td class='num'>0</td>")
    }
    assert by_method["rsvd"] == {
        ('<td class="status s-converged">converged</td>', "<td class='num s-short'>1 of 3</td>")
    }
    assert ("<td class='num'>3</td>") in {s for _, s in by_method["tsvd (structured)"]}
    assert (
        "median over the seeds its row ran: 3 asked per cell; a time on fewer, where the "
        "cell's 3 s budget ran out first, says so"
    ) in page


def test_headline_states_the_seeds_behind_each_time():
    rows = _rows()
    lines = headline(rows)
    assert lines[0] == (
        "Fastest right answer (whole triplet within eps; solve time, median over 3 seeds "
        "unless marked):"
    )
    found = verdicts(rows)
    assert [(v["winner"], v["n_seeds"], v["n_seeds_asked"]) for v in found] == [
        ("tsvd (structured)", 3, 3)
    ] * 2
    assert found[0]["finding"] == (
        "tsvd (structured) 5 ms, 20x faster than RSVD (100 ms on 1 of 3 seeds); fastest "
        "raced solver: rsvd 100 ms on 1 of 3 seeds; 2/4 right."
    )
    # a stopping rule's row runs seed 1 by design: its time says so against 3 asked
    residual = {**rows[2], "method": "rsvd [stop=residual]", "stop": "residual"}
    residual.update(n_seeds_asked=1, seconds=0.05)
    v = verdicts([*rows[:5], residual])[0]
    assert "fastest raced solver: rsvd [stop=residual] 50 ms on 1 seed;" in v["finding"]
    # rows that do not record the seeds asked (older records) keep the old words
    old = [{k: v for k, v in r.items() if k != "n_seeds_asked"} for r in rows]
    assert headline(old)[0].endswith("median over seeds):")
    assert "seeds" not in verdicts(old)[0]["finding"]


@pytest.mark.parametrize("status", ["unreliable", "not converged"])
def test_a_point_without_a_failed_check_is_not_certified(status):
    """reliable None or False leaves the status short of converged and no other check
    explains it: the caption names the certificate."""
    rows = _rows()[:1]
    for p in rows[0]["history"]:
        p.update(sv_error=1e-6, status=status)
    assert curve_marks(rows)["checks"] == {"fast": {"reliable"}}
