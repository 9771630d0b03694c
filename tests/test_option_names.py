"""One rule for every string option (issue 20 §6): names are case-insensitive, run and are
recorded under their canonical spelling, and an unknown name is a ValueError that lists the
choices. The rule lives in one helper, ``solvers.check_choice``."""

import warnings

import numpy as np
import pytest

import solvers
from ksvd_bench.kernels import KernelSource, kernel_matrix, kernel_source
from ksvd_bench.kernels.backends import check_device
from ksvd_bench.kernels.compat import resolve_compat
from solvers._source import DenseSource
from solvers.sampling import rpcholesky_svd, select_rows_cols


@pytest.fixture(scope="module")
def G():
    rng = np.random.default_rng(0)
    return rng.standard_normal((50, 5)) @ rng.standard_normal((5, 40))


@pytest.fixture(scope="module")
def points():
    rng = np.random.default_rng(1)
    return rng.standard_normal((40, 3)), rng.standard_normal((30, 3))


def test_check_choice():
    assert solvers.check_choice("x", "LU", ("auto", "QR", "LU", "none")) == "LU"
    assert solvers.check_choice("x", "lu", ("auto", "QR", "LU", "none")) == "LU"
    assert solvers.check_choice("x", "Qr", ("auto", "QR", "LU", "none")) == "QR"
    for bad in ("q r", "", None, 3, b"LU"):
        with pytest.raises(ValueError, match=r"x must be one of 'auto', 'QR', 'LU', 'none'; got"):
            solvers.check_choice("x", bad, ("auto", "QR", "LU", "none"))


@pytest.mark.parametrize("spelling", ["rsvd", "RSVD", "Rsvd"])
def test_method_any_case_runs_and_is_recorded_canonically(G, spelling):
    res = solvers.svd(G, 3, method=spelling, random_state=0)
    ref = solvers.svd(G, 3, method="rsvd", random_state=0)
    assert res.info["method"] == "rsvd"
    np.testing.assert_array_equal(res.s, ref.s)


def test_solver_options_any_case(G):
    s = np.linalg.svd(G, compute_uv=False)[:3]
    cases = [
        (
            "asym_nystrom",
            {"n_samples": 10, "sampling": "NORM", "core": "Stable"},
            {"sampling": "norm", "core": "stable"},
        ),
        (
            "asym_nystrom",
            {"n_samples": 10, "sampling": "ARP", "core": "PAPER"},
            {"sampling": "arp", "core": "paper"},
        ),
        (
            "sym_nystrom",
            {"n_samples": 10, "sampling": "Uniform", "core": "FULL"},
            {"sampling": "uniform", "core": "full"},
        ),
        ("tsvd", {"backend": "ARPACK"}, {}),
        ("rsvd", {"power_iteration_normalizer": "qr"}, {}),
    ]
    for method, opts, recorded in cases:
        canonical = {
            k: v.lower() if k != "power_iteration_normalizer" else v.upper()
            for k, v in opts.items()
            if isinstance(v, str)
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = solvers.svd(G, 3, method=method.upper(), random_state=0, **opts)
            ref = solvers.svd(G, 3, method=method, random_state=0, **{**opts, **canonical})
        np.testing.assert_array_equal(res.s, ref.s)  # the same run
        if recorded.get("core") != "paper":  # the paper's core truncates to rank 3 first
            np.testing.assert_allclose(res.s, s, rtol=1e-8)
        for key, value in recorded.items():
            assert res.info[key] == value


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda G: solvers.svd(G, 3, method="rsvdx"), "method must be one of 'tsvd', 'rsvd'"),
        (lambda G: solvers.svd(G, 3, method=None), "method must be one of"),
        (
            lambda G: solvers.asym_nystrom(G, 3, n_samples=9, sampling="nrm"),
            "sampling must be one of 'uniform', 'norm', 'arp', 'rpcholesky', 'aca'",
        ),
        (
            lambda G: solvers.asym_nystrom(G, 3, n_samples=9, core="stabel"),
            "core must be one of 'stable', 'paper'",
        ),
        (
            lambda G: solvers.tsvd(G, 3, backend="arpak"),
            "backend must be one of 'arpack', 'propack', 'lobpcg'",
        ),
    ],
)
def test_unknown_solver_names_list_the_choices(G, call, message):
    with pytest.raises(ValueError, match=message):
        call(G)


def test_sampler_names_any_case(G, points):
    sel = select_rows_cols(
        DenseSource(G), 6, 6, sampling="ACA", rng=np.random.default_rng(0), rank=3
    )
    assert sel.row_indices.size == 6
    with pytest.raises(ValueError, match="sampling must be one of"):
        select_rows_cols(
            DenseSource(G), 6, 6, sampling="acca", rng=np.random.default_rng(0), rank=3
        )
    X, Z = points
    src = KernelSource.from_points(X, Z, "sne", gamma=1.0)
    a = rpcholesky_svd(src, 2, 8, rng=np.random.default_rng(0), pivots="PLAIN")
    b = rpcholesky_svd(src, 2, 8, rng=np.random.default_rng(0), pivots="plain")
    np.testing.assert_array_equal(a[1], b[1])


def test_kernel_device_setup_compat_any_case(points):
    X, Z = points
    ref = KernelSource.from_points(X, Z, "sne", gamma=1.0)
    src = KernelSource.from_points(X, Z, "SNE", gamma=1.0, device="CPU", setup="LAZY")
    assert src.kernel == "sne" and src.device == "cpu"
    V = np.random.default_rng(0).standard_normal((Z.shape[0], 2))
    np.testing.assert_allclose(src.matmat(V), ref.matmat(V), rtol=1e-12)
    np.testing.assert_array_equal(
        kernel_matrix(X, Z, "Rbf", gamma=1.0), kernel_matrix(X, Z, "rbf", gamma=1.0)
    )
    assert check_device("Cuda") == "cuda"
    assert resolve_compat("PCA", (4, 3)) == "pca" and resolve_compat("AUTO", (3, 3)) is None
    A = np.random.default_rng(2).standard_normal((30, 30))
    assert kernel_source(A, "T", gamma=1.0).kernel == "t"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kernel": "gauss"}, "kernel must be one of 'sne', 'rbf', 't', 'linear', 'poly'"),
        ({"device": "tpu"}, "device must be one of 'cpu', 'cuda'"),
        ({"setup": "later"}, "setup must be one of 'eager', 'lazy'"),
    ],
)
def test_unknown_kernel_names_list_the_choices(points, kwargs, message):
    X, Z = points
    opts = {"kernel": "sne", "gamma": 1.0, **kwargs}
    kernel = opts.pop("kernel")
    with pytest.raises(ValueError, match=message):
        KernelSource.from_points(X, Z, kernel, **opts)
