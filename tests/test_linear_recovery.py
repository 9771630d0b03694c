"""The design card's property test: a linear-kernel KSVD is the SVD of the data matrix.

With the linear kernel, the pseudo-inverse compatibility map and no centring, the KSVD kernel
matrix of ``A`` is ``A`` itself, so every solver at full effort must return ``A``'s singular
values and vectors (up to sign).
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import solvers
from ksvd_bench.kernels import ksvd_kernel
from ksvd_bench.metrics import eta, subspace_error


def full_effort_options(method, N, M, rank):
    if method == "tsvd":
        return {"tol": 0.0}
    if method == "rsvd":
        return {"n_oversamples": min(N, M) - rank, "n_iter": 4}
    if method == "block_krylov":  # blocks of `rank` vectors until the basis fills R^min(N, M)
        return {"n_oversamples": 0, "n_iter": -(-min(N, M) // rank)}
    if method == "generalized_nystrom":
        return {"n_oversamples": min(N, M) - rank}
    if method == "sym_nystrom":
        return {"n_samples": max(N, M)}
    return {"n_samples": M, "n_rows": N}


@settings(deadline=None)
@given(
    N=st.integers(3, 14),
    M=st.integers(3, 14),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
@pytest.mark.parametrize("method", solvers.METHODS)
def test_linear_kernel_gives_svd_of_A(method, N, M, seed, data):
    rank = data.draw(st.integers(1, min(N, M) - 1), label="rank")
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((N, M))
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    # Vectors are determined only up to the gap around them; keep well-posed cases
    # (Gaussian matrices rarely fail this) and well-conditioned ones for the Nystrom
    # methods, which invert a sampled block.
    gaps = np.abs(np.diff(s[: rank + 1]))
    assume(gaps.min() > 1e-2 * s[0])
    if method in ("sym_nystrom", "asym_nystrom"):
        assume(s[-1] > 1e-3 * s[0])

    G = ksvd_kernel(A, "linear", compat="pinv", center=False)
    np.testing.assert_allclose(G, A, rtol=1e-10, atol=1e-12 * np.abs(A).max())

    res = solvers.svd(
        G, rank, method=method, random_state=seed, **full_effort_options(method, N, M, rank)
    )
    np.testing.assert_allclose(res.s, s[:rank], rtol=1e-7, atol=1e-9 * s[0])
    ref = type(res)(U=U[:, :rank], s=s[:rank], V=Vt[:rank].T, info={})
    assert eta(ref, res, weights="uniform") < 1e-9
    assert max(subspace_error(ref, res)) < 1e-6
    # "Up to sign" means one sign per triplet, shared by u_i and v_i.
    signs = np.sign(np.sum(res.U * ref.U, axis=0))
    np.testing.assert_allclose(res.U * signs, ref.U, atol=1e-6)
    np.testing.assert_allclose(res.V * signs, ref.V, atol=1e-6)
