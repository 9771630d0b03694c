"""Properties of the Nyström solvers beyond the shared contract."""

import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.sparse.linalg import aslinearoperator

import solvers


def classic_nystrom(K, idx, rank):
    """Williams & Seeger's Nyström eigen-approximation of a PSD K from the columns ``idx``.

    Textbook formulas: with C = K[:, idx], W = K[idx, idx] = Q diag(lam) Q^T (n = len(idx)),
    eigenvalues (N / n) lam_i and eigenvectors sqrt(n / N) C q_i / lam_i.
    """
    N, n = K.shape[0], len(idx)
    C = K[:, idx]
    lam, Q = np.linalg.eigh(K[np.ix_(idx, idx)])
    lam, Q = lam[::-1][:rank], Q[:, ::-1][:, :rank]
    return (N / n) * lam, np.sqrt(n / N) * C @ Q / lam


def projector(U):
    Q = np.linalg.qr(U)[0]
    return Q @ Q.T


def psd_problem(N, p, seed):
    B = np.random.default_rng(seed).standard_normal((N, p))
    return B @ B.T


class ReadLog:
    """A matrix source that records every row/column read and refuses products."""

    def __init__(self, G):
        self.G = G
        self.shape = G.shape
        self.dtype = G.dtype
        self.rows_read, self.cols_read = [], []

    def rows(self, idx):
        self.rows_read.append(np.asarray(idx).copy())
        return self.G[idx]

    def cols(self, idx):
        self.cols_read.append(np.asarray(idx).copy())
        return self.G[:, idx]

    def block(self, ridx, cidx):
        raise AssertionError("asym_nystrom must read the block out of rows(idx)")

    def matmat(self, X):
        raise AssertionError("asym_nystrom must not multiply by G")

    def rmatmat(self, Y):
        raise AssertionError("asym_nystrom must not multiply by G.T")


# -- the symmetric case reduces to the classic Nyström method -----------------------------------


@given(
    N=st.integers(6, 30),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_symmetric_case_reduces_to_classic_nystrom(N, seed, data):
    p = data.draw(st.integers(2, N), label="p")  # rank of the PSD matrix
    n = data.draw(st.integers(1, p), label="n")  # sample size (W = K[idx, idx] nonsingular)
    rank = data.draw(st.integers(1, n), label="rank")
    K = psd_problem(N, p, seed)
    idx = np.sort(np.random.default_rng(seed + 1).choice(N, n, replace=False))
    lam_w = np.linalg.eigvalsh(K[np.ix_(idx, idx)])[::-1]
    # Vectors are only comparable when the block's eigenvalues are well separated and nonzero.
    assume(lam_w[rank - 1] > 1e-6 * lam_w[0])
    assume(np.all(-np.diff(lam_w[: rank + 1]) > 1e-4 * lam_w[0]))
    vals, vecs = classic_nystrom(K, idx, rank)

    raw = solvers.asym_nystrom(K, rank, row_indices=idx, col_indices=idx, orthogonalize=False)
    np.testing.assert_allclose(raw.s, vals, rtol=1e-8)
    unit = vecs / np.linalg.norm(vecs, axis=0)
    np.testing.assert_allclose(np.abs(np.sum(raw.U * unit, axis=0)), 1, atol=1e-8)
    np.testing.assert_allclose(raw.U, raw.V, atol=1e-8)  # symmetric: U = V, same signs
    assert raw.info["scale"] == pytest.approx(N / n)

    orth = solvers.asym_nystrom(K, rank, row_indices=idx, col_indices=idx)
    np.testing.assert_allclose(projector(orth.U), projector(vecs), atol=1e-7)
    np.testing.assert_allclose(projector(orth.V), projector(vecs), atol=1e-7)
    # ... and its values are those of the rank-r Nyström approximation C W_r^+ C^T.
    K_r = (vecs * vals) @ vecs.T  # = C Q_r diag(1/lam_r) Q_r^T C^T
    ref = np.linalg.eigvalsh(K_r)[::-1][:rank]
    np.testing.assert_allclose(orth.s, ref, rtol=1e-7, atol=1e-9 * ref[0])

    # core="full": the eigen-decomposition of the one-shot Nyström approximation C W^+ C^T.
    full = solvers.asym_nystrom(K, rank, row_indices=idx, col_indices=idx, core="full")
    C = K[:, idx]
    K_full = C @ np.linalg.pinv(K[np.ix_(idx, idx)], hermitian=True) @ C.T
    lam, Q = np.linalg.eigh(K_full)
    lam, Q = lam[::-1], Q[:, ::-1]
    if rank < N:
        assume(lam[rank - 1] - lam[rank] > 1e-4 * lam[0])  # top-r subspace well defined
    np.testing.assert_allclose(full.s, lam[:rank], rtol=1e-6, atol=1e-9 * lam[0])
    np.testing.assert_allclose(projector(full.U), projector(Q[:, :rank]), atol=1e-6)


# -- the full sample is exact -------------------------------------------------------------------


@given(
    N=st.integers(2, 25),
    M=st.integers(2, 25),
    seed=st.integers(0, 2**32 - 1),
    orthogonalize=st.booleans(),
    data=st.data(),
)
def test_full_sample_is_exact(N, M, seed, orthogonalize, data):
    G = np.random.default_rng(seed).standard_normal((N, M))
    U, s, Vt = np.linalg.svd(G)
    rank = data.draw(st.integers(1, min(N, M)), label="rank")
    assume(np.all(-np.diff(s[: rank + 1]) > 1e-4 * s[0]))
    res = solvers.asym_nystrom(
        G, rank, n_samples=M, n_rows=N, orthogonalize=orthogonalize, random_state=seed
    )
    np.testing.assert_allclose(res.s, s[:rank], rtol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(res.U * U[:, :rank], 0)), 1, atol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(res.V * Vt[:rank].T, 0)), 1, atol=1e-9)
    assert res.info["n_block_entries"] == 2 * N * M


