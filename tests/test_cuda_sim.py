"""The CUDA backend (``device="cuda"``) on Numba's CUDA simulator, against the CPU source.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, at import, and the rest of the suite must keep
the real (CPU) Numba: so in a normal run this module holds only :func:`test_simulator`,
which runs the module again in a fresh interpreter with ``NUMBA_ENABLE_CUDASIM=1``, where the
tests below are defined. The simulator runs every CUDA thread as a Python thread (about
1e4x slower than the GPU), so the sizes are tiny, and the kernels run there in the
simulator's layout (``_cuda_kernels.SIM_LAYOUT``: 16-thread blocks, small tiles; the same
code as the GPU's): every test cuts G into several ragged tiles (N and M not multiples of
the tile). ``tests/test_cuda_ptx.py`` compiles the GPU layout's kernels. How the import of
the CUDA target fails is tested in ``tests/test_cuda_import.py``.

On a machine with a GPU, ``KSVD_BENCH_TEST_GPU=1 pytest tests/test_cuda_sim.py`` runs the
same tests on the real device instead.
"""

import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

#: run the device tests here: on the simulator (the child of test_simulator) or on a GPU
_SIM = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("KSVD_BENCH_TEST_GPU") == "1"
_CHILD_TIMEOUT = 600


def _run_child(env_extra, args, timeout=_CHILD_TIMEOUT):
    env = dict(os.environ, **env_extra)
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=os.path.dirname(__file__) + "/..",
    )


if not _SIM:

    def test_simulator():
        """Run this module's simulator tests in a fresh interpreter with the simulator on."""
        pytest.importorskip("numba_cuda", reason="numba-cuda (the test extra) is not installed")
        proc = _run_child(
            {"NUMBA_ENABLE_CUDASIM": "1"},
            ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", __file__],
        )
        out = proc.stdout + proc.stderr
        if proc.returncode != 0 or " passed" not in out:
            pytest.fail(
                f"simulator tests failed (exit code {proc.returncode}):\n{out[-6000:]}",
                pytrace=False,
            )

    def test_without_gpu_clear_error():
        """No usable GPU and no simulator: a clear error naming what is missing."""
        pytest.importorskip("numba_cuda", reason="numba-cuda (the test extra) is not installed")
        code = (
            "import numpy as np\n"
            "from ksvd_bench.kernels import KernelSource\n"
            "from ksvd_bench.kernels.backends import CudaUnavailableError\n"
            "try:\n"
            "    KernelSource.from_points(np.ones((3, 2)), np.ones((4, 2)), 'rbf', gamma=1.0,\n"
            "                             device='cuda')\n"
            "except CudaUnavailableError as exc:\n"
            "    print('RAISED', exc)\n"
        )
        # no visible device: the driver (if any) finds none, exactly as on a CPU-only machine
        proc = _run_child(
            {"NUMBA_ENABLE_CUDASIM": "0", "CUDA_VISIBLE_DEVICES": ""}, ["-c", code], timeout=300
        )
        assert "RAISED device='cuda' found no usable GPU" in proc.stdout, proc.stdout + proc.stderr
        assert "NUMBA_ENABLE_CUDASIM=1" in proc.stdout

