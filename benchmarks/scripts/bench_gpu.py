"""The lazy SNE kernel passes on one GPU, against the CPU source and torch (issue 16).

One run on the same points (``make_clustered_points``, as ``ksvd-bench scale --part b``:
N = M = 1e5, d = 64, r = 20 clusters; SNE, uncentred, float32 storage; 40 columns):

1. ``device="cuda"``: the set-up pass (building the source: upload and SNE normalisers),
   ``matmat`` (k columns), ``rmatmat`` (k) and ``sketch`` (k + k), median seconds of
   ``--repeat`` runs, numpy in and numpy out (the transfers of the operand and the result
   are also timed alone); the first compile of the kernels is timed apart.
2. The same passes of the CPU source (``device="cpu"``) on all of this machine's cores.
3. torch's tiled pass, if torch is installed and sees the GPU: ``exp((shift - |x - z|^2) /
   gamma^2) * scale @ Omega`` over row tiles (addmm distances, exp, GEMM), in FP32 and in
   TF32, with the same normalisers, numpy in and out.
4. The float32 error of every ``G @ Omega`` against a float64 reference (the float64 GPU
   source; the float64 CPU source with ``--smoke``): ``max |Y - Y64| / max |Y64|``.

Then it prints the ``ksvd-bench scale --part b --device cuda`` commands for the end-to-end
top-20 rows at N = M = 1e5 and 1e6. Run on a machine with an NVIDIA GPU and
``pip install -e ".[cuda]"``::

    python benchmarks/scripts/bench_gpu.py                     # N = M = 1e5
    python benchmarks/scripts/bench_gpu.py --out gpu.json
    python benchmarks/scripts/bench_gpu.py --smoke             # N = M = 130: seconds
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/scripts/bench_gpu.py --smoke   # no GPU needed
    python benchmarks/scripts/bench_gpu.py --ptx               # compile only, no GPU needed

``--ptx`` compiles every kernel variant for ``--arch`` (default sm_90: H100, H200) without a
GPU (CUDA's NVVM and NVRTC are needed) and prints, where ``ptxas`` (a CUDA toolkit) or
nvJitLink (``numba-cuda[cu13]``) is installed, registers, spills and shared memory per
variant (``ksvd_bench.kernels.backends.cuda_kernel_resources``). Under the simulator the
timings mean nothing (it runs each CUDA thread as a Python thread): ``--smoke`` there only
proves that the script runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

RANK = 20
D = 64
K = 40
PASSES = ("setup", "matmat", "rmatmat", "sketch")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000, help="N = M (default: %(default)s)")
    p.add_argument("--k", type=int, default=K, help="columns of the operands (default: 40)")
    p.add_argument("--repeat", type=int, default=5, help="GPU and torch runs per pass (median)")
    p.add_argument("--cpu-repeat", type=int, default=1, help="CPU runs per pass (median)")
    p.add_argument("--skip-cpu", action="store_true", help="no CPU-source passes")
    p.add_argument("--skip-torch", action="store_true", help="no torch passes")
    p.add_argument("--torch-tile", type=int, default=2048, help="rows per torch tile")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="N = M = 130, d = 8, k = 4, 4 clusters, one run: proves the script "
        "runs (also under NUMBA_ENABLE_CUDASIM=1)",
    )
    p.add_argument(
        "--ptx",
        action="store_true",
        help="only compile the kernels for --arch (no GPU needed) and report",
    )
    p.add_argument("--arch", default="sm_90", help="target of --ptx (default: %(default)s)")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    return p.parse_args(argv)


# ----------------------------------------------------------------------- helpers
def median_seconds(fn, repeat):
    """``(median seconds, last result)`` of ``repeat`` calls of ``fn``."""
    times, out = [], None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def rel_error(Y, ref):
    """``max |Y - ref| / max |ref|`` (max-norm relative; entries near 0 do not blow it up)."""
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(np.asarray(Y, dtype=np.float64) - ref)) / np.max(np.abs(ref)))


def problem(n, d, rank, seed=0):
    from ksvd_bench.datasets import make_clustered_points

    pts = make_clustered_points(n, n, d, rank, random_state=seed, dtype=np.float32)
    rng = np.random.default_rng(seed + 1)
    return pts.X, pts.Z, float(pts.gamma), rng


def source(X, Z, gamma, dtype, device):
    from ksvd_bench.kernels import KernelSource

    return KernelSource.from_points(
        X, Z, "sne", gamma=gamma, center=False, dtype=dtype, device=device
    )


def run_passes(make, Om, Ps, repeat):
    """Build a source with ``make()`` and time its set-up and three passes."""
    out = {}
    out["setup"], src = median_seconds(make, repeat)
    out["matmat"], Y = median_seconds(lambda: src.matmat(Om), repeat)
    out["rmatmat"], _ = median_seconds(lambda: src.rmatmat(Ps), repeat)
    out["sketch"], (Ys, _) = median_seconds(lambda: src.sketch(Om, Ps), repeat)
    return out, src, Y, Ys


# ----------------------------------------------------------------------- sections
def gpu_section(X, Z, gamma, Om, Ps, repeat):
    from numba import cuda

    from ksvd_bench.kernels.backends import cuda_simulated

    sim = cuda_simulated()
    res = {"simulator": sim}
    if not sim:
        res["device"] = cuda.get_current_device().name
        if isinstance(res["device"], bytes):
            res["device"] = res["device"].decode()
    # the first use compiles the kernels (seconds): on a small copy, timed apart
    t0 = time.perf_counter()
    w = min(200, X.shape[0] // 4)
    small = source(X[:w], Z[:w], gamma, np.float32, "cuda")
    small.sketch(Om[:w], Ps[:w])
    small.matmat(Om[:w])
    res["compile_s"] = time.perf_counter() - t0
    free0 = None if sim else cuda.current_context().get_memory_info()[0]
    times, src, Y, Ys = run_passes(lambda: source(X, Z, gamma, np.float32, "cuda"), Om, Ps, repeat)
    if free0 is not None:
        res["gpu_memory_bytes_after_sketch"] = int(
            free0 - cuda.current_context().get_memory_info()[0]
        )
    res["times"] = times
    # the transfers inside a pass: operand in (storage dtype), float64 result out
    t_in, dOm = median_seconds(lambda: cuda.to_device(Om.astype(np.float32)), repeat)
    dY = cuda.to_device(np.zeros((X.shape[0], Om.shape[1])))
    t_out, _ = median_seconds(dY.copy_to_host, repeat)
    res["transfer_s"] = {"operand_in": t_in, "result_out": t_out}
    res["shift"], res["scale"] = src._shift, src._scale
    return res, Y, Ys


def cpu_section(X, Z, gamma, Om, Ps, repeat):
    import numba

    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    w = min(200, X.shape[0] // 4)
    src = source(X[:w], Z[:w], gamma, np.float32, "cpu")  # compile (cached) outside the timing
    src.sketch(Om[:w], Ps[:w])
    times, _, Y, _ = run_passes(lambda: source(X, Z, gamma, np.float32, "cpu"), Om, Ps, repeat)
    return {"threads": numba.get_num_threads(), "times": times}, Y


def torch_section(X, Z, gamma, shift, scale, Om, tile, repeat):
    """torch's tiled pass ``G @ Omega`` (FP32 and TF32), numpy in and out; None without torch."""
    try:
        import torch
    except ImportError:
        return None, None
    if not torch.cuda.is_available():
        return None, None
    dev = torch.device("cuda")
    Xt = torch.as_tensor(X, device=dev)
    Zt = torch.as_tensor(Z, device=dev)
    xx = (Xt * Xt).sum(1)
    zz = (Zt * Zt).sum(1)
    sh = torch.as_tensor(shift, device=dev, dtype=torch.float32)
    sc = torch.as_tensor(scale, device=dev, dtype=torch.float32)
    g = 1.0 / gamma**2

    def matmat():
        O = torch.as_tensor(Om.astype(np.float32), device=dev)
        Y = torch.empty((Xt.shape[0], O.shape[1]), device=dev)
        for i0 in range(0, Xt.shape[0], tile):
            i1 = min(i0 + tile, Xt.shape[0])
            Dt = torch.addmm(zz[None, :] + xx[i0:i1, None], Xt[i0:i1], Zt.T, alpha=-2.0)
            Dt.clamp_(min=0.0).sub_(sh[i0:i1, None]).mul_(-g).clamp_(max=0.0).exp_()
            Dt.mul_(sc[i0:i1, None])
            torch.mm(Dt, O, out=Y[i0:i1])
        return Y.cpu().numpy()

    out = {}
    results = {}
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, tf32 in (("fp32", False), ("tf32", True)):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            matmat()  # warm-up
            out[name], results[name] = median_seconds(matmat, repeat)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return out, results