@pytest.mark.parametrize("orthogonalize", [True, False])
def test_sym_nystrom_full_sample_is_exact(orthogonalize):
    G = np.random.default_rng(0).standard_normal((40, 25))
    U, s, Vt = np.linalg.svd(G)
    res = solvers.sym_nystrom(G, 6, n_samples=40, orthogonalize=orthogonalize, random_state=0)
    np.testing.assert_allclose(res.s, s[:6], rtol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(res.U * U[:, :6], 0)), 1, atol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(res.V * Vt[:6].T, 0)), 1, atol=1e-9)
    np.testing.assert_allclose(res.info["s_v"], s[:6], rtol=1e-9)
    np.testing.assert_allclose(res.info["s_ritz"], s[:6], rtol=1e-9)


# -- what the asymmetric method reads -----------------------------------------------------------


def test_asym_nystrom_reads_only_the_sample():
    G = np.random.default_rng(1).standard_normal((50, 40))
    ridx, cidx = np.array([1, 4, 9, 16, 25, 36, 49]), np.array([0, 3, 7, 11, 20, 39])
    src = ReadLog(G)
    res = solvers.asym_nystrom(src, 3, row_indices=ridx, col_indices=cidx)
    assert len(src.rows_read) == len(src.cols_read) == 1
    np.testing.assert_array_equal(src.rows_read[0], ridx)
    np.testing.assert_array_equal(src.cols_read[0], cidx)
    assert res.info["n_matvec"] == 0
    assert res.info["n_block_entries"] == len(ridx) * 40 + 50 * len(cidx)
    np.testing.assert_array_equal(res.info["row_indices"], ridx)
    # The same sample on the ndarray gives the same answer.
    ref = solvers.asym_nystrom(G, 3, row_indices=ridx, col_indices=cidx)
    np.testing.assert_allclose(res.U, ref.U)
    np.testing.assert_allclose(res.s, ref.s)


