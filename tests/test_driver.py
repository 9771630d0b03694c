"""Tests of ksvd_bench.driver: effort schedules, the reference SVD and its cache, the driver."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import aslinearoperator

import solvers
from ksvd_bench.driver import (
    definition_key,
    effort_schedule,
    reference_svd,
    solve_to_tolerance,
)
from ksvd_bench.metrics import (
    CLUSTER_RTOL,
    eta,
    lowrank_error,
    residual_estimate,
    subspace_error,
)
from solvers import SVDResult


def low_rank_plus_noise(N=300, M=250, k=40, decay=0.5, noise=1e-5, seed=0):
    rng = np.random.default_rng(seed)
    Q1 = np.linalg.qr(rng.standard_normal((N, k)))[0]
    Q2 = np.linalg.qr(rng.standard_normal((M, k)))[0]
    return (Q1 * decay ** np.arange(k)) @ Q2.T + noise * rng.standard_normal((N, M))


@pytest.fixture(scope="module")
def problem():
    G = low_rank_plus_noise()
    return G, reference_svd(G, 5)


# ---------------------------------------------------------------------------------------------
# schedules
# ---------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(N=st.integers(2, 3000), M=st.integers(2, 3000), data=st.data())
def test_nystrom_schedule_is_geometric_and_capped(N, M, data):
    rank = data.draw(st.integers(1, min(N, M)))
    for method in ("sym_nystrom", "asym_nystrom"):
        sched = effort_schedule(method, rank, (N, M))
        assert all(isinstance(e, int) for e in sched)
        assert all(b > a for a, b in zip(sched[:-1], sched[1:], strict=True))
        assert sched[-1] == min(N, M)
        assert sched[0] == min(2 * rank, min(N, M))
        for a, b in zip(sched[:-2], sched[1:-1], strict=True):
            assert b == max(a + 1, math.ceil(1.25 * a))


@settings(deadline=None)
@given(N=st.integers(2, 3000), M=st.integers(2, 3000), data=st.data())
def test_rsvd_schedule_doubles_and_is_capped(N, M, data):
    rank = data.draw(st.integers(1, min(N, M)))
    sched = effort_schedule("rsvd", rank, (N, M))
    cap = min(N, M) - rank
    assert sched[-1] == cap
    assert all(b > a for a, b in zip(sched[:-1], sched[1:], strict=True))
    expected = [0, 5] + [5 * 2**k for k in range(1, 20)]
    assert sched[:-1] == [e for e in expected if e < cap]


def test_schedule_caps_and_errors():
    assert effort_schedule("tsvd", 5, (300, 250)) == [0]
    assert effort_schedule("asym_nystrom", 5, (300, 250), max_effort=20) == [10, 13, 17, 20]
    assert effort_schedule("asym_nystrom", 5, (300, 250), max_effort=7) == [7]
    assert effort_schedule("rsvd", 5, (300, 250), max_effort=30) == [0, 5, 10, 20, 30]
    assert effort_schedule("sym_nystrom", 2, (50, 60), start=45) == [45, 50]
    with pytest.raises(ValueError, match="method"):
        effort_schedule("lanczos", 5, (10, 10))
    with pytest.raises(ValueError, match="max_effort"):
        effort_schedule("asym_nystrom", 5, (300, 250), max_effort=4)
    with pytest.raises(ValueError, match="growth"):
        effort_schedule("asym_nystrom", 5, (300, 250), growth=1.0)
    with pytest.raises(ValueError, match="rank"):
        effort_schedule("rsvd", 11, (10, 20))


# ---------------------------------------------------------------------------------------------
# reference SVD and cache
# ---------------------------------------------------------------------------------------------


def test_reference_dense_matches_numpy_and_sign_convention():
    G = low_rank_plus_noise(60, 45, k=10, decay=0.7, noise=1e-3)
    ref = reference_svd(G, 6)
    U, s, Vt = np.linalg.svd(G)
    np.testing.assert_allclose(ref.s, s[:6], rtol=1e-12)
    signs = np.sign(np.sum(ref.U * U[:, :6], axis=0))
    np.testing.assert_allclose(ref.U, U[:, :6] * signs, atol=1e-10)
    np.testing.assert_allclose(ref.V, Vt[:6].T * signs, atol=1e-10)
    top = np.argmax(np.abs(ref.U), axis=0)
    assert np.all(ref.U[top, np.arange(6)] > 0)
    assert ref.info["method"] == "lapack_gesdd" and ref.info["cached"] is False


def test_reference_arpack_path_agrees_with_dense():
    G = low_rank_plus_noise(80, 70, k=20, decay=0.7, noise=1e-3)
    dense = reference_svd(G, 5)
    arpack = reference_svd(G, 5, max_dense_entries=0)
    assert arpack.info["method"] == "arpack"
    np.testing.assert_allclose(arpack.s, dense.s, rtol=1e-10)
    assert eta(dense, arpack, weights="uniform") < 1e-12


def test_reference_cache_round_trip(tmp_path):
    G = low_rank_plus_noise(50, 40, k=10, decay=0.7, noise=1e-3)
    first = reference_svd(G, 4, cache_dir=tmp_path)
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1 and first.info["cached"] is False
    again = reference_svd(G.copy(), 4, cache_dir=tmp_path)
    assert again.info["cached"] is True
    for name in ("U", "s", "V"):
        np.testing.assert_array_equal(getattr(again, name), getattr(first, name))
    with np.load(files[0], allow_pickle=False) as f:
        np.testing.assert_array_equal(f["s"], first.s)
    # Other data or another rank: another entry. Same numbers as sparse: hashed canonically.
    G2 = G.copy()
    G2[0, 0] += 1e-9
    assert reference_svd(G2, 4, cache_dir=tmp_path).info["cached"] is False
    assert reference_svd(G, 3, cache_dir=tmp_path).info["cached"] is False
    S = sp.coo_matrix(G)
    reference_svd(S, 4, cache_dir=tmp_path)
    assert reference_svd(S.tocsc(), 4, cache_dir=tmp_path).info["cached"] is True
    assert len(list(tmp_path.glob("*.npz"))) == 4


def test_reference_cache_for_lazy_sources(tmp_path):
    G = low_rank_plus_noise(40, 30, k=8, decay=0.7, noise=1e-3)
    op = aslinearoperator(G)
    reference_svd(op, 3, cache_dir=tmp_path)
    assert list(tmp_path.glob("*.npz")) == []  # no key, no cache_key: nothing cached
    reference_svd(op, 3, cache_dir=tmp_path, key="my-operator")
    assert reference_svd(op, 3, cache_dir=tmp_path, key="my-operator").info["cached"] is True
    op.cache_key = "attribute-key"
    reference_svd(op, 3, cache_dir=tmp_path)
    hit = reference_svd(op, 3, cache_dir=tmp_path)
    assert hit.info["cached"] is True
    np.testing.assert_allclose(hit.s, np.linalg.svd(G, compute_uv=False)[:3], rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", solvers.METHODS)
def test_driver_reaches_tolerance_for_every_method(problem, method):
    G, ref = problem
    out = solve_to_tolerance(G, 5, method, 1e-2, reference=ref, weights="uniform", random_state=0)
    assert out.converged
    assert out.eta <= 1e-2
    assert out.eta == pytest.approx(eta(ref, out.result, weights="uniform"))
    assert out.method == method and out.seconds > 0
    assert out.effort == out.history[-1]["effort"] == out.result.info["effort"]
    efforts = [h["effort"] for h in out.history]
    assert efforts == sorted(set(efforts))
    assert [h["converged"] for h in out.history] == [False] * (len(efforts) - 1) + [True]
    assert all(np.isfinite(h["residual_estimate"]) for h in out.history)


@pytest.mark.parametrize(
    "method", ["rsvd", "block_krylov", "generalized_nystrom", "sym_nystrom", "asym_nystrom"]
)
def test_driver_stops_at_the_cap_with_the_best_answer(problem, method):
    G, ref = problem
    max_effort = {"rsvd": 5, "block_krylov": 0, "generalized_nystrom": 5}.get(method, 12)
    out = solve_to_tolerance(
        G,
        5,
        method,
        1e-14,
        reference=ref,
        weights="uniform",
        max_effort=max_effort,
        random_state=1,
        n_iter=0,
    )
    assert not out.converged
    assert out.history[-1]["effort"] == max_effort
    assert len(out.history) == len(effort_schedule(method, 5, G.shape, max_effort=max_effort))
    assert out.eta == min(h["eta"] for h in out.history)
    assert out.eta > 1e-14
    assert out.stopped_by == "cap"


def test_driver_time_limit_abandons_the_schedule(problem):
    G, ref = problem
    # eps below any rounding: even the exact full-sample answer is not accepted
    full = solve_to_tolerance(
        G, 5, "asym_nystrom", 1e-30, reference=ref, weights="uniform", random_state=1
    )
    assert full.stopped_by == "cap" and len(full.history) > 2
    # a limit far below one solve: the first effort runs, nothing after it
    out = solve_to_tolerance(
        G,
        5,
        "asym_nystrom",
        1e-30,
        reference=ref,
        weights="uniform",
        random_state=1,
        time_limit=1e-9,
    )
    assert not out.converged and out.stopped_by == "time_limit"
    assert len(out.history) == 1
    assert out.history[0]["effort"] == full.history[0]["effort"]
    ok = solve_to_tolerance(
        G, 5, "asym_nystrom", 1e-2, reference=ref, weights="uniform", random_state=0, time_limit=1e6
    )
    assert ok.converged and ok.stopped_by == "converged"
    with pytest.raises(ValueError, match="time_limit"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, time_limit=0)


def test_driver_residual_operator_is_used_for_the_estimates(problem):
    G, ref = problem
    plain = solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, random_state=0)
    # the same matrix behind another interface: the same estimates
    same = solve_to_tolerance(
        G, 5, "rsvd", 1e-2, reference=ref, random_state=0, residual_operator=aslinearoperator(G)
    )
    assert [h["residual_estimate"] for h in same.history] == pytest.approx(
        [h["residual_estimate"] for h in plain.history], rel=1e-10
    )
    # a different matrix gives different estimates, so the operator really is the one used
    other = solve_to_tolerance(
        G, 5, "rsvd", 1e-2, reference=ref, random_state=0, residual_operator=2.0 * G
    )
    assert other.history[0]["residual_estimate"] != pytest.approx(
        plain.history[0]["residual_estimate"], rel=1e-3
    )
    with pytest.raises(ValueError, match="residual_operator"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, residual_operator=G[:-1])


def test_driver_residual_stop(problem):
    G, ref = problem
    out = solve_to_tolerance(
        G,
        5,
        "asym_nystrom",
        1e-3,
        reference=ref,
        weights="uniform",
        stop="residual",
        random_state=2,
    )
    assert out.converged and out.stop == "residual"
    assert out.residual_estimate <= 1e-3
    assert out.residual_estimate == pytest.approx(
        residual_estimate(G, out.result, weights="uniform")
    )
    # The estimate is conservative here, so eta is met too.
    assert out.eta <= 1e-3
    no_ref = solve_to_tolerance(
        G, 5, "asym_nystrom", 1e-3, weights="uniform", stop="residual", random_state=2
    )
    assert no_ref.converged and np.isnan(no_ref.eta)
    assert no_ref.effort == out.effort


def test_driver_is_deterministic_and_times_repeats(problem):
    G, ref = problem
    a = solve_to_tolerance(G, 5, "rsvd", 1e-6, reference=ref, random_state=3, repeats=3)
    b = solve_to_tolerance(G, 5, "rsvd", 1e-6, reference=ref, random_state=3)
    assert [h["eta"] for h in a.history] == [h["eta"] for h in b.history]
    np.testing.assert_array_equal(a.result.U, b.result.U)
    assert len(a.all_seconds) == 3 and a.seconds == np.median(a.all_seconds)


def test_driver_computes_and_caches_reference(tmp_path):
    G = low_rank_plus_noise(80, 60, k=15, decay=0.5, noise=1e-6, seed=4)
    out = solve_to_tolerance(
        G, 3, "tsvd", 1e-8, weights="relative", cache_dir=tmp_path, random_state=0
    )
    assert out.converged and out.eta <= 1e-8 and len(out.history) == 1
    assert len(list(tmp_path.glob("*.npz"))) == 1


def test_driver_validation(problem):
    G, ref = problem
    with pytest.raises(ValueError, match="method"):
        solve_to_tolerance(G, 5, "lanczos", 1e-2, reference=ref)
    with pytest.raises(ValueError, match="eps"):
        solve_to_tolerance(G, 5, "rsvd", 0.0, reference=ref)
    with pytest.raises(ValueError, match="repeats"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, repeats=0)
    with pytest.raises(ValueError, match="stop"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, stop="never")
    with pytest.raises(ValueError, match="weights"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, weights="flat")
    with pytest.raises(ValueError, match="n_samples"):
        solve_to_tolerance(G, 5, "asym_nystrom", 1e-2, reference=ref, options={"n_samples": 20})
    with pytest.raises(ValueError, match="fewer than rank"):
        solve_to_tolerance(G, 6, "rsvd", 1e-2, reference=ref)
    with pytest.raises(ValueError, match="strictly increasing"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, schedule=[5, 5])


# ---------------------------------------------------------------------------------------------
# new methods' schedules
# ---------------------------------------------------------------------------------------------


def test_schedules_of_the_pass_efficient_methods():
    # block Krylov grows its depth n_iter up to the first basis of (q + 1) blocks of rank + p
    # columns that spans min(N, M) = 250 dimensions: q = 250 / (5 + 5) - 1 = 24
    assert effort_schedule("block_krylov", 5, (300, 250), n_oversamples=5) == [
        0,
        1,
        2,
        3,
        4,
        6,
        8,
        12,
        16,
        24,
    ]
    assert effort_schedule("block_krylov", 5, (300, 250), n_oversamples=5, max_effort=10) == [
        0,
        1,
        2,
        3,
        4,
        6,
        8,
        10,
    ]
    assert effort_schedule("block_krylov", 10, (30, 25), n_oversamples=20) == [0]
    assert effort_schedule("block_krylov", 5, (300, 251), n_oversamples=5)[-1] == 25
    assert effort_schedule("block_krylov", 5, (300, 250))[-2:] == [12, 16]  # the solver's p=10
    # generalized Nystrom grows its oversampling, as RSVD does
    assert effort_schedule("generalized_nystrom", 5, (300, 250)) == effort_schedule(
        "rsvd", 5, (300, 250)
    )
    with pytest.raises(ValueError, match="n_oversamples"):
        effort_schedule("block_krylov", 5, (300, 250), n_oversamples=-1)


@settings(deadline=None)
@given(N=st.integers(2, 3000), M=st.integers(2, 3000), p=st.integers(0, 30), data=st.data())
def test_block_krylov_schedule_is_increasing_and_capped(N, M, p, data):
    rank = data.draw(st.integers(1, min(N, M)))
    sched = effort_schedule("block_krylov", rank, (N, M), n_oversamples=p)
    cap = max(0, math.ceil(min(N, M) / min(rank + p, N, M)) - 1)
    assert sched[-1] == cap and sched[0] == min(0, cap)
    assert all(b > a for a, b in zip(sched[:-1], sched[1:], strict=True))
    assert all(b <= max(a + 1, 2 * a) for a, b in zip(sched[:-1], sched[1:], strict=True))


# ---------------------------------------------------------------------------------------------
# clusters, measures and the cache key
# ---------------------------------------------------------------------------------------------


def repeated_value_problem():
    Q = np.linalg.qr(np.random.default_rng(0).normal(size=(8, 8)))[0]
    return Q @ np.diag([5.0, 5, 5, 5, 5, 5, 1, 1])[:, :6]


def test_driver_exact_answer_on_a_repeated_value_converges():
    """The issue's reproducer: sigma = 5 six times, rank 3 cuts the cluster."""
    G = repeated_value_problem()
    # metric named: scored against a reference (without one the default stop is "estimate")
    out = solve_to_tolerance(G, 3, "tsvd", 1e-2, metric="eta", weights="uniform", random_state=0)
    assert out.converged and out.eta < 1e-12 and out.value == out.eta
    literal = solve_to_tolerance(
        G, 3, "tsvd", 1e-2, metric="eta", weights="uniform", random_state=0, cluster_rtol=None
    )
    assert not literal.converged and literal.eta > 0.1
    for metric in ("lowrank", "subspace"):
        out = solve_to_tolerance(G, 3, "tsvd", 1e-8, metric=metric, random_state=0)
        assert out.converged and out.value <= 1e-8 and out.metric == metric


