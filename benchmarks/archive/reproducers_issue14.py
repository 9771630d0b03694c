"""Print the issue-14 reproducers of solvers that used to return wrong values.

``tests/test_solver_fixes.py`` runs the same cases and asserts on them; this script prints the
numbers quoted in the README ("Library use")::

    python benchmarks/archive/reproducers_issue14.py
"""

import warnings

import numpy as np

import solvers


def _sine(V, T):
    return np.linalg.norm(V - T @ (T.T @ V), 2)


def main():
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    U0 = np.linalg.qr(rng.standard_normal((400, 300)))[0]
    V0 = np.linalg.qr(rng.standard_normal((300, 300)))[0]
    st = 0.5 ** np.arange(300)
    G = (U0 * st) @ V0.T
    for p in (40, 10):
        bk = solvers.svd(G, 5, method="block_krylov", n_oversamples=p, n_iter=0, random_state=1)
        rs = solvers.svd(G, 5, method="rsvd", n_oversamples=p, n_iter=0, random_state=1)
        print(
            f"block_krylov q=0 p={p}: max|s/s_true-1| = {np.abs(bk.s / st[:5] - 1).max():.1e}, "
            f"V sine = {_sine(bk.V, V0[:, :5]):.1e}; rsvd q=0: "
            f"{np.abs(rs.s / st[:5] - 1).max():.1e}, {_sine(rs.V, V0[:, :5]):.1e}; passes "
            f"{bk.info['n_passes']:.0f} / {rs.info['n_passes']:.0f}"
        )

    c, s = np.cos(np.pi / 6), np.sin(np.pi / 6)
    R = np.array([[c, -s], [s, c]])
    r = solvers.svd(R, 2, method="sym_nystrom", n_samples=2)
    err = np.abs((r.U * r.s) @ r.V.T - R).max()
    print(f"sym_nystrom rotation: ||U S V^T - G||_max = {err:.1e}")

    X = np.vstack([rng.random((10, 20))] * 2)
    K = np.exp(-0.1 * ((X[:, None] - X[None]) ** 2).sum(-1))
    Uk, Sk, Vk = np.linalg.svd(K)
    r = solvers.svd(K, 5, method="sym_nystrom", n_samples=20, random_state=0)
    err = np.linalg.norm((r.U * r.s) @ r.V.T - (Uk[:, :5] * Sk[:5]) @ Vk[:5])
    print(f"sym_nystrom duplicated rows, full sample: ||U S V^T - G_5||_F = {err:.1e}")

    Qa = np.linalg.qr(rng.standard_normal((50, 2)))[0]
    Qb = np.linalg.qr(rng.standard_normal((40, 2)))[0]
    G2 = Qa @ Qb.T
    for core in ("stable", "paper"):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = solvers.asym_nystrom(G2, 2, row_indices=[0, 1], col_indices=[0, 1], core=core)
        print(
            f"asym_nystrom rank-2 50x40, 2x2 sample, core={core}: s = {np.round(r.s, 12)}, "
            f"max error {np.abs((r.U * r.s) @ r.V.T - G2).max():.1e}, {len(w)} warnings"
        )

    N, M = 1000, 800
    rr = np.random.default_rng(0)
    dr = np.ones(N)
    dr[rr.choice(N, 100, replace=False)] = 10
    dc = np.ones(M)
    dc[rr.choice(M, 100, replace=False)] = 10
    H = (dr[:, None] * rr.standard_normal((N, 3))) @ (rr.standard_normal((3, M)) * dc)
    sh = np.linalg.svd(H, compute_uv=False)[:3]
    r = solvers.svd(
        H,
        3,
        method="asym_nystrom",
        n_samples=60,
        sampling="norm",
        orthogonalize=False,
        random_state=0,
        check_passes=0,
    )
    print(
        f"norm sampling, orthogonalize=False: s/s_true = {np.round(r.s / sh, 3)} (was 17.2, "
        f"15.5, 14.0), n_passes = {r.info['n_passes']:.3f} (norm pass counted)"
    )

    Gg = np.random.default_rng(0).standard_normal((80, 50))
    sg = np.linalg.svd(Gg, compute_uv=False)[:3]
    r = solvers.svd(Gg, 3, method="generalized_nystrom", random_state=0)
    print(
        f"generalized_nystrom 80x50 Gaussian rank 3: s/s_true = {np.round(r.s / sg, 3)}, "
        f"reliable = {r.info['reliable']}"
    )


if __name__ == "__main__":
    main()
