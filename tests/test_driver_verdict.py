"""The driver's whole-triplet verdict, its warnings record and the reference-free estimate."""

import warnings

import numpy as np
import pytest
from scipy.sparse.linalg import aslinearoperator

import solvers
from ksvd_bench.driver import STOPS, reference_svd, solve_to_tolerance
from ksvd_bench.metrics import lowrank_error
from solvers import SVDResult


def halving_problem():
    """Issue 14's reproducer: G = U0 diag(0.5^i) V0^T, 400 x 300, from a seeded QR."""
    rng = np.random.default_rng(0)
    U0 = np.linalg.qr(rng.standard_normal((400, 300)))[0]
    V0 = np.linalg.qr(rng.standard_normal((300, 300)))[0]
    s = 0.5 ** np.arange(300)
    return (U0 * s) @ V0.T, U0, s, V0


@pytest.fixture(scope="module")
def halving():
    return halving_problem()


def _answer(U, s, V, **info):
    return SVDResult(
        U=np.array(U), s=np.array(s), V=np.array(V), info={"effort": 0, "n_matvec": 0, **info}
    )


def _fake_svd(make):
    """A stand-in for ``solvers.svd`` returning ``make(rank, n_oversamples)``."""

    def fake(G, rank, *, method, random_state=None, **options):
        return make(rank, options.get("n_oversamples", options.get("n_iter", 0)))

    return fake


def _true_sv_error(answer, s_true, r):
    return float(np.max(np.abs(np.sort(answer.s)[::-1][:r] - s_true[:r])) / s_true[0])


def test_reproducer_verdict_matches_the_true_values(halving):
    G, U0, s, V0 = halving
    out = solve_to_tolerance(
        G, 5, "block_krylov", 0.1, metric="lowrank", options={"n_oversamples": 40}, random_state=0
    )
    # Whatever the solver does at q = 0, an accepted answer has the right values and a V
    # that pairs with U (checked here from the exact factors, not from the driver's fields).
    true_sv = _true_sv_error(out.result, s, 5)
    U, V = out.result.U, out.result.V
    residual = max(
        np.linalg.norm(G @ V - U * out.result.s), np.linalg.norm(G.T @ U - V * out.result.s)
    ) / np.linalg.norm(s[:5])
    assert out.sv_error == pytest.approx(true_sv, rel=1e-9, abs=1e-15)
    if out.converged:
        assert true_sv <= 0.1 and residual <= 0.1
        assert np.linalg.svd(V0[:, :5].T @ V, compute_uv=False).min() > 0.99
    for h in out.history:
        if h["converged"]:
            assert h["sv_error"] <= 0.1 and h["triplet_residual"] <= 0.1 and h["reliable"]


def test_reproducer_wrong_answer_is_rejected(halving, monkeypatch):
    """The answer the issue saw at q = 0: U fine (lowrank < 0.1), s at 30-42%, V random."""
    G, U0, s, V0 = halving
    rng = np.random.default_rng(1)

    def wrong(rank, effort):
        V = np.linalg.qr(rng.standard_normal((300, rank)))[0]
        return _answer(U0[:, :rank], s[:rank] * np.linspace(0.30, 0.42, rank), V, effort=effort)

    monkeypatch.setattr(solvers, "svd", _fake_svd(wrong))
    out = solve_to_tolerance(
        G,
        5,
        "block_krylov",
        0.1,
        metric="lowrank",
        options={"n_oversamples": 40},
        random_state=0,
        max_effort=2,
    )
    assert all(h["value"] <= 0.1 for h in out.history)  # the measure alone would accept it
    assert not out.converged and out.stopped_by == "cap"
    assert not any(h["converged"] for h in out.history)
    assert out.sv_error == pytest.approx(_true_sv_error(out.result, s, 5))
    assert out.sv_error > 0.5 and out.triplet_residual > 0.5


