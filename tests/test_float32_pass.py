"""float32 passes in float32 (issue 21, item 2) and the roofline measurement (item 1).

A float32 source runs its tiles in float32 (distances, exp, products) and adds the tiles in
float64: its products must stay within 1e-5 (relative, norm-wise) of the float64 source on
the same points, far from the origin too, for every kernel, and give the same bits on one
and two Numba threads.
"""

import argparse
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from ksvd_bench.kernels import KERNELS, KernelSource
from ksvd_bench.kernels.leaves import EXP_MIN_F32, exp_nonpos_f32

# two row tiles (256 rows) and several column tiles (tile_shape: 64 columns at M = 420)
N, M, D = 300, 420, 6
KW = {"gamma": 2.5, "degree": 3, "coef0": 0.5}
TOL = 1e-5


def _points(offset, seed=0, n=N, m=M, d=D):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + offset
    Z = 1.3 * rng.standard_normal((m, d)) + offset
    return X, Z


def _operands(n=N, m=M, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, 5)), rng.standard_normal((n, 4))


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _products(S, Omega, Psi):
    Y, W = S.sketch(Omega, Psi)
    return {"matmat": S.matmat(Omega), "rmatmat": S.rmatmat(Psi), "sketch_Y": Y, "sketch_W": W}


def _cases():
    for kernel in KERNELS:
        # linear and poly are not translated (that changes the kernel): a far offset makes
        # their centred matrix an ill-conditioned difference of huge terms in any precision;
        # so does softmax's (its rows all pick one column), whose offset of Z alone is
        # removed (tests/test_softmax.py)
        offsets = (0.0, 100.0, 1000.0) if kernel in ("sne", "rbf", "t") else (0.0,)
        for offset in offsets:
            for center in (False, True):
                yield kernel, offset, center


@pytest.mark.parametrize(("kernel", "offset", "center"), list(_cases()))
def test_float32_products_within_1e5_of_float64(kernel, offset, center):
    X, Z = _points(offset)
    Omega, Psi = _operands()
    ref = _products(KernelSource.from_points(X, Z, kernel, center=center, **KW), Omega, Psi)
    S32 = KernelSource.from_points(X, Z, kernel, center=center, dtype=np.float32, **KW)
    got = _products(S32, Omega, Psi)
    for name, R in ref.items():
        assert got[name].dtype == np.float64  # the tiles' sums are added in float64
        err = _rel(got[name], R)
        assert err <= TOL, (name, err)
        assert err > 0.0  # the float32 source really computed in float32


@pytest.mark.parametrize("layout", ["x_sparse", "z_sparse", "both_sparse"])
def test_float32_sparse_products_within_1e5(layout):
    X, Z = _points(0.0, seed=3)
    rng = np.random.default_rng(4)
    X[rng.random(X.shape) < 0.5] = 0.0
    Z[rng.random(Z.shape) < 0.5] = 0.0
    Xi = sp.csr_matrix(X) if layout in ("x_sparse", "both_sparse") else X
    Zi = sp.csr_matrix(Z) if layout in ("z_sparse", "both_sparse") else Z
    Omega, Psi = _operands()
    ref = _products(KernelSource.from_points(X, Z, "sne", center=True, **KW), Omega, Psi)
    S32 = KernelSource.from_points(Xi, Zi, "sne", center=True, dtype=np.float32, **KW)
    for name, G in _products(S32, Omega, Psi).items():
        assert _rel(G, ref[name]) <= TOL, name


def test_float32_blocks_match_float64():
    X, Z = _points(1000.0, seed=5)
    S64 = KernelSource.from_points(X, Z, "sne", center=True, **KW)
    S32 = KernelSource.from_points(X, Z, "sne", center=True, dtype=np.float32, **KW)
    B = S32.dense()
    assert B.dtype == np.float32
    assert _rel(B.astype(np.float64), S64.dense()) <= TOL


@pytest.mark.numba_threads(2)
@pytest.mark.parametrize("kernel", KERNELS)
def test_float32_passes_same_bits_on_one_and_two_threads(kernel, with_numba_threads):
    X, Z = _points(100.0, seed=7)
    Omega, Psi = _operands()

    def run():
        S = KernelSource.from_points(X, Z, kernel, center=True, dtype=np.float32, **KW)
        return {
            "shift": S._shift,
            "scale": S._scale,
            "rmean": S._rmean,
            "cmean": S._cmean,
            **_products(S, Omega, Psi),
            "block": S.dense(),
        }

    one = with_numba_threads(1, run)
    two = with_numba_threads(2, run)
    for name, value in one.items():
        np.testing.assert_array_equal(two[name], value, err_msg=name)


