"""Degenerate problems are refused, never crowned; extreme magnitudes get a clear answer
(issue 33, sections 1 and 2: cases 23, 24, 91, 95, 102, 104, 109 and eps >= 1)."""

import json
import math
import warnings

import numpy as np
import pytest

import solvers
from ksvd_bench.cli import main
from ksvd_bench.datasets import DatasetError
from ksvd_bench.driver import reference_svd, solve_to_tolerance
from ksvd_bench.kernels import ksvd_kernel, paper_gamma
from ksvd_bench.metrics import lowrank_error, residual_estimate, triplet_residual
from ksvd_bench.race.compare import run as compare_run
from ksvd_bench.race.compare import run_compare
from ksvd_bench.race.problems import problem_from_data, problem_from_file, problem_from_points
from ksvd_bench.scoring import exact_fro2

QUIET = ["--seeds", "1", "--no-residual", "--no-progress"]


def _compare(tmp_path, *flags):
    return main(["compare", *flags, *QUIET, "--out", str(tmp_path / "out")])


def _refused(tmp_path, capsys, *flags):
    """The usage error (exit 2) of ``compare`` with ``flags``: its stderr."""
    with pytest.raises(SystemExit) as info:
        _compare(tmp_path, *flags)
    assert info.value.code == 2
    return capsys.readouterr().err


# ------------------------------------------------------- 1. degenerate problems are refused


def test_case_91_constant_data_is_refused_before_racing(tmp_path, capsys):
    """``compare --data ones.npy --gamma 1``: G is exactly 0 after centring."""
    np.save(tmp_path / "ones.npy", np.ones((30, 30)))
    err = _refused(tmp_path, capsys, "--data", str(tmp_path / "ones.npy"), "--gamma", "1")
    assert "problem 'ones'" in err
    assert "zero to rounding after centring (||G||_F = exactly 0)" in err
    assert not (tmp_path / "out" / "compare.json").exists()  # refused before any race


def test_case_95_one_column_csv_is_refused_and_the_fix_is_named(tmp_path, capsys):
    path = tmp_path / "column.csv"
    np.savetxt(path, np.random.default_rng(0).normal(size=(50, 1)), delimiter=",")
    err = _refused(tmp_path, capsys, "--data", str(path), "--rank", "1")
    assert "G (50x1) is zero to rounding after centring" in err
    assert "one column is its own mean" in err and "--no-center" in err
    # uncentred, the same file is a problem (a column of ones: SNE rows sum to 1)
    problem = problem_from_file(path, kind="data", center=False)
    np.testing.assert_allclose(problem.G, 1.0, rtol=1e-15)


def test_case_104_data_far_from_the_origin_under_pca_is_refused_with_the_translation():
    """A 300 x 20 table shifted by 1e8: the uncentred PCA map sends every row's kernel mass
    to one column, and centring leaves rounding (s_1 about 2e-14); translated to its mean
    the data give the G of the unshifted table."""
    A = np.random.default_rng(0).normal(size=(300, 20))
    with pytest.raises(DatasetError) as info:
        problem_from_data(A + 1e8, name="shifted", compat="pca")
    message = str(info.value)
    assert "problem 'shifted': G (300x20) is zero to rounding after centring" in message
    assert "far from the origin (mean 1e+08" in message
    assert "'pca' map" in message and "translate the data to their mean first" in message
    # the norm the message promises is that of the translated data's G
    shifted = A + 1e8
    translated = ksvd_kernel(
        shifted - shifted.mean(), "sne", gamma=paper_gamma(shifted), compat="pca"
    )
    assert f"gives ||G||_F = {np.linalg.norm(translated):.3g})" in message
    assert np.linalg.svd(translated, compute_uv=False)[0] > 1.0  # a real problem
    # the direct formula agrees that the shifted G is zero to rounding, not a bug of the check
    G = ksvd_kernel(shifted, "sne", gamma=paper_gamma(shifted), compat="pca")
    K = ksvd_kernel(shifted, "sne", gamma=paper_gamma(shifted), compat="pca", center=False)
    assert np.linalg.norm(G) <= max(G.shape) * np.finfo(float).eps * np.linalg.norm(K)


def test_points_whose_every_kernel_value_underflows_are_refused():
    X = np.zeros((20, 2))
    with pytest.raises(DatasetError, match=r"G \(20x20\) is zero \(every kernel value"):
        problem_from_points(X, X + 1e3, name="apart", kernel="rbf", gamma=1.0)