def test_reference_closes_a_cut_cluster_on_every_route():
    rng = np.random.default_rng(5)
    s = np.concatenate([[3.0, 2.0, 2.0, 2.0, 2.0], 0.5 ** np.arange(1, 26)])
    G = (np.linalg.qr(rng.standard_normal((60, 30)))[0] * s) @ np.linalg.qr(
        rng.standard_normal((40, 30))
    )[0].T
    for limit in (None, 0):  # dense LAPACK, then ARPACK
        plain = reference_svd(G, 2, max_dense_entries=limit)
        assert len(plain.s) == 2
        ref = reference_svd(G, 2, max_dense_entries=limit, cluster_rtol=1e-6)
        assert len(ref.s) == 5 and ref.info["rank"] == 2
        np.testing.assert_allclose(ref.s, s[:5], rtol=1e-12)
        assert reference_svd(G, 6, max_dense_entries=limit, cluster_rtol=1e-6).s.size == 6


def test_driver_lowrank_metric_matches_the_metric(problem, monkeypatch):
    G, ref = problem
    for method in ("rsvd", "asym_nystrom"):
        out = solve_to_tolerance(
            G, 5, method, 1e-3, reference=ref, metric="lowrank", random_state=0
        )
        assert out.converged and out.metric == "lowrank"
        assert out.value == out.lowrank <= 1e-3
        assert out.value == pytest.approx(lowrank_error(G, ref, out.result, rank=5), rel=1e-12)
        assert all(h["value"] == h["lowrank"] for h in out.history)
        assert np.isfinite(out.eta) and np.isnan(out.subspace)
    # eta stops, lowrank is recorded alongside; beyond the pass limit, products are used
    tracked = solve_to_tolerance(
        G, 5, "rsvd", 1e-6, reference=ref, random_state=0, track=("eta", "lowrank", "subspace")
    )
    monkeypatch.setattr("ksvd_bench.scoring.LOWRANK_PASS_MAX_ENTRIES", 0)
    products = solve_to_tolerance(
        G, 5, "rsvd", 1e-6, reference=ref, random_state=0, track=("lowrank",)
    )
    assert [h["eta"] for h in products.history] == [h["eta"] for h in tracked.history]
    for a, b in zip(products.history, tracked.history, strict=True):
        assert np.isfinite(b["subspace"]) and b["value"] == b["eta"]
        assert a["lowrank"] == pytest.approx(b["lowrank"], rel=1e-6)
    assert products.lowrank == pytest.approx(
        lowrank_error(G, ref, products.result, rank=5, method="products"), rel=1e-12
    )


