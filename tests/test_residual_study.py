"""The residual study's estimate-against-truth fields (issue 15 §2)."""

import math

import numpy as np
import pytest

from ksvd_bench.race.residual_study import (
    ESTIMATE_BAND,
    run_residual_study,
    summarize_error_estimates,
)

#: the sweeps try samples too small for the rank on purpose: a rank-deficient sample warns
#: (the solver pads it; the row records the warning), which is what these tests judge
pytestmark = pytest.mark.filterwarnings(
    r"ignore:.* has numerical rank \d+ < rank=\d+:RuntimeWarning"
)


@pytest.fixture(scope="module")
def rows():
    return run_residual_study(
        ("cora",),
        5,
        methods=("rsvd", "asym_nystrom"),
        efforts={"rsvd": (0, 10), "asym_nystrom": (10, 40)},
        weights=("uniform", "relative"),
    )


def test_rows_carry_estimate_truth_and_verdict(rows):
    assert len(rows) == 4 * 2
    for r in rows:
        assert r["error"] is None and r["true_error"] > 0
        assert r["estimate_ratio"] == pytest.approx(r["error_estimate"] / r["true_error"])
        assert r["probe_ratio"] == pytest.approx(r["probe_estimate"] / r["true_error"])
        # the study knows ||G||_F exactly, so the driver's estimate is the exact gap here
        assert r["estimate_kind"] == "gap" and r["estimate_ratio"] == pytest.approx(1, rel=1e-6)
        assert ESTIMATE_BAND[0] <= r["probe_ratio"] <= ESTIMATE_BAND[1]
        assert math.isfinite(r["sv_error"]) and math.isfinite(r["triplet_residual"])
        assert isinstance(r["n_warnings"], int) and isinstance(r["warnings"], list)
        assert isinstance(r["reliable"], bool)
    # the weightings share one answer per cell
    by_cell = {}
    for r in rows:
        by_cell.setdefault((r["method"], r["value"]), set()).add(r["error_estimate"])
    assert all(len(v) == 1 for v in by_cell.values())


def test_summary_counts_cells_once(rows):
    summary = summarize_error_estimates(rows)
    assert [s["dataset"] for s in summary] == ["cora", "all"]
    assert summary[0]["n"] == 4 and summary[0]["within"] == 1.0
    assert summary[0]["min_ratio"] <= summary[0]["median_ratio"] <= summary[0]["max_ratio"]
    ratios = np.array([r["probe_ratio"] for r in rows])
    assert summary[0]["probe_min"] == pytest.approx(ratios.min())
    # a wrong estimate leaves the band
    bad = [dict(r, estimate_ratio=r["estimate_ratio"] * 10) for r in rows]
    assert summarize_error_estimates(bad)[0]["within"] == 0.0