def test_a_zero_kernel_matrix_is_refused(tmp_path, capsys):
    np.save(tmp_path / "nothing.npy", np.zeros((20, 15)))
    err = _refused(tmp_path, capsys, "--matrix", str(tmp_path / "nothing.npy"), "--rank", "2")
    assert "the kernel matrix G (20x15) is zero" in err


def test_a_well_posed_problem_keeps_its_kernel_bit_for_bit():
    """The check measures ||K|| between the build and the centring: G is unchanged."""
    A = np.random.default_rng(1).random((40, 12))
    problem = problem_from_data(A, name="table", compat="pca")
    expected = ksvd_kernel(A, "sne", gamma=problem.gamma, compat="pca", center=True)
    assert np.array_equal(problem.G, expected)


@pytest.mark.parametrize("eps", ["1", "2.5"])
def test_eps_of_one_or_more_is_refused_by_the_command(tmp_path, capsys, eps):
    np.save(tmp_path / "table.npy", np.random.default_rng(0).random((20, 20)))
    err = _refused(tmp_path, capsys, "--data", str(tmp_path / "table.npy"), "--eps", "0.1", eps)
    assert "argument --eps: eps must be below 1" in err and "every answer is right" in err


def test_eps_of_one_or_more_is_refused_by_run_compare_before_any_work(monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("the problem was built before eps was checked")

    monkeypatch.setattr(compare_run, "build_problem", no_work)
    with pytest.raises(ValueError, match="eps must be below 1, got 1"):
        run_compare("synthetic", eps=(0.1, 1.0), progress=False)


# ------------------------------------------------------- 2. extreme magnitudes


def _table(seed=0, shape=(30, 30)):
    return np.random.default_rng(seed).random(shape)


@pytest.mark.parametrize("factor", [1e300, 1e-300, 2.0**-1060])
def test_cases_23_and_24_the_bandwidth_rule_counts_in_units_of_the_largest_entry(factor):
    """x 1e300 overflowed ``var(A)`` (gamma inf), x 1e-300 underflowed it ("zero variance");
    a subnormal A overflowed the power of two itself."""
    A = _table()
    rtol = 1e-12 if factor > 1e-307 else 1e-6  # subnormal entries keep fewer digits
    assert math.isclose(paper_gamma(A * factor), paper_gamma(A) * factor, rel_tol=rtol)


def test_a_bandwidth_beyond_the_float_range_names_the_flag(tmp_path, capsys):
    A = np.full((2, 100), 1.7e308)
    A[0] *= -1
    with pytest.raises(ValueError, match="exceeds the float64 range"):
        paper_gamma(A)
    np.save(tmp_path / "edge.npy", A)
    err = _refused(tmp_path, capsys, "--data", str(tmp_path / "edge.npy"), "--rank", "1")
    assert "problem 'edge'" in err and "pass --gamma" in err


@pytest.mark.parametrize("factor", [1e300, 1e-300])
def test_cases_23_and_24_data_of_extreme_magnitude_give_the_kernel_of_the_scaled_data(
    tmp_path, factor
):
    A = _table()
    np.save(tmp_path / "scaled.npy", A * factor)
    problem = problem_from_file(tmp_path / "scaled.npy", kind="data")
    base = problem_from_file(_save(tmp_path / "base.npy", A), kind="data")
    assert math.isclose(problem.gamma, base.gamma * factor, rel_tol=1e-12)
    np.testing.assert_allclose(problem.G, base.G, rtol=0, atol=1e-14)


def _save(path, array):
    np.save(path, array)
    return path


def test_case_102_points_of_extreme_magnitude_race(tmp_path):
    X = np.random.default_rng(0).normal(size=(40, 3))
    huge = problem_from_points(X * 1e300, name="huge")
    base = problem_from_points(X, name="base")
    assert math.isclose(huge.gamma, base.gamma * 1e300, rel_tol=1e-12)
    np.testing.assert_allclose(huge.G, base.G, rtol=0, atol=1e-14)
    _save(tmp_path / "X_huge.npy", X * 1e300)
    flags = ["--points", str(tmp_path / "X_huge.npy"), "--rank", "2", "--eps", "0.1"]
    flags += ["--methods", "tsvd", "--measures", "uniform"]
    assert _compare(tmp_path, *flags) == 0


def _huge_and_base(unit=2.0**996, shape=(40, 30), rank=3):
    """A matrix with a gap after its 3rd value (the solvers certify it), and a copy times
    ``unit`` (a power of two): exact, so no measure may move."""
    rng = np.random.default_rng(2)
    U = np.linalg.qr(rng.normal(size=(shape[0], shape[1])))[0]
    V = np.linalg.qr(rng.normal(size=(shape[1], shape[1])))[0]
    G = (U * np.r_[4.0, 3.0, 2.0, 0.5 ** np.arange(1, shape[1] - 2)]) @ V.T
    return G, G * unit, unit, rank


@pytest.mark.parametrize("unit", [2.0**996, 2.0**-996])
def test_case_109_measures_of_a_huge_matrix_equal_those_of_the_matrix_near_1(unit):
    G, H, unit, rank = _huge_and_base(unit)
    ref_g, ref_h = reference_svd(G, rank + 2), reference_svd(H, rank + 2)
    ans = solvers.svd(G, rank, method="rsvd", n_oversamples=2, random_state=0)
    ans_h = solvers.SVDResult(ans.U, ans.s * unit, ans.V, ans.info)
    for method in ("pass", "products"):
        assert math.isclose(
            lowrank_error(H, ref_h, ans_h, rank=rank, method=method),
            lowrank_error(G, ref_g, ans, rank=rank, method=method),
            # LAPACK scales a matrix of huge norm itself, so the two references differ by
            # rounding; this answer is exact, so both errors are that rounding (~1e-16)
            rel_tol=1e-9,
            abs_tol=1e-13,
        )
    assert math.isclose(
        triplet_residual(H, ans_h, reference=ref_h),
        triplet_residual(G, ans, reference=ref_g),
        rel_tol=1e-12,
    )
    for weights in ("uniform", "singular_values"):
        assert math.isclose(
            residual_estimate(H, ans_h, weights=weights, random_state=0),
            residual_estimate(G, ans, weights=weights, random_state=0)
            * (
                unit if weights == "singular_values" else 1.0  # the paper's: absolute
            ),
            rel_tol=1e-9,
        )
    assert exact_fro2(solvers.as_source(H)) is None  # unrepresentable: unknown, no error


@pytest.mark.parametrize("unit", [2.0**996, 2.0**-996])
@pytest.mark.parametrize("stop", ["reference", "estimate"])
def test_case_109_the_driver_scores_a_huge_matrix_as_the_matrix_near_1(stop, unit):
    G, H, unit, rank = _huge_and_base(unit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = [
            solve_to_tolerance(
                M,
                rank,
                "rsvd",
                0.05 if stop == "reference" else 0.2,  # ||G - G_3||_F is 0.11 ||G||_F
                weights="uniform" if stop == "reference" else None,
                stop=stop,
                track=("eta", "lowrank") if stop == "reference" else ("eta",),
                reference=reference_svd(M, rank + 2) if stop == "reference" else None,
                random_state=0,
            )
            for M in (G, H)
        ]
    assert not [w for w in caught if "flow" in str(w.message)]  # no over- or underflow
    keys = ("eta", "lowrank", "sv_error", "triplet_residual", "relative_error_estimate")
    keys += ("residual_estimate",)
    for a, b in zip(runs[0].history, runs[1].history, strict=True):
        assert a["status"] == b["status"]
        for key in keys:
            # without a reference the weights are the paper's: the values, absolute
            x = a[key] * (unit if key == "residual_estimate" and stop == "estimate" else 1)
            assert (math.isnan(x) and math.isnan(b[key])) or math.isclose(
                x, b[key], rel_tol=1e-8, abs_tol=1e-15
            ), key
    assert runs[0].converged and runs[1].converged


def test_case_109_compare_races_a_huge_kernel_matrix(tmp_path, capsys):
    G, H, _, _ = _huge_and_base()
    rows, bounds = {}, {}
    for name, M in (("base", G), ("huge", H)):
        out = tmp_path / name
        flags = ["--matrix", str(_save(tmp_path / f"{name}.npy", M)), "--rank", "3"]
        flags += ["--eps", "0.1", "--methods", "tsvd", "rsvd", "--measures", "uniform"]
        flags += ["lowrank", *QUIET, "--out", str(out)]
        assert main(["compare", *flags]) == 0
        assert "overflow" not in capsys.readouterr().err  # no norm squared beyond the range
        record = json.loads((out / "compare.json").read_text())
        rows[name] = record["rows"]
        bounds[name] = record["meta"]["reference"][name]["value_max"]["lowrank"]
    # the most any answer can score: ||G||_F / ||G - G_r||_F - 1, in units of ||G||_F
    assert math.isclose(bounds["huge"], bounds["base"], rel_tol=1e-12)
    for a, b in zip(rows["base"], rows["huge"], strict=True):
        assert (a["method"], a["measure"], a["status"]) == (b["method"], b["measure"], b["status"])
        for key in ("value", "sv_error", "triplet_residual"):
            assert math.isclose(a[key], b[key], rel_tol=1e-8, abs_tol=1e-14), key
