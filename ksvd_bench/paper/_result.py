"""The value every ``run_*`` experiment returns: a dict with a repr of one line.

A plain dict of per-split rows prints pages of numbers in a REPL; :class:`ExperimentResult` is
that same dict (``result["rows"]``, JSON writing, ``dict(result, ...)`` all work unchanged) whose
repr names the experiment and summarises each entry instead.
"""

from __future__ import annotations

import numbers

import numpy as np

#: column names shown in the repr before "..."
_SHOWN_COLUMNS = 6


def _summarise(value):
    """A few characters standing for ``value`` in the repr."""
    if isinstance(value, list):
        if value and isinstance(value[0], dict):
            keys = list(value[0])
            shown = ", ".join(keys[:_SHOWN_COLUMNS]) + (
                ", ..." if len(keys) > _SHOWN_COLUMNS else ""
            )
            return f"<{len(value)} rows: {shown}>"
        return f"<list of {len(value)}>"
    if isinstance(value, dict):
        return f"<dict of {len(value)}>"
    if isinstance(value, np.ndarray):
        return f"<array {value.shape} {value.dtype}>"
    if isinstance(value, bool | str | None):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "...'"
    if isinstance(value, numbers.Real):
        return f"{float(value):.3g}"
    return f"<{type(value).__name__}>"


class ExperimentResult(dict):
    """Result of one feature-learning experiment: a dict with a short repr.

    Parameters
    ----------
    experiment : str
        Name of the experiment (``"nystrom_f1"``, ...), shown by the repr.
    **entries
        The dict's content: ``rows`` (list of dict, one per table row), ``protocol`` (dict)
        and any experiment-specific entries.

    Examples
    --------
    >>> ExperimentResult("demo", rows=[dict(dataset="cora", micro=0.5)], protocol={})
    ExperimentResult('demo', rows=<1 rows: dataset, micro>, protocol=<dict of 0>)
    """

    def __init__(self, experiment, /, **entries):
        super().__init__(**entries)
        self.experiment = experiment

    def __repr__(self):
        body = ", ".join(f"{key}={_summarise(value)}" for key, value in self.items())
        return f"{type(self).__name__}({self.experiment!r}, {body})"

    def _repr_pretty_(self, printer, cycle):
        # IPython would otherwise pretty-print the dict item by item
        printer.text(repr(self))
