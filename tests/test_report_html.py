"""The headline and the self-contained report page (no browser; tests/test_browser.py loads it
in Chromium)."""

import base64
import html
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from _report_pages import PROBLEMS, sample_meta, sample_records, sample_rows

from ksvd_bench.report import (
    failures,
    headline,
    render_report,
    row_status,
    verdicts,
    warning_counts,
    write_report,
)
from ksvd_bench.report.html import problem_id
from ksvd_bench.report.status import is_right

RECORDED = Path(__file__).resolve().parents[1] / "benchmarks" / "recorded" / "race_cora.json"


class _Page(HTMLParser):
    """Collects tags with their attributes, and text per element id."""

    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _parse(page):
    p = _Page()
    p.feed(page)
    return p.tags


# ------------------------------------------------------------------------------- verdicts


def test_row_status_applies_the_whole_triplet_rule_to_older_rows():
    base = {"method": "x", "eps": 0.1, "seconds": 1.0}
    assert row_status({**base, "converged": True, "sv_error": 0.05}) == "converged"
    assert row_status({**base, "converged": True, "sv_error": 0.5}) == "stopped early, wrong"
    assert row_status({**base, "converged": True, "reliable": False}) == "unreliable"
    assert row_status({**base, "converged": False}) == "not converged"
    assert row_status({**base, "converged": True, "status": "unreliable"}) == "unreliable"
    with pytest.raises(ValueError, match="unknown status 'fine'"):
        row_status({**base, "status": "fine"})


def test_verdicts_pick_the_fastest_right_answer():
    found = {(v["problem"], v["measure"], v["eps"]): v for v in verdicts(sample_rows())}
    assert len(found) == 8
    v = found[("alpha graph", "eta[uniform]", 0.1)]
    # the faster asym_nystrom [stop=residual] stopped on a wrong answer: it never wins
    assert v["winner"] == "block_krylov" and v["seconds"] == 0.01
    assert v["speedup"] == pytest.approx(2.0) and v["baseline_seconds"] == 0.02
    assert v["n_right"] == 2 and v["n_solvers"] == 3  # the n/a row is not counted
    assert v["sentence"] == (
        "alpha graph, eta[uniform], eps 1e-1: block_krylov 10 ms, "
        "2x faster than RSVD (20 ms); 2/3 right."
    )
    nobody = found[("beta<points>", "lowrank", 0.01)]
    assert nobody["winner"] is None and nobody["speedup"] is None
    assert "no solver's answer is right (0/3)" in nobody["sentence"]


def test_verdicts_on_the_recorded_cora_race_agree_with_the_rows():
    rows = json.loads(RECORDED.read_text())["rows"]
    found = verdicts(rows)
    groups = {(r["dataset"], r["measure"], r["weights"], r["eps"]) for r in rows}
    assert len(found) == len(groups) == 8
    for v in found:
        group = [
            r
            for r in rows
            if r["eps"] == v["eps"]
            and r["stop"] != "n/a"
            and (r["measure"] if not r["weights"] else f"{r['measure']}[{r['weights']}]")
            == v["measure"]
        ]
        right = [
            r
            for r in group
            if r["converged"]
            and r["reliable"]
            and (r["sv_error"] is None or r["sv_error"] <= r["eps"])
        ]
        best = min(right, key=lambda r: r["seconds"])
        assert (v["winner"], v["seconds"]) == (best["method"], best["seconds"])
        rsvd = next(r for r in group if r["method"] == "rsvd")
        assert v["speedup"] == pytest.approx(rsvd["seconds"] / best["seconds"])
        # a row that said converged with its singular values off by more than eps is wrong
        for r in group:
            if r["converged"] and r["sv_error"] is not None and r["sv_error"] > r["eps"]:
                assert not is_right(r)
                assert row_status(r) == "stopped early, wrong"


def test_headline_fits_and_names_what_it_leaves_out():
    rows = sample_rows()
    lines = headline(rows, report_path="out/report.html")
    # a title, a line per problem, a line per verdict, warnings, the page
    assert len(lines) == 1 + 2 + 8 + 2
    assert lines[1] == "alpha graph:"
    assert lines[2] == (
        "  eta[uniform], eps 1e-1: block_krylov 10 ms, 2x faster than RSVD (20 ms); 2/3 right."
    )
    assert lines[-1] == "report: out/report.html"
    assert lines[-2] == "warnings (messages in the report): block_krylov 8"
    short = headline(rows, max_lines=6, report_path="r.html")
    assert len(short) == 6
    assert short[1:4] == lines[1:3] + ["  ... 7 more verdicts in the report"]
    recorded = headline(json.loads(RECORDED.read_text())["rows"])
    assert len(recorded) <= 30 and all(len(ln) <= 100 for ln in recorded)
    with pytest.raises(ValueError, match="max_lines"):
        headline(rows, max_lines=2)
    with pytest.raises(ValueError, match="at least one"):
        headline([])


def test_warnings_count_per_solver_with_its_stopping_rule_rows():
    rows = sample_rows()
    extra = dict(
        rows[1],
        method="block_krylov [stop=residual]",
        n_warnings=2,
        warnings=["other message", "other message"],
    )
    assert warning_counts(rows) == {"block_krylov": (8, 1)}
    assert warning_counts(rows + [extra]) == {"block_krylov": (10, 2)}


def test_failures_list_wrong_rows_warnings_and_what_does_not_apply():
    found = failures(sample_rows())
    statuses = {f["status"] for f in found if f["applies"]}
    assert statuses == {"converged", "stopped early, wrong", "not converged", "unreliable"}
    warned = [f for f in found if f["status"] == "converged"]
    assert warned and all(
        f["warnings"] == ["block_krylov: basis lost rank at effort 5"] for f in warned
    )
    assert sum(not f["applies"] for f in found) == 8


