"""``paper_gamma`` of a sparse matrix equals that of the same dense matrix, far from the origin too.

The sparse variance was ``E[A^2] - mean^2`` in one pass (in float32 for float32 data): for
entries ``3e7 + N(0, 1)`` it gave gamma 6.32 instead of 6.48, and at ``1e8`` "zero variance".
"""

import numpy as np
import pytest
import scipy.sparse as sp

from ksvd_bench.kernels import paper_gamma


@pytest.mark.parametrize("offset", [0.0, 1e5, 1e6, 1e7, 3e7, 1e8, -1e8])
def test_sparse_gamma_matches_dense_far_from_the_origin(offset):
    A = offset + np.random.default_rng(0).normal(size=(50, 40))
    dense = paper_gamma(A)
    sparse = paper_gamma(sp.csr_matrix(A))
    assert sparse == pytest.approx(dense, rel=1e-12)
    # and both are the rule itself: sqrt(M * var) with the exact (float64, two-pass) variance
    assert dense == pytest.approx(np.sqrt(40 * np.var(A - offset)), rel=1e-7)


def test_sparse_gamma_of_float32_data_accumulates_in_float64():
    A = (1e3 + np.random.default_rng(1).normal(size=(400, 300))).astype(np.float32)
    dense = paper_gamma(A)  # np.var of the float64 copy of the same float32 values
    sparse = paper_gamma(sp.csr_matrix(A))
    assert sparse == pytest.approx(dense, rel=1e-12)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_sparse_gamma_counts_the_zeros_of_a_truly_sparse_matrix(fmt):
    rng = np.random.default_rng(2)
    A = (1e6 + rng.normal(size=(80, 60))) * (rng.random((80, 60)) < 0.3)
    expected = np.sqrt(60 * np.var(A))
    assert paper_gamma(sp.csr_matrix(A).asformat(fmt), 2.0) == pytest.approx(
        2 * expected, rel=1e-12
    )


def test_sparse_gamma_sums_duplicate_entries_first():
    # entry (0, 0) stored as 1e7 + 1 and 1e7 - 3: the matrix holds 2e7 - 2 there
    row, col = np.array([0, 0, 1, 2]), np.array([0, 0, 1, 2])
    data = np.array([1e7 + 1, 1e7 - 3, 5.0, 1e7])
    A = sp.coo_matrix((data, (row, col)), shape=(3, 4))
    gamma = paper_gamma(A)
    assert gamma == pytest.approx(paper_gamma(A.toarray()), rel=1e-12)
    assert gamma == pytest.approx(np.sqrt(4 * np.var(A.toarray())), rel=1e-12)


@pytest.mark.parametrize(
    "A", [sp.csr_matrix((5, 4)), sp.csr_matrix(np.full((5, 4), 1e8))], ids=["all-zero", "constant"]
)
def test_zero_variance_is_still_refused(A):
    with pytest.raises(ValueError, match="zero variance"):
        paper_gamma(A)
