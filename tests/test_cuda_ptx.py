"""Every CUDA kernel variant compiled for a GPU (sm_90: H100, H200) without a GPU.

The simulator tests run the kernels in the simulator's layout; these compile the GPU
layout's kernels, every one the backend can launch (each storage dtype, each operand width
``cy``), with Numba's CUDA compiler (NVVM and NVRTC, no GPU) and assemble them with
``ptxas -v`` (or nvJitLink): every variant must lower to PTX, state its register count, and
spill nothing to local memory. Where the compiler libraries or an assembler are missing the
tests skip, saying which. The table is printed (``pytest -s`` or ``-rP`` shows it) and also
comes from ``python benchmarks/scripts/bench_gpu.py --ptx``.

Slow: Numba's front end takes about 5 to 10 s of CPU per variant (its IR-level inlining of
the device functions), 30 variants, about 5 minutes of CPU measured on a loaded 2-core
machine; one child process compiles them all once for the module.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("numba_cuda", reason="numba-cuda (the test extra) is not installed")
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCH = "sm_90"
#: a thread's registers on sm_90 (ptxas spills beyond this)
MAX_REGISTERS = 255

_CHILD = f"""
import json
from ksvd_bench.kernels.backends import CudaUnavailableError, cuda_kernel_resources
from ksvd_bench.kernels.backends._cuda_ptx import kernel_ptx
try:
    rows = cuda_kernel_resources({ARCH!r})
except CudaUnavailableError as exc:
    if 'assembling PTX' not in str(exc):
        print('UNAVAILABLE', exc)
        raise SystemExit
    rows = kernel_ptx({ARCH!r})  # lowered to PTX; no assembler to count registers
    print('NOASSEMBLER', exc)
for row in rows:
    row['entries'] = row.pop('ptx').count('.entry ')
    row['cubin_bytes'] = len(row.pop('cubin', b''))
print('ROWS', json.dumps(rows))
"""


@pytest.fixture(scope="module")
def compiled():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    out = proc.stdout
    unavailable = [line for line in out.splitlines() if line.startswith("UNAVAILABLE")]
    if unavailable:
        pytest.skip(f"cannot compile CUDA kernels here: {unavailable[0][12:]}")
    rows = [line for line in out.splitlines() if line.startswith("ROWS ")]
    assert proc.returncode == 0 and rows, out + proc.stderr
    noasm = [line[12:] for line in out.splitlines() if line.startswith("NOASSEMBLER")]
    return json.loads(rows[0][5:]), (noasm[0] if noasm else None)


def _expected_variants():
    """``{(name, dtype, cy)}`` the backend can launch: row/col passes for every cy up to
    the dtype's CY_MAX, the others once; ``sum_parts`` with float32 or float64 partials."""
    from ksvd_bench.kernels.backends._cuda_kernels import CY_KERNELS, GPU_LAYOUT

    names = (
        "row_pass",
        "col_pass",
        "sum_parts",
        "sum_parts_f8",
        "row_stats",
        "center_stats",
        "fill",
    )
    out = set()
    for dtype in ("float32", "float64"):
        cy_max = GPU_LAYOUT.configs[(np.dtype(dtype), "row")][3]
        for name in names:
            for cy in range(1, (cy_max if name in CY_KERNELS else 1) + 1):
                out.add((name, dtype, cy))
    return out


def test_every_variant_lowers_to_ptx(compiled):
    rows, _ = compiled
    got = {(r["name"], r["dtype"], r["cy"]) for r in rows}
    assert len(got) == len(rows)
    assert got == _expected_variants()
    assert len(got) == 30
    assert all(r["entries"] == 1 for r in rows)  # one kernel entry in each PTX


