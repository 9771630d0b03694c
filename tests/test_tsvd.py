"""Tests of ``solvers.tsvd`` beyond the shared contract: a source's own exact path, zero, tiny
and huge matrices, and PROPACK on float32 operators."""

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

import solvers
from solvers import DenseSource

BACKENDS = ("arpack", "propack", "lobpcg")


def assert_orthonormal(X, atol):
    np.testing.assert_allclose(X.T @ X, np.eye(X.shape[1]), rtol=0, atol=atol)


def dense(B):
    return B


def sparse(B):
    return sp.csr_matrix(B)


def operator(B):
    return aslinearoperator(B)


@pytest.fixture(scope="module")
def B():
    return np.random.default_rng(0).standard_normal((30, 20))


# ---------------------------------------------------------------------------------------------
# zero, tiny and huge matrices
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("wrap", [dense, sparse, operator])
def test_zero_matrix_gives_zero_values_and_orthonormal_vectors(wrap, backend):
    # ARPACK used to stop with "Starting vector is zero"; PROPACK gave zero vectors.
    res = solvers.svd(wrap(np.zeros((30, 20))), 2, method="tsvd", backend=backend, random_state=0)
    np.testing.assert_array_equal(res.s, np.zeros(2))
    assert res.U.shape == (30, 2) and res.V.shape == (20, 2)
    assert_orthonormal(res.U, 1e-14)
    assert_orthonormal(res.V, 1e-14)


def test_zero_float32_matrix_keeps_its_dtype():
    res = solvers.svd(np.zeros((30, 20), dtype=np.float32), 3, method="tsvd", random_state=0)
    assert res.s.dtype == np.float32 and np.all(res.s == 0)
    assert_orthonormal(res.U.astype(np.float64), 1e-6)


def test_zero_answer_is_deterministic():
    a = solvers.svd(np.zeros((30, 20)), 2, method="tsvd", random_state=4)
    b = solvers.svd(np.zeros((30, 20)), 2, method="tsvd", random_state=4)
    np.testing.assert_array_equal(a.U, b.U)
    np.testing.assert_array_equal(a.V, b.V)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("wrap", [dense, sparse, operator])
@pytest.mark.parametrize("scale", [1e-300, 1e-160, 1e250])
def test_tiny_and_huge_matrices_are_solved_exactly(B, wrap, backend, scale):
    # The Gram operator squares the entries: 1e-300 underflows to zero, 1e250 overflows.
    ref = sla.svdvals(B)[:2]
    with np.errstate(over="ignore", invalid="ignore"):  # the operator's own overflow
        res = solvers.svd(wrap(B * scale), 2, method="tsvd", backend=backend, random_state=0)
    rtol = 1e-12 if backend != "lobpcg" else 1e-9
    np.testing.assert_allclose(res.s / scale, ref, rtol=rtol)
    assert_orthonormal(res.U, 1e-12)
    U, _, Vt = sla.svd(B)
    np.testing.assert_allclose(np.abs(np.sum(res.U * U[:, :2], axis=0)), 1.0, atol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(res.V * Vt[:2].T, axis=0)), 1.0, atol=1e-9)


def test_scaling_concrete_input_is_exact_and_reported(B):
    # A power-of-two scale changes no rounding: the answer is that of the scaled matrix,
    # bit for bit, with the values scaled back.
    assert solvers.svd(B, 3, method="tsvd", random_state=1).info["scale"] == 1.0
    tiny = B * 2.0**-900
    res = solvers.svd(tiny, 3, method="tsvd", random_state=1)
    scale = res.info["scale"]
    assert np.frexp(scale)[0] == 0.5 and 2.0**890 < scale < 2.0**910
    scaled = solvers.svd(tiny * scale, 3, method="tsvd", random_state=1)
    np.testing.assert_array_equal(res.s, scaled.s / scale)
    np.testing.assert_array_equal(res.U, scaled.U)
    np.testing.assert_array_equal(res.V, scaled.V)