def test_wrong_pairing_alone_is_rejected(halving, monkeypatch):
    """Right U, right values, V of the right subspace but paired in the wrong order."""
    G, U0, s, V0 = halving
    swapped = [1, 0, 2, 3, 4]
    monkeypatch.setattr(
        solvers,
        "svd",
        _fake_svd(lambda r, e: _answer(U0[:, :r], s[:r], V0[:, swapped][:, :r], effort=e)),
    )
    out = solve_to_tolerance(G, 5, "rsvd", 1e-3, metric="subspace", random_state=0, max_effort=0)
    assert out.value < 1e-12 and out.sv_error < 1e-12  # subspaces and values are exact
    # ||G V~ - U S|| = ||[0.5 u1 - u0, u0 - 0.5 u1]||: sqrt(2.5) over ||s[:5]|| = 1.1547
    assert out.triplet_residual == pytest.approx(np.sqrt(2.5) / np.linalg.norm(s[:5]), rel=1e-9)
    assert not out.converged


def test_unreliable_answer_never_converges_and_warnings_are_data(halving, monkeypatch):
    G, U0, s, V0 = halving

    def flagged(rank, effort):
        warnings.warn("cannot trust this", RuntimeWarning, stacklevel=2)
        warnings.warn("cannot trust this", RuntimeWarning, stacklevel=2)
        return _answer(U0[:, :rank], s[:rank], V0[:, :rank], effort=effort, reliable=False)

    monkeypatch.setattr(solvers, "svd", _fake_svd(flagged))
    with pytest.warns(RuntimeWarning, match="cannot trust this") as record:
        out = solve_to_tolerance(G, 5, "rsvd", 1e-2, metric="eta", random_state=0, max_effort=5)
    assert out.eta < 1e-12 and out.sv_error < 1e-12  # exact, but the solver said no
    assert not out.converged and out.reliable is False
    assert out.n_warnings == 2 and out.warnings == ["cannot trust this"]
    assert [h["n_warnings"] for h in out.history] == [2, 2]
    # re-issued once after the sweep (deduplicated), not swallowed
    assert sum("cannot trust this" in str(w.message) for w in record) == 1