def test_asym_nystrom_uniform_sample_is_without_replacement():
    G = np.random.default_rng(2).standard_normal((30, 20))
    res = solvers.asym_nystrom(G, 2, n_samples=12, n_rows=15, random_state=3)
    ridx, cidx = res.info["row_indices"], res.info["col_indices"]
    assert ridx.size == np.unique(ridx).size == 15
    assert cidx.size == np.unique(cidx).size == 12
    assert res.info["n_rows"] == 15 and res.info["n_samples"] == res.info["effort"] == 12


def test_default_n_rows_is_n_samples():
    G = np.random.default_rng(2).standard_normal((30, 20))
    res = solvers.asym_nystrom(G, 2, n_samples=9, random_state=0)
    assert res.info["n_rows"] == 9
    assert res.info["scale"] == pytest.approx(np.sqrt(30 * 20 / (9 * 9)))


# -- norm sampling ------------------------------------------------------------------------------


def test_norm_sampling_prefers_heavy_rows_and_skips_zero_ones():
    rng = np.random.default_rng(4)
    G = rng.standard_normal((60, 50))
    G[:20] = 0  # zero rows carry no mass
    G[:, :10] *= 100  # heavy columns
    counts = np.zeros(50)
    for seed in range(20):
        res = solvers.asym_nystrom(G, 2, n_samples=10, sampling="norm", random_state=seed)
        assert np.all(res.info["row_indices"] >= 20)
        counts[res.info["col_indices"]] += 1
    # With weights 10^4 : 1 the ten heavy columns are drawn almost every time.
    assert counts[:10].sum() > 0.9 * counts.sum()


def test_norm_sampling_streams_rows_when_the_source_has_no_norms():
    G = np.random.default_rng(5).standard_normal((40, 30))
    G[:5] = 0
    direct = solvers.asym_nystrom(G, 3, n_samples=8, sampling="norm", random_state=6)
    lazy = solvers.asym_nystrom(aslinearoperator(G), 3, n_samples=8, sampling="norm",
                                random_state=6)
    np.testing.assert_array_equal(direct.info["row_indices"], lazy.info["row_indices"])
    np.testing.assert_array_equal(direct.info["col_indices"], lazy.info["col_indices"])
    np.testing.assert_allclose(lazy.s, direct.s, rtol=1e-10)
    sample_entries = 8 * 30 + 40 * 8
    assert direct.info["n_block_entries"] == sample_entries
    assert lazy.info["n_block_entries"] == 40 * 30 + sample_entries  # the streamed pass


def test_norm_sampling_with_fewer_nonzero_rows_than_samples():
    G = np.zeros((20, 15))
    G[:3] = np.random.default_rng(7).standard_normal((3, 15))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numerical rank 3 < rank 4
        res = solvers.asym_nystrom(G, 4, n_samples=6, sampling="norm", random_state=0)
    assert set(range(3)) <= set(res.info["row_indices"].tolist())


# -- rank-deficient samples ---------------------------------------------------------------------


@pytest.mark.parametrize("method", ["asym_nystrom", "sym_nystrom"])
@pytest.mark.parametrize("orthogonalize", [True, False])
def test_rank_deficient_sample_warns_and_pads(method, orthogonalize):
    rng = np.random.default_rng(8)
    G = rng.standard_normal((30, 2)) @ rng.standard_normal((2, 25))  # rank 2
    with pytest.warns(RuntimeWarning, match="numerical rank 2 < rank=4"):
        res = solvers.svd(
            G, 4, method=method, n_samples=10, orthogonalize=orthogonalize, random_state=0
        )
    assert res.info["numerical_rank"] == 2
    np.testing.assert_array_equal(res.s[2:], 0)
    if orthogonalize:
        # The sample captures the whole (rank 2) matrix: its Nyström approximation is exact.
        s = np.linalg.svd(G, compute_uv=False)
        np.testing.assert_allclose(res.s[:2], s[:2], rtol=1e-8)
    assert np.all(res.s[:2] > 0)
    np.testing.assert_allclose(res.U[:, 2:].T @ res.U, np.eye(4)[2:], atol=1e-10)
    np.testing.assert_allclose(res.V[:, 2:].T @ res.V, np.eye(4)[2:], atol=1e-10)


