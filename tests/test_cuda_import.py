"""The one import point of the CUDA target (``kernels/backends/_cuda_import.py``).

Every way the import can fail ends in the project's clear error naming its cause: the
package missing (``ImportError`` saying how to install the extra), or installed but broken
(``CudaUnavailableError`` naming the package, its version and the exception), such as
numba-cuda 0.30.4 under numpy 2.5, reproduced here by removing ``numpy.row_stack`` in a
fresh interpreter. No GPU is needed.
"""

import os
import subprocess
import sys
import types

import pytest

from ksvd_bench.kernels.backends import _cuda_import

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: numpy 2.5 as numba-cuda 0.30.4 meets it: no ``row_stack`` (nor in ``__all__``, which
#: scipy's ``from numpy import *`` reads); numba-cuda-mlir hidden, so no fallback is taken
_NUMPY_25 = (
    "import sys, numpy\n"
    "numpy.__all__.remove('row_stack')\n"
    "del numpy.row_stack\n"
    "sys.modules['numba_cuda_mlir'] = None\n"
)


def _child(code, **env):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", CUDA_VISIBLE_DEVICES="", **env)
    proc = subprocess.run(
        [sys.executable, "-c", _NUMPY_25 + code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return proc.stdout + proc.stderr


@pytest.fixture
def fresh(monkeypatch):
    """``_cuda_import`` with no remembered outcome, the simulator off, both packages
    "installed", and ``import_module`` answering from ``modules`` (a module, or an exception
    to raise)."""
    modules = {}

    def import_module(name):
        got = modules[name]
        if isinstance(got, BaseException):
            raise got
        return got

    monkeypatch.setattr(_cuda_import, "_loaded", {})
    monkeypatch.setattr(_cuda_import, "simulated", lambda: False)
    monkeypatch.setattr(_cuda_import, "_installed", lambda dist: dist in installed)
    monkeypatch.setattr(_cuda_import, "_initialise", lambda dist: None)
    monkeypatch.setattr(_cuda_import.importlib, "import_module", import_module)
    installed = {"numba-cuda", "numba-cuda-mlir"}
    return types.SimpleNamespace(modules=modules, installed=installed)


def test_numpy_without_row_stack_gives_clear_error():
    """numba-cuda 0.30.4 under numpy 2.5: one clear error naming the cause and the fix, at
    the import point and through ``KernelSource(device="cuda")``, every time."""
    pytest.importorskip("numba_cuda", reason="numba-cuda (the test extra) is not installed")
    out = _child(
        "from ksvd_bench.kernels.backends._cuda_import import import_cuda, "
        "CudaUnavailableError\n"
        "for attempt in range(2):\n"
        "    try:\n"
        "        import_cuda()\n"
        "    except CudaUnavailableError as exc:\n"
        "        print('RAISED', exc)\n"
        "import numpy as np\n"
        "from ksvd_bench.kernels import KernelSource\n"
        "try:\n"
        "    KernelSource.from_points(np.ones((3, 2)), np.ones((4, 2)), 'rbf', gamma=1.0,\n"
        "                             device='cuda')\n"
        "except Exception as exc:\n"
        "    print('SOURCE', type(exc).__name__, exc)\n"
    )
    raised = [line for line in out.splitlines() if line.startswith("RAISED")]
    assert len(raised) == 2 and raised[0] == raised[1], out
    msg = raised[0]
    assert (
        "device='cuda' is unavailable: numba-cuda 0.30.4 is installed but its import "
        "failed (AttributeError: module 'numpy' has no attribute 'row_stack')" in msg
    ), out
    assert "does not support numpy >= 2.5" in msg and "pip install 'numpy<2.5'" in msg
    assert "numba-cuda-mlir" in msg
    assert "SOURCE CudaUnavailableError device='cuda' is unavailable: numba-cuda 0.30.4" in out


def test_any_import_failure_is_named(fresh):
    fresh.installed.discard("numba-cuda-mlir")
    fresh.modules["numba.cuda"] = OSError("libcuda.so: cannot open shared object file")
    with pytest.raises(
        _cuda_import.CudaUnavailableError,
        match=r"numba-cuda \S+ is installed but its import failed \(OSError: "
        r"libcuda.so: cannot open shared object file\)$",
    ):
        _cuda_import.import_cuda()
    # the outcome is kept: the same error again, without a second half-import
    fresh.modules["numba.cuda"] = types.ModuleType("numba.cuda")
    with pytest.raises(_cuda_import.CudaUnavailableError, match="OSError: libcuda.so"):
        _cuda_import.import_cuda()


def test_falls_back_to_numba_cuda_mlir(fresh):
    """numba-cuda broken (numpy 2.5), numba-cuda-mlir installed: the kernels get the latter."""
    mlir = types.ModuleType("numba_cuda_mlir.cuda")
    fresh.modules["numba.cuda"] = AttributeError("module 'numpy' has no attribute 'row_stack'")
    fresh.modules["numba_cuda_mlir.cuda"] = mlir
    assert _cuda_import.import_cuda() is mlir
    assert _cuda_import.import_cuda() is mlir


def test_numba_cuda_mlir_alone(fresh):
    fresh.installed.discard("numba-cuda")
    mlir = types.ModuleType("numba_cuda_mlir.cuda")
    fresh.modules["numba_cuda_mlir.cuda"] = mlir
    assert _cuda_import.import_cuda() is mlir


def test_both_broken_names_both(fresh):
    fresh.modules["numba.cuda"] = AttributeError("module 'numpy' has no attribute 'row_stack'")
    fresh.modules["numba_cuda_mlir.cuda"] = ImportError("libnvvm.so.4 missing")
    with pytest.raises(_cuda_import.CudaUnavailableError) as info:
        _cuda_import.import_cuda()
    msg = str(info.value)
    assert "numba-cuda " in msg and "row_stack" in msg and "numpy<2.5" in msg
    assert "numba-cuda-mlir " in msg and "ImportError: libnvvm.so.4 missing" in msg


def test_simulator_needs_numba_cuda(fresh, monkeypatch):
    """The simulator is numba-cuda's: numba-cuda-mlir is never taken in its place."""
    monkeypatch.setattr(_cuda_import, "simulated", lambda: True)
    fresh.modules["numba.cuda"] = AttributeError("module 'numpy' has no attribute 'row_stack'")
    fresh.modules["numba_cuda_mlir.cuda"] = types.ModuleType("numba_cuda_mlir.cuda")
    with pytest.raises(_cuda_import.CudaUnavailableError, match="row_stack"):
        _cuda_import.import_cuda()
    monkeypatch.setattr(_cuda_import, "_loaded", {})
    fresh.installed.discard("numba-cuda")
    with pytest.raises(
        ImportError,
        match=r"simulator \(NUMBA_ENABLE_CUDASIM=1\) needs "
        r"numba-cuda",
    ):
        _cuda_import.import_cuda()


def test_nothing_installed_says_how_to_install(fresh):
    fresh.installed.clear()
    with pytest.raises(
        ImportError,
        match=r"CUDA target.*not installed.*neither numba-cuda nor "
        r"numba-cuda-mlir.*\[cuda\].*numba-cuda==0\.30\.4",
    ):
        _cuda_import.import_cuda()


def test_extras_bound_numpy_with_the_pin():
    """The cuda and test extras carry the numba-cuda pin and the numpy bound it needs, as
    the import point states them."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python >= 3.11")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    for name in ("cuda", "test"):
        reqs = [r.split(";")[0].strip() for r in extras[name]]
        assert _cuda_import.PIN in reqs, (name, reqs)
        assert _cuda_import.NUMPY_BOUND in reqs, (name, reqs)


def test_numba_cuda_mlir_builds_every_kernel():
    """Where numba-cuda-mlir is installed, under "numpy 2.5" and with numba-cuda hidden, the
    kernels build from its ``cuda`` module: every variant, with its types. (Compiling them
    needs a GPU: numba-cuda-mlir 0.6 asks the device for its compute capability even for
    PTX.)"""
    pytest.importorskip("numba_cuda_mlir", reason="numba-cuda-mlir is not installed")
    out = _child(
        "sys.modules['numba_cuda'] = None\n"
        "del sys.modules['numba_cuda_mlir']\n"
        "from ksvd_bench.kernels.backends._cuda_import import import_cuda\n"
        "print('MODULE', import_cuda().__name__)\n"
        "from ksvd_bench.kernels.backends import _cuda_kernels as K\n"
        "print('VARIANTS', len(K.variants()))\n"
    )
    assert "MODULE numba_cuda_mlir.cuda" in out and "VARIANTS 30" in out, out