def test_missing_reliable_key_counts_as_reliable(halving, monkeypatch):
    G, U0, s, V0 = halving
    monkeypatch.setattr(
        solvers, "svd", _fake_svd(lambda r, e: _answer(U0[:, :r], s[:r], V0[:, :r], effort=e))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning raised, none emitted
        out = solve_to_tolerance(G, 5, "rsvd", 1e-2, metric="eta", random_state=0)
    assert out.converged and out.reliable and out.n_warnings == 0 and out.warnings == []


def test_separate_sv_tolerance(halving, monkeypatch):
    G, U0, s, V0 = halving
    monkeypatch.setattr(
        solvers,
        "svd",
        _fake_svd(lambda r, e: _answer(U0[:, :r], s[:r] * (1 - 0.02), V0[:, :r], effort=e)),
    )
    strict = solve_to_tolerance(
        G, 5, "rsvd", 1e-1, metric="eta", random_state=0, max_effort=0, sv_tol=1e-3
    )
    assert strict.sv_error == pytest.approx(0.02) and not strict.converged
    loose = solve_to_tolerance(G, 5, "rsvd", 1e-1, metric="eta", random_state=0, max_effort=0)
    assert loose.converged  # sv_tol defaults to eps
    with pytest.raises(ValueError, match="sv_tol"):
        solve_to_tolerance(G, 5, "rsvd", 1e-1, sv_tol=-1.0)
    with pytest.raises(TypeError, match="triplet_tol"):
        solve_to_tolerance(G, 5, "rsvd", 1e-1, triplet_tol="big")
    with pytest.raises(ValueError, match="n_probes"):
        solve_to_tolerance(G, 5, "rsvd", 1e-1, n_probes=0)


def test_repr_shows_eta_once(halving):
    G = halving[0]
    out = solve_to_tolerance(G, 3, "rsvd", 1e-2, metric="eta", random_state=0, max_effort=5)
    assert repr(out).count("eta=") == 1
    low = solve_to_tolerance(G, 3, "rsvd", 1e-2, metric="lowrank", random_state=0, max_effort=5)
    assert repr(low).count("eta=") == 1 and "lowrank=" in repr(low)
    assert "sv_error=" in repr(low) and "n_warnings=" in repr(low)


# ---------------------------------------------------------------------------------------------
# stop="estimate"
# ---------------------------------------------------------------------------------------------


def slow_decay(N=300, M=200, seed=3):
    rng = np.random.default_rng(seed)
    U0 = np.linalg.qr(rng.standard_normal((N, M)))[0]
    V0 = np.linalg.qr(rng.standard_normal((M, M)))[0]
    return (U0 / np.arange(1, M + 1) ** 1.5) @ V0.T


def test_estimate_is_the_default_stop_without_a_reference():
    assert STOPS == ("reference", "estimate", "residual")
    G = slow_decay()
    out = solve_to_tolerance(G, 10, "rsvd", 0.1, random_state=0, max_effort=20)
    assert out.stop == "estimate" and np.isnan(out.eta) and np.isnan(out.sv_error)
    # dense G: ||G||_F is known, the gap is resolved, the estimate is the exact error
    assert all(h["estimate_kind"] == "gap" for h in out.history)
    assert all(h["stop_value"] == h["relative_error_estimate"] for h in out.history)
    err = np.linalg.norm(G - out.result.U @ (out.result.U.T @ G))
    assert out.error_estimate == pytest.approx(err, rel=1e-8)
    assert out.relative_error_estimate == pytest.approx(err / np.linalg.norm(G), rel=1e-8)
    assert out.converged and err <= 0.1 * np.linalg.norm(G)
    # a tolerance below the optimum ||G - G_10||_F / ||G||_F is never met
    tail = np.sqrt(
        np.sum(np.arange(11, 201, dtype=float) ** -3.0)
        / np.sum(np.arange(1, 201, dtype=float) ** -3.0)
    )
    never = solve_to_tolerance(G, 10, "rsvd", 0.9 * tail, random_state=0, max_effort=20)
    assert not never.converged and never.stopped_by == "cap"
    assert all(h["relative_error_estimate"] >= tail * (1 - 1e-9) for h in never.history)


@pytest.mark.parametrize(
    "method, kind",
    [("generalized_nystrom", "probes"), ("rsvd", "fused_loo"), ("block_krylov", "fused_loo")],
)
def test_estimate_without_the_norm_is_randomized_and_stays_in_band(method, kind):
    G = slow_decay()
    op = aslinearoperator(G)  # no norm: the solver's leave-one-out or the probes decide
    norm = np.linalg.norm(G)
    ratios = []
    for seed in range(4):
        out = solve_to_tolerance(op, 10, method, 0.15, random_state=seed, max_effort=20)
        assert out.stop == "estimate"
        # a basis that fills R^M gives the exact truncation error: the only other kind (the
        # stop, dividing by a lower bound on the probes' ||G||_F, may run on to it)
        assert {h["estimate_kind"] for h in out.history[:-1]} <= {kind}
        assert out.history[-1]["estimate_kind"] in (kind, "fused_exact")
        err = np.linalg.norm(G - out.result.U @ (out.result.U.T @ G))
        ratios.append(out.error_estimate / err)
        for h in out.history:  # the safety factor 2 of a randomized estimate is in the stop
            factor = 1 if h["estimate_kind"] == "fused_exact" else 2
            assert h["stop_value"] == pytest.approx(factor * h["relative_error_estimate"])
        if out.converged:
            assert out.history[-1]["stop_value"] <= 0.15
    assert all(0.5 <= r <= 2 for r in ratios)
    # given ||G||_F, the same operator gets the exact gap
    known = solve_to_tolerance(op, 10, method, 0.1, random_state=0, norm_fro=norm, max_effort=20)
    assert all(h["estimate_kind"] == "gap" for h in known.history)
    err = np.linalg.norm(G - known.result.U @ (known.result.U.T @ G))
    assert known.error_estimate == pytest.approx(err, rel=1e-8)


def test_estimate_stop_with_reference_records_both():
    G = slow_decay()
    ref = reference_svd(G, 10)
    out = solve_to_tolerance(
        G,
        10,
        "asym_nystrom",
        0.1,
        reference=ref,
        stop="estimate",
        metric="lowrank",
        random_state=0,
        max_effort=60,
    )
    assert out.stop == "estimate" and np.isfinite(out.lowrank) and np.isfinite(out.sv_error)
    terms = lowrank_error(G, ref, out.result, rank=10, return_terms=True)[1]
    assert out.error_estimate == pytest.approx(terms["error"], rel=1e-6)