# -- symmetric Nyström specifics ----------------------------------------------------------------


def test_sym_nystrom_pairs_near_degenerate_values():
    """U and V come from two eigen-problems; pairing must not mix distinct values."""
    rng = np.random.default_rng(9)
    U = np.linalg.qr(rng.standard_normal((50, 6)))[0]
    V = np.linalg.qr(rng.standard_normal((40, 6)))[0]
    s = np.array([3.0, 3.0 - 1e-9, 2.0, 1.0, 1.0 - 1e-9, 0.5])
    G = (U * s) @ V.T
    res = solvers.sym_nystrom(G, 6, n_samples=50, random_state=1)
    np.testing.assert_allclose(res.s, s, rtol=1e-8)
    ritz = np.einsum("ij,ij->j", res.U, G @ res.V)
    assert np.all(ritz > 0)
    # Inside a (near-)degenerate pair the vectors may rotate, but the pair's subspaces are
    # right on both sides and the pairing never crosses pairs.
    for block in ([0, 1], [2], [3, 4], [5]):
        np.testing.assert_allclose(projector(res.U[:, block]), projector(U[:, block]), atol=1e-6)
        np.testing.assert_allclose(projector(res.V[:, block]), projector(V[:, block]), atol=1e-6)
        assert np.all(ritz[block] <= s[block[0]] * (1 + 1e-8))
    np.testing.assert_allclose(ritz[[2, 5]], s[[2, 5]], rtol=1e-8)


def test_sym_nystrom_cost_counters():
    G = np.random.default_rng(10).standard_normal((45, 35))
    n, rank = 12, 4
    res = solvers.sym_nystrom(G, rank, n_samples=n, random_state=0)
    assert res.info["n_block_entries"] == n * 35 + 45 * n
    assert res.info["n_matvec"] == 2 * n + rank
    assert res.info["effort"] == n


def test_sym_nystrom_raw_values_use_the_classic_scaling():
    G = np.random.default_rng(11).standard_normal((30, 20))
    res = solvers.sym_nystrom(G, 3, n_samples=8, orthogonalize=False, random_state=2)
    ridx = res.info["row_indices"]
    vals, _ = classic_nystrom(G @ G.T, ridx, 3)
    np.testing.assert_allclose(res.s, np.sqrt(vals), rtol=1e-10)


# -- core="full": the whole floored pseudo-inverse of the block ---------------------------------


@pytest.mark.parametrize("method", ["asym_nystrom", "sym_nystrom"])
def test_full_core_is_exact_once_the_sample_spans_the_matrix(method):
    rng = np.random.default_rng(12)
    p = 8  # rank of G; the sample (12 rows, 12 columns) spans its row and column spaces
    G = (rng.standard_normal((60, p)) * 2.0 ** -np.arange(p)) @ rng.standard_normal((p, 45))
    U, s, Vt = np.linalg.svd(G)
    res = solvers.svd(G, 3, method=method, n_samples=12, core="full", random_state=0)
    np.testing.assert_allclose(res.s, s[:3], rtol=1e-8)
    np.testing.assert_allclose(np.abs(np.sum(res.U * U[:, :3], 0)), 1, atol=1e-8)
    np.testing.assert_allclose(np.abs(np.sum(res.V * Vt[:3].T, 0)), 1, atol=1e-8)
    assert res.info["core"] == "full" and res.info["numerical_rank"] == p


def test_full_core_needs_orthogonalize():
    G = np.ones((10, 8))
    with pytest.raises(ValueError, match="core='full' needs orthogonalize=True"):
        solvers.asym_nystrom(G, 2, n_samples=4, core="full", orthogonalize=False)
    with pytest.raises(ValueError, match="core must be one of"):
        solvers.sym_nystrom(G, 2, n_samples=4, core="half")


def test_sym_nystrom_clips_the_sample_per_side():
    G = np.random.default_rng(13).standard_normal((30, 18))
    res = solvers.sym_nystrom(G, 3, n_samples=24, random_state=0)
    assert res.info["row_indices"].size == 24  # G G^T is 30 x 30
    assert res.info["col_indices"].size == 18  # G^T G is 18 x 18: sampled completely
    np.testing.assert_array_equal(res.info["col_indices"], np.arange(18))


