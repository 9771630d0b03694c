"""Issue 20, section 9: do the certificates vouch for wrong answers?

Sweeps every method and sampler, with efforts from too small to enough, over six families
(rare clusters, the coherent polynomial problem, a plain clustered family, a slow-decay
synthetic, a centred kernel far from the origin, a graph), 5 seeds each, and tabulates
against numpy's exact SVD:

* wrong answers (sv error > 0.1 s_1 or sin theta > 0.1) and how many of them said
  ``info["reliable"] = True`` (target: none, at most 1% of wrong);
* right answers that said ``reliable=False`` (false alarms, target <= 20%);
* every ``stop="estimate"`` run of :func:`ksvd_bench.driver.solve_to_tolerance` (no
  reference): how many converged with a true relative low-rank error
  ``||G - U U^T G||_F / ||G||_F`` above eps (target: none), and the effort against the
  oracle's (the smallest effort of the same schedule whose true error is <= eps; target:
  within 2x in >= 90%).

Writes ``benchmarks/recorded/certificates/certificates.json`` and ``certificates.md``.
Run: ``python benchmarks/scripts/certificates.py [--quick]`` (sizes chosen so the whole
sweep runs in a few minutes on 2 cores).

``--grown`` (issue 32, section 6) adds eight families the certificate was not tuned on
(Student-t points, points at 1e5, 0.5% clusters, two-scale and clustered spectra at ranks
before, at and after the gap, duplicated rows, a sparse random graph, the ionosphere table),
runs the certified methods at other ``check_passes`` on them, skips the ``stop="estimate"``
runs and reports the false alarms in bins of ``s_r / s_(r+1)``, the certificate's share of
the passes, and wrong-and-reliable per method, sampler and ``check_passes``
(``grown.json``/``grown.md``; 5 seeds at N = 200: 3,755 answers in about 3 minutes on 2
loaded cores, nice'd)::

    python benchmarks/scripts/certificates.py --grown --seeds 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

import solvers
from ksvd_bench.datasets import load_graph, make_kernel_problem, make_rare_clusters
from ksvd_bench.driver import solve_to_tolerance
from ksvd_bench.driver.schedule import EFFORT_OPTION
from ksvd_bench.kernels import KernelSource, kernel_matrix

OUT = Path(__file__).resolve().parents[1] / "recorded" / "certificates"
SAMPLERS = ("uniform", "norm", "arp", "aca", "rpcholesky")


def families(n):
    """name -> (builder(seed) -> (G dense, lazy point source or None), rank)."""

    def clustered(n_rare):
        def build(seed):
            P = make_rare_clusters(n, n, 16, n_clusters=8, n_rare=n_rare, random_state=seed)
            src = KernelSource.from_points(P.X, P.Z, "sne", gamma=P.gamma, setup="lazy")
            return kernel_matrix(P.X, P.Z, "sne", gamma=P.gamma), src

        return build

    def coherent(seed):
        return make_kernel_problem(
            n, n - n // 6, rank=20, decay="polynomial", coherence=0.9, random_state=seed
        ), None

    def slow(seed):
        return make_kernel_problem(
            n, n - n // 6, rank=60, decay="polynomial", decay_rate=0.5, random_state=seed
        ), None

    def far(seed):
        rng = np.random.default_rng(seed)
        R = np.linalg.qr(rng.standard_normal((8, 8)))[0]
        scale = 2.0 ** -np.arange(8)
        X = 3000 + (rng.standard_normal((n, 8)) * scale) @ R
        Z = 3000 + (rng.standard_normal((n - n // 6, 8)) * scale) @ R
        src = KernelSource.from_points(X, Z, "rbf", gamma=0.05, center=True)
        return kernel_matrix(X, Z, "rbf", gamma=0.05, center=True), src

    graph_cache = {}

    def graph(seed):  # cora's first n nodes, the same for every seed: the solvers' seeds vary
        if "G" not in graph_cache:
            A = load_graph("cora").adjacency[:n, :n].toarray().astype(float)
            graph_cache["G"] = kernel_matrix(A, A, "sne", gamma=0.5)
        return graph_cache["G"], None

    return {
        "rare": (clustered(3), 8),
        "coherent": (coherent, 5),
        "plain": (clustered(0), 8),
        "slow": (slow, 10),
        "far_centred": (far, 3),
        "graph_cora": (graph, 10),
    }


def grown_families(n):
    """Issue 32 section 6: families the certificate was not tuned on, each with ranks at,
    before and after a gap of the spectrum (name -> (builder, ranks))."""
    m = n - n // 6

    def median_gamma(X, Z):
        d2 = ((X[:50, None, :] - Z[None, :50, :]) ** 2).sum(-1)
        return float(np.sqrt(np.median(d2[d2 > 0])))  # the bandwidth: exp(-d^2 / gamma^2)

    def heavy(seed):  # Student-t points, df = 1.5: a few points far out on every axis
        rng = np.random.default_rng(seed)
        X, Z = rng.standard_t(1.5, (n, 16)), rng.standard_t(1.5, (m, 16))
        return kernel_matrix(X, Z, "rbf", gamma=median_gamma(X, Z)), None

    def far_raw(seed):  # offset 1e5, not centred: distances from cancelling coordinates
        rng = np.random.default_rng(seed)
        X = 1e5 + rng.standard_normal((n, 8)) * 2.0 ** -np.arange(8)
        Z = 1e5 + rng.standard_normal((m, 8)) * 2.0 ** -np.arange(8)
        return kernel_matrix(X, Z, "rbf", gamma=median_gamma(X - 1e5, Z - 1e5)), None

    def rare_half(seed):  # the issue-32 reproducer's 10 clusters, the last with 0.5%
        rng = np.random.default_rng(seed)
        w = np.array([0.30, 0.20, 0.15, 0.12, 0.08, 0.06, 0.04, 0.025, 0.02, 0.005])
        C = 3 * rng.standard_normal((10, 16))

        def pts(k):
            c = np.maximum(1, np.round(w * k).astype(int))
            c[0] += k - c.sum()
            return C[np.repeat(np.arange(10), c)] + rng.standard_normal((k, 16))

        X, Z = pts(n), pts(m)
        return kernel_matrix(X, Z, "sne", gamma=np.sqrt(32)), None

    def spectrum(values):
        def build(seed):
            rng = np.random.default_rng(seed)
            k = len(values)
            U = np.linalg.qr(rng.standard_normal((n, k)))[0]
            V = np.linalg.qr(rng.standard_normal((m, k)))[0]
            return (U * values) @ V.T, None

        return build

    k = min(n, m)
    two_scale = np.concatenate([np.geomspace(1, 0.4, 10), 0.05 * np.geomspace(1, 0.5, k - 10)])
    # clusters of three values within 1e-3 of each other, halving from cluster to cluster
    clustered = 2.0 ** -(np.arange(k) // 3) * (1 - 1e-3 * (np.arange(k) % 3))

    def duplicated(seed):  # every point three times: repeated rows and columns
        P = make_rare_clusters(n // 3 + 1, m // 3 + 1, 16, n_clusters=8, random_state=seed)
        X, Z = np.repeat(P.X, 3, axis=0)[:n], np.repeat(P.Z, 3, axis=0)[:m]
        return kernel_matrix(X, Z, "sne", gamma=P.gamma), None

    def sparse_graph(seed):  # Erdos-Renyi, mean degree 6, as a scipy sparse matrix
        import scipy.sparse as sp

        A = sp.random(n, n, density=6 / n, random_state=seed, format="csr")
        A.data[:] = 1.0
        return A + A.T, None

    table_cache = {}

    def table(seed):  # ionosphere (351 x 34), standardised, RBF at the median distance
        if "G" not in table_cache:
            from ksvd_bench.datasets import load_table

            T = load_table("ionosphere")[0]
            T = (T - T.mean(0)) / np.where(T.std(0) > 0, T.std(0), 1)
            X, Z = T[:n], T[-m:]
            table_cache["G"] = kernel_matrix(X, Z, "rbf", gamma=median_gamma(X, Z))
        return table_cache["G"], None

    return {
        "heavy_t": (heavy, (5, 10)),
        "far_1e5": (far_raw, (3, 6)),
        "rare_0.5%": (rare_half, (9, 10)),
        "two_scale": (spectrum(two_scale), (8, 10, 12)),
        "clustered_spectrum": (spectrum(clustered), (6, 7, 9)),
        "duplicated": (duplicated, (8,)),
        "sparse_graph": (sparse_graph, (10,)),
        "ionosphere": (table, (5, 10)),
    }


def settings(r):
    """(method, options, effort label): too small to enough."""
    out = [("tsvd", {}, "default")]
    for p in (0, 5, 20):
        out.append(("rsvd", {"n_oversamples": p, "n_iter": 0}, f"p={p} q=0"))
    out.append(("rsvd", {"n_oversamples": 10, "n_iter": 4}, "p=10 q=4"))
    for q in (1, 3):
        out.append(("block_krylov", {"n_iter": q}, f"q={q}"))
    for p in (0, 10):
        out.append(("generalized_nystrom", {"n_oversamples": p}, f"p={p}"))
    for sampling in ("uniform", "norm"):
        for m in (2 * r, 8 * r):
            out.append(("sym_nystrom", {"n_samples": m, "sampling": sampling}, f"{sampling} m={m}"))
    for sampling in SAMPLERS:
        for m in (r, 4 * r, 12 * r):
            out.append(
                ("asym_nystrom", {"n_samples": m, "sampling": sampling}, f"{sampling} m={m}")
            )
    return out


def check_settings(r):
    """Issue 32: the same methods at other ``check_passes`` (0 for asym_nystrom: off)."""
    out = []
    for c in (1, 3):
        out.append(
            ("rsvd", {"n_oversamples": 10, "n_iter": 4, "check_passes": c}, f"p=10 q=4 c={c}")
        )
        out.append(("rsvd", {"n_oversamples": 5, "n_iter": 0, "check_passes": c}, f"p=5 q=0 c={c}"))
        out.append(("block_krylov", {"n_iter": 1, "check_passes": c}, f"q=1 c={c}"))
        out.append(
            (
                "sym_nystrom",
                {"n_samples": 8 * r, "sampling": "uniform", "check_passes": c},
                f"uniform m={8 * r} c={c}",
            )
        )
    for c in (0, 1, 2, 3):
        out.append(
            (
                "asym_nystrom",
                {"n_samples": 4 * r, "sampling": "uniform", "check_passes": c},
                f"uniform m={4 * r} c={c}",
            )
        )
    return out


def sin_theta(A, B):
    return float(np.linalg.norm(A - B @ (B.T @ A), 2))


def score(res, U, s, Vt, r):
    sv = float(np.max(np.abs(res.s - s[:r])) / s[0])
    sin = max(sin_theta(U[:, :r], res.U), sin_theta(Vt[:r].T, res.V))
    return sv, sin


def relative_lowrank(G, U, fro):
    return float(np.linalg.norm(G - U @ (U.T @ G)) / fro)


def sweep_answers(fams, seeds, rows, grown=False, methods=None):
    svds = {}
    for name, (build, ranks) in fams.items():
        t0 = time.perf_counter()
        for seed in seeds:
            G, lazy = build(seed)
            if id(G) not in svds:
                svds.clear()
                dense = G.toarray() if hasattr(G, "toarray") else G
                svds[id(G)] = np.linalg.svd(dense, full_matrices=False)
            U, s, Vt = svds[id(G)]
            for r in (ranks,) if np.isscalar(ranks) else ranks:
                todo = settings(r) + (check_settings(r) if grown else [])
                for method, opts, label in todo:
                    if methods and method not in methods:
                        continue
                    source = G
                    if opts.get("sampling") == "rpcholesky":
                        if lazy is None or not hasattr(lazy, "joint_psd"):
                            continue
                        source = lazy
                    if method == "asym_nystrom" and opts["n_samples"] > min(G.shape):
                        continue
                    if method == "sym_nystrom" and opts["n_samples"] > max(G.shape):
                        continue
                    base = {"family": name, "seed": seed, "rank": r, "method": method}
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            res = solvers.svd(source, r, method=method, random_state=seed, **opts)
                    except (ValueError, TypeError) as exc:  # a setting the source refuses
                        rows.append({**base, "setting": label, "error": str(exc)[:200]})
                        continue
                    sv, sin = score(res, U, s, Vt, r)
                    cert = res.info.get("certificate") or {}
                    reliable = res.info.get("reliable", True)
                    rows.append(
                        {
                            **base,
                            "setting": label,
                            "sv_error": sv,
                            "sin_theta": sin,
                            "gap_ratio": float(s[r - 1] / s[r]) if s[r] > 0 else float("inf"),
                            "wrong": bool(sv > 0.1 or sin > 0.1),
                            "reliable": None if reliable is None else bool(reliable),
                            "n_passes": float(res.info["n_passes"]),
                            "check_passes": int(res.info.get("check_passes", 0)),
                            "seconds": float(res.info.get("seconds", np.nan)),
                            "sin_theta_bound": cert.get("sin_theta_bound"),
                            "sv_error_bound": cert.get("sv_error_bound"),
                            "upper_kind": cert.get("upper_kind"),
                            "failed": cert.get("failed"),
                        }
                    )
        print(f"  {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)


def sweep_estimate(fams, seeds, eps_list, runs):
    for name, (build, r) in fams.items():
        for seed in seeds:
            G, _ = build(seed)
            fro = float(np.linalg.norm(G))
            for method in ("rsvd", "block_krylov"):
                for eps in eps_list:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        out = solve_to_tolerance(
                            G, r, method, eps, stop="estimate", random_state=seed
                        )
                        true = relative_lowrank(G, out.result.U, fro)
                        oracle = None
                        for h in out.history:  # the same schedule, scored exactly
                            e = int(h["effort"])
                            opts = {EFFORT_OPTION[method]: e}
                            if method == "rsvd":
                                opts["n_iter"] = 4
                            res = solvers.svd(G, r, method=method, random_state=seed, **opts)
                            if relative_lowrank(G, res.U, fro) <= eps:
                                oracle = e
                                break
                    runs.append(
                        {
                            "family": name,
                            "seed": seed,
                            "method": method,
                            "eps": eps,
                            "converged": bool(out.converged),
                            "effort": int(out.effort),
                            "oracle_effort": oracle,
                            "true_error": true,
                            "estimate": float(out.relative_error_estimate),
                        }
                    )


BINS = (1.0, 1.1, 1.5, 2.5, np.inf)


def _sampler(r):
    return r["setting"].split(" ")[0] if r["method"] in ("asym_nystrom", "sym_nystrom") else ""


def gap_bins(rows):
    """False alarms (right answers that did not say ``reliable=True``; None, unknown, counts)
    in bins of ``s_r / s_(r+1)``, for the methods with a product certificate and for rsvd /
    block_krylov alone; answers with the certificate off (``check_passes=0``) are left out."""
    out = []
    ok = [r for r in rows if "wrong" in r and not r["wrong"] and r.get("check_passes", 0) > 0]
    ok = [r for r in ok if r["method"] in ("rsvd", "block_krylov", "sym_nystrom", "asym_nystrom")]
    for who, keep in (
        ("all certified methods", lambda r: True),
        ("rsvd, block_krylov", lambda r: r["method"] in ("rsvd", "block_krylov")),
    ):
        for lo, hi in zip(BINS[:-1], BINS[1:], strict=True):
            sel = [r for r in ok if keep(r) and lo <= r["gap_ratio"] < hi]
            alarms = sum(r["reliable"] is not True for r in sel)
            out.append(
                {"methods": who, "low": lo, "high": hi, "right": len(sel), "false_alarms": alarms}
            )
        sel = [r for r in ok if keep(r) and r["gap_ratio"] >= 1.5]
        out.append(
            {
                "methods": who,
                "low": 1.5,
                "high": np.inf,
                "right": len(sel),
                "false_alarms": sum(r["reliable"] is not True for r in sel),
            }
        )
        sel = [r for r in ok if keep(r)]
        out.append(
            {
                "methods": who,
                "low": 1.0,
                "high": np.inf,
                "right": len(sel),
                "false_alarms": sum(r["reliable"] is not True for r in sel),
            }
        )
    return out


def summarise(rows, runs):
    ok = [r for r in rows if "wrong" in r]
    # wrong, wrong&reliable, right, right&unreliable, unknown (reliable None)
    by = defaultdict(lambda: [0, 0, 0, 0, 0])
    passes = defaultdict(list)  # key -> (n_passes, check_passes) per answer
    for r in ok:
        c = r.get("check_passes", 0)
        for key in ((r["method"], _sampler(r), c), ("all", "", -1)):
            passes[key].append((r["n_passes"], c))
            b = by[key]
            if r["wrong"]:
                b[0] += 1
                b[1] += r["reliable"] is True
            else:
                b[2] += 1
                b[3] += r["reliable"] is False
            b[4] += r["reliable"] is None
    table = [
        {
            "method": k[0],
            "sampler": k[1],
            "check_passes": None if k[2] < 0 else k[2],
            "wrong": v[0],
            "wrong_reliable": v[1],
            "right": v[2],
            "false_alarms": v[3],
            "unknown": v[4],
            "median_passes": float(np.median([p for p, _ in passes[k]])) if passes[k] else None,
            "certificate_share": float(np.median([c / p for p, c in passes[k] if p > 0]))
            if passes[k]
            else None,
        }
        for k, v in sorted(by.items())
    ]
    conv = [r for r in runs if r["converged"]]
    bad = [r for r in conv if r["true_error"] > r["eps"]]
    with_oracle = [r for r in conv if r["oracle_effort"] is not None]
    within = [
        r
        for r in with_oracle  # effort 0 (no oversampling) counts as 1
        if max(r["effort"], 1) <= 2 * max(r["oracle_effort"], 1)
        and max(r["oracle_effort"], 1) <= 2 * max(r["effort"], 1)
    ]
    est = {
        "runs": len(runs),
        "converged": len(conv),
        "converged_above_eps": len(bad),
        "with_oracle": len(with_oracle),
        "effort_within_2x": len(within),
        "not_converged": len(runs) - len(conv),
    }
    return table, est


def markdown(table, est, meta, bins=None):
    lines = [
        "# Certificates sweep (issue 20, section 9; grown for issue 32, section 6)",
        "",
        f"{meta['answers']} answers, {meta['families']} families x {meta['seeds']} seeds, "
        f"N = {meta['n']}; {meta['seconds']:.0f} s on {meta['machine']}.",
        "",
        "Each method at its default `check_passes` and, on the grown families, at other "
        "values too (the `check` column; solvers/_certificate.py: values, missed "
        "directions, and the top-r subspace by Wedin / Davis-Kahan with the power-probe "
        "bound on the norm outside the answer); asym_nystrom also its sampled certificate. "
        "Wrong: sv error > 0.1 s_1 or sin theta > 0.1 against numpy's SVD. Unknown: "
        "`reliable` is None (no certificate ran). Certificate share: the median fraction "
        "of the answer's passes spent on the certificate.",
        "",
        "| method | sampler | check | wrong | wrong & reliable=True | right | right & "
        "reliable=False (false alarms) | unknown | passes (median) | certificate share |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in table:
        fa = f"{t['false_alarms']} ({t['false_alarms'] / t['right']:.1%})" if t["right"] else "0"
        wr = (
            f"{t['wrong_reliable']} ({t['wrong_reliable'] / t['wrong']:.1%})" if t["wrong"] else "0"
        )
        med = "" if t.get("median_passes") is None else f"{t['median_passes']:.3g}"
        chk = "" if t.get("check_passes") is None else str(t["check_passes"])
        share = "" if t.get("certificate_share") is None else f"{t['certificate_share']:.0%}"
        lines.append(
            f"| {t['method']} | {t['sampler']} | {chk} | {t['wrong']} | {wr} | {t['right']} "
            f"| {fa} | {t.get('unknown', 0)} | {med} | {share} |"
        )
    if bins:
        lines += [
            "",
            "False alarms (right answers without `reliable=True`) by s_r / s_(r+1), "
            "certificate on:",
            "",
            "| methods | s_r / s_(r+1) | right | false alarms |",
            "|---|---|---|---|",
        ]
        for b in bins:
            rate = f" ({b['false_alarms'] / b['right']:.1%})" if b["right"] else ""
            lines.append(
                f"| {b['methods']} | [{b['low']:g}, {b['high']:g}) | {b['right']} "
                f"| {b['false_alarms']}{rate} |"
            )
    if est:
        lines += [
            "",
            'stop="estimate" (solve_to_tolerance, no reference):',
            "",
            "| runs | converged | converged with true error > eps | oracle found | "
            "effort within 2x of the oracle |",
            "|---|---|---|---|---|",
            f"| {est['runs']} | {est['converged']} | {est['converged_above_eps']} | "
            f"{est['with_oracle']} | {est['effort_within_2x']} |",
        ]
    return "\n".join(lines) + "\n"


def at_scale(n, budget=None):
    """The sampled certificate on the lazy rare-cluster SNE source at N = M = n (no
    reference: the bound, the estimate and the clusters the pivots found are the
    evidence). RPCholesky, 80 pivots, ``check_passes=0``."""
    t0 = time.perf_counter()
    P = make_rare_clusters(n, n, 64, n_clusters=20, n_rare=6, random_state=0)
    src = KernelSource.from_points(P.X, P.Z, "sne", gamma=P.gamma, setup="lazy")
    t1 = time.perf_counter()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        res = solvers.svd(
            src,
            20,
            method="asym_nystrom",
            sampling="rpcholesky",
            n_samples=80,
            check_passes=0,
            certificate_budget=budget,
            random_state=0,
        )
    info = res.info
    cert = info["certificate"]["sampled"]
    found = set(P.labels_x[info["pivots_x"]]) | set(P.labels_z[info["pivots_z"]])
    out = {
        "n": n,
        "build_seconds": t1 - t0,
        "solve_seconds": info["seconds"],
        "entries_read_fraction": info["entries_read"] / n**2,
        "reliable": info["reliable"],
        "s_20": float(res.s[-1]),
        "certificate": cert,
        "rare_clusters_found": len(set(P.params["rare"]) & found),
        "warnings": [str(w.message)[:300] for w in record],
    }
    print(json.dumps(out, indent=1, default=float))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"scale_{n}.json").write_text(json.dumps(out, indent=1, default=float))
    return out


def _rounded(x):
    if isinstance(x, float):
        return float(f"{x:.4g}") if np.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def dump(head, rows, runs):
    """The record as JSON: the summary indented, then each list of records as ``columns``
    (the keys) and one line per record (4 significant digits)."""
    text = json.dumps(_rounded(head), indent=1, default=float)[:-2]
    for key, items in (("answers", rows), ("estimate_runs", runs)):
        columns = list(dict.fromkeys(k for r in items for k in r))
        lines = ",\n".join(
            json.dumps(_rounded([r.get(c) for c in columns]), default=float) for r in items
        )
        text += f',\n "{key}": {{"columns": {json.dumps(columns)}, "rows": [\n{lines}\n ]}}'
    return text + "\n}\n"


def load(path):
    """A record of :func:`dump` (or an older one, answers as dicts) with its lists as dicts."""
    data = json.loads(Path(path).read_text())
    for key in ("answers", "estimate_runs"):
        block = data.get(key)
        if isinstance(block, dict):
            data[key] = [dict(zip(block["columns"], r, strict=True)) for r in block["rows"]]
    return data


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument(
        "--scale",
        type=int,
        default=0,
        help="instead of the sweep: the sampled certificate at N = M = SCALE",
    )
    ap.add_argument(
        "--budget", type=float, default=None, help="certificate_budget for --scale (default 0.1)"
    )
    ap.add_argument(
        "--grown",
        action="store_true",
        help="issue 32: the six families and the grown ones, other check_passes on the grown "
        "ones, false alarms by s_r / s_(r+1); no stop='estimate' runs; writes grown.json/.md",
    )
    ap.add_argument("--families", default="", help="comma-separated subset of the families")
    ap.add_argument("--methods", default="", help="comma-separated subset of the methods")
    ap.add_argument(
        "--out", type=Path, default=OUT, help=f"folder for the .json and .md (default {OUT})"
    )
    args = ap.parse_args(argv)
    if args.scale:
        at_scale(args.scale, args.budget)
        return
    n, seeds = (200, range(2)) if args.quick else (args.n, range(args.seeds))
    t0 = time.perf_counter()
    fams = families(n)
    rows, runs = [], []
    if args.grown:
        grown = grown_families(n)
        if args.families:
            keep = set(args.families.split(","))
            fams = {k: v for k, v in fams.items() if k in keep}
            grown = {k: v for k, v in grown.items() if k in keep}
        methods = set(args.methods.split(",")) - {""}
        sweep_answers(fams, seeds, rows, methods=methods)
        sweep_answers(grown, seeds, rows, grown=True, methods=methods)
        fams = {**fams, **grown}
    else:
        sweep_answers(fams, seeds, rows)
        est_fams = {k: v for k, v in fams.items() if k != "graph_cora"}
        sweep_estimate(est_fams, seeds, (1e-1, 1e-2), runs)
    table, est = summarise(rows, runs)
    bins = gap_bins(rows)
    import platform

    meta = {
        "n": n,
        "seeds": len(seeds),
        "families": len(fams),
        "answers": sum("wrong" in r for r in rows),
        "seconds": time.perf_counter() - t0,
        "machine": platform.machine(),
    }
    name = "grown" if args.grown else "certificates"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(
        dump({"meta": meta, "table": table, "gap_bins": bins, "estimate": est}, rows, runs)
    )
    text = markdown(table, None if args.grown else est, meta, bins)
    (args.out / f"{name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