def test_driver_subspace_metric(problem):
    G, ref = problem
    out = solve_to_tolerance(G, 5, "rsvd", 1e-4, reference=ref, metric="subspace", random_state=1)
    assert out.converged and out.value <= 1e-4
    assert out.value == max(subspace_error(ref, out.result))


def test_driver_names_bad_arguments(problem):
    G, ref = problem
    with pytest.raises(ValueError, match="random_state must be a non-negative"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, random_state=-1)
    with pytest.raises(TypeError, match="random_state"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, random_state="seed")
    with pytest.raises(TypeError, match="time_limit"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, time_limit="x")
    with pytest.raises(TypeError, match="time_limit"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, time_limit=True)
    with pytest.raises(ValueError, match="metric"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, metric="frobenius")
    with pytest.raises(ValueError, match="track"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, track=("eta", "speed"))
    with pytest.raises(ValueError, match="cluster_rtol"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=ref, cluster_rtol=2.0)
    with pytest.raises(TypeError, match="eps"):
        solve_to_tolerance(G, 5, "rsvd", "small", reference=ref)
    bad = SVDResult(U=ref.U, s=-ref.s, V=ref.V, info={})
    with pytest.raises(ValueError, match="non-negative"):
        solve_to_tolerance(G, 5, "rsvd", 1e-2, reference=bad)


