"""Synthetic generators: planted-community directed graphs and controlled kernel problems."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from ksvd_bench.datasets import (
    Graph,
    KernelProblem,
    make_clustered_points,
    make_directed_graph,
    make_kernel_problem,
    measure_coherence,
)


@pytest.fixture(autouse=True, scope="module")
def _single_blas_thread():
    # the matrices here are small: BLAS threads only add start-up and contention costs
    with threadpool_limits(limits=1, user_api="blas"):
        yield


# --------------------------------------------------------------------------- directed graphs


def _intra_fraction(g):
    A = g.adjacency.tocoo()
    return float(np.mean(g.labels[A.row] == g.labels[A.col]))


def _in_degree(g):
    return np.asarray(g.adjacency.sum(axis=0)).ravel()


def test_graph_basic_contract():
    g = make_directed_graph(1000, n_communities=4, avg_degree=6.0, random_state=0)
    assert isinstance(g, Graph) and g.name == "synthetic"
    A = g.adjacency
    assert A.shape == (1000, 1000) and A.dtype == np.float64 and A.format == "csr"
    assert g.n_edges == 6000
    np.testing.assert_array_equal(A.data, 1.0)  # binary: no duplicate edge was summed
    assert A.diagonal().sum() == 0
    A.check_format(full_check=True)
    C = A.copy()
    C.sum_duplicates()
    assert C.nnz == A.nnz
    assert g.labels.dtype == np.int64 and set(np.unique(g.labels)) == {0, 1, 2, 3}
    assert np.ptp(np.bincount(g.labels)) <= 1
    assert g.class_names == ("community_0", "community_1", "community_2", "community_3")
    np.testing.assert_array_equal(g.node_ids, np.arange(1000))


def test_graph_deterministic():
    a = make_directed_graph(800, random_state=7)
    b = make_directed_graph(800, random_state=np.random.default_rng(7))
    c = make_directed_graph(800, random_state=8)
    assert (a.adjacency != b.adjacency).nnz == 0
    np.testing.assert_array_equal(a.labels, b.labels)
    assert (a.adjacency != c.adjacency).nnz > 0


@pytest.mark.parametrize("p_in", [0.0, 0.3, 0.8, 1.0])
def test_graph_community_structure(p_in):
    g = make_directed_graph(2000, n_communities=5, p_in=p_in, random_state=1)
    assert abs(_intra_fraction(g) - p_in) <= 1.0 / g.n_edges
    # the planted partition is visible: with 5 communities about 20% of the pairs are intra,
    # so any p_in above that makes the communities denser inside than between
    sizes = np.bincount(g.labels)
    intra_pairs = np.sum(sizes * (sizes - 1))
    inter_pairs = g.n_nodes**2 - np.sum(sizes**2)
    intra_density = _intra_fraction(g) * g.n_edges / intra_pairs
    inter_density = (1 - _intra_fraction(g)) * g.n_edges / inter_pairs
    if p_in >= 0.3:
        assert intra_density > inter_density
    if p_in == 0.0:
        assert intra_density == 0.0


def test_single_community_puts_every_edge_inside():
    g = make_directed_graph(300, n_communities=1, p_in=0.2, random_state=0)
    assert _intra_fraction(g) == 1.0


def test_graph_heavy_tailed_in_degree():
    g = make_directed_graph(5000, avg_degree=5.0, degree_exponent=2.5, random_state=3)
    k_in = _in_degree(g)
    k_out = np.diff(g.adjacency.indptr)
    assert k_in.mean() == pytest.approx(5.0)
    # a Poisson(5) in-degree (Erdos-Renyi) would have a maximum around 15
    poisson_max = np.random.default_rng(0).poisson(5.0, size=5000).max()
    assert k_in.max() > 10 * poisson_max
    assert k_out.max() < 3 * poisson_max  # out-degree stays light-tailed
    # fraction of nodes above 4x the mean in-degree: heavy tail vs Poisson
    assert np.mean(k_in > 20) > 0.01 > np.mean(np.random.default_rng(1).poisson(5, 5000) > 20)


def test_smaller_exponent_gives_heavier_hubs():
    maxima = [
        _in_degree(make_directed_graph(4000, degree_exponent=a, random_state=5)).max()
        for a in (2.1, 2.5, 4.0)
    ]
    assert maxima[0] > maxima[1] > maxima[2]


@pytest.mark.parametrize("alpha", [2.1, 2.5, 3.0])
def test_in_degree_tail_exponent_hill_estimate(alpha):
    """The Hill estimator on the top in-degrees recovers the requested power-law exponent."""
    g = make_directed_graph(20000, avg_degree=10.0, degree_exponent=alpha, random_state=0)
    top = np.sort(_in_degree(g))[::-1][:400]
    hill = 1.0 / np.mean(np.log(top[:-1] / top[-1]))  # estimates alpha - 1 (CCDF exponent)
    assert abs(hill + 1.0 - alpha) < 0.35


@pytest.mark.parametrize("alpha", [1.05, 1.3])
def test_extreme_exponent_saturated_hubs(alpha):
    """Weights so skewed that hubs are cited by every possible node: counts stay exact."""
    g = make_directed_graph(3000, avg_degree=8.0, degree_exponent=alpha, random_state=0)
    assert g.n_edges == 24000 and g.adjacency.diagonal().sum() == 0
    np.testing.assert_array_equal(g.adjacency.data, 1.0)
    k_in = _in_degree(g)
    assert k_in.max() <= 2999
    assert np.sum(k_in == 2999) >= (1 if alpha < 1.1 else 0)  # a hub cited by everybody else
    assert k_in.max() > 100 * k_in.mean()
    assert abs(_intra_fraction(g) - 0.8) <= 1.0 / g.n_edges


def test_graph_large_exact_edge_count():
    # its build time is an asv benchmark (bench_datasets.TimeDatasets), not a unit test
    g = make_directed_graph(20000, random_state=0)
    assert g.n_edges == 100000 and g.adjacency.nnz == 100000
    assert g.adjacency.diagonal().sum() == 0


def _capacities(n, k):
    sizes = np.bincount(np.arange(n) % k)
    return int(np.sum(sizes * (sizes - 1))), int(n * n - np.sum(sizes**2))


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 40),
    k_frac=st.floats(0.0, 1.0),
    avg_degree=st.floats(0.05, 40.0),
    p_in=st.floats(0.0, 1.0),
    alpha=st.floats(1.2, 5.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_graph_any_size_exact_counts_or_clear_error(n, k_frac, avg_degree, p_in, alpha, seed):
    k = 1 + int(k_frac * (n - 1))
    n_edges = int(round(avg_degree * n))
    n_intra = n_edges if k == 1 else int(round(p_in * n_edges))
    intra_cap, inter_cap = _capacities(n, k)
    kwargs = dict(n_communities=k, avg_degree=avg_degree, p_in=p_in, degree_exponent=alpha)
    if n_intra > intra_cap or n_edges - n_intra > inter_cap:
        with pytest.raises(ValueError, match="avg_degree"):
            make_directed_graph(n, **kwargs, random_state=seed)
        return
    g = make_directed_graph(n, **kwargs, random_state=seed)
    A = g.adjacency
    assert g.n_edges == n_edges
    assert A.diagonal().sum() == 0
    np.testing.assert_array_equal(A.data, 1.0)
    coo = A.tocoo()
    assert int(np.sum(g.labels[coo.row] == g.labels[coo.col])) == n_intra


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_nodes": 1}, ValueError, "n_nodes"),
        ({"n_nodes": 10.0}, TypeError, "n_nodes"),
        ({"n_communities": 0}, ValueError, "n_communities"),
        ({"n_nodes": 5, "n_communities": 6}, ValueError, "n_communities"),
        ({"avg_degree": 0.0}, ValueError, "avg_degree"),
        ({"avg_degree": float("nan")}, ValueError, "avg_degree"),
        ({"avg_degree": "5"}, TypeError, "avg_degree"),
        ({"p_in": 1.5}, ValueError, "p_in"),
        ({"p_in": -0.1}, ValueError, "p_in"),
        ({"degree_exponent": 1.0}, ValueError, "degree_exponent"),
        ({"n_nodes": 10, "avg_degree": 9.5}, ValueError, "avg_degree"),
        ({"random_state": "seed"}, TypeError, "seed"),
    ],
)
def test_graph_validation(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_directed_graph(**kwargs)


# --------------------------------------------------------------------------- kernel problems


def _expected_spectrum(decay, rate, r):
    k = np.arange(1, r + 1)
    if decay == "exponential":
        return np.exp(-rate * (k - 1))
    if decay == "polynomial":
        return 1.0 / k**rate
    return np.ones(r)


@pytest.mark.parametrize(
    ("decay", "rate"),
    [
        ("exponential", 0.2),
        ("exponential", 0.5),
        ("polynomial", 1.0),
        ("polynomial", 2.0),
        ("flat", None),
    ],
)
@pytest.mark.parametrize("coherence", [0.0, 0.6])
def test_spectrum_within_weyl_bound(decay, rate, coherence):
    n, m, r, noise = 240, 180, 12, 1e-3
    p = make_kernel_problem(
        n,
        m,
        rank=r,
        decay=decay,
        decay_rate=rate,
        coherence=coherence,
        noise=noise,
        random_state=0,
        return_details=True,
    )
    assert isinstance(p, KernelProblem) and p.rank == r
    np.testing.assert_allclose(p.singular_values, _expected_spectrum(decay, rate, r), rtol=1e-14)
    np.testing.assert_allclose(p.U.T @ p.U, np.eye(r), atol=1e-12)
    np.testing.assert_allclose(p.V.T @ p.V, np.eye(r), atol=1e-12)
    E = p.G - (p.U * p.singular_values) @ p.V.T
    e_norm = np.linalg.norm(E, 2)
    assert 0.5 * noise < e_norm < 1.2 * noise  # noise is the spectral norm of E
    sigma = np.linalg.svd(p.G, compute_uv=False)
    assert np.all(np.abs(sigma[:r] - p.singular_values) <= e_norm * (1 + 1e-9))
    assert sigma[r] <= e_norm * (1 + 1e-9)


def test_default_decay_rates_and_noiseless_rank():
    p = make_kernel_problem(100, 80, rank=7, noise=0.0, random_state=1, return_details=True)
    assert p.params["decay_rate"] == 0.2
    np.testing.assert_allclose(p.G, (p.U * p.singular_values) @ p.V.T, atol=1e-15)
    sigma = np.linalg.svd(p.G, compute_uv=False)
    np.testing.assert_allclose(sigma[:7], p.singular_values, atol=1e-13)
    assert sigma[7] < 1e-13
    q = make_kernel_problem(
        100, 80, rank=7, decay="polynomial", random_state=1, return_details=True
    )
    assert q.params["decay_rate"] == 1.0


def test_coherence_increases_with_parameter():
    n, m, r = 1000, 600, 10
    grid = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    problems = [
        make_kernel_problem(n, m, rank=r, coherence=c, random_state=4, return_details=True)
        for c in grid
    ]
    mu_u = [p.coherence_u for p in problems]
    mu_v = [p.coherence_v for p in problems]
    assert np.all(np.diff(mu_u) > 0) and np.all(np.diff(mu_v) > 0)
    # delocalised at 0, maximal (r coordinate vectors) at 1 with support_size=1
    assert mu_u[0] < 0.15 * n / r and mu_v[0] < 0.15 * m / r
    assert mu_u[-1] == pytest.approx(n / r) and mu_v[-1] == pytest.approx(m / r)
    assert problems[-1].coherence == max(mu_u[-1], mu_v[-1])
    # the documented rule of thumb: mu is about c N / r once above the random level
    for c, mu in zip(grid, mu_u, strict=True):
        if c >= 0.5:
            assert 0.6 * c * n / r < mu <= n / r + 1e-9


def test_support_size_spreads_localised_vectors():
    n, r, s = 600, 10, 6
    p = make_kernel_problem(
        n, n, rank=r, coherence=1.0, support_size=s, random_state=2, return_details=True
    )
    rows_used = np.flatnonzero(np.abs(p.U).sum(axis=1) > 0)
    assert rows_used.size == r * s
    assert n / (r * s) - 1e-9 <= p.coherence_u <= n / r + 1e-9


def test_localised_vectors_defeat_uniform_row_sampling():
    """Why coherence matters for Nystrom: a uniform row sample misses localised directions."""
    n, r, m = 2000, 10, 200
    rows = np.random.default_rng(0).choice(n, size=m, replace=False)
    smallest = {}
    for c in (0.0, 1.0):
        p = make_kernel_problem(n, 50, rank=r, coherence=c, random_state=3, return_details=True)
        smallest[c] = np.linalg.svd(p.U[rows], compute_uv=False)[-1]
    # delocalised: the sample sees every direction (about sqrt(m / n) each)
    assert smallest[0.0] > 0.3 * np.sqrt(m / n)
    # localised: directions whose support row was not sampled are invisible
    assert smallest[1.0] < 1e-12


def test_measure_coherence_against_svd_oracle():
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((50, 4)) * np.array([1.0, 10.0, 0.1, 3.0])
    Q[0] *= 30.0
    left = np.linalg.svd(Q, full_matrices=False)[0]
    expected = 50 / 4 * np.max(np.sum(left**2, axis=1))
    assert measure_coherence(Q) == pytest.approx(expected, rel=1e-12)
    assert measure_coherence(np.eye(8)[:, :2]) == pytest.approx(4.0)
    assert measure_coherence(np.ones((9, 1))) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="Q"):
        measure_coherence(np.ones((3, 4)))
    with pytest.raises(ValueError, match="finite"):
        measure_coherence(np.full((3, 1), np.nan))


def test_kernel_problem_deterministic_and_return_forms():
    kw = dict(rank=5, coherence=0.3, random_state=11)
    G = make_kernel_problem(60, 40, **kw)
    p = make_kernel_problem(60, 40, **kw, return_details=True)
    assert isinstance(G, np.ndarray) and G.flags.c_contiguous and G.shape == (60, 40)
    np.testing.assert_array_equal(G, p.G)
    np.testing.assert_array_equal(
        G,
        make_kernel_problem(60, 40, rank=5, coherence=0.3, random_state=np.random.default_rng(11)),
    )
    assert not np.array_equal(
        G, make_kernel_problem(60, 40, rank=5, coherence=0.3, random_state=12)
    )


def test_square_problem_is_asymmetric():
    G = make_kernel_problem(50, 50, rank=5, random_state=0)
    assert np.abs(G - G.T).max() > 0.1 * np.abs(G).max()


def test_float32():
    p = make_kernel_problem(120, 90, rank=6, dtype=np.float32, random_state=0, return_details=True)
    assert p.G.dtype == np.float32 and p.U.dtype == np.float64
    sigma = np.linalg.svd(p.G.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(sigma[:6], p.singular_values, atol=2e-3)


@given(
    n=st.integers(1, 30),
    m=st.integers(1, 30),
    r=st.integers(1, 30),
    coherence=st.floats(0.0, 1.0),
    support=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=40, deadline=None)
def test_kernel_problem_any_shape(n, m, r, coherence, support, seed):
    assume(r * support <= min(n, m))
    p = make_kernel_problem(
        n,
        m,
        rank=r,
        coherence=coherence,
        support_size=support,
        noise=0.0,
        random_state=seed,
        return_details=True,
    )
    assert p.G.shape == (n, m) and np.all(np.isfinite(p.G))
    np.testing.assert_allclose(p.U.T @ p.U, np.eye(r), atol=1e-10)
    np.testing.assert_allclose(p.V.T @ p.V, np.eye(r), atol=1e-10)
    assert 1.0 - 1e-9 <= p.coherence_u <= n / r + 1e-9
    assert 1.0 - 1e-9 <= p.coherence_v <= m / r + 1e-9


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_rows": 0}, ValueError, "n_rows"),
        ({"n_cols": 2.5}, TypeError, "n_cols"),
        ({"rank": 0}, ValueError, "rank"),
        ({"rank": 41}, ValueError, "rank"),
        ({"decay": "linear"}, ValueError, "decay"),
        ({"decay_rate": 0.0}, ValueError, "decay_rate"),
        ({"decay": "flat", "decay_rate": 1.0}, ValueError, "decay_rate"),
        ({"coherence": 1.5}, ValueError, "coherence"),
        ({"coherence": float("nan")}, ValueError, "coherence"),
        ({"noise": -1e-3}, ValueError, "noise"),
        ({"support_size": 0}, ValueError, "support_size"),
        ({"rank": 10, "support_size": 5}, ValueError, "support_size"),
        ({"dtype": np.int64}, ValueError, "dtype"),
        ({"dtype": "not-a-dtype"}, TypeError, "dtype"),
    ],
)
def test_kernel_problem_validation(kwargs, error, match):
    base = {"n_rows": 50, "n_cols": 40}
    base.update(kwargs)
    n, m = base.pop("n_rows"), base.pop("n_cols")
    with pytest.raises(error, match=match):
        make_kernel_problem(n, m, **base)


# --------------------------------------------------------------------------- clustered points


def _top_singular_values(p, kernel, center=False, k=None):
    from ksvd_bench.kernels import kernel_matrix

    G = kernel_matrix(p.X, p.Z, kernel, gamma=p.gamma, center=center)
    s = np.linalg.svd(G, compute_uv=False)
    return s if k is None else s[:k]


def test_clustered_points_contract():
    p = make_clustered_points(300, 200, 16, 4, random_state=0)
    X, Z = p
    assert X.shape == (300, 16) and Z.shape == (200, 16)
    assert X.dtype == Z.dtype == np.float64 and X.flags.c_contiguous
    assert p.labels_x.shape == (300,) and p.labels_z.shape == (200,)
    assert p.centers.shape == (4, 16) and p.n_clusters == 4 and p.gamma == 1.0
    # Z clusters have equal sizes, X clusters follow the default 2..1 proportions exactly
    np.testing.assert_array_equal(np.bincount(p.labels_z), [50, 50, 50, 50])
    counts_x = np.bincount(p.labels_x)
    assert counts_x.sum() == 300 and np.all(np.diff(counts_x) <= 0)
    w = np.linspace(2, 1, 4)
    np.testing.assert_allclose(counts_x / 300, w / w.sum(), atol=1 / 300)


def test_clustered_points_geometry():
    p = make_clustered_points(
        2000, 1000, 64, 5, cluster_std=0.1, separation=3.0, gamma=2.0, random_state=1
    )
    # centres are pairwise `separation * gamma` apart (exactly, since K <= d)
    diff = p.centers[:, None, :] - p.centers[None, :, :]
    dist = np.sqrt((diff**2).sum(-1))[np.triu_indices(5, 1)]
    np.testing.assert_allclose(dist, 3.0 * 2.0, rtol=1e-12)
    # points lie about `cluster_std * gamma` from their own centre
    radius = np.linalg.norm(p.X - p.centers[p.labels_x], axis=1)
    assert abs(np.median(radius) - 0.2) < 0.02
    assert np.linalg.norm(p.Z - p.centers[p.labels_z], axis=1).max() < 0.4


def test_clustered_points_deterministic_and_float32():
    a = make_clustered_points(100, 80, 8, 3, random_state=5)
    b = make_clustered_points(100, 80, 8, 3, random_state=5)
    c = make_clustered_points(100, 80, 8, 3, random_state=6)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.labels_z, b.labels_z)
    assert not np.array_equal(a.X, c.X)
    f = make_clustered_points(100, 80, 8, 3, random_state=5, dtype=np.float32)
    assert f.X.dtype == f.Z.dtype == np.float32
    np.testing.assert_allclose(f.X, a.X, rtol=1e-6)


@pytest.mark.parametrize("kernel", ["sne", "rbf"])
def test_clustered_points_spectral_gap_at_n_clusters(kernel):
    # the documented gap: sigma_{K+1} / sigma_K ~ 2 cluster_std^2 / d, far below 1e-2
    p = make_clustered_points(800, 600, 64, 10, random_state=0)
    s = _top_singular_values(p, kernel)
    assert s[10] / s[9] < 2e-3
    assert np.sqrt(np.sum(s[10:] ** 2)) / s[9] < 2e-2
    # no gap inside the top K: the cluster singular values are spread by at most sqrt(2)
    assert s[0] / s[9] < 1.6 and np.all(s[1:10] / s[:9] > 0.85)


def test_clustered_points_gap_tracks_cluster_std():
    # the gap scales like cluster_std^2: doubling the radius quadruples sigma_{K+1}/sigma_K
    ratios = []
    for std in (0.05, 0.1):
        s = _top_singular_values(
            make_clustered_points(600, 600, 32, 6, cluster_std=std, random_state=2), "sne"
        )
        ratios.append(s[6] / s[5])
    assert 2.5 < ratios[1] / ratios[0] < 6.0


def test_clustered_points_top_subspace_is_the_clusters():
    # the top-K left singular subspace is (nearly) spanned by the cluster indicators: SNE's
    # row normaliser cancels the within-cluster row scaling, so only the rank-d term is left
    from scipy.linalg import subspace_angles

    from ksvd_bench.kernels import kernel_matrix

    p = make_clustered_points(500, 400, 64, 5, random_state=3)
    U = np.linalg.svd(kernel_matrix(p.X, p.Z, "sne", gamma=p.gamma))[0][:, :5]
    indicators = (p.labels_x[:, None] == np.arange(5)).astype(float)
    assert np.sin(subspace_angles(U, indicators).max()) < 1e-4


def test_clustered_points_centred_gap_moves_to_k_minus_1():
    p = make_clustered_points(600, 600, 64, 6, random_state=4)
    s = _top_singular_values(p, "sne", center=True)
    assert s[5] / s[4] < 2e-3 and s[4] / s[0] > 0.3


def test_clustered_points_more_clusters_than_dimensions():
    p = make_clustered_points(400, 300, 3, 12, random_state=0)
    assert p.centers.shape == (12, 3)
    assert np.bincount(p.labels_x, minlength=12).min() >= 1


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(n=5, m=10, d=2, n_clusters=6), ValueError, "n_clusters must be <= min"),
        (dict(n=0, m=10, d=2, n_clusters=1), ValueError, "n must be >= 1"),
        (dict(n=10, m=10, d=0, n_clusters=1), ValueError, "d must be >= 1"),
        (dict(n=10.0, m=10, d=2, n_clusters=1), TypeError, "n must be an integer"),
        (
            dict(n=10, m=10, d=2, n_clusters=2, cluster_std=0.0),
            ValueError,
            "cluster_std must be > 0",
        ),
        (
            dict(n=10, m=10, d=2, n_clusters=2, separation=np.inf),
            ValueError,
            "separation must be finite",
        ),
        (dict(n=10, m=10, d=2, n_clusters=2, gamma=-1.0), ValueError, "gamma must be > 0"),
        (
            dict(n=10, m=10, d=2, n_clusters=2, weights=[1.0]),
            ValueError,
            "weights must have n_clusters=2",
        ),
        (
            dict(n=10, m=10, d=2, n_clusters=2, weights=[1.0, 0.0]),
            ValueError,
            "weights must be finite and > 0",
        ),
        (
            dict(n=10, m=10, d=2, n_clusters=2, dtype=np.int32),
            ValueError,
            "dtype must be float32 or float64",
        ),
    ],
)
def test_clustered_points_validation(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_clustered_points(**kwargs)


def test_attention_points_are_seeded_low_rank_plus_noise():
    from ksvd_bench.datasets import make_attention_points

    P = make_attention_points(400, d=16, rank=8, model_dim=32, noise=0.0, random_state=0)
    Q, K = P
    assert Q.shape == K.shape == (400, 16) and P.gamma == 4.0
    assert P.params["self_attention"] and P.params["rank"] == 8
    # noiseless tokens of rank 8: so are the queries and keys (the projections of one T)
    for V in (Q, K):
        s = np.linalg.svd(V, compute_uv=False)
        assert s[7] > 1e-3 * s[0] and s[8] < 1e-12 * s[0]
    again = make_attention_points(400, d=16, rank=8, model_dim=32, noise=0.0, random_state=0)
    np.testing.assert_array_equal(again.X, Q)
    np.testing.assert_array_equal(again.Z, K)
    noisy = make_attention_points(400, d=16, rank=8, model_dim=32, random_state=0)
    assert np.linalg.svd(noisy.X, compute_uv=False)[15] > 0.1  # noise: full rank d
    # logits q.k / sqrt(d) of about unit spread, as in a trained head
    assert 0.5 < np.std(noisy.X @ noisy.Z.T / noisy.gamma) < 2.0
    cross = make_attention_points(50, 70, d=4, random_state=1, dtype=np.float32)
    assert cross.X.shape == (50, 4) and cross.Z.shape == (70, 4)
    assert cross.X.dtype == np.float32 and not cross.params["self_attention"]
    with pytest.raises(ValueError, match="rank must be <= model_dim = 32, got 40"):
        make_attention_points(10, rank=40, model_dim=32)
    with pytest.raises(ValueError, match="noise must be >= 0"):
        make_attention_points(10, noise=-1.0)
    with pytest.raises(TypeError, match="n must be an integer"):
        make_attention_points(10.5)
