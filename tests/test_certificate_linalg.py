"""The certificate's small dense kernels against numpy: orthonormal bases and top singular
values from Gram matrices (``solvers/_certificate.py``)."""

import numpy as np
import pytest

from solvers._certificate import _orth_against, _top_sv


def _q(n, k, seed):
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((n, k)))[0]


@pytest.mark.parametrize("scale", [1.0, 1e-150, 1e150])
def test_orth_against_is_orthonormal_and_spans_the_deflated_part(scale):
    rng = np.random.default_rng(0)
    n = 3000
    Q = _q(n, 7, 1)
    tiny = rng.standard_normal((n, 1)) * 1e-9  # below drop = 1e-6 of the largest: dropped
    X = scale * np.hstack(
        [
            rng.standard_normal((n, 4)),
            Q[:, :2] @ rng.standard_normal((2, 3)),
            1e-3 * rng.standard_normal((n, 1)),
            tiny,
        ]
    )
    B = _orth_against(Q, X)
    assert B.shape == (n, 5)  # 4 random + the 1e-3 one; the 3 inside span(Q) and 1e-9 go
    assert np.abs(B.T @ B - np.eye(5)).max() < 1e-13
    assert np.abs(Q.T @ B).max() < 1e-13
    # B spans the deflated kept directions: projecting them onto B loses nothing
    D = X[:, [0, 1, 2, 3, 7]] / scale
    D = D - Q @ (Q.T @ D)
    assert np.linalg.norm(D - B @ (B.T @ D)) < 1e-10 * np.linalg.norm(D)


def test_orth_against_of_nothing_new():
    Q = _q(200, 5, 2)
    # inside span(Q): what is left is rounding noise, dropped (rescaled to unit columns it
    # would not be orthogonal to Q where Q fills the space: a 2 x 2 full-rank answer got
    # a lower bound 1.4 sigma_1 from such a block)
    assert _orth_against(Q, Q[:, :3]).shape == (200, 0)
    full = _q(4, 4, 2)
    assert _orth_against(full[:, :2], full[:, 2:] + full[:, :2]).shape == (4, 2)
    assert _orth_against(full, np.ones((4, 2))).shape == (4, 0)
    # a block with a new part keeps it, orthonormal and orthogonal to Q
    X = Q[:, :3] + 1e-3 * np.random.default_rng(0).standard_normal((200, 3))
    B = _orth_against(Q, X)
    assert B.shape == (200, 3)
    assert np.abs(B.T @ B - np.eye(3)).max() < 1e-13
    assert np.abs(Q.T @ B).max() < 1e-13
    assert _orth_against(Q, np.zeros((200, 2))).shape == (200, 0)
    assert _orth_against(Q, np.full((200, 2), np.nan)).shape == (200, 0)


@pytest.mark.parametrize("shape", [(4000, 30), (30, 4000), (50, 50)])
@pytest.mark.parametrize("scale", [1.0, 1e-200, 1e200])
def test_top_sv_matches_numpy(shape, scale):
    X = np.random.default_rng(3).standard_normal(shape) * np.logspace(0, -8, shape[1])
    want = np.linalg.svd(X, compute_uv=False)[0] * scale
    assert _top_sv(X * scale) == pytest.approx(want, rel=1e-12)


def test_top_sv_unknown_and_empty():
    assert np.isnan(_top_sv(np.array([[1.0, np.inf]])))
    assert _top_sv(np.zeros((0, 3))) == 0.0
    assert _top_sv(np.zeros((5, 3))) == 0.0