# ------------------------------------------------------------------------------- the page


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    path = write_report(
        out,
        rows=sample_rows(),
        meta=sample_meta(),
        records=sample_records(),
        headline_extra=["collection: test-set v1"],
    )
    assert path == out / "report.html"
    return path.read_text(encoding="utf-8")


def test_page_is_self_contained(page):
    # not even the letters: no URL, and no base64 figure that spells them by chance
    assert "http" not in page.lower()
    tags = _parse(page)
    refs = [(t, a.get("src") or a.get("href")) for t, a in tags if "src" in a or "href" in a]
    assert refs
    assert all(ref.startswith(("data:", "#")) for _, ref in refs), refs
    assert not any(t in ("script", "iframe", "object", "embed") for t, _ in tags)
    assert not any(t == "link" and a.get("rel") == "stylesheet" for t, a in tags)
    assert "@import" not in page and "url(" not in page
    # the command line's address is kept, without its scheme
    assert "example.invalid/page" in page


def test_page_holds_headline_sections_profiles_failures_and_record(page):
    tags = _parse(page)
    ids = [a.get("id") for _, a in tags if a.get("id")]
    assert ids[:1] == ["headline"]
    for problem in PROBLEMS:
        assert problem_id(problem) in ids
    assert {"profiles", "failures", "record"} <= set(ids)
    assert problem_id("beta<points>") == "problem-beta-points"
    # names are escaped, never markup
    assert "<points>" not in page and "beta&lt;points&gt;" in page
    items = re.findall(r'<li class="verdict">(.*?)</li>', page)
    assert [html.unescape(re.sub(r"<[^>]+>", "", i)) for i in items] == [
        v["sentence"] for v in verdicts(sample_rows())
    ]
    assert "collection: test-set v1" in page
    images = [a for t, a in tags if t == "img"]
    # 2 problems x 2 measures of curves, and one profile figure (one measure, one eps)
    assert len(images) == 5
    assert all(a["src"].startswith("data:image/png;base64,") and a.get("alt") for a in images)
    for status in ("stopped early, wrong", "not converged", "unreliable"):
        assert f">{status}<" in page
    assert "block_krylov: basis lost rank at effort 5" in page
    assert "Not run (does not apply)" in page and "needs two point sets" in page
    assert "unreliable on p4" in page  # suite failures with their reason
    for key in ("command_line", "seeds", "threads", "load_average", "machine: numpy"):
        assert f"<dt>{key}</dt>" in page


def test_png_variants_show_the_same_image_and_encode_differently():
    import numpy as np
    from matplotlib.figure import Figure
    from PIL import Image

    from ksvd_bench.report.figures import _png_padded, _png_variants, figure_data_uri

    fig = Figure(figsize=(2, 1))
    fig.subplots().plot([0, 1], [1, 0])
    uri = figure_data_uri(fig)
    assert uri.startswith("data:image/png;base64,") and "http" not in uri.lower()
    png = base64.b64decode(uri.split(",", 1)[1])
    for n in (1, 2, 3):
        padded = _png_padded(png, n)
        image = Image.open(io.BytesIO(padded))
        image.load()  # checks every chunk's CRC
        assert image.size == (200, 100) and image.text["pad"] == "." * n
        assert base64.b64encode(padded)[60:] != base64.b64encode(png)[60:]
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))
    variants = list(_png_variants(png))
    # padding moves the text after it only three ways: new compressions change the bytes
    assert len({base64.b64encode(v)[60:] for v in variants}) == len(variants) == 28
    for variant in variants:
        image = Image.open(io.BytesIO(variant))
        image.load()
        np.testing.assert_array_equal(np.asarray(image.convert("RGBA")), pixels)


def test_figure_uri_takes_the_first_variant_without_http(monkeypatch):
    from matplotlib.figure import Figure

    from ksvd_bench.report import figures

    # the bytes of base64 texts "xxhTtPxx...", "xxxxHTTP", then clean ones
    bad = [base64.b64decode("xxhTtPxx"), base64.b64decode("xxxxHTTP")]
    good = [base64.b64decode("xxxxxxxx"), base64.b64decode("yyyyyyyy")]
    monkeypatch.setattr(figures, "_png_variants", lambda png: iter(bad + good))
    assert figures.figure_data_uri(Figure()) == "data:image/png;base64,xxxxxxxx"
    monkeypatch.setattr(figures, "_png_variants", lambda png: iter(bad))
    with pytest.raises(RuntimeError, match="without the letters 'http'"):
        figures.figure_data_uri(Figure())


def test_page_draws_one_point_per_row_without_a_history():
    rows = [
        {k: v for k, v in r.items() if k != "history"}
        for r in sample_rows()
        if r["dataset"] == PROBLEMS[0] and r["measure"] == "lowrank"
    ]
    page = render_report(rows=rows)
    assert "recorded no effort sweep" in page
    assert page.count("<img ") == 1
    assert 'id="profiles"' not in page


def test_suite_only_page_and_refusals(tmp_path):
    page = render_report(records=sample_records(), meta={"command": "suite"})
    assert 'id="profiles"' in page and page.count("<img ") == 1
    # the headline from the records: p2 is block_krylov's (1 s against RSVD's 2 s)
    assert (
        'p2, eta[uniform], eps 1e-2: <span class="winner">block_krylov</span> 1 s, '
        "2x faster than RSVD (2 s); 2/3 right."
    ) in page
    assert "<title>ksvd-bench suite</title>" in page
    with pytest.raises(ValueError, match="neither"):
        write_report(tmp_path, rows=[], records=None)
    assert not (tmp_path / "report.html").exists()
