"""Problems, warm-ups and accuracy checks shared by the asv suites.

Conventions (after SciPy's ``BenchSVDS`` and scikit-learn's asv suites):

* problems are built once per suite in ``setup_cache`` (pickled by asv), Numba is warmed up in
  ``setup`` on a small input of the same dtype and layout, so no timing includes compilation;
* a benchmark that times an answer checks the accuracy of that very answer in ``setup`` and
  refuses to run (raises) when it missed;
* every solver call uses the same seed, the same dtype (float64) and the process's thread
  settings (asv runs each benchmark in a fresh process; set ``NUMBA_NUM_THREADS`` and
  ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` in the environment to pin them).

Two sizes of run. By default the parameter grids are small and the benchmarks whose one call
takes seconds take few samples (:class:`SlowTiming`), so ``asv run`` fits in about ten minutes on
two cores. ``KSVD_BENCH_ASV_FULL=1`` in the environment of ``asv run`` selects the full grids
(PubMed beside Cora, eps 0.01 beside 0.1, the strict eta weighting, higher effort caps, two
kernel sizes) and asv's own sampling; it takes several times longer.
"""

from __future__ import annotations

import math
import os
from functools import partial

import numpy as np

#: the full parameter grids and asv's default sampling (``KSVD_BENCH_ASV_FULL=1``)
FULL = os.environ.get("KSVD_BENCH_ASV_FULL", "").strip() not in ("", "0")


def grid(default, full):
    """An asv parameter list: ``full`` under ``KSVD_BENCH_ASV_FULL=1``, else ``default``."""
    return list(full if FULL else default)


class SlowTiming:
    """asv sampling of benchmarks whose one call takes about a second or more.

    Their ``setup`` already made (and checked) the timed call once, so no warm-up is needed;
    by default one round of at most 3 samples or 4 s. Under ``KSVD_BENCH_ASV_FULL=1``: asv's
    defaults (2 rounds, up to 10 samples or 20 s, warm-up, calibrated ``number``).
    """

    if FULL:
        rounds, repeat, number, warmup_time, min_run_count = 2, 0, 0, -1, 2
    else:
        rounds, repeat, number, warmup_time, min_run_count = 1, (1, 3, 4.0), 1, 0.0, 1


RANK = 20
SEED = 0
#: fixed efforts of the ``time_solve`` suites (the paper's regime: a few hundred samples)
FIXED_EFFORT = {
    "tsvd": 0,
    "rsvd": 10,
    "block_krylov": 2,
    "generalized_nystrom": 10,
    "sym_nystrom": 200,
    "asym_nystrom": 200,
    "asym_nystrom_norm": 200,
}
#: benchmark names -> (solver method, extra options); "asym_nystrom_norm" samples rows and
#: columns by squared norms instead of uniformly (uniform sampling fails on PubMed, whose
#: singular vectors are localised)
VARIANTS = {
    "tsvd": ("tsvd", {}),
    "rsvd": ("rsvd", {}),
    "block_krylov": ("block_krylov", {}),
    "generalized_nystrom": ("generalized_nystrom", {}),
    "sym_nystrom": ("sym_nystrom", {}),
    "asym_nystrom": ("asym_nystrom", {}),
    "asym_nystrom_norm": ("asym_nystrom", {"sampling": "norm"}),
}
#: accuracy measures of the tolerance suites: eta under two weightings, and the gap-robust
#: low-rank error ||G - U U^T G||_F <= (1 + eps) ||G - G_r||_F
MEASURES = ("singular_values", "uniform", "lowrank")
#: loose sanity tolerance (paper weighting) that a fixed-effort answer must meet to be timed
FIXED_EFFORT_EPS = 0.1


class MissedTolerance(NotImplementedError):
    """Raised in ``setup`` when the answer to be timed misses its tolerance.

    A subclass of NotImplementedError, so asv reports the benchmark as skipped (n/a, with this
    message in the log) instead of recording a time for a wrong answer.
    """


_ONCE = {}


def once(key, fn):
    """``fn()`` the first time ``key`` is seen in this process; its result (or error) after.

    asv re-runs ``setup`` before every timed sample after the first. Warm-ups, and the
    accuracy check of a deterministic answer, need to run only once per process: the
    repeated set-ups then cost nothing beyond the first.
    """
    if key not in _ONCE:
        try:
            _ONCE[key] = (True, fn())
        except Exception as exc:  # a MissedTolerance, say: raised again on every set-up
            _ONCE[key] = (False, exc)
    ok, value = _ONCE[key]
    if not ok:
        raise value
    return value


def effort_options(method, effort):
    """The solver option that sets ``method``'s effort (TSVD: ARPACK to machine precision).

    RSVD: oversampling p with 4 power iterations; generalized Nystrom: oversampling p; block
    Krylov: the depth (iterations) q; Nystrom: the number of samples m.
    """
    if method == "tsvd":
        return {"tol": 0.0}
    if method == "rsvd":
        return {"n_oversamples": int(effort), "n_iter": 4}
    if method == "generalized_nystrom":
        return {"n_oversamples": int(effort)}
    if method == "block_krylov":
        return {"n_iter": int(effort)}
    return {"n_samples": int(effort)}


def solve(G, method, effort, rank=RANK):
    """One seeded solver call at the given effort (``method`` may be a :data:`VARIANTS` key)."""
    from solvers import svd

    method, extra = VARIANTS.get(method, (method, {}))
    return svd(G, rank, method=method, random_state=SEED, **effort_options(method, effort), **extra)


