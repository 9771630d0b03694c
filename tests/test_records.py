"""``info`` and its certificate are typed records (issue 34 section 3) that read as dicts."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import typing
import warnings

import numpy as np
import pytest

import solvers
from solvers import Certificate, SolveInfo

#: the fields every solver sets, in declaration order
COMMON = tuple(
    "method effort n_matvec n_block_entries n_products n_passes seconds reliable".split()
)


#: one small call per method, with and without the product certificate where it has one
CALLS = [
    ("tsvd", {}),
    ("rsvd", {}),
    ("rsvd", {"check_passes": 0}),
    ("block_krylov", {}),
    ("generalized_nystrom", {}),
    ("sym_nystrom", {"n_samples": 20}),
    ("asym_nystrom", {"n_samples": 20}),
    ("asym_nystrom", {"n_samples": 20, "check_passes": 0, "certificate_budget": 0.5}),
]


@pytest.fixture(scope="module")
def G():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 8)) * 2.0 ** -np.arange(8)
    return X @ rng.standard_normal((8, 50)) + 1e-3 * rng.standard_normal((60, 50))


@pytest.mark.parametrize("cls", [SolveInfo, Certificate])
def test_every_field_is_documented(cls):
    doc = cls.__doc__
    section = doc[doc.index("Attributes\n") :]
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    assert names and set(names) == set(hints)
    for name in names:
        # numpydoc: "name : type" at the start of a line of the Attributes section
        assert f"\n    {name} : " in section, f"{cls.__name__}.{name} is not documented"
    assert names[: len(COMMON)] == list(COMMON) or cls is Certificate


@pytest.mark.parametrize("method, options", CALLS)
def test_every_solver_returns_typed_records(G, method, options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = solvers.svd(G, 5, method=method, random_state=0, **options).info
    assert type(info) is SolveInfo
    assert set(COMMON) <= set(info)
    records = [(info, typing.get_type_hints(SolveInfo))]
    if "certificate" in info:
        assert type(info["certificate"]) is Certificate
        records.append((info["certificate"], typing.get_type_hints(Certificate)))
    checked = 0
    for rec, hints in records:
        for name, kind in hints.items():
            if name in rec:
                assert isinstance(rec[name], kind), (method, name, type(rec[name]), kind)
                assert getattr(rec, name) is rec[name]
                checked += 1
    assert checked >= len(COMMON)
    assert info.method == method and info.n_passes == info["n_passes"] > 0


def test_dict_view_behaves_as_before():
    info = SolveInfo({"method": "rsvd", "reliable": None}, n_iter=4)
    assert isinstance(info, dict)
    # a declared field never set is no entry: absent for "in", get, [] and keys()
    assert "fro2" not in info and info.get("fro2") is None and info.fro2 is None
    with pytest.raises(KeyError):
        info["fro2"]
    assert list(info) == ["method", "reliable", "n_iter"]
    # None set explicitly is an entry (reliable None: "unknown")
    assert "reliable" in info and info.reliable is None
    info["fro2"] = 4.0
    assert info.fro2 == 4.0 and "fro2" in info
    info.update(error_estimate=0.5)
    info.effort = 3
    assert dict(info) == {
        "method": "rsvd",
        "reliable": None,
        "n_iter": 4,
        "fro2": 4.0,
        "error_estimate": 0.5,
        "effort": 3,
    }
    assert info.extra == {"n_iter": 4}
    with pytest.raises(AttributeError):
        info.frob2 = 1.0  # a mistyped field is an error, not a new attribute
    assert json.loads(json.dumps(info)) == dict(info)
    again = pickle.loads(pickle.dumps(info))
    assert type(again) is SolveInfo and again == info and type(copy.deepcopy(info)) is SolveInfo


def test_certificate_is_made_a_record_once():
    info = SolveInfo(certificate={"check_passes": 1, "failed": ["uncertified"]})
    cert = info.certificate
    assert type(cert) is Certificate and cert.failed == ["uncertified"]
    assert cert.gap is None and "gap" not in cert
    assert SolveInfo(info).certificate is cert  # a record is kept, not copied


def test_result_makes_a_plain_info_a_record():
    res = solvers.SVDResult(np.eye(3, 2), np.ones(2), np.eye(3, 2), {"method": "x"})
    assert type(res.info) is SolveInfo and res.info.method == "x"
    assert type(solvers.SVDResult(np.eye(3, 2), np.ones(2), np.eye(3, 2)).info) is SolveInfo


def test_a_record_writes_the_json_its_dict_wrote(G, tmp_path):
    from ksvd_bench.report.files import write_json

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = solvers.svd(G, 5, method="rsvd", random_state=0).info
    plain = {k: dict(v) if isinstance(v, dict) else v for k, v in info.items()}
    assert type(plain["certificate"]) is dict
    write_json(tmp_path / "record.json", {"rows": [{"info": info}]})
    write_json(tmp_path / "plain.json", {"rows": [{"info": plain}]})
    text = (tmp_path / "record.json").read_text()
    assert text == (tmp_path / "plain.json").read_text()
    assert json.loads(text)["rows"][0]["info"]["certificate"]["failed"] == info.certificate.failed
