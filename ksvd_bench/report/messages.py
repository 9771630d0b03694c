"""Warning messages for a person: one line per template, never cut mid-word.

A race raises the same warning with different numbers hundreds of times ("the estimate
s_10 = 0.135 is below a lower bound 0.165 ...", then 0.121, then 0.118). Listed one by one
they bury the few kinds there are. :func:`message_templates` groups messages that differ only
in their numbers and writes each group once, a number that varies shown as its range
(``{0.118..0.135}``), one that does not as itself, with the group's count. :func:`clip`
shortens a message to a width at a word boundary, marked ``...``.

A number is a figure standing alone: part of a name (``s_10``, ``sigma_1``, ``top-20``,
``rank=20``, ``2^-40``) stays as written, so the template still names what it measures.
"""

from __future__ import annotations

import re
import textwrap

from ksvd_bench.report.status import base_solver
from ksvd_bench.report.tables import TEXT_WIDTH
from ksvd_bench.report.winners import warning_counts
from ksvd_bench.scoring import clip_message as clip

__all__ = ["clip", "message_templates", "strip_solver", "warning_summary"]

#: a number standing alone (not part of a name such as s_10, top-20, rank=20, 2^-40, v1.2)
NUMBER = re.compile(r"(?<![\w^=.\-])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?!\w)(?!\.\d)")
#: the solver's name that leads its own warnings ("rsvd: ...")
_SOLVER_PREFIX = re.compile(r"^[A-Za-z_]\w*: ")


def strip_solver(message):
    """A message without the solver name that leads it (``"rsvd: "``): the solver is shown
    beside it, and messages of different solvers then share a template."""
    return _SOLVER_PREFIX.sub("", str(message), count=1)


def _number_text(value):
    return f"{value:.3g}"


def message_templates(items):
    """Group messages that differ only in their numbers.

    Parameters
    ----------
    items : iterable of (str, int, str or None)
        ``(message, count, tag)``: a message, how many times it counts, and who raised it
        (a solver; None: nobody named).

    Returns
    -------
    list of dict
        One per template, largest count first: ``text`` (the template, each number that
        varies within the group written ``{lo..hi}``, the others as they were), ``count``
        (the counts summed), ``n_messages`` (distinct messages grouped) and ``tags`` (who
        raised them, in order of first appearance, None left out).

    Examples
    --------
    >>> groups = message_templates([
    ...     ("the top-20 subspace is unknown within 0.012 sigma_1", 3, "rsvd"),
    ...     ("the top-20 subspace is unknown within 0.4 sigma_1", 1, "block_krylov"),
    ... ])
    >>> groups[0]["text"], groups[0]["count"], groups[0]["tags"]
    ('the top-20 subspace is unknown within {0.012..0.4} sigma_1', 4, ['rsvd', 'block_krylov'])
    """
    groups = {}
    for message, count, tag in items:
        message = " ".join(str(message).split())
        key = NUMBER.sub("\0", message)
        group = groups.setdefault(key, {"count": 0, "messages": {}, "tags": {}})
        group["count"] += int(count)
        group["messages"].setdefault(message, [m.group(0) for m in NUMBER.finditer(message)])
        if tag is not None:
            group["tags"].setdefault(tag, None)
    out = []
    for key, group in groups.items():
        numbers = list(zip(*group["messages"].values(), strict=True))  # one tuple per position
        pieces = key.split("\0")
        text = pieces[0]
        for piece, seen in zip(pieces[1:], numbers, strict=True):
            if len(set(seen)) == 1:
                text += seen[0]
            else:
                values = [float(v) for v in seen]
                text += f"{{{_number_text(min(values))}..{_number_text(max(values))}}}"
            text += piece
        out.append(
            {
                "text": text,
                "count": group["count"],
                "n_messages": len(group["messages"]),
                "tags": list(group["tags"]),
            }
        )
    out.sort(key=lambda g: -g["count"])
    return out


def _names(tags, room=12):
    """Who raised a template, in at most ``room`` characters: the names, or how many (the
    per-solver line above names them), so that the message keeps the width."""
    shown = ", ".join(tags)
    return shown if len(shown) <= room or len(tags) == 1 else f"{len(tags)} solvers"


def warning_summary(rows, *, others=(), width=TEXT_WIDTH, most=12):
    """The warnings of a race for the terminal, at most ``most`` lines of ``width``.

    First the warnings of the answers returned per solver: the same counts as the headline
    (:func:`~ksvd_bench.report.winners.warning_counts`), so the two agree. Then one line per
    template of their messages (:func:`message_templates`), with the rows that carry it and
    their solvers. Then the templates of ``others``: messages raised on the way (smaller
    efforts of a sweep, warm-up) that no returned answer carries, with how many distinct
    messages each template stands for. Each line is cut at a
    word boundary (:func:`clip`); the full messages are in the JSON and the report.

    Parameters
    ----------
    rows : list of dict
        The rows of a race (``warnings``, ``n_warnings``, ``method``).
    others : iterable of str
        Every message recorded while the race ran (repeats allowed); those a row carries
        are left out.
    width, most : int
        Line width and the most lines.

    Returns
    -------
    list of str
        Empty when nothing warned.
    """
    counts = warning_counts(rows)
    carried = {clip(m) for r in rows for m in (r.get("warnings") or [])}
    lines = []
    if counts:
        per = sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))
        total = sum(n for _, (n, _) in per)
        lines += textwrap.wrap(
            f"warnings of the answers returned: {total} "
            f"({', '.join(f'{s} {n}' for s, (n, _) in per)}):",
            width=width,
            subsequent_indent="    ",
        )
        groups = message_templates(
            (strip_solver(m), 1, base_solver(r.get("method", "?")))
            for r in rows
            for m in dict.fromkeys(r.get("warnings") or [])
        )
        lines += [
            "  "
            + clip(
                f"{g['count']} row{'s' * (g['count'] != 1)} ({_names(g['tags'])}): {g['text']}",
                width - 2,
            )
            for g in groups
        ]
    rest = message_templates((m, 1, None) for m in others if clip(m) not in carried)
    if rest:
        lines.append(clip("also raised on the way (smaller efforts, warm-up):", width))
        lines += [
            "  "
            + clip(
                ("" if g["n_messages"] == 1 else f"{g['n_messages']} messages: ") + g["text"],
                width - 2,
            )
            for g in rest
        ]
    if len(lines) > most:
        more = len(lines) - (most - 1)
        lines = lines[: most - 1] + [
            clip(
                f"... {more} more lines of warnings (each answer's are in the JSON and the report)",
                width,
            )
        ]
    return lines