def warm_up_solvers(methods=None):
    """Compile every solver's Numba code on a small dense float64 matrix."""
    import solvers

    G = np.random.default_rng(SEED).standard_normal((80, 60))
    small = {"sym_nystrom": 30, "asym_nystrom": 30, "block_krylov": 1}
    for name in methods or solvers.METHODS:
        method, extra = VARIANTS.get(name, (name, {}))
        opts = effort_options(method, small.get(method, 5))
        once(
            ("warm_up_solver", name),
            partial(solvers.svd, G, 5, method=method, random_state=SEED, **opts, **extra),
        )


def warm_up_structured():
    """Compile the structured operator's kernels on a small slice of Cora (once a process)."""
    once(("warm_up_structured",), _warm_up_structured)


def _warm_up_structured():
    from ksvd_bench.kernels import StructuredKernelSource, paper_gamma
    from ksvd_bench.race.problems import problem_data

    A = problem_data("cora")[:200, :200].tocsr()
    src = StructuredKernelSource(A, "sne", gamma=paper_gamma(A, 1.0), center=True)
    x = np.ones((200, 2))
    src.matmat(x)
    src.rmatmat(x)
    src.rows(np.arange(3))
    src.cols(np.arange(3))
    src.block(np.arange(3), np.arange(3))


def cora_dense():
    """Cora's centred SNE kernel matrix (paper bandwidth), dense, and its build time."""
    from ksvd_bench.race.problems import build_problem

    problem = build_problem("cora", random_state=SEED)
    return problem.G, problem.kernel_seconds


def pubmed_structured():
    """PubMed's centred SNE kernel (bandwidth factor 0.5) as the exact structured operator.

    The dense matrix would take 3.1 GB; this source holds O(nnz(A @ A) + N) numbers.
    """
    from ksvd_bench.kernels import StructuredKernelSource, paper_gamma
    from ksvd_bench.race.problems import problem_data

    A = problem_data("pubmed")
    return StructuredKernelSource(A, "sne", gamma=paper_gamma(A, 0.5), center=True)


def pubmed_lazy():
    """PubMed's centred SNE kernel as a lazy block source (no structure used, nothing N x N)."""
    from ksvd_bench.kernels import kernel_source, paper_gamma
    from ksvd_bench.race.problems import problem_data

    A = problem_data("pubmed")
    return kernel_source(
        A, "sne", gamma=paper_gamma(A, 0.5), compat=None, center=True, structured=False
    )


def _reference_cache_dir():
    # the suites share one on-disk cache of exact SVDs in the repository's .asv folder (git
    # ignores it), so Cora's dense SVD is computed once per machine, not once per suite and run
    return os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".asv", "reference_cache"
    )


def reference_triplets(G, rank=RANK):
    """The exact top-``rank`` SVD as a plain (U, s, V) tuple (picklable for setup_cache).

    It is cached on disk in the repository's ``.asv/reference_cache``, keyed by a hash of a
    dense ``G``'s numbers or a source's ``cache_key`` (:func:`ksvd_bench.driver.reference_svd`).
    """
    from ksvd_bench.driver import reference_svd

    ref = reference_svd(G, rank, cache_dir=_reference_cache_dir())
    return (np.asarray(ref.U), np.asarray(ref.s), np.asarray(ref.V))


def as_reference(triplets):
    from solvers import SVDResult

    U, s, V = triplets
    return SVDResult(U=U, s=s, V=V, info={"method": "reference"})


def accuracy(G, reference, result, measure, rank=RANK):
    """eta of ``result`` under a weighting, or its low-rank excess (``measure="lowrank"``)."""
    from ksvd_bench.metrics import eta, lowrank_error

    if measure == "lowrank":
        return float(lowrank_error(G, reference, result, rank=rank))
    return float(eta(reference, result, weights=measure, rank=rank))


def sv_error(reference, result, rank=RANK):
    """``max_i |s~_i - s_i| / s_1`` over the top ``rank`` singular values (inf if fewer)."""
    s = np.asarray(reference.s, dtype=np.float64)[:rank]
    s_hat = np.asarray(result.s, dtype=np.float64)[:rank]
    if s_hat.size < s.size or not np.all(np.isfinite(s_hat)):
        return math.inf
    return float(np.max(np.abs(s_hat - s)) / s[0])


def meets(G, reference, result, eps, measure):
    """(ok, value, sv_err): the race's whole-triplet rule (:func:`ksvd_bench.race.common.meets`).

    The vector measures (eta, low-rank error) do not read the singular values; an answer
    with the right subspace and wrong values must not count as converged, so the relative
    singular-value error ``max_i |s~_i - s_i| <= eps * s_1`` is checked too, and an answer
    its solver flagged unreliable does not count either. The triplet residual is not
    computed here (NaN: the rule does not block on it).
    """
    from ksvd_bench.race.common import meets as race_meets
    from ksvd_bench.race.common import warning_fields

    value = accuracy(G, reference, result, measure)
    err = sv_error(reference, result)
    entry = {"value": value, "sv_error": err, "triplet_residual": math.nan}
    entry.update(warning_fields((), result.info))
    return race_meets(entry, eps), value, err


def check_accuracy(reference, result, eps, weights, what, G=None):
    """Raise :class:`MissedTolerance` if ``result`` misses ``eps`` under ``weights``.

    ``weights`` is an eta weighting, or ``"lowrank"`` (then ``G`` is needed); the singular
    values must be within ``eps * s_1`` as well (:func:`meets`). A time for a wrong answer is
    never reported.
    """
    if weights == "lowrank" and G is None:
        raise ValueError("check_accuracy needs G for the lowrank measure")
    ok, value, err = meets(G, reference, result, eps, weights)
    if not ok:
        raise MissedTolerance(
            f"{what}: {weights} measure {value:.3g}, singular-value error {err:.3g}, "
            f"reliable={result.info.get('reliable')}, "
            f"eps={eps:g}; refusing to time an answer that missed the tolerance"
        )
    return value
