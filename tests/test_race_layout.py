"""The race's house (issue 19 section 7): plain module names, no import circle within
``ksvd_bench.race``, and no study importing another study's private names.

The whole repository's layering is checked by :mod:`test_layout`. Read from the source with
:mod:`ast` (every ``import``, module-level or inside a function,
counts: a circle through a lazy import is still a circle).
"""

import ast
from pathlib import Path

import pytest
from test_layout import cycles  # the one circle finder (tests/ is on sys.path)

import ksvd_bench.race

RACE_DIR = Path(ksvd_bench.race.__file__).parent
PACKAGE = "ksvd_bench.race"
#: modules every study may use: they belong to no study
SHARED = {"common", "problems", "paper_runtime", "commands"}


def _module_name(path):
    parts = path.relative_to(RACE_DIR).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def _modules():
    return {_module_name(p): p for p in sorted(RACE_DIR.rglob("*.py"))}


def _resolve(importer, node, modules):
    """The race modules an import statement names (submodules where ``from pkg import sub``),
    with the names it takes from each: ``[(module, [names])]``."""
    if isinstance(node, ast.Import):
        return [(a.name, []) for a in node.names if a.name in modules]
    base = node.module or ""
    if node.level:  # relative: resolve against the importer's package
        pkg = importer.split(".")
        if not modules[importer].name == "__init__.py":
            pkg = pkg[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([base] if base else []))
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in modules:
            out.append((sub, []))
        elif base in modules:
            out.append((base, [alias.name]))
    return out


def _imports(modules):
    """``{module: [(imported module, [names taken])]}`` over every import statement."""
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges += _resolve(name, node, modules)
        graph[name] = edges
    return graph


def _study(module):
    """The study a module belongs to (``compare``, ``scale``, ``spectrum``...), None if shared."""
    rest = module[len(PACKAGE) + 1 :].split(".") if module != PACKAGE else []
    return None if not rest or rest[0] in SHARED else rest[0]


def _cycles(graph):
    """Every import circle of a race graph (the finder of :mod:`test_layout`)."""
    return cycles({v: [w for w, _ in edges] for v, edges in graph.items()})


def test_the_race_has_plain_module_names():
    private = [
        str(p.relative_to(RACE_DIR))
        for p in RACE_DIR.rglob("*.py")
        if p.name.startswith("_") and p.name != "__init__.py"
    ]
    assert private == []


def test_the_race_has_no_import_circle():
    assert _cycles(_imports(_modules())) == []


def test_the_circle_finder_finds_a_circle():
    # the check above must be able to fail: a two-module circle and a lazy self-reference
    graph = {"a": [("b", [])], "b": [("a", [])], "c": [("d", [])], "d": []}
    assert _cycles(graph) == [["a", "b"]]


def test_no_study_imports_another_studys_private_names():
    offending = []
    for importer, edges in _imports(_modules()).items():
        for module, names in edges:
            private = [n for n in names if n.startswith("_")]
            if private and _study(module) != _study(importer):
                offending.append(f"{importer} imports {private} from {module}")
            if private and _study(module) is None:
                # shared modules are public by definition: nothing private is taken from them
                offending.append(f"{importer} imports {private} from shared {module}")
    assert offending == []


@pytest.mark.parametrize(
    ("name", "public"),
    [
        (
            "ksvd_bench.race.compare",
            (
                "run_compare",
                "CompareResult",
                "format_compare",
                "write_compare_files",
                "VARIANTS",
                "DEFAULT_METHODS",
                "ROW_FIELDS",
                "RUN_FIELDS",
                "STRUCTURED_NAME",
                "exact_operator",
                "seeds_from",
            ),
        ),
        (
            "ksvd_bench.race.scale",
            (
                "run_scale",
                "ScaleResult",
                "RUNNERS",
                "register_runner",
                "MethodRunner",
                "format_scale",
                "best_cells",
                "ProblemSpec",
            ),
        ),
        (
            "ksvd_bench.race.common",
            (
                "meets",
                "verdict",
                "measure_bound",
                "warm_up",
                "exact_operator",
                "VARIANTS",
                "solver_of",
            ),
        ),
    ],
)
def test_public_names_stay_importable(name, public):
    import importlib

    module = importlib.import_module(name)
    assert [n for n in public if not hasattr(module, n)] == []
    assert set(public) <= set(module.__all__)
