"""Result files: JSON and CSV writers, atomic writes, and the check of an output directory.

Result files are written atomically (a temporary file in the same directory, then
``os.replace``): an interrupted or failed write never leaves a truncated file behind, and a
reader never sees a half-written one. :func:`check_out_dir` checks an output directory before
any work is done, so a bad ``--out`` costs nothing.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["write_json", "write_csv", "write_text", "atomic_path", "check_out_dir"]


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success move it onto ``path`` atomically.

    The temporary file lives in the same directory (``os.replace`` is atomic only within one
    file system). If the body raises, the temporary file is removed and ``path`` keeps its
    previous content.

    Examples
    --------
    >>> with atomic_path("results/figure.png") as tmp:   # doctest: +SKIP
    ...     fig.savefig(tmp, format="png")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    # mkstemp makes the file private (0600); a result file gets the mode any new file would
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask():
    """The process's umask (read by setting it and restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path, text):
    """Write ``text`` (UTF-8) to ``path``, atomically; returns the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def write_json(path, payload):
    """Write ``payload`` (dicts, lists, numpy scalars/arrays) as indented JSON, atomically."""
    return write_text(path, json.dumps(_jsonable(payload), indent=2))


def write_csv(path, rows, columns=None):
    """Write a list of dicts as CSV (nested values are JSON-encoded), atomically."""
    rows = list(rows)
    if columns is None:
        columns = []
        for row in rows:
            columns += [k for k in row if k not in columns]
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                k: json.dumps(_jsonable(v)) if isinstance(v, (dict, list, tuple)) else v
                for k, v in row.items()
            }
        )
    return write_text(path, buf.getvalue())


def check_out_dir(out, name="out"):
    """Check, before any work, that result files can be written under ``out``.

    Creates the directory (and its parents) and writes and removes a probe file in it, so
    that every reason a later write could fail (a path under a file, no permission, a
    read-only file system) is found now.

    Parameters
    ----------
    out : str or Path
        The output directory. The empty string is refused: it would silently mean the
        current directory.
    name : str, default="out"
        How the caller names the argument in the error message (e.g. ``"--out"``).

    Returns
    -------
    Path
        ``out`` as a Path.

    Raises
    ------
    ValueError
        Naming ``name`` and the reason, when ``out`` is empty or not writable.
    """
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path, got {type(out).__name__}")
    if str(out).strip() == "":
        raise ValueError(
            f"{name} must name a directory, got an empty string (use '.' for the current directory)"
        )
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}={str(out)!r} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(prefix=".write-probe.", dir=path):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"{name}={str(out)!r} is not a writable directory ({reason})") from None
    return path