else:
    import scipy.sparse as sp

    # The simulator's threads hand the GIL around at every syncthreads: a shorter switch
    # interval than Python's 5 ms roughly halves this module's time (measured 2026-11).
    sys.setswitchinterval(2e-4)

    def _lock_simulated_shared_arrays():
        """Make the simulator's shared arrays one per block, as on a GPU, under any schedule.

        numba-cuda 0.30.4's simulator gives a block's threads the array of a
        ``cuda.shared.array`` call site from a dict filled on first touch without a lock
        (``FakeCUDAShared.array``): with the short switch interval above, two threads of the
        first block can each make their own, and the block then computes with arrays that
        are not shared (seen once: a wrong row sum in the centring set-up). The same
        lookup, under a lock, and without formatting the whole stack for the call site.
        """
        import threading

        from numba.cuda.simulator import kernelapi

        lock = threading.Lock()
        plain = kernelapi.FakeCUDAShared.array

        def array(self, shape, dtype, alignment=None):
            if shape == 0 or alignment is not None:  # dynamic shared memory: as it was
                return plain(self, shape, dtype, alignment)
            if isinstance(dtype, kernelapi.types.Type):
                dtype = kernelapi.numpy_support.as_dtype(dtype)
            frame = sys._getframe(1)
            site = (frame.f_code.co_filename, frame.f_lineno)
            with lock:
                res = self._allocations.get(site)
                if res is None:
                    res = self._allocations[site] = np.empty(shape, dtype)
            return res

        kernelapi.FakeCUDAShared.array = array

    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        _lock_simulated_shared_arrays()

    import solvers
    from ksvd_bench.kernels import KernelSource, kernel_source, ksvd_kernel
    from ksvd_bench.kernels.backends import cuda as cuda_backend

    KERNELS = ("sne", "rbf", "t", "linear", "poly", "softmax")
    DTYPES = (np.float64, np.float32)
    #: relative agreement with the CPU source (entries and products, max-norm relative)
    TOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5}

    def _points(n, m, d=3, seed=0):
        rng = np.random.default_rng(seed)
        return rng.normal(size=(n, d)), rng.normal(size=(m, d)) + 0.3

    def _pair(X, Z, kernel, **kw):
        kw.setdefault("gamma", 1.3)
        return (
            KernelSource.from_points(X, Z, kernel, **kw),
            KernelSource.from_points(X, Z, kernel, device="cuda", **kw),
        )

    def _close(got, want, dtype):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape
        err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300)
        assert err <= TOL[np.dtype(dtype)], err

    def _protocol(cpu, gpu, dtype, k=3, l=2, seed=1):
        """Every protocol member of ``gpu`` equals that of ``cpu``."""
        n, m = cpu.shape
        rng = np.random.default_rng(seed)
        Om, Ps = rng.normal(size=(m, k)), rng.normal(size=(n, l))
        _close(gpu.matmat(Om), cpu.matmat(Om), dtype)
        _close(gpu.rmatmat(Ps), cpu.rmatmat(Ps), dtype)
        for got, want in zip(gpu.sketch(Om, Ps), cpu.sketch(Om, Ps), strict=True):
            _close(got, want, dtype)
        r, c = [0, n - 1, n // 2], [m - 1, 0]
        rows = gpu.rows(r)
        assert rows.dtype == np.dtype(dtype)
        _close(rows, cpu.rows(r), dtype)
        _close(gpu.cols(c), cpu.cols(c), dtype)
        _close(gpu.block(r, c), cpu.block(r, c), dtype)
        assert gpu.norm_bound() == pytest.approx(cpu.norm_bound(), rel=TOL[np.dtype(dtype)])
        assert (gpu.n_passes, gpu.n_matmat, gpu.n_entries) == (
            cpu.n_passes,
            cpu.n_matmat,
            cpu.n_entries,
        )

    # ---------------------------------------------------------------- equal to the CPU
    @pytest.mark.parametrize("dtype", DTYPES)
    @pytest.mark.parametrize("center", [False, True])
    @pytest.mark.parametrize("kernel", KERNELS)
    def test_every_kernel_matches_cpu(kernel, center, dtype):
        # ragged tiles in every pass: N, M not multiples of the tile sizes (one tile on a GPU)
        X, Z = _points(19, 13, seed=len(kernel))
        cpu, gpu = _pair(X, Z, kernel, center=center, dtype=dtype)
        assert (
            gpu.device == "cuda"
            and gpu.chunk_rows == cuda_backend.CONFIGS[(np.dtype(dtype), "row")][0]
        )
        _protocol(cpu, gpu, dtype)

    @pytest.mark.parametrize("center", [False, True])
    def test_softmax_matches_the_formula(center):
        """Softmax attention on the device equals the numpy formula (1e-12 in float64,
        1e-5 in float32), with logits over 1e3 in some rows (a naive exp overflows)."""
        rng = np.random.default_rng(12)
        X, Z = rng.normal(size=(19, 5)), rng.normal(size=(13, 5))
        X[:3] *= 300.0
        S = X @ Z.T / 0.9
        assert np.abs(S).max() > 1e3
        E = np.exp(S - S.max(axis=1, keepdims=True))
        G = E / E.sum(axis=1, keepdims=True)
        if center:
            G = G - G.mean(axis=0) - G.mean(axis=1, keepdims=True) + G.mean()
        Om, Ps = rng.normal(size=(13, 3)), rng.normal(size=(19, 2))
        for dtype in DTYPES:
            gpu = KernelSource.from_points(
                X, Z, "softmax", gamma=0.9, center=center, dtype=dtype, device="cuda"
            )
            _close(gpu.matmat(Om), G @ Om, dtype)
            _close(gpu.rmatmat(Ps), G.T @ Ps, dtype)
            _close(gpu.dense(), G, dtype)
            _close(gpu.cols([12, 0]), G[:, [12, 0]], dtype)

    @pytest.mark.parametrize("dtype", DTYPES)
    def test_ragged_tiles_and_bands(dtype):
        """Several ragged tiles in both tile configurations, several bands in one sketch."""
        tr, tc = cuda_backend.CONFIGS[(np.dtype(dtype), "row")][:2]
        cr, cc = cuda_backend.CONFIGS[(np.dtype(dtype), "col")][:2]
        n, m = tr + 3, max(tc, cc) + 5  # 2 row tiles of the row pass, 3 of the col pass
        X, Z = _points(n, m, d=5, seed=3)
        # a budget of one column-pass row tile per band (k = 3): the sketch takes 3 bands
        n_col_tiles = -(-m // cc)
        budget = cr * n_col_tiles * 3 * np.dtype(dtype).itemsize
        chunk = -(-budget // cuda_backend.GPU_BUDGET_FACTOR)
        cpu, gpu = _pair(X, Z, "sne", center=True, dtype=dtype, chunk_bytes=chunk)
        band = gpu._backend._band(n_col_tiles, 3, np.dtype(dtype).itemsize, n)
        assert band < n  # the sketch of _protocol (k = 3) runs in several bands
        _protocol(cpu, gpu, dtype)
        _close(gpu.dense(), cpu.dense(), dtype)

    @pytest.mark.parametrize("dtype", DTYPES)
    def test_many_features(dtype):
        """d above every staging chunk: several chunks of features, the last one partial."""
        d = max(cuda_backend.CONFIGS[(np.dtype(dtype), c)][2] for c in ("row", "col")) + 6
        X, Z = _points(19, 13, d=d, seed=13)
        cpu, gpu = _pair(X, Z, "sne", gamma=np.sqrt(d), center=True, dtype=dtype)
        rng = np.random.default_rng(14)
        Om, Ps = rng.normal(size=(13, 2)), rng.normal(size=(19, 2))
        _close(gpu.matmat(Om), cpu.matmat(Om), dtype)  # the row-pass tiles
        for got, want in zip(gpu.sketch(Om, Ps), cpu.sketch(Om, Ps), strict=True):
            _close(got, want, dtype)  # the column-pass tiles
        _close(gpu.rows([0, 18]), cpu.rows([0, 18]), dtype)
        assert gpu.norm_bound() == pytest.approx(cpu.norm_bound(), rel=TOL[np.dtype(dtype)])

    def test_extreme_magnitudes():
        """Points and gamma near the float64 limits: the source rescales them, exactly."""
        X, Z = _points(19, 13, seed=15)
        for kernel, f in (("sne", 1e200), ("t", 1e-200)):
            cpu, gpu = _pair(X * f, Z * f, kernel, gamma=1.5 * f)
            Om = np.ones((13, 1))
            _close(gpu.matmat(Om), cpu.matmat(Om), np.float64)

    @pytest.mark.parametrize("dtype", DTYPES)
    def test_wide_operands_and_vectors(dtype):
        """Operands wider than one block's columns (several chunks) and 1-d operands."""
        X, Z = _points(20, 17, seed=4)
        cpu, gpu = _pair(X, Z, "t", center=True, dtype=dtype)
        rng = np.random.default_rng(5)
        wide = cuda_backend.TX * cuda_backend.CONFIGS[(np.dtype(dtype), "row")][3] + 6
        Om, Ps = rng.normal(size=(17, wide)), rng.normal(size=20)
        _close(gpu.matmat(Om), cpu.matmat(Om), dtype)
        y, w = gpu.sketch(Om, Ps)
        yc, wc = cpu.sketch(Om, Ps)
        assert w.shape == (17,)
        _close(y, yc, dtype)
        _close(w, wc, dtype)
        Pw = rng.normal(size=(20, wide))
        _close(gpu.rmatmat(Pw), cpu.rmatmat(Pw), dtype)
        _close(gpu.matmat(Ps[:17]), cpu.matmat(Ps[:17]), dtype)

    @pytest.mark.parametrize("dtype", DTYPES)
    def test_data_matrix_form(dtype):
        """``kernel_source(A, ..., device="cuda")`` (compat map, paper gamma) equals the CPU."""
        A = np.abs(np.random.default_rng(6).normal(size=(13, 9)))
        cpu = kernel_source(A, "sne", dtype=dtype)
        gpu = kernel_source(A, "sne", dtype=dtype, device="cuda")
        _protocol(cpu, gpu, dtype)
        _close(gpu.dense(), ksvd_kernel(A, "sne", dtype=dtype), dtype)

    def test_deterministic_and_pickles():
        X, Z = _points(21, 19, seed=7)
        _, gpu = _pair(X, Z, "sne", center=True, dtype=np.float32)
        Om = np.random.default_rng(8).normal(size=(19, 3))
        y1, y2 = gpu.matmat(Om), gpu.matmat(Om)
        np.testing.assert_array_equal(y1, y2)  # fixed order, no atomics: the same bits
        again = pickle.loads(pickle.dumps(gpu))
        assert again.device == "cuda"
        np.testing.assert_array_equal(again.matmat(Om), y1)

    # ---------------------------------------------------------------- solvers
    @pytest.fixture(scope="module")
    def solver_pair():
        """One centred SNE pair for every solver (its set-up passes run once)."""
        X, Z = _points(17, 15, seed=9)
        return _pair(X, Z, "sne", center=True)

    @pytest.mark.parametrize("method", sorted(solvers.METHODS))
    def test_solvers_match_cpu(method, solver_pair):
        cpu, gpu = solver_pair
        opts = {"n_samples": 8} if method in ("sym_nystrom", "asym_nystrom") else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the same on both; not the point
            want = solvers.svd(cpu, 2, method=method, random_state=0, **opts)
            got = solvers.svd(gpu, 2, method=method, random_state=0, **opts)
        np.testing.assert_allclose(got.s, want.s, rtol=1e-10)
        for a, b in ((got.U, want.U), (got.V, want.V)):
            np.testing.assert_allclose(a @ a.T, b @ b.T, atol=1e-8)
        assert got.info["n_passes"] == want.info["n_passes"]

    # ---------------------------------------------------------------- bad input
    GOOD = np.ones((4, 3))

    @pytest.mark.parametrize(
        "X, Z, kwargs",
        [
            (GOOD, np.ones((4, 2)), {"gamma": 1.0}),
            (np.array([[np.nan, 1.0, 0.0]]), GOOD, {"gamma": 1.0}),
            (np.empty((0, 3)), GOOD, {"gamma": 1.0}),
            (GOOD, GOOD, {"gamma": 0.0}),
            (GOOD, GOOD, {}),
            (GOOD, GOOD, {"gamma": 1e-160}),
            (GOOD, GOOD, {"gamma": 1.0, "chunk_bytes": 0}),
            (GOOD, GOOD, {"gamma": 1.0, "dtype": np.int64}),
            (GOOD, GOOD, {"gamma": 1.0, "center": 1}),
            (GOOD, GOOD, {"gamma": 1.0, "kernel": "laplace"}),
        ],
    )
    def test_bad_input_same_messages(X, Z, kwargs):
        errors = []
        for device in ("cpu", "cuda"):
            with pytest.raises(Exception) as info:
                KernelSource.from_points(X, Z, device=device, **kwargs)
            errors.append((type(info.value), str(info.value)))
        assert errors[0] == errors[1]

    def _same_error(calls):
        errors = []
        for call in calls:
            with pytest.raises(Exception) as info:
                call()
            errors.append((type(info.value), str(info.value)))
        assert errors[0] == errors[1], errors
        return errors[0]

    def test_bad_operands_and_indices_same_messages():
        cpu, gpu = _pair(GOOD, np.ones((5, 3)), "rbf", gamma=1.0)
        for bad in (
            lambda s: s.sketch(np.ones((4, 2)), np.ones((4, 2))),
            lambda s: s.sketch(np.ones((5, 2)), np.ones((5, 2))),
            lambda s: s.matmat(np.full(5, np.nan)),
            lambda s: s.rows([4]),
            lambda s: s.cols([0.5]),
        ):
            _same_error([lambda b=bad: b(cpu), lambda b=bad: b(gpu)])

    def test_overflowing_poly_same_message():
        X, Z = _points(20, 10, seed=12)
        exc, msg = _same_error(
            [
                lambda dev=dev: KernelSource.from_points(X, Z, "poly", degree=1000, device=dev)
                for dev in ("cpu", "cuda")
            ]
        )
        assert exc is ValueError and "overflow" in msg

    def test_sparse_points_clear_error():
        X = sp.random(6, 3, density=0.5, format="csr", random_state=0)
        with pytest.raises(ValueError, match="device='cuda' needs dense points"):
            KernelSource.from_points(X, np.ones((4, 3)), "rbf", gamma=1.0, device="cuda")
        # the structured (sparse graph) source stays on the CPU
        A = sp.random(8, 8, density=0.4, format="csr", random_state=1)
        with pytest.raises(ValueError, match="device='cpu'"):
            kernel_source(A, "sne", structured=True, device="cuda")
