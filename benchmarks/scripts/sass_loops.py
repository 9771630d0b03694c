"""The machine code of one CUDA kernel variant, without a GPU: its loops and what they issue.

A pass on the GPU is bound by the instructions its warps issue (Nsight Compute on an H200:
``benchmarks/recorded/passes/README.md``), so a kernel change can be judged before a GPU is
at hand by the instructions of its inner loops. This script compiles one variant
(``ksvd_bench.kernels.backends.cuda_kernel_resources``: Numba's CUDA compiler, then
``ptxas -v`` or nvJitLink, giving registers, spills and the machine code), lists the machine
code with ``cuobjdump -sass`` (which runs ``nvdisasm``) and prints:

* registers, spills and shared memory;
* the static instruction count and the most frequent opcodes;
* every loop (a backward branch and the instructions from its target to it, innermost
  first, so an outer loop's count includes its inner loops): its start and end address, its
  instructions, and their most frequent opcodes.

The counts are static: how often a loop runs is for the reader (``Shape`` in
``_cuda_kernels`` gives the trip counts). Needs CUDA's NVVM and NVRTC libraries
(``numba-cuda[cu13]``), ``ptxas`` or nvJitLink, and ``cuobjdump`` and ``nvdisasm`` from a
CUDA toolkit or NVIDIA's wheels (``pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm``);
no GPU::

    python benchmarks/scripts/sass_loops.py --kernel row_pass --dtype float32 --cy 5
    python benchmarks/scripts/sass_loops.py --kernel col_pass --cy 6 --sass col.sass
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

from ksvd_bench.kernels.backends import CudaUnavailableError, cuda_kernel_resources

_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_BRANCH = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")


def find_tool(name):
    """Path of ``cuobjdump`` or ``nvdisasm``: on PATH, under CUDA_HOME, or in NVIDIA's
    wheels; None when missing."""
    found = shutil.which(name)
    if found:
        return found
    candidates = [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", name)]
    try:
        import nvidia

        for root in nvidia.__path__:
            candidates += [os.path.join(root, sub, "bin", name) for sub in ("cu13", "cu12")]
    except ImportError:
        pass
    return next((p for p in candidates if os.access(p, os.X_OK)), None)


def parse_sass(text):
    """``[(address, instruction)]`` of a ``cuobjdump -sass`` listing, in order."""
    return [(int(a, 16), ins) for a, ins in _INSTRUCTION.findall(text)]


def opcode(instruction):
    """The opcode of one instruction, without its predicate and modifiers."""
    words = instruction.split()
    word = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return word.split(".")[0]


def loops(instructions):
    """``[(start, end, Counter of opcodes)]``: one per backward branch, in address order of
    the branch (inner loops before the loops that hold them). A branch to itself (the
    kernel's closing trap) is not a loop."""
    out = []
    for address, instruction in instructions:
        m = _BRANCH.search(instruction)
        if m and int(m.group(1), 16) < address:
            start = int(m.group(1), 16)
            body = [opcode(i) for a, i in instructions if start <= a <= address]
            out.append((start, address, collections.Counter(body)))
    return out


def _top(counter, k):
    return ", ".join(f"{op} {n}" for op, n in counter.most_common(k))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", default="row_pass", help="kernel name (default: row_pass)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument(
        "--cy",
        type=int,
        default=5,
        help="operand width in thread columns (default: 5, i.e. 40 columns)",
    )
    ap.add_argument("--arch", default="sm_90", help="GPU architecture (default: sm_90)")
    ap.add_argument("--sass", help="also write the disassembly to this file")
    args = ap.parse_args(argv)

    tools = {name: find_tool(name) for name in ("cuobjdump", "nvdisasm")}
    missing = [name for name, path in tools.items() if path is None]
    if missing:
        sys.exit(
            f"sass_loops: {' and '.join(missing)} not found (a CUDA toolkit, or pip "
            f"install {' '.join('nvidia-cuda-' + name for name in missing)})"
        )
    try:
        rows = cuda_kernel_resources(args.arch, kernel=args.kernel, dtype=args.dtype, cy=args.cy)
    except (CudaUnavailableError, ValueError) as exc:
        sys.exit(f"sass_loops: {exc}")
    row = rows[0]
    env = dict(os.environ, NVDISASM_PATH=os.path.dirname(tools["nvdisasm"]))
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        with open(cubin, "wb") as f:
            f.write(row["cubin"])
        sass = subprocess.run(
            [tools["cuobjdump"], "-sass", cubin],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    if args.sass:
        with open(args.sass, "w") as f:
            f.write(sass)
    instructions = parse_sass(sass)
    if not instructions:
        sys.exit("sass_loops: cuobjdump listed no instructions")
    total = collections.Counter(opcode(i) for _, i in instructions)
    print(
        f"{row['name']} {row['dtype']} cy={row['cy']} {args.arch}: {row['registers']} "
        f"registers, spills {row['spill_stores']}/{row['spill_loads']} bytes, "
        f"{row['shared_bytes']} bytes shared"
    )
    print(f"static instructions {sum(total.values())}: {_top(total, 10)}")
    print(f"{'loop':>17s} {'instr':>6s}  opcodes")
    for start, end, body in loops(instructions):
        print(f"{start:#8x}-{end:#8x} {sum(body.values()):6d}  {_top(body, 8)}")


if __name__ == "__main__":
    main()
