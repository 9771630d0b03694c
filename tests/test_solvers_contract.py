"""One contract shared by every solver in ``solvers`` (one small subclass per method).

Modelled on scipy's ``test_svds.py``: a base class of tests that every solver must pass, and a
subclass per method that says how to call it at a cheap effort and at full effort.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import LinearOperator, aslinearoperator

import solvers

INFO_KEYS = {"method", "effort", "n_matvec", "n_block_entries", "n_products", "n_passes", "seconds"}


def low_rank_plus_noise(N, M, seed, *, effective_rank=6, noise=1e-3, dtype=np.float64):
    """Geometric spectrum 2^-i on ``effective_rank`` directions plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, effective_rank)) * 2.0 ** -np.arange(effective_rank)
    G = X @ rng.standard_normal((effective_rank, M)) + noise * rng.standard_normal((N, M))
    return G.astype(dtype)


def check_against_dense(res, G, rank, *, rtol):
    """Values and vectors (up to sign) agree with LAPACK's dense SVD."""
    U, s, Vt = np.linalg.svd(np.asarray(G, dtype=np.float64))
    np.testing.assert_allclose(res.s, s[:rank], rtol=0, atol=rtol * s[0])
    cos_u = np.abs(np.sum(res.U * U[:, :rank], axis=0))
    cos_v = np.abs(np.sum(res.V * Vt[:rank].T, axis=0))
    np.testing.assert_allclose(cos_u, 1, atol=rtol)
    np.testing.assert_allclose(cos_v, 1, atol=rtol)


def nan_operator(shape):
    """A LinearOperator whose products are NaN (a broken lazy source)."""
    N, M = shape
    return LinearOperator(
        shape,
        matvec=lambda x: np.full(N, np.nan),
        rmatvec=lambda y: np.full(M, np.nan),
        dtype=np.float64,
    )


class WrongShapeSource:
    """A custom matrix source whose every answer has one row too many."""

    def __init__(self, G):
        self.G, self.shape, self.dtype = G, G.shape, G.dtype

    def _grow(self, a):
        return np.vstack([a, a[:1]])

    def rows(self, idx):
        return self._grow(self.G[idx])

    def cols(self, idx):
        return self._grow(self.G[:, idx])

    def block(self, ridx, cidx):
        return self._grow(self.G[np.ix_(ridx, cidx)])

    def matmat(self, X):
        return self._grow(self.G @ X)

    def rmatmat(self, Y):
        return self._grow(self.G.T @ Y)