def test_sym_nystrom_norm_sampling_skips_zero_rows_and_columns():
    G = np.random.default_rng(14).standard_normal((40, 30))
    G[:10] = 0
    G[:, :5] = 0
    res = solvers.sym_nystrom(G, 3, n_samples=12, sampling="norm", random_state=0)
    assert np.all(res.info["row_indices"] >= 10)
    assert np.all(res.info["col_indices"] >= 5)
    assert res.info["sampling"] == "norm"


# -- stability: no silent garbage ---------------------------------------------------------------


def whisper_block_problem():
    """Rank 3 on the sample's block, which also holds a 1e-12 whisper above the pinv floor.

    The sampled columns and rows (the first 10) carry entries outside the block that the block
    does not see: inverting the whisper's singular values amplifies them ~1e12-fold, the
    failure seen on sparse graph kernels (a tiny block triplet, big C v_i and R^T u_i).
    """
    rng = np.random.default_rng(0)
    N, M, n = 200, 150, 10
    G = rng.standard_normal((N, 3)) @ rng.standard_normal((3, M))
    G[n:, :n] += 0.1 * rng.standard_normal((N - n, n))
    G[:n, n:] += 0.1 * rng.standard_normal((n, M - n))
    G[:n, :n] += 1e-12 * rng.standard_normal((n, n))
    return G, np.arange(n)


def top_value_of_cur(C, R, cidx, k):
    """Largest singular value of ``C W_k^+ R`` (W = R[:, cidx]) without forming it."""
    U, s, Vt = np.linalg.svd(R[:, cidx])
    E, F = C @ (Vt[:k].T / s[:k]), R.T @ (U[:, :k] / s[:k])
    Re, Rf = np.linalg.qr(E)[1], np.linalg.qr(F)[1]
    return np.linalg.svd((Re * s[:k]) @ Rf.T, compute_uv=False)[0]


@pytest.mark.parametrize("core", ["rank", "full"])
def test_unstable_block_triplets_are_cut_with_a_warning(core):
    G, idx = whisper_block_problem()
    bsv = np.linalg.svd(G[np.ix_(idx, idx)], compute_uv=False)
    kept = np.count_nonzero(bsv > bsv[0] * idx.size * np.finfo(float).eps)  # the pinv floor
    assert kept > 3 and bsv[3] < 1e-11 * bsv[0]  # the whisper passes the floor ...
    assert top_value_of_cur(G[:, idx], G[idx], idx, kept) > 1e9  # ... and C W^+ R blows up
    # core="rank" with rank 4 > the block's real rank 3 takes the whisper into C W_r^+ R.
    rank = 3 if core == "full" else 4
    with pytest.warns(RuntimeWarning) as record:
        res = solvers.asym_nystrom(G, rank, row_indices=idx, col_indices=idx, core=core)
    messages = " | ".join(str(w.message) for w in record)
    assert "unstable core inversion" in messages
    assert res.info["numerical_rank"] == kept and res.info["core_rank"] == 3
    if core == "rank":
        assert "numerical rank 3 < rank=4" in messages
        np.testing.assert_array_equal(res.s[3:], 0)
    # Cut to the block's three real triplets, the answer is the rank-3 CUR one: near G's own.
    s = np.linalg.svd(G, compute_uv=False)
    np.testing.assert_allclose(res.s[:3], s[:3], rtol=0.01)
    assert res.info["norm_bound"] == pytest.approx(np.linalg.norm(G))


