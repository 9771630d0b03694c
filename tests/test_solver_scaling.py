"""Answers of extreme magnitude: a dense or sparse G near 2^+-300 is solved as an exact copy
near 1 (``check_args``), so every method gives the answer it gives on G, scaled.

Before, G at 1e-300 had its products with G^T G and its certificates' squared norms underflow:
error estimates of 0 against a true 7.07, certificates whose upper bound on ||D|| read 0 and
vouched for a flat spectrum, and at 1e150-1e300 overflow errors ("A has a NaN entry",
OverflowError) from finite input.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import solvers

CONFIGS = [
    ("tsvd", {}),
    ("rsvd", {}),
    ("rsvd", {"n_iter": 0}),
    ("block_krylov", {}),
    ("generalized_nystrom", {}),
    ("sym_nystrom", {"n_samples": 30}),
    ("sym_nystrom", {"n_samples": 30, "sampling": "norm"}),
    ("sym_nystrom", {"n_samples": 30, "orthogonalize": False}),
    ("asym_nystrom", {"n_samples": 30}),
    ("asym_nystrom", {"n_samples": 30, "sampling": "norm"}),
    ("asym_nystrom", {"n_samples": 30, "sampling": "arp"}),
    ("asym_nystrom", {"n_samples": 30, "sampling": "aca"}),
    ("asym_nystrom", {"n_samples": 30, "core": "paper"}),
]


def _matrix(sparse):
    rng = np.random.default_rng(0)
    G = rng.normal(size=(120, 80)) @ np.diag(0.8 ** np.arange(80)) @ rng.normal(size=(80, 80))
    if sparse:
        G[np.abs(G) < 0.5 * np.abs(G).std()] = 0.0
    G /= 2 * np.abs(G).max() / 1.5  # largest entry 0.75: exponent 0, never rescaled
    return sp.csr_matrix(G) if sparse else G


def _leaves(info, prefix=""):
    """Every float (or float array) in ``info``, by its path; wall times left out."""
    out = {}
    for key, value in info.items():
        if isinstance(value, dict):
            out.update(_leaves(value, prefix + key + "."))
        elif key != "seconds" and isinstance(value, (float, np.floating, np.ndarray)):
            if not isinstance(value, np.ndarray) or value.dtype.kind == "f":
                out[prefix + key] = np.asarray(value, dtype=np.float64)
    return out


def _solve(G, method, options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return solvers.svd(G, 5, method=method, random_state=0, **options)


def _same(a, b):
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize(
    "method,options",
    CONFIGS,
    ids=[f"{m}-{'-'.join(map(str, o.values())) or 'default'}" for m, o in CONFIGS],
)
def test_extreme_magnitudes_give_the_scaled_answer(method, options, sparse):
    G = _matrix(sparse)
    base, eight = _solve(G, method, options), _solve(G * 8.0, method, options)
    base_info, eight_info = _leaves(base.info), _leaves(eight.info)
    for e in (300, -300, 1000, -1000):
        f = 2.0**e
        res = _solve(G * f, method, options)
        np.testing.assert_array_equal(res.s, base.s * f)
        np.testing.assert_array_equal(res.U, base.U)
        np.testing.assert_array_equal(res.V, base.V)
        assert res.info["reliable"] == base.info["reliable"]
        info = _leaves(res.info)
        assert info.keys() == base_info.keys()
        # Each number is classed by how it moves from G to 8 G (within the safe range, where
        # nothing is rescaled): unchanged (dimensionless), 8x (a magnitude), 64x (squared).
        for key, value in base_info.items():
            if method == "tsvd" and key == "scale":  # the power of two tsvd applied itself
                assert info[key] * f == 1.0 and value == 1.0
                continue
            if _same(eight_info[key], value):
                expected = value
            elif _same(eight_info[key], value * 8):
                expected = value * f
            elif _same(eight_info[key], value * 64):
                with np.errstate(over="ignore"):  # fro2 at 2^1000: inf, as it is
                    expected = value * f * f
            else:
                pytest.fail(f"info[{key!r}] does not scale with G: {value} -> {eight_info[key]}")
            assert _same(info[key], expected), (e, key, info[key], expected)


LAZY = [
    ("rsvd", {}),
    ("block_krylov", {}),
    ("generalized_nystrom", {}),
    ("sym_nystrom", {"n_samples": 30}),
    ("asym_nystrom", {"n_samples": 30}),
]


# at 2^-1000 numpy's own "invalid value" warnings come with the underflow provoked here (the
# estimate they would feed is dropped, as asserted below)
@pytest.mark.filterwarnings("ignore:invalid value encountered in:RuntimeWarning")
@pytest.mark.parametrize("method,options", LAZY, ids=[m for m, _ in LAZY])
def test_a_lazy_source_of_extreme_magnitude_is_not_vouched_for(method, options):
    """A LinearOperator is not rescaled (its size is unknown until read): at 2^-1000 its
    checks' squares underflow (rsvd's leave-one-out estimate read 0 against a true 7.07), so
    the answer is unreliable and carries no error estimate; at 1 the same answer passes."""
    from scipy.sparse.linalg import aslinearoperator

    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.normal(size=(120, 40)))[0]
    V = np.linalg.qr(rng.normal(size=(80, 40)))[0]
    G = (U * 0.5 ** np.arange(40)) @ V.T  # well separated: certified at unit scale
    unit = solvers.svd(aslinearoperator(G), 5, method=method, random_state=0, **options)
    assert unit.info["reliable"] is True
    with pytest.warns(RuntimeWarning, match=r"outside \[2\^-200, 2\^200\].*cannot be certified"):
        tiny = solvers.svd(
            aslinearoperator(G * 2.0**-1000), 5, method=method, random_state=0, **options
        )
    assert tiny.info["reliable"] is False
    assert "error_estimate" not in tiny.info
