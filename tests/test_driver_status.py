"""Every answer's verdict (``status``) under every stop (issue 19 §1), and arguments a stop
does not use (issue 20 §5, §6)."""

import warnings

import numpy as np
import pytest

import solvers
from ksvd_bench.driver import STATUSES, STOPPED_BY, ToleranceResult, solve_to_tolerance
from solvers import SVDResult


@pytest.fixture(scope="module")
def halving():
    """G = U0 diag(0.5^i) V0^T, 120 x 90: exact triplets known."""
    rng = np.random.default_rng(0)
    U0 = np.linalg.qr(rng.standard_normal((120, 90)))[0]
    V0 = np.linalg.qr(rng.standard_normal((90, 90)))[0]
    s = 0.5 ** np.arange(90)
    return (U0 * s) @ V0.T, U0, s, V0


def _fake(monkeypatch, make):
    def fake(G, rank, *, method, random_state=None, **options):
        return make(rank, options.get("n_oversamples", options.get("n_iter", 0)))

    monkeypatch.setattr(solvers, "svd", fake)


def _skipping_one(U0, s, V0, **info):
    """Exact triplets 0..r-2 and r: every triplet is exact (residual 0), the r-th is missed."""

    def make(r, effort):
        keep = [*range(r - 1), r]
        return SVDResult(
            U=U0[:, keep].copy(),
            s=s[keep].copy(),
            V=V0[:, keep].copy(),
            info={"effort": effort, "n_matvec": 0, **info},
        )

    return make


def test_statuses_are_the_documented_four():
    assert STATUSES == ("converged", "not converged", "unreliable", "stopped early, wrong")
    assert "stopped_early" in STOPPED_BY
    built = ToleranceResult(
        method="rsvd", effort=0, eta=0.0, seconds=0.0, converged=True, result=None
    )
    assert built.status == "converged"
    with pytest.raises(ValueError, match="status"):
        ToleranceResult(
            method="rsvd",
            effort=0,
            eta=0.0,
            seconds=0.0,
            converged=False,
            result=None,
            status="fine",
        )


@pytest.mark.parametrize(
    "stop, eps, metric, wrong",
    [
        ("estimate", 0.1, "eta", 0.4),  # eta (uniform): one vector of five orthogonal
        ("residual", 0.5, "subspace", 1.0),  # the residual estimate sees 0.4; the sine is 1
    ],
)
def test_a_reference_free_stop_that_fires_on_a_wrong_answer_is_shown(
    halving, monkeypatch, stop, eps, metric, wrong
):
    G, U0, s, V0 = halving
    from ksvd_bench.driver import reference_svd

    ref = reference_svd(G, 5)
    _fake(monkeypatch, _skipping_one(U0, s, V0))
    out = solve_to_tolerance(
        G,
        5,
        "rsvd",
        eps,
        reference=ref,
        stop=stop,
        metric=metric,
        weights="uniform",
        random_state=0,
    )
    first = out.history[0]
    # the stop fired and the triplets are exact, but the reference shows a missed direction
    assert first["stop_value"] <= eps and first["triplet_residual"] < 1e-12
    assert first["value"] == pytest.approx(wrong, abs=1e-9) and first["sv_error"] <= eps
    assert first["status"] == "stopped early, wrong" and not first["converged"]
    assert len(out.history) == 1  # the sweep stops where the stop fired, as without a reference
    assert out.status == "stopped early, wrong" and not out.converged
    assert out.stopped_by == "stopped_early" and out.value == pytest.approx(wrong, abs=1e-9)
    # the same stop without a reference accepts it: that is what the row exists to show
    free = solve_to_tolerance(
        G,
        5,
        "rsvd",
        eps,
        stop=stop,
        random_state=0,
        **({"weights": "uniform"} if stop == "residual" else {}),
    )
    assert free.converged and free.status == "converged"


def test_converged_always_meets_the_whole_triplet_rule(halving):
    G = halving[0]
    from ksvd_bench.driver import reference_svd

    ref = reference_svd(G, 4)
    accepted = set()
    for stop in ("reference", "estimate", "residual"):
        for method in ("rsvd", "asym_nystrom"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = solve_to_tolerance(
                    G,
                    4,
                    method,
                    0.1,
                    reference=ref,
                    stop=stop,
                    weights="relative",
                    random_state=0,
                    max_effort=60,
                )
            for h in [*out.history, vars(out)]:
                assert h["status"] in STATUSES
                assert h["converged"] == (h["status"] == "converged")
                if h["converged"]:
                    assert h["value"] <= 0.1 and h["sv_error"] <= 0.1
                    assert h["triplet_residual"] <= 0.1 and h["reliable"]
                    accepted.add(stop)
    assert accepted == {"reference", "estimate", "residual"}  # every stop accepted some


def test_unreliable_and_not_converged(halving, monkeypatch):
    G, U0, s, V0 = halving
    _fake(
        monkeypatch,
        lambda r, e: SVDResult(
            U=U0[:, :r], s=s[:r], V=V0[:, :r], info={"effort": e, "reliable": False}
        ),
    )
    out = solve_to_tolerance(G, 3, "rsvd", 1e-2, metric="eta", random_state=0, max_effort=5)
    assert [h["status"] for h in out.history] == ["unreliable", "unreliable"]
    assert out.status == "unreliable" and out.stopped_by == "cap"
    # values 3% off with eps 1e-2: the reference stop's measure passes, the values do not
    _fake(
        monkeypatch,
        lambda r, e: SVDResult(U=U0[:, :r], s=s[:r] * 0.97, V=V0[:, :r], info={"effort": e}),
    )
    out = solve_to_tolerance(G, 3, "rsvd", 1e-2, metric="eta", random_state=0, max_effort=0)
    assert out.value < 1e-12 and out.status == "not converged"


def test_an_argument_the_stop_does_not_use_is_an_error(halving):
    G = halving[0]
    # issue 20 §5: no reference, so the estimate stop runs, and it has no use for weights
    with pytest.raises(
        ValueError,
        match=r"weights='uniform' is not used by stop='estimate'"
        r".*relative low-rank error",
    ) as err:
        solve_to_tolerance(G, 10, "rsvd", 1e-2, weights="uniform")
    assert "reference=" in str(err.value)
    # §6: metric= with stop="estimate" and nothing to measure against
    with pytest.raises(ValueError, match=r"metric='lowrank' is not used by stop='estimate'"):
        solve_to_tolerance(G, 10, "rsvd", 1e-2, stop="estimate", metric="lowrank")
    with pytest.raises(ValueError, match=r"metric='eta' is not used by stop='residual'"):
        solve_to_tolerance(G, 10, "rsvd", 1e-2, stop="residual", metric="eta")
    # used: weights by the residual stop, both by the scoring when a reference is given
    out = solve_to_tolerance(
        G, 3, "rsvd", 1e-1, stop="residual", weights="uniform", random_state=0, max_effort=5
    )
    assert out.weights == "uniform" and np.isfinite(out.residual_estimate)
    from ksvd_bench.driver import reference_svd

    out = solve_to_tolerance(
        G,
        3,
        "rsvd",
        1e-1,
        stop="estimate",
        metric="lowrank",
        weights="uniform",
        reference=reference_svd(G, 3),
        random_state=0,
        max_effort=5,
    )
    assert np.isfinite(out.lowrank) and np.isfinite(out.eta)
