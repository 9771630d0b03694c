"""Bad input found by the peers' tests (issue 11, item 3): clear errors that name G or the option.

The contract class in ``test_solvers_contract.py`` runs the same cases through every method;
these tests pin the issue's own reproducers and the edges around them.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

import solvers
from solvers._source import as_source

CHEAP = {
    "tsvd": {},
    "rsvd": {},
    "block_krylov": {"n_iter": 1},
    "generalized_nystrom": {},
    "sym_nystrom": {"n_samples": 10},
    "asym_nystrom": {"n_samples": 10},
}


def complex_reproducer():
    return np.random.default_rng(0).normal(size=(40, 30)) + 1j


@pytest.mark.parametrize("method", solvers.METHODS)
@pytest.mark.parametrize("kind", ["ndarray", "sparse", "operator"])
def test_complex_input_is_refused_not_reduced_to_its_real_part(method, kind):
    G = complex_reproducer()
    G = {"ndarray": G, "sparse": sp.csr_matrix(G), "operator": aslinearoperator(G)}[kind]
    with pytest.raises(ValueError, match=r"complex G is not supported.*real and imaginary"):
        solvers.svd(G, 3, method=method, random_state=0, **CHEAP[method])


def test_complex_values_from_a_real_declared_source_are_refused():
    G = complex_reproducer()
    op = LinearOperator(
        G.shape, matvec=lambda x: G @ x, rmatvec=lambda y: G.T @ y, dtype=np.float64
    )
    with pytest.raises(ValueError, match=r"G\.matmat\(X\) returned complex values"):
        solvers.rsvd(op, 3, random_state=0)


def test_complex_custom_source_is_refused():
    class ComplexSource:
        shape, dtype = (4, 3), np.dtype(np.complex128)

        def rows(self, idx): ...
        def cols(self, idx): ...
        def block(self, ridx, cidx): ...
        def matmat(self, X): ...
        def rmatmat(self, Y): ...

    with pytest.raises(ValueError, match="complex G"):
        solvers.svd(ComplexSource(), 1, method="rsvd")


def test_the_real_embedding_suggested_by_the_message_works():
    G = complex_reproducer()
    E = np.block([[G.real, -G.imag], [G.imag, G.real]])
    s = np.linalg.svd(G, compute_uv=False)
    res = solvers.svd(E, 6, method="tsvd", random_state=0)
    np.testing.assert_allclose(res.s[::2], s[:3], rtol=1e-10)
    np.testing.assert_allclose(res.s[1::2], s[:3], rtol=1e-10)


@pytest.mark.parametrize(
    "G",
    [
        np.array([[1, 2], [3, 4]], dtype=object),
        np.array([[1.0, 2.0], [3.0, 4.0]]).astype(object),
    ],
)
def test_object_arrays_fail_naming_G(G):
    with pytest.raises(TypeError, match=r"G must hold real numbers .* got dtype object"):
        solvers.svd(G, 1, method="rsvd", random_state=0)


@pytest.mark.parametrize(
    "G",
    [
        [["1", "2"], ["3", "4"]],
        np.array([["1", "2"], ["3", "4"]]),
        np.array([[b"1", b"2"], [b"3", b"4"]]),
    ],
)
def test_string_arrays_are_not_numbers(G):
    with pytest.raises(TypeError, match="G must hold real numbers"):
        solvers.svd(G, 1, method="rsvd", random_state=0)


def test_ragged_lists_name_G():
    with pytest.raises(ValueError, match="G could not be converted"):
        solvers.svd([[1.0, 2.0], [3.0]], 1, method="rsvd")


def test_bool_and_integer_arrays_are_numbers():
    A = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]])
    s = np.linalg.svd(A.astype(float), compute_uv=False)
    for G in (A, A.astype(bool), A.astype(np.int8)):
        res = solvers.svd(G, 2, method="rsvd", random_state=0, n_oversamples=1)
        np.testing.assert_allclose(res.s, s[:2], rtol=1e-12)


@pytest.mark.parametrize("tol", [[], "hi", None, True, [1e-3]])
def test_tol_of_the_wrong_type_is_a_type_error(tol):
    G = np.random.default_rng(0).normal(size=(20, 15))
    with pytest.raises(TypeError, match="tol must be a real number"):
        solvers.svd(G, 2, method="tsvd", tol=tol)


@pytest.mark.parametrize("tol", [-1.0, np.inf, np.nan])
def test_tol_out_of_range_is_a_value_error(tol):
    G = np.random.default_rng(0).normal(size=(20, 15))
    with pytest.raises(ValueError, match="tol must be a finite number >= 0"):
        solvers.svd(G, 2, method="tsvd", tol=tol)


def test_masked_entries_are_not_ignored():
    G = np.ma.masked_array(np.arange(12.0).reshape(4, 3))
    G[1, 2] = np.ma.masked
    G[3, 0] = np.ma.masked
    with pytest.raises(ValueError, match=r"G is a masked array with 2 masked entries.*filled"):
        solvers.svd(G, 1, method="rsvd", random_state=0)


def test_a_masked_array_without_masked_entries_is_its_data():
    data = np.random.default_rng(1).normal(size=(12, 9))
    plain = solvers.svd(data, 2, method="rsvd", random_state=0)
    masked = solvers.svd(np.ma.masked_array(data, mask=False), 2, method="rsvd", random_state=0)
    np.testing.assert_array_equal(masked.s, plain.s)
    np.testing.assert_array_equal(masked.U, plain.U)


class _Source:
    """A dense matrix behind the six protocol members; ``bad`` names one to corrupt."""

    def __init__(self, G, bad=None):
        self.G, self.shape, self.dtype, self.bad = G, G.shape, G.dtype, bad

    def _out(self, name, a):
        return a[:-1] if name == self.bad else a

    def rows(self, idx):
        return self._out("rows", self.G[idx])

    def cols(self, idx):
        return self._out("cols", self.G[:, idx])

    def block(self, ridx, cidx):
        return self._out("block", self.G[np.ix_(ridx, cidx)])

    def matmat(self, X):
        return self._out("matmat", self.G @ X)

    def rmatmat(self, Y):
        return self._out("rmatmat", self.G.T @ Y)


@pytest.mark.parametrize(
    ("method", "member"),
    [
        ("rsvd", "matmat"),
        ("rsvd", "rmatmat"),
        ("tsvd", "matmat"),
        ("block_krylov", "matmat"),
        ("block_krylov", "rmatmat"),
        ("generalized_nystrom", "rmatmat"),
        ("asym_nystrom", "rows"),
        ("asym_nystrom", "cols"),
        ("sym_nystrom", "rows"),
    ],
)
def test_a_source_answering_with_the_wrong_shape_is_caught(method, member):
    G = np.random.default_rng(2).normal(size=(30, 20))
    pattern = rf"G\.{member}\(.*\) returned an array of shape .* expected"
    with pytest.raises(ValueError, match=pattern):
        solvers.svd(_Source(G, bad=member), 3, method=method, random_state=0, **CHEAP[method])
    good = solvers.svd(_Source(G), 3, method=method, random_state=0, **CHEAP[method])
    assert good.U.shape == (30, 3) and good.V.shape == (20, 3)


def test_randomized_range_finder_refuses_complex_too():
    with pytest.raises(ValueError, match="complex G"):
        solvers.randomized_range_finder(complex_reproducer(), 3, 1)


def test_as_source_names_G_for_unknown_objects():
    with pytest.raises(TypeError, match="G must be a numpy array"):
        as_source({"not": "a matrix"})