class SolverContract:
    """Tests every method must pass; subclasses set ``method`` and the option builders."""

    method = None
    randomized = True
    shape = (70, 50)
    rank = 4

    def options(self, shape, rank):
        """Cheap options (an approximate answer)."""
        return {}

    def full_options(self, shape, rank):
        """Options at full effort (the exact answer up to rounding)."""
        return {}

    def bad_options(self, shape, rank):
        """(options, exception, match) triples specific to the method."""
        return []

    def solve(self, G, rank=None, *, full=False, random_state=0, **extra):
        rank = self.rank if rank is None else rank
        shape = G.shape
        opts = self.full_options(shape, rank) if full else self.options(shape, rank)
        opts.update(extra)
        return solvers.svd(G, rank, method=self.method, random_state=random_state, **opts)

    # -- the answer's form ------------------------------------------------------------------

    def test_shapes_and_info(self):
        G = low_rank_plus_noise(*self.shape, seed=1)
        res = self.solve(G)
        N, M = self.shape
        assert res.U.shape == (N, self.rank)
        assert res.s.shape == (self.rank,)
        assert res.V.shape == (M, self.rank)
        assert INFO_KEYS <= set(res.info)
        assert res.info["method"] == self.method
        for key in ("effort", "n_matvec", "n_block_entries", "n_products"):
            assert isinstance(res.info[key], int) and res.info[key] >= 0
        assert res.info["seconds"] > 0
        assert res.info["n_matvec"] + res.info["n_block_entries"] > 0
        # Passes: one per product (whatever its width) plus the entries read, in units of G.
        assert isinstance(res.info["n_passes"], float)
        assert res.info["n_passes"] == pytest.approx(
            res.info["n_products"] + res.info["n_block_entries"] / (N * M), rel=1e-12
        )
        assert res.info["n_products"] <= res.info["n_matvec"]
        assert res.info["n_passes"] > 0
        U, s, V = res  # unpacks like np.linalg.svd
        assert U is res.U and s is res.s and V is res.V

    def test_orthonormal(self):
        G = low_rank_plus_noise(*self.shape, seed=2)
        res = self.solve(G)
        eye = np.eye(self.rank)
        np.testing.assert_allclose(res.U.T @ res.U, eye, atol=1e-10)
        np.testing.assert_allclose(res.V.T @ res.V, eye, atol=1e-10)

    def test_descending_nonnegative(self):
        G = low_rank_plus_noise(*self.shape, seed=3)
        res = self.solve(G)
        assert np.all(np.diff(res.s) <= 0)
        assert np.all(res.s >= 0)

    def test_sign_convention(self):
        G = low_rank_plus_noise(*self.shape, seed=4)
        res = self.solve(G)
        top = np.argmax(np.abs(res.U), axis=0)
        assert np.all(res.U[top, np.arange(self.rank)] > 0)
        # V is flipped with U: each triplet is oriented so that u_i^T G v_i > 0.
        assert np.all(np.einsum("ij,ij->j", res.U, G @ res.V) > 0)

    # -- accuracy -----------------------------------------------------------------------------

    @pytest.mark.parametrize("kind", ["ndarray", "sparse", "operator"])
    def test_full_effort_agrees_with_dense_svd(self, kind):
        G = low_rank_plus_noise(*self.shape, seed=5)
        inp = {
            "ndarray": G,
            "sparse": sp.csr_array(G),
            "operator": aslinearoperator(G),
        }[kind]
        res = self.solve(inp, full=True)
        assert res.U.dtype == np.float64
        check_against_dense(res, G, self.rank, rtol=1e-8)

    def test_float32(self):
        G = low_rank_plus_noise(*self.shape, seed=6, dtype=np.float32)
        res = self.solve(G, full=True)
        assert res.U.dtype == res.s.dtype == res.V.dtype == np.float32
        check_against_dense(res, G, self.rank, rtol=1e-4)

    # Each subclass runs this inherited test on its own instance (a different "executor"); it is
    # safe because the test reads nothing but class attributes.
    @settings(suppress_health_check=[HealthCheck.differing_executors])
    @given(
        N=st.integers(3, 14),
        M=st.integers(3, 14),
        seed=st.integers(0, 2**32 - 1),
        data=st.data(),
    )
    def test_linear_recovery(self, N, M, seed, data):
        """At full effort every solver returns A's own singular triplets (N != M too)."""
        assume(N != M)
        A = np.random.default_rng(seed).standard_normal((N, M))
        s = np.linalg.svd(A, compute_uv=False)
        rank = data.draw(st.integers(1, min(N, M) - 1), label="rank")
        # Singular vectors are only defined (and comparable) when the values are separated.
        assume(np.min(-np.diff(s[: rank + 1])) > 1e-3 * s[0])
        res = self.solve(A, rank, full=True, random_state=seed)
        check_against_dense(res, A, rank, rtol=1e-7)

    # -- randomness ---------------------------------------------------------------------------

    def test_deterministic_for_fixed_seed(self):
        G = low_rank_plus_noise(*self.shape, seed=7)
        a = self.solve(G, random_state=11)
        b = self.solve(G, random_state=11)
        c = self.solve(G, random_state=np.random.default_rng(11))
        for x in (b, c):
            np.testing.assert_array_equal(a.U, x.U)
            np.testing.assert_array_equal(a.s, x.s)
            np.testing.assert_array_equal(a.V, x.V)

    def test_different_seeds(self):
        """Randomized methods give different answers; a converged Krylov solver the same one."""
        G = low_rank_plus_noise(*self.shape, seed=8, noise=1e-1)
        a = self.solve(G, random_state=1)
        b = self.solve(G, random_state=2)
        if self.randomized:
            assert not np.allclose(a.s, b.s, rtol=1e-10, atol=0)
        else:
            np.testing.assert_allclose(a.s, b.s, rtol=1e-10)
            np.testing.assert_allclose(a.U, b.U, atol=1e-8)

    # -- bad input ----------------------------------------------------------------------------

    def common_bad_inputs(self):
        N, M = self.shape
        G = low_rank_plus_noise(N, M, seed=9)
        G_nan = G.copy()
        G_nan[3, 4] = np.nan
        S_inf = sp.csr_array(G)
        S_inf.data[0] = np.inf
        other = "backend" if "n_oversamples" in solvers.OPTIONS[self.method] else "n_oversamples"
        masked = np.ma.masked_array(G, mask=np.zeros(G.shape, bool))
        masked[0, 0] = np.ma.masked
        return [
            ((G, 0), {}, ValueError, "rank"),
            ((G, min(N, M) + 1), {}, ValueError, "rank"),
            ((G, 2.0), {}, TypeError, "rank"),
            ((G, True), {}, TypeError, "rank"),
            ((G_nan, 2), {}, ValueError, "finite"),
            ((S_inf, 2), {}, ValueError, "finite"),
            ((nan_operator((N, M)), 2), {}, ValueError, "finite"),
            ((G, 2), {"random_state": 1.5}, TypeError, "random_state"),
            ((G, 2), {"random_state": -1}, ValueError, "random_state"),
            ((G, 2), {"random_state": "seed"}, TypeError, "random_state"),
            ((G, 2), {other: 1}, TypeError, f"{other}.*belongs to method"),
            ((G, 2), {"not_an_option": 1}, TypeError, "not_an_option"),
            ((np.zeros((0, 3)), 1), {}, ValueError, "G must be"),
            ((np.zeros(5), 1), {}, ValueError, "G must be"),
            (("matrix", 1), {}, TypeError, "G must be"),
            # Issue 11, item 3: no silent reduction to the real part, no numbers from strings.
            ((G + 1j, 2), {}, ValueError, "complex G is not supported"),
            ((sp.csr_array(G + 1j), 2), {}, ValueError, "complex G is not supported"),
            ((aslinearoperator(G + 1j), 2), {}, ValueError, "complex G is not supported"),
            ((G.astype(object), 2), {}, TypeError, "G must hold real numbers.*object"),
            (([["1", "2"], ["3", "4"]], 1), {}, TypeError, "G must hold real numbers"),
            ((masked, 2), {}, ValueError, "G is a masked array with 1 masked"),
            ((WrongShapeSource(G), 2), {}, ValueError, r"G\.\w+.*returned an array of shape"),
        ]

    def test_bad_inputs(self):
        N, M = self.shape
        cases = self.common_bad_inputs()
        G = low_rank_plus_noise(N, M, seed=9)
        cases += [((G, 2), o, exc, match) for o, exc, match in self.bad_options(self.shape, 2)]
        for (g, rank), extra, exc, match in cases:
            opts = self.options(getattr(g, "shape", (N, M)), 2)
            opts.update(extra)
            random_state = opts.pop("random_state", 0)
            with pytest.raises(exc, match=match):
                solvers.svd(g, rank, method=self.method, random_state=random_state, **opts)