def reference(X, Z, gamma, Om, on_gpu):
    """float64 ``G @ Omega`` of the same points (GPU source, or CPU with ``--smoke``)."""
    return source(X, Z, gamma, np.float64, "cuda" if on_gpu else "cpu").matmat(Om)


# ----------------------------------------------------------------------- compile only
def ptx_report(arch):
    """Compile every kernel variant for ``arch`` without a GPU; registers, spills, shared."""
    from ksvd_bench.kernels.backends import CudaUnavailableError, cuda_kernel_resources

    try:
        rows = cuda_kernel_resources(arch)
    except CudaUnavailableError as exc:
        raise SystemExit(f"--ptx: {exc}") from None
    lines = []
    for r in rows:
        lines.append(
            f"{r['name']:13s} {r['dtype']:7s} cy={r['cy']}  registers "
            f"{r['registers']}, spill stores {r['spill_stores']} B, spill loads "
            f"{r['spill_loads']} B, stack {r['stack_bytes']} B, shared "
            f"{r['shared_bytes']} B"
        )
        print(lines[-1], flush=True)
    spills = sum(1 for r in rows if r["spill_stores"] or r["spill_loads"])
    print(
        f"{len(rows)} variants for {arch} ({rows[0]['assembler']}): {spills} spill, most "
        f"registers {max(r['registers'] for r in rows)}"
    )
    return lines