def test_registers_and_no_spills(compiled):
    rows, noasm = compiled
    if noasm:
        pytest.skip(f"lowered to PTX, but cannot count registers here: {noasm}")
    print(
        f"\n{'kernel':13s} {'dtype':7s} {'cy':>2s} {'regs':>4s} {'spill st/ld':>11s} "
        f"{'stack':>5s} {'smem':>6s}  ({ARCH}, {rows[0]['assembler']})"
    )
    for r in rows:
        print(
            f"{r['name']:13s} {r['dtype']:7s} {r['cy']:2d} {r['registers']!s:>4s} "
            f"{r['spill_stores']!s:>5s}/{r['spill_loads']!s:<5s} {r['stack_bytes']!s:>5s} "
            f"{r['shared_bytes']!s:>6s}"
        )
    for r in rows:
        what = f"{r['name']} {r['dtype']} cy={r['cy']}"
        assert r["cubin_bytes"] > 0, what
        assert r["registers"] is not None and 0 < r["registers"] <= MAX_REGISTERS, what
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, what
        assert r["shared_bytes"] <= 48 * 1024, what  # static shared memory per block
        if r["launch_bounds"]:  # the blocks per SM asked for fit the SM's 64 Ki registers
            threads, blocks = r["launch_bounds"]
            assert r["registers"] * threads * blocks <= 65536, what


def test_selection_errors_name_the_choices():
    """A selection that matches no variant is a ValueError naming the kernels (no compile)."""
    from ksvd_bench.kernels.backends._cuda_ptx import kernel_ptx

    for bad in (
        {"kernel": "nope"},
        {"dtype": "float16"},
        {"dtype": "not a dtype"},
        {"kernel": "fill", "cy": 2},
        {"kernel": "row_pass", "cy": 7},
    ):
        with pytest.raises(ValueError, match="no CUDA kernel variant.*'row_pass'.*cy 1..6"):
            kernel_ptx(ARCH, **bad)


def test_selection_compiles_only_the_variant_asked_for(compiled):
    """``cuda_kernel_resources(kernel=, dtype=, cy=)``: that one variant, as in the full run."""
    rows, noasm = compiled
    if noasm:
        pytest.skip(f"lowered to PTX, but cannot count registers here: {noasm}")
    from ksvd_bench.kernels.backends import cuda_kernel_resources

    one = cuda_kernel_resources(ARCH, kernel="row_pass", dtype=np.float32, cy=5)
    assert [(r["name"], r["dtype"], r["cy"]) for r in one] == [("row_pass", "float32", 5)]
    full = next(r for r in rows if (r["name"], r["dtype"], r["cy"]) == ("row_pass", "float32", 5))
    for key in ("registers", "spill_stores", "spill_loads", "shared_bytes", "cubin_bytes"):
        got = len(one[0]["cubin"]) if key == "cubin_bytes" else one[0][key]
        assert got == full[key], key
    assert one[0]["cubin"][:4] == b"\x7fELF"  # the machine code, for cuobjdump


def _sass_loops():
    path = os.path.join(ROOT, "benchmarks", "scripts", "sass_loops.py")
    spec = importlib.util.spec_from_file_location("sass_loops", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sass_loops_reads_nested_loops():
    """benchmarks/scripts/sass_loops.py: opcodes without predicates or modifiers, one loop per
    backward branch (inner first), forward branches and the closing self-branch ignored."""
    sl = _sass_loops()
    listing = "\n".join(
        f"        /*{a:04x}*/                   {ins} ;  /* 0x0 */"
        for a, ins in [
            (0x00, "MOV R1, c[0x0][0x28]"),
            (0x10, "IMAD R2, R3, 0x4, RZ"),  # outer loop starts
            (0x20, "FFMA R4, R5, R6, R4"),  # inner loop starts
            (0x30, "LDS.64 R6, [R7+0x10]"),
            (0x40, "@!P0 BRA 0x20"),  # inner back edge
            (0x50, "@P1 BRA 0x70"),  # forward: not a loop
            (0x60, "ISETP.GE.U32.AND P0, PT, R2, 0x20, PT"),
            (0x70, "BRA 0x10"),  # outer back edge
            (0x80, "EXIT"),
            (0x90, "BRA 0x90"),  # the closing trap
        ]
    )
    ins = sl.parse_sass(listing)
    assert [a for a, _ in ins] == list(range(0, 0xA0, 0x10))
    assert [sl.opcode(i) for _, i in ins][:5] == ["MOV", "IMAD", "FFMA", "LDS", "BRA"]
    found = sl.loops(ins)
    assert [(s, e, sum(c.values())) for s, e, c in found] == [(0x20, 0x40, 3), (0x10, 0x70, 7)]
    assert found[0][2] == {"FFMA": 1, "LDS": 1, "BRA": 1}
    assert found[1][2]["BRA"] == 3 and found[1][2]["ISETP"] == 1