def test_definition_key_is_stable_and_discriminating():
    A = sp.random(20, 20, density=0.2, random_state=0, format="csr")
    params = {"center": True, "bandwidth_factor": 1.0, "seed": 0, "dtype": np.float64}
    key = definition_key("cora", "sne", params, A)
    assert key == definition_key("cora", "sne", dict(reversed(params.items())), A.tocoo())
    assert len(key) == 64 and int(key, 16) >= 0
    others = {
        definition_key("cora", "rbf", params, A),
        definition_key("cora", "sne", {**params, "center": False}, A),
        definition_key("cora", "sne", {**params, "bandwidth_factor": 1.0 + 2**-52}, A),
        definition_key("cora", "sne", params, A * 2),
        definition_key("cora", "sne", params, A.toarray()),
        definition_key(("cora", "sne"), params, A),
        definition_key("cora", "sne", params, A, None),
    }
    assert key not in others and len(others) == 7
    with pytest.raises(TypeError, match="key parts"):
        definition_key(object())


def test_reference_cache_keyed_by_definition_survives_last_bit_changes(tmp_path):
    G = low_rank_plus_noise(50, 40, k=10, decay=0.7, noise=1e-3)
    definition = ("synthetic", {"N": 50, "M": 40, "seed": 0})
    first = reference_svd(G, 4, cache_dir=tmp_path, key=definition)
    # the same matrix computed another way: every entry one ulp off
    G_ulp = np.nextafter(G, np.inf)
    assert not np.array_equal(G, G_ulp)
    hit = reference_svd(G_ulp, 4, cache_dir=tmp_path, key=definition)
    assert hit.info["cached"] is True
    np.testing.assert_array_equal(hit.s, first.s)
    assert reference_svd(G_ulp, 4, cache_dir=tmp_path).info["cached"] is False  # bits differ
    # a key that names another matrix is caught, recomputed and overwritten
    other = low_rank_plus_noise(50, 40, k=10, decay=0.7, noise=1e-3, seed=9)
    with pytest.warns(RuntimeWarning, match="does not belong to G"):
        redo = reference_svd(other, 4, cache_dir=tmp_path, key=definition)
    assert redo.info["cached"] is False
    np.testing.assert_allclose(redo.s, np.linalg.svd(other, compute_uv=False)[:4], rtol=1e-12)
    assert reference_svd(other, 4, cache_dir=tmp_path, key=definition).info["cached"] is True
    # the driver passes its cache_key on (with its cluster_rtol: an entry of its own)
    out = solve_to_tolerance(
        other, 4, "tsvd", 1e-8, cache_dir=tmp_path, cache_key=definition, random_state=0
    )
    assert out.converged
    assert (
        reference_svd(other, 4, cache_dir=tmp_path, key=definition, cluster_rtol=CLUSTER_RTOL).info[
            "cached"
        ]
        is True
    )