# ----------------------------------------------------------------------- main
def main(argv=None):
    args = parse_args(argv)
    if args.ptx:
        rows = ptx_report(args.arch)
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"arch": args.arch, "kernels": rows}, f, indent=1)
        return
    n, d, k, rank = args.n, D, args.k, RANK
    if args.smoke:
        n, d, k, rank = 130, 8, 4, 4
        args.repeat = args.cpu_repeat = 1
    X, Z, gamma, rng = problem(n, d, rank)
    Om = rng.standard_normal((n, k))
    Ps = rng.standard_normal((n, k))
    print(
        f"N = M = {n}, d = {d}, k = {k}, SNE uncentred, float32 storage, gamma = "
        f"{gamma:.4g}; {platform.node()}, {os.cpu_count()} CPUs",
        flush=True,
    )

    gpu, Yg, Ygs = gpu_section(X, Z, gamma, Om, Ps, args.repeat)
    sim = gpu["simulator"]
    print(
        f"GPU: {'Numba CUDA simulator (timings meaningless)' if sim else gpu['device']}; "
        f"first compile {gpu['compile_s']:.1f} s",
        flush=True,
    )
    ref = reference(X, Z, gamma, Om, on_gpu=not args.smoke and not sim)
    errors = {"gpu_matmat": rel_error(Yg, ref), "gpu_sketch_y": rel_error(Ygs, ref)}

    cpu = None
    if not args.skip_cpu:
        cpu, Yc = cpu_section(X, Z, gamma, Om, Ps, args.cpu_repeat)
        errors["cpu_matmat"] = rel_error(Yc, ref)
    tch = None
    if not args.skip_torch and not sim:
        tch, Yt = torch_section(
            X, Z, gamma, gpu["shift"], gpu["scale"], Om, args.torch_tile, args.repeat
        )
        if tch is not None:
            errors.update({f"torch_{name}": rel_error(Y, ref) for name, Y in Yt.items()})

    head = f"{'pass':8s} {'GPU s':>9s}"
    head += f" {'CPU s (' + str(cpu['threads']) + ' thr)':>16s} {'CPU/GPU':>8s}" if cpu else ""
    head += f" {'torch fp32':>10s} {'tf32':>8s} {'fp32/GPU':>8s}" if tch else ""
    print(head)
    for name in PASSES:
        g = gpu["times"][name]
        line = f"{name:8s} {g:9.4f}"
        if cpu:
            c = cpu["times"][name]
            line += f" {c:16.3f} {c / g:8.1f}"
        if tch and name == "matmat":
            line += f" {tch['fp32']:10.4f} {tch['tf32']:8.4f} {tch['fp32'] / g:8.2f}"
        print(line)
    tr = gpu["transfer_s"]
    print(
        f"transfers inside a GPU pass: operand in {tr['operand_in']:.4f} s, float64 result "
        f"out {tr['result_out']:.4f} s"
    )
    print(f"sketch / matmat on the GPU: {gpu['times']['sketch'] / gpu['times']['matmat']:.2f}")
    if "gpu_memory_bytes_after_sketch" in gpu:
        print(
            f"GPU memory held after the passes: "
            f"{gpu['gpu_memory_bytes_after_sketch'] / 2**30:.2f} GiB"
        )
    print(
        "float32 error of G @ Omega vs float64 (max |Y - Y64| / max |Y64|): "
        + ", ".join(f"{name} {e:.2e}" for name, e in errors.items())
    )
    print("\nEnd to end (top-20, clustered family; part b's default methods), on the GPU machine:")
    for size in (100_000, 1_000_000):
        print(
            f"  ksvd-bench scale --part b --device cuda --dtype float32 --sizes {size} "
            f"--out results/scale_gpu" + (" --merge" if size > 100_000 else "")
        )
    if args.out:
        gpu.pop("shift")
        gpu.pop("scale")
        with open(args.out, "w") as f:
            json.dump(
                {"n": n, "d": d, "k": k, "gpu": gpu, "cpu": cpu, "torch": tch, "errors": errors},
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