class TestTSVD(SolverContract):
    method = "tsvd"
    randomized = False

    def bad_options(self, shape, rank):
        kmin = min(shape)
        return [
            ({"backend": "lapack"}, ValueError, "backend"),
            ({"tol": -1.0}, ValueError, "tol"),
            ({"tol": np.nan}, ValueError, "tol"),
            ({"tol": []}, TypeError, "tol must be a real number"),
            ({"tol": "hi"}, TypeError, "tol must be a real number"),
            ({"tol": True}, TypeError, "tol must be a real number"),
            ({"maxiter": 0}, ValueError, "maxiter"),
            ({"ncv": rank}, ValueError, "ncv"),
            ({"ncv": kmin}, ValueError, "ncv"),
            ({"backend": "propack", "ncv": 10}, ValueError, "ncv"),
        ]

    def test_rank_limit_per_backend(self):
        G = low_rank_plus_noise(*self.shape, seed=10)
        kmin = min(self.shape)
        with pytest.raises(ValueError, match="rank must be < min"):
            solvers.tsvd(G, kmin, backend="arpack")
        res = solvers.tsvd(G, kmin, backend="propack", random_state=0)
        check_against_dense(res, G, kmin, rtol=1e-7)

    @pytest.mark.parametrize("backend", ["propack", "lobpcg"])
    def test_other_backends(self, backend):
        G = low_rank_plus_noise(*self.shape, seed=12, noise=1e-6)
        res = solvers.tsvd(G, 3, backend=backend, random_state=0, maxiter=200)
        assert res.info["backend"] == backend
        check_against_dense(res, G, 3, rtol=1e-5)


