"""The maintained tools in ``benchmarks/scripts/`` import, answer ``--help`` and, where a flag
makes them cheap, run; the archive (``benchmarks/archive/``) and the tools are each listed in
their README, and every path the repository cites under them exists.

A tool's ``--help`` must work on any machine, GPU or not; a run that needs a GPU is skipped,
saying so, where CUDA is not available.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "benchmarks" / "scripts"
ARCHIVE = ROOT / "benchmarks" / "archive"

#: the maintained Python tools (gpu_check.sh is checked apart)
TOOLS = (
    "bench_distributed",
    "bench_estimates",
    "bench_gpu",
    "bench_kernels",
    "bench_pass_efficient",
    "bench_passes",
    "bench_structured",
    "certificate_cost",
    "certificates",
    "sass_loops",
)


def _env():
    """The worktree's code first; one thread each, so a run stays cheap on a shared machine."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("MPLBACKEND", "Agg")
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = "1"
    return env


def _run(*args, timeout=120):
    return subprocess.run(
        [sys.executable, *map(str, args)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _cuda_available():
    try:
        from numba import cuda
    except ImportError:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver reads as no GPU
        return False


def test_the_scripts_folder_holds_the_tools_and_the_readme_lists_them():
    """Every file in benchmarks/scripts/ is a maintained tool with a row in its README, and
    every archived script has a row in the archive's README."""
    held = {p.name for p in SCRIPTS.iterdir() if p.is_file() and p.name != "README.md"}
    assert held == {f"{t}.py" for t in TOOLS} | {"gpu_check.sh"}
    table = (SCRIPTS / "README.md").read_text()
    rows = set(re.findall(r"^\| `([\w.]+)` \|", table, flags=re.M))
    assert rows == held
    archived = {p.name for p in ARCHIVE.glob("*.py")}
    assert archived, "the archive is empty"
    archive_rows = set(re.findall(r"^\| `([\w.]+)` \|", (ARCHIVE / "README.md").read_text(), re.M))
    assert archive_rows == archived


def _cited_paths():
    """Every ``benchmarks/scripts/X`` or ``benchmarks/archive/X`` that the manual, the READMEs
    and the code name (the raw logs under benchmarks/recorded keep the paths they ran)."""
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    files += [*(ROOT / "benchmarks").rglob("README.md"), *(ROOT / "benchmarks").rglob("*.sh")]
    for package in ("ksvd_bench", "solvers", "tests", "benchmarks"):
        files += (ROOT / package).rglob("*.py")
    cited = set()
    for path in files:
        for match in re.findall(r"benchmarks/(?:scripts|archive)/\w+\.(?:py|sh)", path.read_text()):
            cited.add((match, path.relative_to(ROOT).as_posix()))
    return cited


def test_every_cited_script_exists():
    cited = _cited_paths()
    assert len(cited) > 20
    missing = sorted((name, where) for name, where in cited if not (ROOT / name).is_file())
    assert not missing, f"cited but absent: {missing}"


@pytest.mark.parametrize("name", TOOLS)
def test_tool_imports_without_running(name):
    """Importing a tool defines its main and runs nothing (main would parse pytest's argv)."""
    spec = importlib.util.spec_from_file_location(f"_tool_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.main)
    assert module.__doc__ and len(module.__doc__.splitlines()) > 3


@pytest.mark.parametrize("name", TOOLS)
def test_tool_answers_help(name):
    """``--help`` works on any machine (the GPU tools too): it prints the usage and exits 0."""
    done = _run(SCRIPTS / f"{name}.py", "--help", timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: {name}.py")


def test_gpu_check_is_valid_bash_naming_scripts_that_exist():
    script = SCRIPTS / "gpu_check.sh"
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash on this machine to parse gpu_check.sh")
    done = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    named = set(re.findall(r"benchmarks/scripts/\w+\.py|tests/\w+\.py", script.read_text()))
    assert "benchmarks/scripts/bench_gpu.py" in named
    assert all((ROOT / p).is_file() for p in named), named


def test_bench_passes_tiny_run(tmp_path):
    """N = M = 300, one round: the fused passes agree with the dense rows to rounding."""
    out = tmp_path / "passes.json"
    done = _run(SCRIPTS / "bench_passes.py", "--size", 300, "--repeats", 1, "--out", out)
    assert done.returncode == 0, done.stderr[-2000:]
    main = json.loads(out.read_text())["main"]
    assert main["n"] == 300
    assert set(main["ratios"]) >= {"matmat", "rmatmat", "sketch", "setup"}
    assert max(main["accuracy"].values()) < 1e-12
    assert "targets (wall): matmat <= 1.0x" in done.stdout


def test_bench_structured_tiny_run(tmp_path):
    """Cora, one repeat, no dense path: the structured answer matches scipy's (issue 6's
    targets: values within 1e-10, vectors within 1e-8)."""
    out = tmp_path / "structured.json"
    done = _run(
        SCRIPTS / "bench_structured.py",
        *("--datasets", "cora", "--repeats", 1, "--dense", "never", "--json", out),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {r["method"]: r for r in json.loads(out.read_text())["rows"]}
    assert {"structured", "solvers.svd tsvd"} <= set(rows)
    for method in ("structured", "solvers.svd tsvd"):
        assert rows[method]["vs"] == "scipy"
        assert rows[method]["val_err"] < 1e-10
        assert rows[method]["vec_err"] < 1e-8


def test_bench_kernels_tiny_run():
    """Case (a) at N = 300: kernel_matrix agrees with the numpy reference to rounding."""
    done = _run(
        SCRIPTS / "bench_kernels.py",
        *("--quick", "--skip-pubmed", "--size", 300, "--repeats", 1),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    row = next(line for line in done.stdout.splitlines() if line.startswith("(a) dense 300x300"))
    assert float(row.split()[-1]) < 1e-12


def test_bench_pass_efficient_quick_run():
    """--quick: the new LU normaliser gives the old one's factors, in both dtypes."""
    done = _run(SCRIPTS / "bench_pass_efficient.py", "--quick")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("identical to lu(permute_l=True): True") == 2
    assert "block_krylov q=3" in done.stdout


def test_bench_estimates_tiny_run_makes_its_folder(tmp_path):
    """N = M = 40, rank 2: the cells are written into a folder that did not exist (the sweep
    used to crash there after its work), and the estimates meet issue 15's [0.5, 2]."""
    out = tmp_path / "not" / "yet" / "estimates"
    done = _run(SCRIPTS / "bench_estimates.py", "--n", 40, "--rank", 2, "--out", out)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.with_suffix(".json").read_text())
    assert len(rows) > 50
    ratio = [r["ratio"] for r in rows]
    assert all(0 < r < float("inf") for r in ratio)
    assert sum(0.5 <= r <= 2 for r in ratio) >= 0.9 * len(ratio)


@pytest.mark.skipif(not _cuda_available(), reason="bench_gpu.py --smoke needs a CUDA GPU")
def test_bench_gpu_smoke_on_a_gpu(tmp_path):
    out = tmp_path / "gpu.json"
    done = _run(SCRIPTS / "bench_gpu.py", "--smoke", "--skip-torch", "--out", out, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.stat().st_size > 0