def test_lazy_recovery_counts_every_product(B):
    res = solvers.svd(aslinearoperator(B * 1e-300), 2, method="tsvd", random_state=0)
    plain = solvers.svd(aslinearoperator(B), 2, method="tsvd", random_state=0)
    # the failed attempt and the probe are paid for too
    assert res.info["n_matvec"] > plain.info["n_matvec"]


def test_non_finite_operator_still_raises(B):
    bad = B.copy()
    bad[3, 4] = np.inf
    with pytest.raises(ValueError, match="finite"):
        solvers.svd(aslinearoperator(bad), 2, method="tsvd", random_state=0)


def test_centred_kernel_of_identical_points_is_zero():
    from ksvd_bench.estimators import KSVD

    model = KSVD(n_components=3, kernel="rbf", gamma=1.0, solver="tsvd", random_state=0)
    model.fit(np.zeros((30, 20)))  # used to raise ArpackError
    np.testing.assert_array_equal(model.singular_values_, np.zeros(3))


# ---------------------------------------------------------------------------------------------
# PROPACK on float32 operators
# ---------------------------------------------------------------------------------------------


def rounding_operator(B32):
    """A float32 operator that rounds its input to float32, as a float32 code would."""
    n, m = B32.shape
    return LinearOperator(
        (n, m),
        dtype=np.float32,
        matvec=lambda x: B32 @ np.asarray(x, dtype=np.float32),
        rmatvec=lambda y: B32.T @ np.asarray(y, dtype=np.float32),
    )


@pytest.mark.parametrize("shape, rank", [((50, 40), 10), ((100, 30), 5), ((60, 60), 20)])
@pytest.mark.parametrize("make", [aslinearoperator, rounding_operator])
def test_propack_converges_on_float32_operators(shape, rank, make):
    B32 = np.random.default_rng(1).random(shape).astype(np.float32)
    ref = sla.svdvals(B32.astype(np.float64))[:rank]
    res = solvers.svd(make(B32), rank, method="tsvd", backend="propack", random_state=0)
    assert res.s.dtype == np.float32
    np.testing.assert_allclose(res.s, ref, rtol=0, atol=2e-6 * ref[0])
    assert_orthonormal(res.U.astype(np.float64), 1e-5)
    assert_orthonormal(res.V.astype(np.float64), 1e-5)


