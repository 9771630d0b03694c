"""Seeded synthetic problems: directed graphs with communities, and kernel-like matrices.

* :func:`make_directed_graph` is a directed, degree-corrected planted-partition graph
  (a Chung-Lu-type model): nodes are split into communities, every node gets a Pareto
  "attractiveness" weight, each node's number of intra- and inter-community citations received
  is drawn multinomially in proportion to its weight, and the citing nodes are then chosen
  uniformly (distinct, in / outside the cited node's community). The in-degree has a
  power-law tail with the weight's exponent, as in citation graphs; the out-degree is close to
  Poisson.
* :func:`make_kernel_problem` is an asymmetric ``N x M`` matrix ``U diag(s) V^T + noise`` with a
  prescribed singular-value decay and a tunable coherence of the singular vectors, the two
  properties that decide how hard a matrix is for randomized SVD and for uniform-sampling
  Nyström methods.
* :func:`make_clustered_points` is two point sets X (N x d) and Z (M x d) drawn from the same
  K tight, well separated clusters, so that the SNE or RBF kernel ``G_ij = k(x_i, z_j)`` has a
  clear spectral gap after its K-th singular value: the two-point-set problem of the scale
  study (``ksvd-bench scale``).
* :func:`make_attention_points` is the queries Q (N x d) and keys K (M x d) of one attention
  head over tokens with low-rank-plus-noise embeddings, for the softmax kernel
  ``G = softmax(Q K^T / sqrt(d))`` (row-wise): the attention matrix whose asymmetric SVD
  Primal-Attention and KEP-SVGP build on.

References
----------
F. Chung, L. Lu. Connected components in random graphs with given expected degree sequences.
Annals of Combinatorics 6:125-145, 2002.

B. Karrer, M. E. J. Newman. Stochastic blockmodels and community structure in networks.
Physical Review E 83:016107, 2011.

E. J. Candès, B. Recht. Exact matrix completion via convex optimization. Foundations of
Computational Mathematics 9:717-772, 2009. (the coherence mu = (N/r) max_i |U_i|^2)

Y. Chen, Q. Tao, F. Tonin, J. A. K. Suykens. Primal-Attention: Self-attention through
asymmetric kernel SVD in primal representation. NeurIPS 2023 (arXiv:2305.19798).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers import check_choice, check_int

from ..kernels.params import check_dtype as _check_dtype  # the one float32/float64 check
from .graphs import Graph

__all__ = [
    "DECAYS",
    "AttentionPoints",
    "ClusteredPoints",
    "KernelProblem",
    "make_attention_points",
    "make_clustered_points",
    "make_directed_graph",
    "make_kernel_problem",
    "make_rare_clusters",
    "measure_coherence",
    "rare_cluster_count",
    "RARE_SHARE",
]

#: singular-value decay laws understood by :func:`make_kernel_problem`
DECAYS = ("exponential", "polynomial", "flat")
_DEFAULT_DECAY_RATE = {"exponential": 0.2, "polynomial": 1.0}

# Redraw rounds for the citing nodes of a cited node before switching to exact sampling
# without replacement (each round succeeds with probability >= 1/2 per missing edge).
_MAX_ROUNDS = 64


def _check_real(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


# --------------------------------------------------------------------------- directed graphs


def _capped_multinomial(rng, total, weights, capacity):
    """Integer vector d with sum ``total``, ``d <= capacity``, drawn multinomially ~ weights.

    Overflow above a node's capacity is redistributed, again multinomially, over the nodes
    that still have room (water-filling); ``total <= capacity.sum()`` is assumed.
    """
    d = rng.multinomial(total, weights / weights.sum())
    while True:
        overflow = int(np.sum(np.maximum(d - capacity, 0)))
        if overflow == 0:
            return d
        d = np.minimum(d, capacity)
        room = np.where(d < capacity, weights, 0.0)
        if room.sum() <= 0:  # every node with weight is full: spread by remaining room
            room = (capacity - d).astype(np.float64)
        d = d + rng.multinomial(overflow, room / room.sum())


class _Layout:
    """Nodes laid out community by community, so that a community is a contiguous slice."""

    def __init__(self, labels, n_communities):
        self.labels = labels
        self.order = np.argsort(labels, kind="stable")
        self.sizes = np.bincount(labels, minlength=n_communities)
        self.starts = np.concatenate(([0], np.cumsum(self.sizes)[:-1]))
        self.position = np.empty_like(self.order)
        self.position[self.order] = np.arange(labels.size)

    def allowed_count(self, targets, intra):
        size = self.sizes[self.labels[targets]]
        return size - 1 if intra else self.labels.size - size

    def draw_sources(self, rng, targets, intra):
        """One uniformly random allowed citing node for each cited node in ``targets``."""
        comm = self.labels[targets]
        start = self.starts[comm]
        size = self.sizes[comm]
        if intra:
            u = (rng.random(targets.size) * (size - 1)).astype(np.int64)
            u += u >= self.position[targets] - start  # skip the target itself
            return self.order[start + u]
        u = (rng.random(targets.size) * (self.labels.size - size)).astype(np.int64)
        u += np.where(u >= start, size, 0)  # skip the target's own community
        return self.order[u]

    def allowed_sources(self, target, intra):
        comm = self.labels[target]
        members = self.order[self.starts[comm] : self.starts[comm] + self.sizes[comm]]
        if intra:
            return members[members != target]
        mask = np.ones(self.labels.size, dtype=bool)
        mask[members] = False
        return np.flatnonzero(mask)


def _sorted_unique(keys):
    # sort-based: np.unique's hash path is far slower on int64 keys (numpy 2.4)
    keys = np.sort(keys)
    keep = np.empty(keys.size, dtype=bool)
    keep[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def _sample_edges(rng, layout, weights, needed, intra):
    """``needed`` distinct edges of one kind (intra / inter community) as keys ``src*N + dst``.

    The in-degree of every node is drawn first (multinomial in the weights, capped by the
    number of allowed citing nodes), then that many distinct citing nodes uniformly.
    """
    n = weights.size
    nodes = np.arange(n)
    capacity = layout.allowed_count(nodes, intra)
    if needed == 0:
        return np.empty(0, dtype=np.int64)
    in_degree = _capped_multinomial(rng, needed, weights, capacity)
    # nodes needing more than half of their possible citers: draw them without replacement
    dense = np.flatnonzero(2 * in_degree > capacity)
    keys = [
        layout.allowed_sources(j, intra)[rng.permutation(capacity[j])[: in_degree[j]]].astype(
            np.int64
        )
        * n
        + j
        for j in dense
    ]
    missing = in_degree.copy()
    missing[dense] = 0
    accepted = np.empty(0, dtype=np.int64)
    for _ in range(_MAX_ROUNDS):
        if not missing.any():
            break
        targets = np.repeat(nodes, missing)
        new = layout.draw_sources(rng, targets, intra).astype(np.int64) * n + targets
        accepted = _sorted_unique(np.concatenate([accepted, new]))
        missing = in_degree - np.bincount(accepted % n, minlength=n)
        missing[dense] = 0
    else:
        # astronomically unlikely: finish the stragglers exactly
        for j in np.flatnonzero(missing):
            have = accepted[accepted % n == j] // n
            pool = np.setdiff1d(layout.allowed_sources(j, intra), have)
            pick = pool[rng.permutation(pool.size)[: missing[j]]]
            keys.append(pick.astype(np.int64) * n + j)
    keys.append(accepted)
    return np.concatenate(keys)


def make_directed_graph(
    n_nodes=500,
    *,
    n_communities=5,
    avg_degree=5.0,
    p_in=0.8,
    degree_exponent=2.5,
    random_state=None,
):
    """Random directed graph with planted communities and a heavy-tailed in-degree.

    Parameters
    ----------
    n_nodes : int, default=500
        Number of nodes N, at least 2.
    n_communities : int, default=5
        Number of communities K, ``1 <= K <= N``. Nodes are assigned to communities of sizes
        ``floor(N/K)`` or ``ceil(N/K)`` in a random order; the community is the node's label.
    avg_degree : float, default=5.0
        Mean out-degree (= mean in-degree): the graph has exactly ``round(avg_degree * N)``
        directed edges.
    p_in : float, default=0.8
        Fraction of edges inside a community: exactly ``round(p_in * E)`` edges join two nodes
        of the same community (all of them when ``K = 1``).
    degree_exponent : float, default=2.5
        Exponent alpha > 1 of the node weights' Pareto density ``w^(-alpha)`` (w >= 1). The
        expected in-degree of a node is proportional to its weight, so the in-degree tail follows
        ``P(k_in = k) ~ k^(-alpha)``; smaller alpha means heavier hubs. Citation graphs have
        alpha around 2 to 3.
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator; the same seed gives the same graph.

    Returns
    -------
    Graph
        ``name="synthetic"``, ``adjacency[i, j] = 1`` iff node i cites node j, no self-loops and
        no duplicate edges; ``labels`` the community of each node, ``class_names``
        ``("community_0", ...)``, ``node_ids`` ``arange(N)``.

    Raises
    ------
    ValueError
        A parameter is out of range, or the requested number of intra- or inter-community
        edges exceeds the number of distinct pairs available.

    Notes
    -----
    Node j gets the weight ``w_j = (1 - u_j)^(-1/(alpha - 1))``, ``u_j`` uniform. The
    ``round(p_in * E)`` intra-community edges are placed as follows (inter-community edges
    alike, with "outside the community" for "inside"): the in-degrees ``d_j`` are one
    multinomial draw with probabilities ``w_j / sum(w)``, capped at the number of possible
    citing nodes (the rest of j's community) with the overflow redistributed over the nodes that
    still have room; then j receives ``d_j`` distinct citing nodes drawn uniformly from its
    community. Hence ``E[d_j]`` is proportional to ``w_j`` (until capped), the edge counts are
    exact and there are no self-loops or duplicates. Everything is vectorised; N = 20000 with
    the defaults takes a few tens of milliseconds.

    Examples
    --------
    >>> g = make_directed_graph(1000, random_state=0)
    >>> g.n_nodes, g.n_edges
    (1000, 5000)
    """
    n = check_int("n_nodes", n_nodes, 2)
    k = check_int("n_communities", n_communities, 1)
    if k > n:
        raise ValueError(f"n_communities must be <= n_nodes ({n}), got {k}")
    avg_degree = _check_real(avg_degree, "avg_degree")
    if avg_degree <= 0:
        raise ValueError(f"avg_degree must be > 0, got {avg_degree}")
    p_in = _check_real(p_in, "p_in")
    if not 0.0 <= p_in <= 1.0:
        raise ValueError(f"p_in must be in [0, 1], got {p_in}")
    alpha = _check_real(degree_exponent, "degree_exponent")
    if alpha <= 1:
        raise ValueError(f"degree_exponent must be > 1, got {alpha}")
    rng = np.random.default_rng(random_state)

    n_edges = int(round(avg_degree * n))
    n_intra = n_edges if k == 1 else int(round(p_in * n_edges))
    n_inter = n_edges - n_intra
    sizes = np.bincount(np.arange(n) % k, minlength=k).astype(np.int64)
    intra_capacity = int(np.sum(sizes * (sizes - 1)))
    inter_capacity = int(n * n - np.sum(sizes * sizes))
    if n_intra > intra_capacity:
        raise ValueError(
            f"avg_degree={avg_degree} with p_in={p_in} asks for {n_intra} intra-community edges, "
            f"but {k} communities of {n} nodes allow only {intra_capacity}; lower avg_degree "
            "or p_in, or use fewer communities"
        )
    if n_inter > inter_capacity:
        raise ValueError(
            f"avg_degree={avg_degree} with p_in={p_in} asks for {n_inter} inter-community edges, "
            f"but {k} communities of {n} nodes allow only {inter_capacity}; lower avg_degree "
            "or raise p_in"
        )

    labels = rng.permutation(np.arange(n) % k).astype(np.int64)
    # Pareto(alpha - 1) weights w = (1 - u)^(-1/(alpha - 1)), scaled by the largest one in log
    # space: only ratios matter and alpha near 1 would overflow
    log_w = -np.log1p(-rng.random(n)) / (alpha - 1.0)
    weights = np.exp(log_w - log_w.max())
    layout = _Layout(labels, k)
    keys = np.concatenate(
        [
            _sample_edges(rng, layout, weights, n_intra, True),
            _sample_edges(rng, layout, weights, n_inter, False),
        ]
    )
    keys.sort()
    src, dst = np.divmod(keys, n)
    # keys are sorted by (src, dst), i.e. already in CSR order
    indptr = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=n))))
    adjacency = sp.csr_matrix(
        (np.ones(keys.size, dtype=np.float64), dst.astype(np.int32), indptr.astype(np.int32)),
        shape=(n, n),
    )
    adjacency.has_sorted_indices = True
    return Graph(
        name="synthetic",
        adjacency=adjacency,
        labels=labels,
        class_names=tuple(f"community_{c}" for c in range(k)),
        node_ids=np.arange(n, dtype=np.int64),
    )


# --------------------------------------------------------------------------- kernel problems


def measure_coherence(Q):
    """Coherence ``mu = (N / r) * max_i ||P_i||^2`` of the column space of an ``N x r`` matrix.

    ``P`` is an orthonormal basis of ``range(Q)`` (``Q`` itself when its columns are
    orthonormal), so ``||P_i||^2`` is the leverage score of row i and ``1 <= mu <= N / r``:
    ``mu = 1`` when every row carries the same share of the subspace (delocalised vectors),
    ``mu = N / r`` when the subspace is spanned by r coordinate vectors (fully localised).

    Parameters
    ----------
    Q : array_like, shape (N, r)
        Full column rank, ``r <= N``, finite.

    Returns
    -------
    float
    """
    Q = np.asarray(Q, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[1] == 0 or Q.shape[1] > Q.shape[0]:
        raise ValueError(f"Q must be a 2-d array with 1 <= r <= N columns, got shape {Q.shape}")
    if not np.all(np.isfinite(Q)):
        raise ValueError("Q must be finite")
    n, r = Q.shape
    basis, _ = np.linalg.qr(Q)
    leverage = np.einsum("ij,ij->i", basis, basis)
    return float(n / r * leverage.max())


@dataclass(frozen=True, eq=False)
class KernelProblem:
    """A synthetic asymmetric matrix with a known planted SVD.

    Attributes
    ----------
    G : numpy.ndarray
        The ``N x M`` matrix ``U diag(s) V^T + E`` in the requested dtype.
    singular_values : numpy.ndarray
        The planted singular values ``s`` (float64, descending, ``s[0] = 1``). The singular
        values of ``G`` differ from them by at most ``||E||_2`` (Weyl), about ``noise``.
    U, V : numpy.ndarray
        The planted singular vectors (float64, orthonormal columns, ``N x r`` and ``M x r``).
    coherence_u, coherence_v : float
        Measured coherence of ``U`` and ``V`` (see :func:`measure_coherence`).
    params : dict
        The generator's arguments (resolved ``decay_rate`` included).
    """

    G: np.ndarray
    singular_values: np.ndarray
    U: np.ndarray
    V: np.ndarray
    coherence_u: float
    coherence_v: float
    params: dict

    @property
    def coherence(self):
        """``max(coherence_u, coherence_v)``."""
        return max(self.coherence_u, self.coherence_v)

    @property
    def rank(self):
        return self.singular_values.size


def _planted_basis(rng, n, r, mix, support_size):
    """Orthonormal N x r basis interpolating between a random and a localised one.

    Column k is ``sqrt(1 - mix) x_k + sqrt(mix) y_k`` with ``x_k`` a random unit vector and
    ``y_k`` a random unit vector supported on ``support_size`` rows (supports disjoint across
    columns), then the columns are orthonormalised (QR with a sign fix). Both ``x`` and ``y`` are
    drawn whatever ``mix`` is, so one seed gives one path from delocalised to localised.
    """
    x = rng.standard_normal((n, r))
    x /= np.linalg.norm(x, axis=0)
    support = rng.permutation(n)[: r * support_size].reshape(r, support_size)
    values = rng.standard_normal((r, support_size))
    values /= np.linalg.norm(values, axis=1, keepdims=True)
    y = np.zeros((n, r))
    y[support, np.arange(r)[:, None]] = values
    q, upper = np.linalg.qr(np.sqrt(1.0 - mix) * x + np.sqrt(mix) * y)
    signs = np.sign(np.diag(upper))
    signs[signs == 0] = 1.0
    return q * signs


def make_kernel_problem(
    n_rows,
    n_cols,
    *,
    rank=20,
    decay="exponential",
    decay_rate=None,
    coherence=0.0,
    noise=1e-3,
    support_size=1,
    random_state=None,
    dtype=np.float64,
    return_details=False,
):
    """Asymmetric test matrix with a prescribed spectrum and singular-vector coherence.

    ``G = U diag(s) V^T + E`` with ``U`` (N x r) and ``V`` (M x r) orthonormal, ``s`` following
    the decay law and ``E`` Gaussian noise of spectral norm about ``noise``. It stands in for an
    asymmetric kernel matrix whose difficulty is under control: the decay sets how many
    samples / oversamples a solver needs, the coherence sets whether uniform row/column sampling
    (Nyström) can see the dominant subspaces at all.

    Parameters
    ----------
    n_rows, n_cols : int
        Shape N x M of G.
    rank : int, default=20
        Number r of planted singular triplets, ``1 <= r <= min(N, M)``.
    decay : {"exponential", "polynomial", "flat"}, default="exponential"
        Law of the planted singular values, ``k = 1..r``:
        ``exp(-decay_rate (k - 1))``, ``k^(-decay_rate)``, or all equal to 1.
    decay_rate : float, optional
        Positive rate of the decay law; default 0.2 for "exponential", 1.0 for "polynomial".
        Must be None for "flat".
    coherence : float in [0, 1], default=0.0
        Localisation of the planted singular vectors. Each column of U (and of V) starts as
        ``sqrt(1 - c) x + sqrt(c) y``, ``x`` a uniformly random unit vector and ``y`` a random
        unit vector supported on ``support_size`` rows (disjoint supports); the columns are
        then orthonormalised. ``c = 0`` gives Haar-random (delocalised) vectors with measured
        coherence ``mu = O(log N)``; ``c = 1`` gives vectors living on ``r * support_size``
        rows only, ``mu >= N / (r * support_size)`` (exactly ``N / r``, the maximum, for
        ``support_size=1``: the vectors are coordinate vectors). In between, for
        ``support_size=1``, the largest leverage is about ``c``, i.e. ``mu`` is about
        ``c N / r`` once that exceeds the random level, so a uniform sample of m rows misses a
        localised direction with probability about ``1 - m / N``. The measured coherences
        (``mu = (N / r) max_i |U_i|^2``, see :func:`measure_coherence`) are returned with
        ``return_details=True``.
    noise : float, default=1e-3
        Spectral norm of the noise relative to ``s_1 = 1``: ``E = noise * Z / (sqrt(N) +
        sqrt(M))`` with Z standard Gaussian, whose norm is close to ``sqrt(N) + sqrt(M)``. 0 gives
        an exactly rank-r matrix.
    support_size : int, default=1
        Rows per localised vector (see ``coherence``); ``rank * support_size <= min(N, M)``.
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator; the same seed gives the same matrix.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        dtype of G. For float32 the noise is drawn in float32 directly (no float64 copy of G),
        so the float32 problem is not the float64 one rounded.
    return_details : bool, default=False
        Return a :class:`KernelProblem` (G, planted s, U, V, measured coherences) instead of
        G alone.

    Returns
    -------
    numpy.ndarray or KernelProblem
        G (C-contiguous, ``dtype``), or the full problem when ``return_details`` is true.

    Examples
    --------
    >>> p = make_kernel_problem(300, 200, rank=5, coherence=0.5, random_state=0,
    ...                         return_details=True)
    >>> p.G.shape, p.singular_values.size
    ((300, 200), 5)
    """
    n = check_int("n_rows", n_rows, 1)
    m = check_int("n_cols", n_cols, 1)
    r = check_int("rank", rank, 1)
    if r > min(n, m):
        raise ValueError(f"rank must be <= min(n_rows, n_cols) = {min(n, m)}, got {r}")
    decay = check_choice("decay", decay, DECAYS)
    if decay == "flat":
        if decay_rate is not None:
            raise ValueError("decay_rate must be None for decay='flat'")
    else:
        decay_rate = _DEFAULT_DECAY_RATE[decay] if decay_rate is None else decay_rate
        decay_rate = _check_real(decay_rate, "decay_rate")
        if decay_rate <= 0:
            raise ValueError(f"decay_rate must be > 0, got {decay_rate}")
    coherence = _check_real(coherence, "coherence")
    if not 0.0 <= coherence <= 1.0:
        raise ValueError(f"coherence must be in [0, 1], got {coherence}")
    noise = _check_real(noise, "noise")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    support_size = check_int("support_size", support_size, 1)
    if r * support_size > min(n, m):
        raise ValueError(
            f"rank * support_size must be <= min(n_rows, n_cols) = {min(n, m)}, "
            f"got {r} * {support_size}"
        )
    dtype = _check_dtype(dtype)
    rng = np.random.default_rng(random_state)

    k = np.arange(1, r + 1, dtype=np.float64)
    if decay == "exponential":
        s = np.exp(-decay_rate * (k - 1.0))
    elif decay == "polynomial":
        s = k ** (-decay_rate)
    else:
        s = np.ones(r)
    U = _planted_basis(rng, n, r, coherence, support_size)
    V = _planted_basis(rng, m, r, coherence, support_size)

    left = (U * s).astype(dtype)
    right_t = np.ascontiguousarray(V.T.astype(dtype))
    if noise > 0:
        G = rng.standard_normal((n, m), dtype=dtype)
        G *= dtype.type(noise / (np.sqrt(n) + np.sqrt(m)))
    else:
        G = np.zeros((n, m), dtype=dtype)
    # add the low-rank part by row blocks: no second N x M temporary
    step = max(1, (1 << 22) // m)
    for start in range(0, n, step):
        G[start : start + step] += left[start : start + step] @ right_t
    if not return_details:
        return G
    return KernelProblem(
        G=G,
        singular_values=s,
        U=U,
        V=V,
        coherence_u=measure_coherence(U),
        coherence_v=measure_coherence(V),
        params={
            "n_rows": n,
            "n_cols": m,
            "rank": r,
            "decay": decay,
            "decay_rate": decay_rate,
            "coherence": coherence,
            "noise": noise,
            "support_size": support_size,
            "dtype": dtype.name,
        },
    )


# --------------------------------------------------------------------------- clustered points


@dataclass(frozen=True, eq=False)
class ClusteredPoints:
    """Two point sets drawn from shared clusters (see :func:`make_clustered_points`).

    Unpacks as ``X, Z = make_clustered_points(...)``.

    Attributes
    ----------
    X : numpy.ndarray of shape (N, d)
        Row points.
    Z : numpy.ndarray of shape (M, d)
        Column points.
    labels_x, labels_z : numpy.ndarray of int64
        Cluster of each point of X and of Z.
    centers : numpy.ndarray of shape (K, d)
        The cluster centres (float64).
    gamma : float
        The kernel bandwidth the points are scaled for; the documented gap holds for
        ``kernel_matrix(X, Z, "sne" or "rbf", gamma=gamma)``.
    params : dict
        The generator's arguments (resolved cluster proportions included).
    """

    X: np.ndarray
    Z: np.ndarray
    labels_x: np.ndarray
    labels_z: np.ndarray
    centers: np.ndarray
    gamma: float
    params: dict

    @property
    def n_clusters(self):
        return self.centers.shape[0]

    def __iter__(self):
        return iter((self.X, self.Z))


def _cluster_counts(total, proportions):
    """Exact cluster sizes summing to ``total``: one point each, the rest by largest remainder."""
    k = proportions.size
    share = proportions * (total - k)
    counts = np.floor(share).astype(np.int64)
    left = total - k - int(counts.sum())
    # ties broken by cluster index (stable sort): the sizes depend on nothing random
    counts[np.argsort(counts - share, kind="stable")[:left]] += 1
    return counts + 1


def _cluster_centers(rng, k, d, separation):
    """K centres at pairwise distance ``separation`` (exactly when K <= d, else about)."""
    if k <= d:
        # orthonormal directions scaled by separation / sqrt(2): a regular simplex-like set
        q, _ = np.linalg.qr(rng.standard_normal((d, k)))
        return q.T * (separation / np.sqrt(2.0))
    return rng.standard_normal((k, d)) * (separation / np.sqrt(2.0 * d))


def _check_proportions(weights, k):
    if weights is None:
        w = np.linspace(2.0, 1.0, k) if k > 1 else np.ones(1)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (k,):
            raise ValueError(f"weights must have n_clusters={k} entries, got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError("weights must be finite and > 0")
    return w / w.sum()


def make_clustered_points(
    n,
    m,
    d,
    n_clusters,
    *,
    cluster_std=0.08,
    separation=4.0,
    gamma=1.0,
    weights=None,
    random_state=None,
    dtype=np.float64,
):
    """Two point sets from shared clusters, whose SNE/RBF kernel has a gap at rank K.

    X (N x d) and Z (M x d) are drawn around the same K cluster centres. With the bandwidth
    ``gamma`` the kernel ``G_ij = exp(-|x_i - z_j|^2 / gamma^2)`` (RBF, or SNE: each row
    normalised to sum 1) is then, up to a small perturbation, block-diagonal with rank-one
    blocks: K singular values of order one, then a gap.

    Parameters
    ----------
    n, m : int
        Numbers of row points N and column points M, each ``>= n_clusters``.
    d : int
        Dimension of the points, ``>= 1``. The gap widens with d (Notes).
    n_clusters : int
        Number of clusters K, ``>= 1``: the rank r at which G has its gap.
    cluster_std : float, default=0.08
        Radius of a cluster in units of ``gamma``: a point is its centre plus Gaussian noise
        of standard deviation ``cluster_std * gamma / sqrt(d)`` per coordinate, so its
        distance to the centre is about ``cluster_std * gamma``. Smaller means a wider gap.
    separation : float, default=4.0
        Distance between cluster centres in units of ``gamma`` (exact when ``K <= d``: the
        centres are scaled orthonormal directions; typical when ``K > d``: Gaussian). The
        kernel between two clusters is about ``exp(-separation^2)``.
    gamma : float, default=1.0
        The bandwidth the points are scaled for (returned as ``gamma``).
    weights : array-like of shape (K,), optional
        Relative cluster sizes in X; default linearly decreasing from 2 to 1, so that the
        top K singular values are distinct (about ``sqrt(N_k / M_k)`` for SNE). Z's clusters
        have equal sizes. Sizes are exact (largest remainder, at least one point each);
        the order of the points is random.
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator; the same seed gives the same points.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        dtype of X and Z.

    Returns
    -------
    ClusteredPoints
        ``X``, ``Z``, their cluster labels, the centres and ``gamma``; unpacks as ``X, Z``.

    Raises
    ------
    ValueError
        A size below its minimum, a non-positive or non-finite scale, ``weights`` of the
        wrong length or not positive, or a dtype other than float32/float64.
    TypeError
        A size that is not an integer.

    Notes
    -----
    For x = mu + u and z = mu + v in the same cluster,
    ``|x - z|^2 = |u|^2 + |v|^2 - 2 u.v``, so the block of G is
    ``diag(a) [exp(2 u_i.v_j / gamma^2)] diag(b)``: rank one (row and column scalings, SNE's
    normaliser included) except for ``exp(2 u.v / gamma^2) - 1 ~ 2 u.v / gamma^2``, a rank-d
    term whose singular values are about ``2 cluster_std^2 / d`` times the block's. Blocks of
    different clusters are ``exp(-separation^2)`` smaller. Hence ``sigma_{K+1} / sigma_K`` is
    about ``2 cluster_std^2 / d`` (times the spread of the cluster sizes), independent of N
    and M, and the tail beyond K is flat (K d values of that size): one-pass sketches then
    reach a subspace error of about ``sqrt(K d) 2 cluster_std^2 / d`` divided by a factor
    that grows with the oversampling.

    Measured (n = m = 3000, d = 64, K = 20, defaults, ``gamma=1``, uncentred, seed 0):
    ``sigma_21 / sigma_20 = 5.3e-4`` (8.1e-4 at n = m = 1000) and
    ``||sigma_{21:}||_2 / sigma_20 = 8.7e-3``, ``sigma_1 / sigma_20 = 1.41``, for SNE and RBF
    alike. Centring (``H G H``) removes the constant direction from the span of the
    cluster indicators, so a centred G has its gap at K - 1.

    Examples
    --------
    >>> X, Z = make_clustered_points(300, 200, 16, 4, random_state=0)
    >>> X.shape, Z.shape
    ((300, 16), (200, 16))
    """
    n = check_int("n", n, 1)
    m = check_int("m", m, 1)
    d = check_int("d", d, 1)
    k = check_int("n_clusters", n_clusters, 1)
    if k > min(n, m):
        raise ValueError(f"n_clusters must be <= min(n, m) = {min(n, m)}, got {k}")
    scales = {}
    for name, value in (("cluster_std", cluster_std), ("separation", separation), ("gamma", gamma)):
        value = _check_real(value, name)
        if value <= 0:
            raise ValueError(f"{name} must be > 0, got {value}")
        scales[name] = value
    proportions = _check_proportions(weights, k)
    dtype = _check_dtype(dtype)
    rng = np.random.default_rng(random_state)

    g = scales["gamma"]
    centers = _cluster_centers(rng, k, d, scales["separation"] * g)
    noise = scales["cluster_std"] * g / np.sqrt(d)

    def draw(total, props):
        labels = rng.permutation(np.repeat(np.arange(k), _cluster_counts(total, props)))
        points = centers[labels] + rng.standard_normal((total, d)) * noise
        return np.ascontiguousarray(points, dtype=dtype), labels.astype(np.int64)

    X, labels_x = draw(n, proportions)
    Z, labels_z = draw(m, np.full(k, 1.0 / k))
    return ClusteredPoints(
        X=X,
        Z=Z,
        labels_x=labels_x,
        labels_z=labels_z,
        centers=centers,
        gamma=g,
        params={
            "n": n,
            "m": m,
            "d": d,
            "n_clusters": k,
            **scales,
            "weights": proportions.tolist(),
            "dtype": dtype.name,
        },
    )


# --------------------------------------------------------------------------- rare clusters

#: the share of the clusters the rare-cluster family makes rare (6 of 20, as issue 15)
RARE_SHARE = 0.3


def rare_cluster_count(n_clusters):
    """How many of ``n_clusters`` the rare-cluster family makes rare: the one rule.

    :data:`RARE_SHARE` of them, rounded, at least one and at most ``n_clusters - 1``: the
    family stays rare at every size, some clusters rare and some common (6 of 20, 2 of 5,
    1 of 2). Needs ``n_clusters >= 2`` (one cluster cannot be rare beside a common one).
    """
    k = check_int("n_clusters", n_clusters, 1)
    if k < 2:
        raise ValueError(
            f"the rare-cluster family needs n_clusters >= 2 (a rare cluster "
            f"beside a common one), got {k}"
        )
    return int(min(k - 1, max(1, round(RARE_SHARE * k))))


def make_rare_clusters(
    n=6000,
    m=6000,
    d=64,
    *,
    n_clusters=20,
    n_rare=None,
    rare_weight=0.02,
    weights=None,
    cluster_std=0.08,
    separation=4.0,
    gamma=5.0,
    random_state=None,
    dtype=np.float64,
):
    """Two point sets from shared clusters, some of them rare in BOTH sets.

    The family on which uniform sampling misses structure (issue 15): X and Z are drawn
    around the same K centres with the same cluster weights, ``n_rare`` of them tiny. With
    SNE the rows of a rare cluster are normalised over the few z of their own cluster, so
    its block of G has a singular value of the same order as a common cluster's: the top-K
    subspace is well posed, yet a uniform sample of rows and columns rarely touches it.

    Parameters
    ----------
    n, m : int, default=6000
        Numbers of row points N and column points M, each ``>= n_clusters``.
    d : int, default=64
        Dimension.
    n_clusters : int, default=20
        Number of clusters K (G has a gap after the K-th singular value).
    n_rare : int, optional
        How many clusters are rare (the last ``n_rare``), ``0 <= n_rare <= n_clusters``.
        Default: :func:`rare_cluster_count` (6 of the default 20).
    rare_weight : float, default=0.02
        Weight of a rare cluster; the others have weight 1 (so with the defaults a rare
        cluster holds about 8 of the 6000 points of each set).
    weights : array-like of shape (K,), optional
        Explicit positive cluster weights (then ``n_rare`` and ``rare_weight`` are
        ignored); used for X and Z alike.
    cluster_std, separation, gamma, random_state, dtype
        As in :func:`make_clustered_points` (``gamma`` defaults to 5).

    Returns
    -------
    ClusteredPoints
        With ``params["rare"]``, the indices of the rare clusters.

    Raises
    ------
    ValueError, TypeError
        As :func:`make_clustered_points`, and ``n_rare``/``rare_weight`` out of range.

    Notes
    -----
    Cluster sizes are exact (largest remainder, at least one point per cluster and set),
    so every cluster appears in both X and Z. Measured with the defaults (SNE, seed 0,
    uncentred): see the README section of ``ksvd-bench sampling``.

    Examples
    --------
    >>> P = make_rare_clusters(600, 500, 8, n_clusters=5, n_rare=2, random_state=0)
    >>> sorted(set(P.labels_x.tolist())) == list(range(5))
    True
    """
    k = check_int("n_clusters", n_clusters, 1)
    if weights is None:
        n_rare = rare_cluster_count(k) if n_rare is None else check_int("n_rare", n_rare, 0)
        if n_rare > k:
            raise ValueError(f"n_rare must be <= n_clusters={k}, got {n_rare}")
        rare_weight = _check_real(rare_weight, "rare_weight")
        if not 0 < rare_weight:
            raise ValueError(f"rare_weight must be > 0, got {rare_weight}")
        w = np.ones(k)
        w[k - n_rare :] = rare_weight
        rare = list(range(k - n_rare, k))
    else:
        w = np.asarray(weights, dtype=np.float64)
        rare = []
    proportions = _check_proportions(w, k)
    if weights is not None:
        rare = np.flatnonzero(proportions < 0.5 * proportions.max()).tolist()
    P = make_clustered_points(
        n,
        m,
        d,
        k,
        cluster_std=cluster_std,
        separation=separation,
        gamma=gamma,
        weights=proportions,
        random_state=random_state,
        dtype=dtype,
    )
    # make_clustered_points gives Z equal clusters: redraw Z with the same proportions,
    # around the same centres and from the same stream of numbers
    rng = np.random.default_rng(random_state)
    rng = np.random.default_rng(rng.integers(2**63))
    noise = P.params["cluster_std"] * P.gamma / np.sqrt(P.params["d"])
    labels_z = rng.permutation(np.repeat(np.arange(k), _cluster_counts(m, proportions)))
    Z = P.centers[labels_z] + rng.standard_normal((m, P.params["d"])) * noise
    params = dict(P.params, weights_z=proportions.tolist(), rare=rare)
    return ClusteredPoints(
        X=P.X,
        Z=np.ascontiguousarray(Z, dtype=P.X.dtype),
        labels_x=P.labels_x,
        labels_z=labels_z.astype(np.int64),
        centers=P.centers,
        gamma=P.gamma,
        params=params,
    )


# --------------------------------------------------------------------------- attention


@dataclass(frozen=True, eq=False)
class AttentionPoints:
    """Queries and keys of one attention head (see :func:`make_attention_points`).

    Unpacks as ``X, Z = make_attention_points(...)``.

    Attributes
    ----------
    X : numpy.ndarray of shape (N, d)
        The queries ``q_i`` (row points).
    Z : numpy.ndarray of shape (M, d)
        The keys ``k_j`` (column points).
    gamma : float
        The temperature ``sqrt(d)`` of scaled dot-product attention:
        ``kernel_matrix(X, Z, "softmax", gamma=gamma)`` is the attention matrix.
    params : dict
        The generator's arguments.
    """

    X: np.ndarray
    Z: np.ndarray
    gamma: float
    params: dict

    def __iter__(self):
        return iter((self.X, self.Z))


def make_attention_points(
    n,
    m=None,
    d=64,
    *,
    rank=96,
    model_dim=256,
    noise=0.5,
    random_state=None,
    dtype=np.float64,
):
    """Queries and keys of one attention head over low-rank-plus-noise token embeddings.

    Tokens ``t`` (rows of ``T``, dimension ``model_dim``) are ``L R^T + noise E``: ``L``
    (tokens x ``rank``) and ``E`` standard normal, ``R`` (``model_dim`` x ``rank``) normal
    with variance ``1 / rank``, so the signal part of a token has unit variance per
    coordinate and rank ``rank``. The head projects them, ``Q = T_q W_q`` and ``K = T_k
    W_k``, with independent normal ``W_q``, ``W_k`` (``model_dim`` x ``d``, variance ``1 /
    model_dim``): queries and keys have entries of variance about ``1 + noise^2`` and the
    logits ``q . k / sqrt(d)`` a standard deviation of about 1, as in a trained layer's
    scaled dot-product attention. The softmax kernel ``G = softmax(Q K^T / sqrt(d))`` is
    asymmetric (``W_q != W_k``) and row-stochastic.

    Parameters
    ----------
    n : int
        Number of queries N (``>= 1``).
    m : int, optional
        Number of keys M. None (default): self-attention, the keys come from the same N
        tokens as the queries; else cross-attention, from M further tokens of the same model.
    d : int, default=64
        Head dimension (``>= 1``).
    rank : int, default=96
        Rank of the tokens' signal (``>= 1``; 96 as the low-rank attention of
        Primal-Attention), at most ``model_dim``.
    model_dim : int, default=256
        Dimension of the token embeddings (``>= 1``).
    noise : float, default=0.5
        Standard deviation of the tokens' full-rank noise (``>= 0``).
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator; the same seed gives the same points.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        dtype of X and Z.

    Returns
    -------
    AttentionPoints
        ``X`` (queries), ``Z`` (keys), ``gamma = sqrt(d)``; unpacks as ``X, Z``.

    Raises
    ------
    ValueError
        A size below 1, ``rank > model_dim``, a negative or non-finite ``noise``, or a dtype
        other than float32/float64.
    TypeError
        A size that is not an integer.

    Notes
    -----
    Measured (N = M = 2000, defaults, seed 0, uncentred G): logits of standard deviation
    1.27; singular values 1.03, 0.370, ..., ``sigma_20 = 0.206``, ``sigma_21 / sigma_20 =
    0.976``, ``sigma_96 = 0.096``: one dominant direction (the rows sum to 1), then a slow
    decay with no gap, which makes the top 20 triplets hard for one-pass sketches.

    Examples
    --------
    >>> Q, K = make_attention_points(300, d=16, rank=8, model_dim=32, random_state=0)
    >>> Q.shape, K.shape
    ((300, 16), (300, 16))
    """
    n = check_int("n", n, 1)
    cross = m is not None
    m = check_int("m", m, 1) if cross else n
    d = check_int("d", d, 1)
    rank = check_int("rank", rank, 1)
    model_dim = check_int("model_dim", model_dim, 1)
    if rank > model_dim:
        raise ValueError(f"rank must be <= model_dim = {model_dim}, got {rank}")
    noise = _check_real(noise, "noise")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    dtype = _check_dtype(dtype)
    rng = np.random.default_rng(random_state)
    R = rng.standard_normal((model_dim, rank)) / np.sqrt(rank)

    def tokens(count):
        return rng.standard_normal((count, rank)) @ R.T + noise * rng.standard_normal(
            (count, model_dim)
        )

    Tq = tokens(n)
    Tk = tokens(m) if cross else Tq
    W = rng.standard_normal((2, model_dim, d)) / np.sqrt(model_dim)
    return AttentionPoints(
        X=np.ascontiguousarray(Tq @ W[0], dtype=dtype),
        Z=np.ascontiguousarray(Tk @ W[1], dtype=dtype),
        gamma=float(np.sqrt(d)),
        params={
            "n": n,
            "m": m,
            "d": d,
            "rank": rank,
            "model_dim": model_dim,
            "noise": noise,
            "self_attention": not cross,
            "dtype": dtype.name,
        },
    )
