"""The bundled UCI tables: Pima diabetes, Ionosphere, BUPA liver, Cholesterol, Yacht.

Each file is a gzipped CSV with a header whose last column is the target (see
``data/PROVENANCE.md`` for sources and column meanings). Values are read verbatim; nothing is
rescaled or imputed.

References
----------
D. Dua, C. Graff. UCI Machine Learning Repository, 2019. http://archive.ics.uci.edu/ml

J. McDermott, R. S. Forsyth. Diagnosing a disorder in a classification benchmark. Pattern
Recognition Letters 73:41-43, 2016. (the BUPA ``selector`` column)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._files import DatasetError, data_path, read_csv_gz

__all__ = ["TABLES", "TABLE_ALIASES", "load_table"]


@dataclass(frozen=True)
class _TableSpec:
    filename: str
    columns: tuple
    task: str


_SPECS = {
    "diabetes": _TableSpec(
        "pima_indians_diabetes.csv.gz",
        ("preg", "plas", "pres", "skin", "insu", "mass", "pedi", "age", "class"),
        "classification",
    ),
    "ionosphere": _TableSpec(
        "ionosphere.csv.gz",
        tuple(f"a{k:02d}" for k in range(1, 35)) + ("class",),
        "classification",
    ),
    "liver": _TableSpec(
        "bupa_liver_disorders.csv.gz",
        ("mcv", "alkphos", "sgpt", "sgot", "gammagt", "drinks", "selector"),
        "classification",
    ),
    "cholesterol": _TableSpec(
        "cholesterol.csv.gz",
        (
            "age",
            "sex",
            "cp",
            "trestbps",
            "fbs",
            "restecg",
            "thalach",
            "exang",
            "oldpeak",
            "slope",
            "ca",
            "thal",
            "num",
            "chol",
        ),
        "regression",
    ),
    "yacht": _TableSpec(
        "yacht_hydrodynamics.csv.gz",
        (
            "lcb",
            "prismatic_coeff",
            "length_displacement",
            "beam_draught",
            "length_beam",
            "froude_number",
            "residuary_resistance",
        ),
        "regression",
    ),
}

#: canonical names of the bundled tables
TABLES = tuple(_SPECS)
#: file-style names accepted as well
TABLE_ALIASES = {
    "pima_indians_diabetes": "diabetes",
    "bupa_liver_disorders": "liver",
    "yacht_hydrodynamics": "yacht",
}
_MISSING = ("drop", "raise", "keep")
#: threshold of the alternative BUPA target (McDermott & Forsyth 2016): ``drinks > 5``
LIVER_DRINKS_THRESHOLD = 5.0


def _canonical(name):
    valid = TABLES + tuple(TABLE_ALIASES)
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, one of {valid}; got {type(name).__name__}")
    key = name.strip().lower()
    key = TABLE_ALIASES.get(key, key)
    if key not in _SPECS:
        raise ValueError(f"unknown dataset name {name!r}; valid names are {valid}")
    return key


def load_table(name, *, target=None, missing="drop", data_home=None):
    """Load a bundled UCI table as ``(X, y, task)``.

    Parameters
    ----------
    name : str
        ``"diabetes"``, ``"ionosphere"``, ``"liver"``, ``"cholesterol"`` or ``"yacht"``; the
        file-style names ``"pima_indians_diabetes"``, ``"bupa_liver_disorders"`` and
        ``"yacht_hydrodynamics"`` are accepted too.
    target : str, optional
        Only for ``"liver"``: ``"selector"`` (default, the column the kernel-method literature
        uses as the class, values 1/2) or ``"drinks"`` (the dichotomised target recommended by
        McDermott & Forsyth: ``y = drinks > 5`` as 0/1; ``X`` is then the five blood tests and
        the ``selector`` column, a train/test split indicator, is dropped). Must be None for
        the other tables.
    missing : {"drop", "raise", "keep"}, default="drop"
        What to do with empty fields (only Cholesterol has them: 4 in ``ca`` and 2 in ``thal``,
        on 6 distinct rows). ``"drop"`` removes those rows (303 -> 297), ``"raise"`` raises
        :class:`DatasetError`, ``"keep"`` leaves NaN in ``X``. Values are never imputed.
    data_home : str or os.PathLike, optional
        Directory holding the ``.csv.gz`` file instead of the bundled copy.

    Returns
    -------
    X : numpy.ndarray
        float64 array ``(n_samples, n_features)``, the file's columns except the target, in
        file order.
    y : numpy.ndarray
        int64 class labels as stored in the file for classification (diabetes and ionosphere
        0/1, liver ``selector`` 1/2 or ``drinks > 5`` 0/1), float64 values for regression.
    task : {"classification", "regression"}

    Raises
    ------
    ValueError
        Unknown ``name``, ``target`` or ``missing``.
    DatasetError
        The file is missing, corrupt or malformed, or has missing values and
        ``missing="raise"``.

    Examples
    --------
    >>> X, y, task = load_table("yacht")
    >>> X.shape, task
    ((308, 6), 'regression')
    """
    key = _canonical(name)
    spec = _SPECS[key]
    if missing not in _MISSING:
        raise ValueError(f"missing must be one of {_MISSING}, got {missing!r}")
    if key == "liver":
        target = "selector" if target is None else target
        if target not in ("selector", "drinks"):
            raise ValueError(f"target for 'liver' must be 'selector' or 'drinks', got {target!r}")
    elif target is not None:
        raise ValueError(
            f"target is only selectable for 'liver'; got target={target!r} for {key!r}"
        )

    path = data_path(spec.filename, data_home)
    table = read_csv_gz(path, spec.columns)
    if key == "liver" and target == "drinks":
        X = table[:, :5]
        y_raw = (table[:, 5] > LIVER_DRINKS_THRESHOLD).astype(np.float64)
        y_raw[np.isnan(table[:, 5])] = np.nan
    else:
        X = table[:, :-1]
        y_raw = table[:, -1]

    bad_rows = np.isnan(X).any(axis=1) | np.isnan(y_raw)
    if bad_rows.any():
        n_bad = int(bad_rows.sum())
        if missing == "raise" or (missing == "keep" and np.isnan(y_raw).any()):
            has_nan = np.isnan(table).any(axis=0)
            cols = [c for c, bad in zip(spec.columns, has_nan, strict=True) if bad]
            raise DatasetError(
                f"dataset file {str(path)!r} has {n_bad} row(s) with missing values "
                f"(columns {cols}); pass missing='drop' or missing='keep' (NaN in X only)"
            )
        if missing == "drop":
            X = X[~bad_rows]
            y_raw = y_raw[~bad_rows]
    X = np.ascontiguousarray(X, dtype=np.float64)

    if spec.task == "classification":
        if not np.all(y_raw == np.round(y_raw)):
            raise DatasetError(f"dataset file {str(path)!r}: class labels are not integers")
        y = y_raw.astype(np.int64)
    else:
        y = np.ascontiguousarray(y_raw, dtype=np.float64)
    return X, y, spec.task