def test_float32_operator_gets_float64_vectors():
    # The float32 matrix is exact: fed float64 vectors, PROPACK reaches double accuracy
    # before the result is cast, so the values are the float32 roundings of the truth.
    B32 = np.random.default_rng(2).random((80, 50)).astype(np.float32)
    seen = []

    def matvec(x):
        seen.append(np.asarray(x).dtype)
        return B32 @ x

    op = LinearOperator((80, 50), matvec=matvec, rmatvec=lambda y: B32.T @ y, dtype=np.float32)
    res = solvers.svd(op, 5, method="tsvd", backend="propack", random_state=0)
    assert set(seen) == {np.dtype(np.float64)}
    ref = sla.svdvals(B32.astype(np.float64))[:5]
    np.testing.assert_array_equal(res.s, ref.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# the exact path of a source (optional protocol member exact_svd)
# ---------------------------------------------------------------------------------------------


class ExactSource(DenseSource):
    """A dense source that answers exactly by LAPACK and records how it was asked."""

    def __init__(self, G, *, bad_shape=False):
        super().__init__(G)
        self.calls = []
        self.bad_shape = bad_shape

    def exact_svd(self, rank, *, random_state=None, tol=0.0, maxiter=None, ncv=None):
        self.calls.append(
            {"rank": rank, "random_state": random_state, "tol": tol, "maxiter": maxiter, "ncv": ncv}
        )
        U, s, Vt = sla.svd(self.G, full_matrices=False)
        if self.bad_shape:
            return U, s, Vt.T
        return solvers.SVDResult(
            U[:, :rank],
            s[:rank],
            Vt[:rank].T,
            info={"n_matvec": 7, "n_passes": 3, "note": "lapack"},
        )


def test_tsvd_uses_the_source_exact_path(B):
    src = ExactSource(B)
    res = solvers.svd(src, 4, method="tsvd", random_state=0, tol=1e-9, ncv=12, maxiter=50)
    assert len(src.calls) == 1
    call = src.calls[0]
    assert call["rank"] == 4 and call["tol"] == 1e-9 and call["ncv"] == 12
    assert call["maxiter"] == 50 and isinstance(call["random_state"], np.random.Generator)
    assert res.info["exact_path"] == "source"
    assert res.info["n_matvec"] == 7 and res.info["n_passes"] == 3.0
    assert res.info["source_info"]["note"] == "lapack"
    assert res.info["effort"] == 12 and res.info["ncv"] == 12
    via_svds = solvers.svd(B, 4, method="tsvd", random_state=0)
    assert via_svds.info["exact_path"] == "svds"
    np.testing.assert_allclose(res.s, via_svds.s, rtol=1e-12)
    # the sign convention is applied to what the source returned
    np.testing.assert_allclose(res.U, via_svds.U, atol=1e-10)
    np.testing.assert_allclose(res.V, via_svds.V, atol=1e-10)


@pytest.mark.parametrize("backend", ["propack", "lobpcg"])
def test_other_backends_ignore_the_exact_path(B, backend):
    src = ExactSource(B)
    res = solvers.svd(src, 3, method="tsvd", backend=backend, random_state=0)
    assert src.calls == [] and res.info["exact_path"] == "svds"
    assert res.info["n_matvec"] > 0


def test_exact_path_with_wrong_shapes_raises(B):
    with pytest.raises(ValueError, match=r"exact_svd\(rank=2\) returned U of shape"):
        solvers.svd(ExactSource(B, bad_shape=True), 2, method="tsvd", random_state=0)


def test_exact_path_accepts_a_plain_tuple(B):
    class TupleSource(DenseSource):
        def exact_svd(self, rank, **options):
            U, s, Vt = sla.svd(self.G, full_matrices=False)
            return U[:, :rank], s[:rank], Vt[:rank].T

    res = solvers.svd(TupleSource(B), 2, method="tsvd", random_state=0)
    assert res.info["exact_path"] == "source" and res.info["n_matvec"] == 0
    np.testing.assert_allclose(res.s, sla.svdvals(B)[:2], rtol=1e-13)


@pytest.mark.parametrize("maxiter", [2, 5])
def test_lobpcg_stopping_short_raises_instead_of_returning_its_block(maxiter):
    """LOBPCG stopped at its cap returns its unconverged block with only a warning; tsvd
    raises instead, naming the cap and the triplet residual it measured."""
    G = np.random.default_rng(0).normal(size=(300, 200))  # a flat spectrum: slow to converge
    with pytest.raises(
        RuntimeError,
        match=f"'lobpcg' did not converge .* within maxiter={maxiter}.*not reaching the "
        r"requested tolerance.*triplet residual .* is above sqrt\(eps\) s_1",
    ):
        solvers.svd(G, 5, method="tsvd", backend="lobpcg", random_state=0, maxiter=maxiter)
    # with a tolerance of its own, the cap alone decides, as scipy's warning says
    with pytest.raises(RuntimeError, match="did not converge to tol=0.001"):
        solvers.svd(G, 5, method="tsvd", backend="lobpcg", random_state=0, maxiter=2, tol=1e-3)


@pytest.mark.parametrize("shape, rank", [((60, 40), 5), ((300, 200), 5), ((300, 200), 10)])
def test_lobpcg_on_a_float32_operator_converges_at_its_defaults(shape, rank):
    """A float32 LinearOperator raised "did not converge" (tol=0 asked LOBPCG for an exact
    zero residual within scipy's 20 iterations) where scipy's own svds is within 1e-4: the
    default stop now follows float32's accuracy and the cap is one at which it converges."""
    A = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    res = solvers.svd(aslinearoperator(A), rank, method="tsvd", backend="lobpcg", random_state=0)
    exact = np.linalg.svd(A.astype(np.float64), compute_uv=False)[:rank]
    np.testing.assert_allclose(res.s, exact, rtol=0, atol=1e-4 * exact[0])
    assert res.s.dtype == np.float32
    Gv = A.astype(np.float64) @ res.V.astype(np.float64)
    assert np.max(np.linalg.norm(Gv - res.U * res.s, axis=0)) <= 1e-3 * exact[0]
