"""Every code block of the README and the manual runs, or is run by CI.

The Markdown pages (``README.md``, ``docs/**/*.md``) hold fenced blocks of three kinds:

* ``python``: run as a script in a fresh interpreter, in an empty folder, unless marked
  ``<!-- docs-test: gpu -->`` on the line before the fence: such a block needs a CUDA GPU and
  runs where Numba finds one; elsewhere it is skipped with that reason (never reported as
  passed);
* ``bash``: run with ``bash -e`` in an empty folder, the environment's ``bin`` first on
  ``PATH``, unless a marker comment on the line before the fence says otherwise:
  ``<!-- docs-test: ci -->`` (the block's commands are the ones ``.ci/run`` runs, and the test
  checks that each line appears there verbatim) or ``<!-- docs-test: parse -->`` (the block's
  commands take longer than the test suite may: each ``ksvd-bench`` command is parsed with the
  real parser and the checks a sub-command makes before any work are run, so a renamed flag or
  a bad combination fails here; ``python path/script.py ...`` must name a script of the
  repository, ``python -c CODE`` must compile, and any other command must name a program
  found on ``PATH``);
* ``text``: printed output, nothing to run.

Ordinary ``bash`` blocks and ``python`` blocks are kept small: each runs in seconds.

MyST directives (``{toctree}`` and the like) are not code.

A block with any other info string, or none, fails the test: no untested code can hide in the
manual.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGES = [p for p in PAGES if "_build" not in p.parts]
KINDS = {"python", "bash", "text"}
MARKER = re.compile(r"<!--\s*docs-test:\s*(\w+)\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")


def _blocks(page):
    """``(line, info, marker, code)`` of every fenced block of ``page``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start, info = i, m.group(1)
        prev = lines[i - 1] if i else ""
        marker = MARKER.search(prev)
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise AssertionError(f"{page.name}:{start + 1}: unclosed code block")
        out.append(
            (start + 1, info, marker.group(1) if marker else None, "\n".join(lines[i + 1 : j]))
        )
        i = j + 1
    return out


BLOCKS = [(page, *b) for page in PAGES for b in _blocks(page) if not b[1].startswith("{")]


def _id(item):
    page, line, info, marker, _ = item
    return f"{page.relative_to(ROOT)}:{line}:{info}{'-' + marker if marker else ''}"


def _env():
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(ROOT))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _commands(code):
    """The shell commands of a block, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [c.strip() for c in joined.splitlines() if c.strip() and not c.strip().startswith("#")]


def _cuda_gpu():
    """Whether Numba's CUDA target finds a GPU here (never the simulator)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:  # no numba-cuda, no driver: no GPU to run on
        return False


def _check_program(command, where):
    """A non-``ksvd-bench`` command of a 'parse' block names a real script or program."""
    words = shlex.split(command.split(" #")[0])
    while words and re.fullmatch(r"[A-Za-z_]\w*=\S*", words[0]):  # VAR=value prefixes
        words = words[1:]
    assert words, f"{where}: empty command {command!r}"
    program = words[0].removeprefix(".venv/bin/")
    if program in ("python", "python3") and len(words) > 1 and words[1].endswith(".py"):
        assert (ROOT / words[1]).is_file(), f"{where}: no script {words[1]!r} in the repository"
        return
    if program in ("python", "python3") and words[1:2] == ["-c"]:
        compile(words[2], where, "exec")  # a syntax error fails here
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    assert shutil.which(program, path=path), f"{where}: {program!r} is not on PATH"


def test_pages_have_blocks():
    assert (ROOT / "docs" / "index.md").exists()
    assert len(BLOCKS) >= 10, [_id(b) for b in BLOCKS]


@pytest.mark.parametrize("item", BLOCKS, ids=_id)
def test_block(item, tmp_path):
    page, line, info, marker, code = item
    where = f"{page.relative_to(ROOT)}:{line}"
    assert info in KINDS, f"{where}: code block of unknown kind {info!r} (use one of {KINDS})"
    if info == "text":
        return
    if info == "python":
        assert marker in (None, "gpu"), f"{where}: python blocks run (or, marked gpu, need one)"
        if marker == "gpu" and not _cuda_gpu():
            pytest.skip(f"{where}: needs a CUDA GPU, and Numba finds none here")
        script = tmp_path / "example.py"
        script.write_text(code, encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"{where}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        return
    if marker == "ci":
        ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
        for command in _commands(code):
            assert command in ci, f"{where}: {command!r} is not what .ci/run runs"
        return
    if marker == "parse":
        from ksvd_bench.cli import build_parser

        commands = [c for part in _commands(code) for c in part.split(" && ")]
        for command in commands:
            if not command.startswith("ksvd-bench "):
                _check_program(command, where)
        commands = [c for c in commands if c.startswith("ksvd-bench ")]
        for command in commands:
            argv = shlex.split(command.split(" #")[0])[1:]
            argv = [a.replace("results/", f"{tmp_path}/results/") for a in argv]
            parser = build_parser()
            args = parser.parse_args(argv)
            check = getattr(args, "check", None)
            # the checks of --scheduler and --device cuda contact the cluster or the GPU the
            # command names (placeholders here): parsing them is what can be checked
            remote = "--scheduler" in argv or "cuda" in argv
            if check is not None and not remote:
                check(args, getattr(args, "parser", parser))
        return
    assert marker is None, f"{where}: unknown docs-test marker {marker!r}"
    proc = subprocess.run(
        ["bash", "-e", "-c", code],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{where}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
