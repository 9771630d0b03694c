"""The CUDA kernels compiled ahead of time, without a GPU: PTX, registers and spills.

:func:`kernel_resources` lowers every kernel variant of :mod:`._cuda_kernels` (the GPU
layout) to PTX with Numba's CUDA compiler, which needs CUDA's NVVM and NVRTC libraries but
no GPU, then assembles each PTX for the target with ``ptxas -v`` (or nvJitLink, where
``ptxas`` is missing) and reads its registers, spills, stack and shared memory per thread
block. A spill means a register-blocked accumulator went to local memory: the kernels are
sized so that none does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

from ._cuda_import import CudaUnavailableError, import_cuda, simulated

__all__ = ["kernel_ptx", "kernel_resources", "assembler"]

_FIELDS = {
    "registers": r"Used (\d+) registers",
    "spill_stores": r"(\d+) bytes spill stores",
    "spill_loads": r"(\d+) bytes spill loads",
    "stack_bytes": r"(\d+) bytes stack frame",
    "shared_bytes": r"(\d+) bytes smem",
}


def _cc(arch):
    digits = arch.removeprefix("sm_").rstrip("af")
    if not arch.startswith("sm_") or len(digits) < 2 or not digits.isdigit():
        raise ValueError(f"arch must look like 'sm_90', got {arch!r}")
    return int(digits[:-1]), int(digits[-1])


def kernel_ptx(arch="sm_90", *, kernel=None, dtype=None, cy=None):
    """Every kernel variant lowered to PTX for ``arch``: a list of dicts with ``name``,
    ``dtype``, ``cy`` (operand width, in units of the block's thread columns), ``ptx`` and
    ``launch_bounds`` (``(threads, blocks per SM)`` or None).

    ``kernel`` (a name such as ``"row_pass"``), ``dtype`` (``"float32"`` or ``"float64"``)
    and ``cy`` keep only the variants they match (None: all); each variant takes seconds.

    Raises
    ------
    CudaUnavailableError
        Under the simulator (it compiles nothing), or where CUDA's compiler libraries
        (NVVM, NVRTC) are missing; the message names the cause.
    ValueError
        If no variant matches ``kernel``, ``dtype`` and ``cy``.
    """
    if simulated():
        raise CudaUnavailableError(
            "compiling the CUDA kernels to PTX needs the real CUDA "
            "target: unset NUMBA_ENABLE_CUDASIM"
        )
    cuda = import_cuda()
    # numba-cuda: an optional dependency (ksvd-bench[cuda]); import_cuda() checked it above
    from ._cuda_kernels import variants

    cc = _cc(arch)
    if dtype is not None:
        try:
            dtype = np.dtype(dtype).name
        except TypeError:
            pass  # matches nothing: the error below names it
    everything = variants()
    chosen = [
        v
        for v in everything
        if (kernel is None or v[0] == kernel)
        and (dtype is None or v[1].name == dtype)
        and (cy is None or v[2] == cy)
    ]
    if not chosen:
        names = sorted({v[0] for v in everything})
        cys = sorted({v[2] for v in everything})
        raise ValueError(
            f"no CUDA kernel variant has kernel={kernel!r}, dtype={dtype!r}, "
            f"cy={cy!r}: kernels {names}, dtypes float32 and float64, cy "
            f"{cys[0]}..{cys[-1]} (row and column passes; the others 1)"
        )
    out = []
    for name, dt, c, pyfunc, sig, bounds in chosen:
        try:
            ptx, _ = cuda.compile_ptx(pyfunc, sig, cc=cc, launch_bounds=bounds)
        except Exception as exc:  # noqa: BLE001 -- most often a missing compiler library
            cause = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
            raise CudaUnavailableError(
                f"compiling the CUDA kernels to PTX needs CUDA's NVVM and NVRTC libraries "
                f"(no GPU): {cause}. Install a CUDA toolkit or 'numba-cuda[cu13]'"
            ) from None
        out.append({"name": name, "dtype": dt.name, "cy": c, "ptx": ptx, "launch_bounds": bounds})
    return out


def assembler():
    """How PTX is assembled here: ``"ptxas"`` (its path), ``"nvjitlink"``, or None."""
    for path in (
        shutil.which("ptxas"),
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas"),
    ):
        if path and os.access(path, os.X_OK):
            return path
    try:
        from cuda.bindings import nvjitlink  # noqa: F401

        nvjitlink.version()
    except Exception:  # noqa: BLE001 -- missing module or missing library alike
        return None
    return "nvjitlink"


def _ptxas(tool, ptx, arch):
    """``(log, cubin)`` of ``ptxas -v`` on one PTX."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        proc = subprocess.run(
            [tool, f"-arch={arch}", "-v", "-O3", src, "-o", out],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ptxas failed on a kernel: {proc.stderr.strip()[-2000:]}")
        with open(out, "rb") as f:
            return proc.stdout + proc.stderr, f.read()


def _nvjitlink(ptx, arch):
    """``(log, cubin)`` of nvJitLink (verbose) on one PTX."""
    # cuda-bindings: optional (it comes with numba-cuda), needed without ptxas only
    from cuda.bindings import nvjitlink

    data = ptx.encode()
    h = nvjitlink.create(3, [f"-arch={arch}", "-verbose", "-O3"])
    try:
        nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "k")
        nvjitlink.complete(h)
        log = bytearray(nvjitlink.get_info_log_size(h))
        nvjitlink.get_info_log(h, log)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(h))
        nvjitlink.get_linked_cubin(h, cubin)
    finally:
        nvjitlink.destroy(h)
    return log.decode(errors="replace"), bytes(cubin)


def parse_log(log):
    """``{registers, spill_stores, spill_loads, stack_bytes, shared_bytes}`` (ints) of the one
    entry function in a ``ptxas -v`` log; a field the log does not state is None."""
    out = {}
    for key, pattern in _FIELDS.items():
        found = [int(v) for v in re.findall(pattern, log)]
        out[key] = max(found) if found else None
    if out["registers"] is not None and out["shared_bytes"] is None:
        out["shared_bytes"] = 0  # ptxas names smem only where a kernel uses some
    return out


def kernel_resources(arch="sm_90", *, kernel=None, dtype=None, cy=None):
    """:func:`kernel_ptx` (the same selection), each variant assembled for ``arch``: its
    dict gains the fields of :func:`parse_log`, ``assembler`` and ``cubin`` (the machine
    code, bytes: ``cuobjdump -sass`` lists it).

    Raises
    ------
    CudaUnavailableError
        As :func:`kernel_ptx`, or where neither ``ptxas`` nor nvJitLink is installed.
    ValueError
        As :func:`kernel_ptx`.
    """
    tool = assembler()
    if tool is None:
        raise CudaUnavailableError(
            "assembling PTX needs ptxas (a CUDA toolkit) or nvJitLink "
            "('numba-cuda[cu13]'), and neither is installed"
        )
    rows = kernel_ptx(arch, kernel=kernel, dtype=dtype, cy=cy)
    for row in rows:
        log, cubin = (
            _nvjitlink(row["ptx"], arch) if tool == "nvjitlink" else _ptxas(tool, row["ptx"], arch)
        )
        row.update(parse_log(log), assembler=os.path.basename(tool), cubin=cubin)
    return rows