def test_sparse_graph_kernel_gets_no_impossible_answer():
    """Issue 9's failure on a small graph: asym Nyström on a sparse graph's SNE kernel.

    At N = 300000 with 400 samples it returned s_1 = 1.6e8 for an exact 2.0e-4; here
    (N = 5000, 40 samples) the pinv-floored C W^+ R has s_1 around 1e13 times the exact one.
    """
    from ksvd_bench.datasets.synthetic import make_directed_graph
    from ksvd_bench.kernels import KernelSource

    src = KernelSource(make_directed_graph(5000, random_state=0).adjacency, "sne")
    exact = solvers.svd(src, 1, method="tsvd", random_state=0).s[0]
    with pytest.warns(RuntimeWarning) as record:
        res = solvers.svd(src, 10, method="asym_nystrom", n_samples=40, random_state=0)
    messages = " | ".join(str(w.message) for w in record)
    assert "unstable core inversion" in messages and "numerical rank" in messages
    ridx, cidx = res.info["row_indices"], res.info["col_indices"]
    naive = top_value_of_cur(src.cols(cidx), src.rows(ridx), cidx, res.info["numerical_rank"])
    assert naive > 1e6 * exact  # the failure mode is present in this sample
    assert res.info["core_rank"] < res.info["numerical_rank"]
    assert res.info["norm_bound"] == pytest.approx(src.norm_bound())
    assert np.all(res.s <= src.norm_bound())
    assert exact / 10 < res.s[0] < 10 * exact  # sane (the sample is small: 4x here)


def test_answer_above_a_proven_bound_is_clipped_with_a_warning():
    # C W^+ R of [[d, 1], [1, 0]] from row 0 and column 0 is [[d, 1], [1, 1/d]]: s_1 ~ 1/d.
    d = 1e-3
    G = np.array([[d, 1.0], [1.0, 0.0]])
    with pytest.warns(RuntimeWarning, match="exceeds the bound .* clipped to the bound"):
        res = solvers.asym_nystrom(G, 1, row_indices=[0], col_indices=[0])
    assert res.s[0] == pytest.approx(np.linalg.norm(G))
    assert res.info["norm_bound"] == pytest.approx(np.linalg.norm(G))
    # Without norm_bound() the sample's estimate of ||G||_F is used: reported, not clipped.
    with pytest.warns(RuntimeWarning, match="estimate .* of \\|\\|G\\|\\|_F .* kept"):
        lazy = solvers.asym_nystrom(aslinearoperator(G), 1, row_indices=[0], col_indices=[0])
    assert lazy.info["norm_bound"] is None
    assert lazy.s[0] > 1 / (2 * d)


@pytest.mark.parametrize("method", ["asym_nystrom", "sym_nystrom"])
def test_raw_estimates_above_the_bound_are_reported_not_changed(method):
    K = np.diag([10.0, 1, 1, 1, 1, 1])  # sampling only the heavy index: (N / n) 10 = 60
    opts = {"n_samples": 1, "orthogonalize": False}
    if method == "asym_nystrom":
        opts.update(row_indices=[0], col_indices=[0], n_samples=None)
    else:
        opts.update(sampling="norm", random_state=0)
        K = K[:, :1]  # one column: G^T G is 1 x 1, and G G^T's sample is row 0 (all mass)
    with pytest.warns(RuntimeWarning, match="exceeds the bound .* raw estimates unchanged"):
        res = solvers.svd(K, 1, method=method, **opts)
    expected = 60.0 if method == "asym_nystrom" else np.sqrt(6 * 100.0)
    assert res.s[0] == pytest.approx(expected)
    # The exact Nyström approximation of that sample is K's own top part: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        orth = solvers.svd(K, 1, method=method, **{**opts, "orthogonalize": True})
    assert orth.s[0] == pytest.approx(10.0)


@pytest.mark.parametrize("method", ["asym_nystrom", "sym_nystrom"])
@pytest.mark.parametrize("opts", [{}, {"core": "full"}, {"orthogonalize": False}])
def test_a_spanning_sample_raises_no_alarm(method, opts):
    rng = np.random.default_rng(15)
    G = (rng.standard_normal((60, 5)) * 2.0 ** -np.arange(5)) @ rng.standard_normal((5, 45))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = solvers.svd(G, 3, method=method, n_samples=45, random_state=0, **opts)
    assert np.all(res.s <= np.linalg.norm(G))
    if method == "asym_nystrom":
        assert res.info["core_rank"] == (5 if opts.get("core") == "full" else 3)
