#!/usr/bin/env bash
# Issue 16's GPU measurements (issue 21 section 4) in one device call of at most 8 minutes.
#
# The GPU machine (nvidia-h100-x1 or nvidia-h200) has Python 3.12 with numba, numba-cuda,
# scipy, scikit-learn, matplotlib, tqdm, torch and pytest, but numpy 2.5, under which
# numba-cuda 0.30.4 (the project's pin) fails to load (see pyproject.toml), and no package
# registry. So numpy 2.4 and numba-cuda 0.30.4 travel as wheels. Once, on the development
# machine, in the repository root:
#
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_28_x86_64 \
#       --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d .whl numpy==2.4.6 numba-cuda==0.30.4
#
# (about 18 MB: numpy-2.4.6-cp312-...manylinux_2_28_x86_64.whl and
# numba_cuda-0.30.4-cp312-...manylinux_2_28_x86_64.whl; numba-cuda's other needs, numba,
# cuda-bindings, cuda-core, cuda-pathfinder and packaging, are on the machine). Then ONE
# device call, with the wheels carried:
#
#   run(command="bash benchmarks/scripts/gpu_check.sh", carry=[".whl"], timeout_s=540)
#
# It runs, each under its own time limit so that one hang cannot eat the others' time
# (about 150 + 110 + 200 s, then the 1e6 row and the CPU roofline with what is left of 530 s):
#   1. benchmarks/scripts/bench_gpu.py                         (passes at N = M = 1e5 vs CPU,
#                                                              torch FP32/TF32; float32 error)
#   2. ksvd-bench scale --part b --device cuda --dtype float32 --sizes 100000 --in-process
#      --reference none (isolated cells compile the kernels again, about 17 s each, and the
#      block Krylov reference alone took 68 s at 1e5: see benchmarks/recorded/passes/README.md)
#   3. KSVD_BENCH_TEST_GPU=1 pytest tests/test_cuda_sim.py -n 8 (the simulator tests, on the
#      GPU, in 8 processes with pytest-xdist where the machine has it; 49 tests, compile-bound:
#      48 of 49 passed in 170 s on an H200, each process compiling the kernel sets it needs)
#   4. if at least 160 s are left, the 1e6 row (--sizes 1000000 --merge; rsvd alone had not
#      finished after 155 s on an H200, so give it a call of its own: --methods rsvd)
#   5. ksvd-bench roofline: the CPU pass against BLAS at 1 thread and all 16 (issue 21 sec. 2)
# Logs and JSON land in $OUT (they come back with the call's reply); the summary lines are
# printed last. Issue 16's targets on one H100/H200: float32 matmat at N = M = 1e5 <= 0.07 s
# and >= 2x torch's FP32 tiled pass, sketch <= 1.3x matmat, float32 error <= 1e-5, 1e6
# top-20 <= 45 s.
#
# A/B against older kernels in the same call (timings of different calls do not compare):
# GPU_CHECK_BASE=DIR, a folder holding an older checkout's ksvd_bench/ and solvers/, e.g.
#
#   git worktree add /tmp/base d553811 && mkdir -p .base && cp -r /tmp/base/ksvd_bench \
#       /tmp/base/solvers .base/ && echo /.base/ >> .git/info/exclude
#   run(command="GPU_CHECK_BASE=.base bash benchmarks/scripts/gpu_check.sh",
#       carry=[".whl", ".base"], timeout_s=540)
#
# Step 0 then times the older passes (bench_gpu.py --skip-cpu --skip-torch, about 90 s)
# before step 1.
#
# Without a GPU: NUMBA_ENABLE_CUDASIM=1 python benchmarks/scripts/bench_gpu.py --smoke
# proves that the benchmark runs; tests/test_cuda_ptx.py compiles every kernel for sm_90.

set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d)}
BUDGET=530
START=$SECONDS
left() { echo $((BUDGET - (SECONDS - START))); }

if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || { echo "wheel install failed"; exit 1; }
    export PYTHONPATH=/tmp/site:$PWD
else
    echo "no .whl folder: using the machine's own numpy and numba-cuda (see the header)"
    export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
nvidia-smi -L 2>&1 | head -2
python3 -c "import numpy, numba, numba_cuda, importlib.metadata as m; print('numpy', \
numpy.__version__, 'numba', numba.__version__, 'numba-cuda', m.version('numba-cuda'))"
python3 -c "from ksvd_bench.kernels.backends import backend_class; backend_class('cuda'); \
from numba import cuda; print('device:', cuda.get_current_device().name)" 2>&1 | tail -3

if [ -n "${GPU_CHECK_BASE:-}" ]; then
    echo "=== 0. bench_gpu.py on the kernels of $GPU_CHECK_BASE, N = M = 1e5 ($(left) s left)"
    timeout 120 env PYTHONPATH="/tmp/site:$(cd "$GPU_CHECK_BASE" && pwd)" python3 \
        benchmarks/scripts/bench_gpu.py --skip-cpu --skip-torch \
        --out "$OUT/bench_gpu_base.json" 2>&1 | tee "$OUT/bench_gpu_base.log"
fi

echo "=== 1. bench_gpu.py, N = M = 1e5 ($(left) s left)"
timeout 150 python3 benchmarks/scripts/bench_gpu.py --out "$OUT/bench_gpu.json" 2>&1 \
    | tee "$OUT/bench_gpu.log"

echo "=== 2. scale part b, N = 1e5, float32, cuda ($(left) s left)"
timeout 110 python3 -m ksvd_bench scale --part b --device cuda --in-process \
    --reference none --dtype float32 --sizes 100000 --out "$OUT/scale_gpu" --no-progress 2>&1 \
    | tee "$OUT/scale_1e5.log" | tail -30

echo "=== 3. tests/test_cuda_sim.py on the GPU ($(left) s left)"
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
timeout 200 env KSVD_BENCH_TEST_GPU=1 python3 -m pytest tests/test_cuda_sim.py -q $XDIST \
    -p no:cacheprovider --durations=8 2>&1 | tee "$OUT/test_cuda_sim.log" | tail -25

if [ "$(left)" -ge 160 ]; then
    echo "=== 4. scale part b, N = 1e6 ($(left) s left)"
    timeout $(( $(left) - 70 )) python3 -m ksvd_bench scale --part b --device cuda --in-process \
        --reference none --dtype float32 --sizes 1000000 --merge --out "$OUT/scale_gpu" \
        --no-progress 2>&1 \
        | tee "$OUT/scale_1e6.log" | tail -30
else
    echo "=== 4. skipped: $(left) s left, under the 160 s the 1e6 row needs"
fi

echo "=== 5. CPU roofline on this machine's cores, 1 and all threads ($(left) s left)"
if [ "$(left)" -ge 30 ]; then
    timeout $(( $(left) - 5 )) python3 -m ksvd_bench roofline --repeats 3 \
        --out "$OUT/roofline" 2>&1 | tee "$OUT/roofline.log" | tail -30
fi
echo "=== done in $((SECONDS - START)) s; files in $OUT"