def test_exp_nonpos_f32_within_one_ulp():
    rng = np.random.default_rng(12)
    x = np.concatenate(
        [
            -rng.random(20000) * 100.0,
            -np.logspace(-30, 1.9, 2000),
            [0.0, -0.0, EXP_MIN_F32, -1e-30, -np.log(2) / 2],
        ]
    ).astype(np.float32)
    y = x.copy()
    exp_nonpos_f32(y, np.float32(0.0), np.float32(1.0))
    ref = np.exp(x.astype(np.float64))
    normal = x >= EXP_MIN_F32
    ulps = np.abs(y[normal] - ref[normal]) / np.spacing(ref[normal].astype(np.float32))
    assert ulps.max() <= 1.0
    np.testing.assert_array_equal(y[~normal], 0.0)  # subnormal results flushed to zero
    assert np.all(ref[~normal] < np.exp(np.float64(EXP_MIN_F32)))


# ----------------------------------------------------------------------- the roofline
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["setup", "matmat", "rmatmat", "sketch"])
def test_blas_work_does_the_passes_products(name, dtype, monkeypatch):
    from ksvd_bench import roofline

    monkeypatch.setattr(roofline, "BAND_BYTES", 40 * 60 * np.dtype(dtype).itemsize)  # bands
    rng = np.random.default_rng(0)
    X, Z, Omega, Psi = (
        rng.standard_normal(shape).astype(dtype) for shape in ((97, 5), (60, 5), (60, 3), (97, 2))
    )
    Y, W = roofline.blas_work(name, X, Z, Omega=Omega, Psi=Psi)
    C = X.astype(np.float64) @ Z.T.astype(np.float64)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    if name in ("matmat", "sketch"):
        np.testing.assert_allclose(Y, C @ Omega, rtol=rtol, atol=rtol * 10)
    else:
        assert Y is None
    if name in ("rmatmat", "sketch"):
        np.testing.assert_allclose(W, C.T @ Psi, rtol=rtol, atol=rtol * 10)
    else:
        assert W is None
    assert roofline.blas_flops(name, 97, 60, 5, 3) == 2 * 97 * 60 * (
        5 + 3 * ({"setup": 0, "matmat": 1, "rmatmat": 1, "sketch": 2}[name])
    )


def test_roofline_command_prints_rates_and_ratios(tmp_path, capsys):
    from ksvd_bench import roofline, roofline_cli

    parser = argparse.ArgumentParser()
    roofline_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(
        [
            "roofline",
            "--n",
            "150",
            "--dim",
            "8",
            "--cols",
            "4",
            "--repeats",
            "2",
            "--threads",
            "1",
            "--out",
            str(tmp_path),
        ]
    )
    args.check(args, parser)
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "BLAS GFLOP/s" in out and "load" in out
    record = json.loads((tmp_path / "roofline.json").read_text())
    rows = record["rows"]
    assert [(r["dtype"], r["pass"]) for r in rows] == [
        (t, p) for t in ("float32", "float64") for p in roofline.PASSES
    ]
    for r in rows:
        assert r["threads"] == 1 and len(r["ratios"]) == 2
        assert r["ratio"] > 0 and r["blas_gflops"] > 0
        assert r["pass_ns_per_entry"] == pytest.approx(1e9 * r["pass_s"] / 150**2)
    assert record["machine"]["blas"] and len(record["machine"]["load_1min"]) == 2


def test_roofline_refuses_bad_settings():
    from ksvd_bench.roofline import roofline

    with pytest.raises(ValueError, match="dtypes"):
        roofline(50, dtypes=("float16",))
    with pytest.raises(ValueError, match="n must be"):
        roofline(0)
    with pytest.raises(ValueError, match="threads"):
        roofline(50, threads=(10**6,))
    with pytest.raises(ValueError, match="settle must be"):
        roofline(50, settle=-0.1)


def test_blas_ns_per_entry_times_a_slab_of_rows(monkeypatch):
    from ksvd_bench import roofline

    shapes = []
    real = roofline.blas_work

    def spy(name, X, Z, **kw):
        shapes.append((name, X.shape, Z.shape, X.dtype, kw["Omega"].shape))
        return real(name, X, Z, **kw)

    monkeypatch.setattr(roofline, "blas_work", spy)
    ns = roofline.blas_ns_per_entry(10**6, 500, 7, 3, "float32", repeats=2, max_entries=20000)
    assert ns > 0
    assert shapes == [("matmat", (40, 7), (500, 7), np.float32, (500, 3))] * 3