class TestRSVD(SolverContract):
    method = "rsvd"

    def options(self, shape, rank):
        return {"n_oversamples": 5, "n_iter": 1}

    def full_options(self, shape, rank):
        return {"n_oversamples": min(shape), "n_iter": 2}

    def bad_options(self, shape, rank):
        return [
            ({"n_oversamples": -1}, ValueError, "n_oversamples"),
            ({"n_iter": "many"}, ValueError, "n_iter"),
            ({"n_iter": -2}, ValueError, "n_iter"),
            ({"power_iteration_normalizer": "SVD"}, ValueError, "power_iteration_normalizer"),
        ]


class TestBlockKrylov(SolverContract):
    method = "block_krylov"

    def options(self, shape, rank):
        return {"n_oversamples": 2, "n_iter": 1}

    def full_options(self, shape, rank):
        # No oversampling: the basis must fill R^min(N, M) by Krylov steps alone.
        return {"n_oversamples": 0, "n_iter": -(-min(shape) // rank)}

    def bad_options(self, shape, rank):
        return [
            ({"n_oversamples": -1}, ValueError, "n_oversamples"),
            ({"n_iter": "auto"}, TypeError, "n_iter"),
            ({"n_iter": -1}, ValueError, "n_iter"),
            ({"power_iteration_normalizer": "LU"}, TypeError, "belongs to method 'rsvd'"),
        ]


class TestGeneralizedNystrom(SolverContract):
    method = "generalized_nystrom"

    def options(self, shape, rank):
        return {"n_oversamples": 3}

    def full_options(self, shape, rank):
        return {"n_oversamples": min(shape)}

    def bad_options(self, shape, rank):
        return [
            ({"n_oversamples": -1}, ValueError, "n_oversamples"),
            ({"n_oversamples": 2.5}, TypeError, "n_oversamples"),
            ({"left_factor": 0.5}, ValueError, "left_factor"),
            ({"left_factor": np.inf}, ValueError, "left_factor"),
            ({"left_factor": "big"}, TypeError, "left_factor"),
            ({"rcond": 1.0}, ValueError, "rcond"),
            ({"rcond": -1e-3}, ValueError, "rcond"),
            ({"n_iter": 2}, TypeError, "n_iter.*belongs to method"),
        ]


class TestSymNystrom(SolverContract):
    method = "sym_nystrom"

    def options(self, shape, rank):
        return {"n_samples": 3 * rank}

    def full_options(self, shape, rank):
        return {"n_samples": max(shape)}

    def bad_options(self, shape, rank):
        return [
            ({"n_samples": None}, TypeError, "n_samples"),
            ({"n_samples": max(shape) + 1}, ValueError, "n_samples"),
            ({"n_samples": rank - 1}, ValueError, "rank"),
            ({"sampling": "leverage"}, ValueError, "sampling"),
            ({"orthogonalize": "yes"}, TypeError, "orthogonalize"),
            ({"n_rows": 5}, TypeError, "n_rows.*belongs to method 'asym_nystrom'"),
        ]


class TestAsymNystrom(SolverContract):
    method = "asym_nystrom"

    def options(self, shape, rank):
        return {"n_samples": 3 * rank}

    def full_options(self, shape, rank):
        return {"n_samples": shape[1], "n_rows": shape[0]}

    def bad_options(self, shape, rank):
        N, M = shape
        return [
            ({"n_samples": None}, TypeError, "n_samples"),
            ({"n_samples": M + 1}, ValueError, "n_samples"),
            ({"n_samples": 10, "n_rows": N + 1}, ValueError, "n_rows"),
            ({"n_samples": 10, "n_rows": rank - 1}, ValueError, "n_rows"),
            ({"n_samples": rank - 1}, ValueError, "rank"),
            ({"sampling": "leverage"}, ValueError, "sampling"),
            ({"orthogonalize": 1}, TypeError, "orthogonalize"),
            ({"col_indices": [0, 1, 1, 2]}, ValueError, "col_indices"),
            ({"col_indices": [0, M]}, ValueError, "col_indices"),
            ({"col_indices": [0.0, 1.0]}, TypeError, "col_indices"),
            ({"col_indices": [0, 1, 2], "n_samples": 4}, ValueError, "n_samples"),
            ({"row_indices": [0, -1, 2]}, ValueError, "row_indices"),
            ({"row_indices": [0, 1, 2], "n_rows": 4}, ValueError, "n_rows"),
            ({"core": "full"}, ValueError, "core"),
            ({"core": "stable", "orthogonalize": False}, ValueError, "orthogonalize"),
            ({"check_passes": -1}, ValueError, "check_passes"),
            ({"check_passes": 1.5}, TypeError, "check_passes"),
            ({"sampling": "rpcholesky", "col_indices": [0, 1, 2]}, ValueError, "rpcholesky"),
        ]


class TestSymNystromFullCore(TestSymNystrom):
    def options(self, shape, rank):
        return {"n_samples": 3 * rank, "core": "full"}


class TestAsymNystromPaperCore(TestAsymNystrom):
    def options(self, shape, rank):
        return {"n_samples": 3 * rank, "core": "paper"}


class TestAsymNystromRaw(TestAsymNystrom):
    """The paper's raw extension: unit columns, not orthogonal, so no orthonormality test."""

    def options(self, shape, rank):
        return {"n_samples": 3 * rank, "orthogonalize": False}

    def full_options(self, shape, rank):
        return {"n_samples": shape[1], "n_rows": shape[0], "orthogonalize": False}

    def test_orthonormal(self):
        G = low_rank_plus_noise(*self.shape, seed=2)
        res = self.solve(G)
        np.testing.assert_allclose(np.linalg.norm(res.U, axis=0), 1, atol=1e-12)
        np.testing.assert_allclose(np.linalg.norm(res.V, axis=0), 1, atol=1e-12)
        # At full sample the raw extension is the exact (orthonormal) SVD.
        full = self.solve(G, full=True)
        np.testing.assert_allclose(full.U.T @ full.U, np.eye(self.rank), atol=1e-10)


def test_methods_and_exports():
    assert solvers.METHODS == (
        "tsvd",
        "rsvd",
        "block_krylov",
        "generalized_nystrom",
        "sym_nystrom",
        "asym_nystrom",
    )
    for name in solvers.METHODS + ("svd", "as_source", "SVDResult", "randomized_range_finder"):
        assert hasattr(solvers, name)
    assert set(solvers.OPTIONS) == set(solvers.METHODS)


def test_unknown_method():
    with pytest.raises(ValueError, match="method must be one of"):
        solvers.svd(np.eye(4), 2, method="lanczos")


# ---------------------------------------------------------------------------------------------
# the source protocol's optional members, the counting wrapper and the result's repr
# ---------------------------------------------------------------------------------------------


def _adapters(G):
    return {
        "dense": solvers.DenseSource(G),
        "sparse": solvers.SparseSource(sp.csr_array(G)),
        "operator": solvers.OperatorSource(aslinearoperator(G)),
    }


@pytest.mark.parametrize("kind", ["dense", "sparse", "operator"])
def test_adapters_sketch_is_both_products(kind):
    rng = np.random.default_rng(0)
    G = rng.standard_normal((30, 20))
    Omega, Psi = rng.standard_normal((20, 4)), rng.standard_normal((30, 3))
    left, right = _adapters(G)[kind].sketch(Omega, Psi)
    np.testing.assert_allclose(left, G @ Omega, rtol=1e-13)
    np.testing.assert_allclose(right, G.T @ Psi, rtol=1e-13)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_norm_bound_is_the_frobenius_norm(kind):
    G = np.random.default_rng(1).standard_normal((30, 20)).astype(np.float32)
    src = _adapters(G)[kind]
    bound = src.norm_bound()
    assert bound == pytest.approx(np.linalg.norm(G.astype(np.float64)), rel=1e-12)
    assert bound >= np.linalg.norm(G.astype(np.float64), 2)


def test_tracked_exposes_exactly_the_optional_members_of_its_source():
    from solvers.validation import Tracked

    G = np.random.default_rng(2).standard_normal((12, 8))
    optional = ("sketch", "norm_bound", "dense", "row_norms_sq", "col_norms_sq")
    dense = Tracked(solvers.DenseSource(G), check_finite=False)
    assert all(hasattr(dense, name) for name in optional)
    op = Tracked(solvers.OperatorSource(aslinearoperator(G)), check_finite=True)
    assert [hasattr(op, name) for name in optional] == [True, False, True, False, False]
    assert dense.norm_bound() == pytest.approx(np.linalg.norm(G))
    np.testing.assert_allclose(dense.row_norms_sq(), np.sum(G**2, axis=1))
    np.testing.assert_allclose(dense.col_norms_sq(), np.sum(G**2, axis=0))


def test_tracked_counts_passes():
    from solvers.validation import Tracked

    G = np.random.default_rng(3).standard_normal((12, 8))
    t = Tracked(solvers.DenseSource(G), check_finite=False)
    t.matmat(np.ones((8, 3)))
    t.rmatmat(np.ones((12, 1)))  # one vector is still a whole pass over G
    left, right = t.sketch(np.ones((8, 2)), np.ones((12, 5)))
    assert left.shape == (12, 2) and right.shape == (8, 5)
    t.rows([0, 1, 2])  # 3 * 8 entries: a quarter pass
    t.block([0, 1], [0, 1, 2])  # 6 entries
    assert t.n_products == 3 and t.n_matvec == 3 + 1 + 7
    assert t.n_block_entries == 24 + 6
    assert t.n_passes == pytest.approx(3 + 30 / 96)
    np.testing.assert_array_equal(t.dense(), G)
    assert t.n_passes == pytest.approx(4 + 30 / 96)


def test_tracked_checks_both_sketch_outputs():
    from solvers.validation import Tracked

    class BadSketch(WrongShapeSource):
        def sketch(self, Omega, Psi):
            return self.G @ Omega, np.full((self.shape[1], Psi.shape[1]), np.nan)

    G = np.random.default_rng(4).standard_normal((12, 8))
    t = Tracked(BadSketch(G), check_finite=True)
    with pytest.raises(ValueError, match=r"finite.*sketch\(Omega, Psi\)\[1\]"):
        t.sketch(np.ones((8, 2)), np.ones((12, 2)))


def test_result_repr_is_short():
    G = np.random.default_rng(5).standard_normal((400, 300))
    res = solvers.svd(G, 30, method="rsvd", random_state=0)
    text = repr(res)
    assert len(text) < 200 and "\n" not in text
    assert text.startswith("SVDResult(U=(400, 30), s=[")
    assert f"{res.s[0]:.5g}" in text and ", ...]" in text
    # 10 passes of the solve and 2 of its certificate
    assert "method='rsvd'" in text and "n_passes=12" in text and "effort=10" in text