def test_entry_rates():
    from ksvd_bench.roofline import entry_rates

    assert entry_rates(2.0, 4 * 10**8, 2.5) == {
        "ns_per_entry": 5.0,
        "blas_ns_per_entry": 2.5,
        "blas_ratio": 2.0,
    }
    assert entry_rates(2.0, 4 * 10**8)["blas_ratio"] is None
    assert entry_rates(2.0, None, 2.5)["ns_per_entry"] is None


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_scale_cells_report_ns_per_entry_and_blas_ratio(dtype):
    from ksvd_bench.race.scale.cells import run_cell
    from ksvd_bench.race.scale.problems import ProblemSpec

    row = run_cell(ProblemSpec("b", 300, 300, 3, 0, dtype=dtype), "rsvd", warm_up=False)
    assert row["entries"] == (row["passes"] + row["setup_passes"]) * 300 * 300
    assert row["ns_per_entry"] == pytest.approx(1e9 * row["seconds"] / row["entries"])
    assert row["blas_ns_per_entry"] > 0
    assert row["blas_ratio"] == pytest.approx(row["ns_per_entry"] / row["blas_ns_per_entry"])


# ----------------------------------------------------------------------- idle BLAS threads
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 28),
        ("", 28),
        ("junk", 28),
        ("0", 28),
        ("-3", 28),
        ("2", 4),
        ("20", 20),
        ("28", 28),
        ("31", 30),
    ],
)
def test_openblas_spin_reads_the_variable_as_openblas_does(value, expected):
    from ksvd_bench.threads import openblas_spin

    env = {} if value is None else {"OPENBLAS_THREAD_TIMEOUT": value}
    assert openblas_spin(env) == expected


def test_quiet_blas_spin_sets_a_default_and_keeps_the_users():
    from ksvd_bench.threads import BLAS_SPIN, quiet_blas_spin

    env = {}
    assert quiet_blas_spin(env) == BLAS_SPIN < 28
    assert env == {"OPENBLAS_THREAD_TIMEOUT": str(BLAS_SPIN)}
    env = {"OPENBLAS_THREAD_TIMEOUT": "26"}
    assert quiet_blas_spin(env) == 26 and env["OPENBLAS_THREAD_TIMEOUT"] == "26"


def test_the_command_line_quiets_blas_before_numpy_is_loaded():
    # OpenBLAS reads OPENBLAS_THREAD_TIMEOUT once, when numpy loads it: main() must set it
    # before anything imports numpy, and its child processes inherit it
    code = (
        "import os, sys\n"
        "from ksvd_bench.cli import main\n"
        "assert 'numpy' not in sys.modules, 'numpy was loaded before main()'\n"
        "try:\n"
        "    main(['roofline', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(os.environ['OPENBLAS_THREAD_TIMEOUT'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    from ksvd_bench.threads import BLAS_SPIN

    assert out.strip().splitlines()[-1] == str(BLAS_SPIN)
    env["OPENBLAS_THREAD_TIMEOUT"] = "24"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    assert out.strip().splitlines()[-1] == "24"


def test_time_against_blas_pauses_before_every_timed_call():
    import time

    from ksvd_bench.roofline import time_against_blas

    events = []

    def fn(tag):
        def call():
            events.append((tag, time.perf_counter()))
            time.sleep(0.001)
            events.append((tag + " end", time.perf_counter()))

        return call

    out = time_against_blas({"p": (fn("pass"), fn("blas"))}, repeats=2, settle=0.05)
    assert [tag for tag, _ in events[::2]] == ["blas", "pass"] * 2  # baseline first
    starts = [t for tag, t in events if not tag.endswith("end")]
    ends = [t for tag, t in events if tag.endswith("end")]
    gaps = [s - e for s, e in zip(starts[1:], ends[:-1], strict=True)]
    assert min(gaps) >= 0.05
    assert out["p"]["pass_s"] < 0.05  # the pause is not timed


@pytest.mark.numba_threads(2)
def test_solver_threads_warns_when_blas_workers_spin_at_several_threads(monkeypatch):
    from ksvd_bench import threads as blas_threads

    monkeypatch.setattr(blas_threads, "_spinning_blas", lambda: True)
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "28")
    with pytest.warns(RuntimeWarning, match="OPENBLAS_THREAD_TIMEOUT=20"):
        with blas_threads.solver_threads(2) as used:
            assert used == 2
    for threads, spin, spinning in ((2, "20", True), (1, "28", True), (2, "28", False)):
        monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", spin)
        monkeypatch.setattr(blas_threads, "_spinning_blas", lambda s=spinning: s)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with blas_threads.solver_threads(threads):
                pass


def test_the_record_names_the_blas_spin(monkeypatch):
    from ksvd_bench.report import machine_info

    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "20")
    assert machine_info()["openblas_thread_timeout"] == "20"
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT")
    assert machine_info()["openblas_thread_timeout"] is None
