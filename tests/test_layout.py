"""The repository's layering (issue 34 section 5), read from the source with :mod:`ast`.

- :mod:`solvers` never imports :mod:`ksvd_bench`;
- :mod:`ksvd_bench.kernels` takes no private name from :mod:`solvers`;
- no import circle among the modules of :mod:`solvers` and :mod:`ksvd_bench`, counting imports
  inside functions (a circle through a lazy import is still a circle);
- no private name (a module or an attribute with a leading underscore) is imported across a
  package, a package being a directory with an ``__init__.py``: ``solvers``,
  ``solvers.sampling``, ``ksvd_bench``, ``ksvd_bench.kernels``, ``ksvd_bench.kernels.backends``...
  (top-level ``ksvd_bench`` modules belong to the ``ksvd_bench`` package). Within one package
  privates are fine. Tests and benchmarks may use the privates of what they test; this checks the
  package code;
- only the command-line modules parse arguments (the studies compute);
- an import inside a function says why it is not at the top (start-up, an optional dependency,
  the order of loading).

Every ``import`` statement counts, at module level or inside a function or a ``TYPE_CHECKING``
block. The race's own rules (no study takes another study's privates) are in
:mod:`tests.test_race_layout`.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("solvers", "ksvd_bench")


def module_name(path, root=ROOT):
    """The dotted name of the module at ``path`` (a package for an ``__init__.py``)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_modules(root=ROOT, packages=PACKAGES):
    """``{module name: path}`` for every ``.py`` file of the packages."""
    return {
        module_name(p, root): p
        for top in packages
        for p in sorted((root / top).rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def is_package(module, modules):
    return modules[module].name == "__init__.py"


def package_of(module, modules):
    """The package a module belongs to: itself for a package, else its parent."""
    return module if is_package(module, modules) else module.rpartition(".")[0]


def _absolute(importer, node, modules):
    """The absolute module an ``ImportFrom`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    pkg = package_of(importer, modules).split(".")
    pkg = pkg[: len(pkg) - (node.level - 1)]
    return ".".join(pkg + ([node.module] if node.module else []))


def imports(modules):
    """Every import of every module: ``{importer: [(line, dotted name)]}``.

    A dotted name is a module (``a.b``) or an attribute of one (``a.b.name``); ``from a import
    b`` gives ``a.b`` whether ``b`` is a submodule or a name.
    """
    out = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(node.lineno, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(name, node, modules)
                found += [(node.lineno, f"{base}.{a.name}") for a in node.names if a.name != "*"]
        out[name] = found
    return out


def target_module(dotted, modules):
    """The module a dotted import name loads: the longest prefix that is one of ``modules``
    (None for a module outside them, e.g. numpy)."""
    parts = dotted.split(".")
    for stop in range(len(parts), 0, -1):
        candidate = ".".join(parts[:stop])
        if candidate in modules:
            return candidate
    return None


def import_graph(modules, graph=None):
    """``{module: {modules it imports}}`` within ``modules``."""
    graph = imports(modules) if graph is None else graph
    edges = {}
    for importer, found in graph.items():
        targets = {target_module(d, modules) for _, d in found}
        edges[importer] = sorted(t for t in targets if t is not None)
    return edges


def cycles(edges):
    """Every import circle, as a sorted list of modules (Tarjan's strongly connected
    components; a module importing itself counts)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, []):
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def private_crossings(modules, graph=None):
    """Imports that take a private name (a module or attribute whose name starts with ``_``,
    dunders aside) from outside the importer's package, as readable lines."""
    graph = imports(modules) if graph is None else graph
    offending = []
    for importer, found in graph.items():
        home = package_of(importer, modules)
        for line, dotted in found:
            parts = dotted.split(".")
            for i, part in enumerate(parts):
                if not part.startswith("_") or (part.startswith("__") and part.endswith("__")):
                    continue
                # the private ``part`` is visible inside the package that holds it
                owner = ".".join(parts[:i])
                if owner in modules and not is_package(owner, modules):
                    owner = package_of(owner, modules)
                if owner != home:
                    offending.append(f"{importer}:{line} imports {dotted}")
                break
    return offending


def test_solvers_never_import_ksvd_bench():
    modules = source_modules()
    offending = [
        f"{importer}:{line} imports {dotted}"
        for importer, found in imports(modules).items()
        if importer.split(".")[0] == "solvers"
        for line, dotted in found
        if dotted.split(".")[0] == "ksvd_bench"
    ]
    assert offending == []


def test_kernels_need_no_solvers_privates():
    modules = source_modules()
    offending = [
        f"{importer}:{line} imports {dotted}"
        for importer, found in imports(modules).items()
        if importer.startswith("ksvd_bench.kernels")
        for line, dotted in found
        if dotted.split(".")[0] == "solvers" and any(p.startswith("_") for p in dotted.split("."))
    ]
    assert offending == []


def test_no_import_circle():
    assert cycles(import_graph(source_modules())) == []


def test_no_private_name_crosses_a_package():
    assert private_crossings(source_modules()) == []


def _toy(tmp_path, files):
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return source_modules(tmp_path, ("pkg",))


def test_the_checks_can_fail(tmp_path):
    # a circle through an import inside a function, and privates taken across packages
    # (a name, a private module, a relative import) beside ones taken within a package
    modules = _toy(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/_leaf.py": "X = 1\n_Y = 2\n",
            "pkg/a.py": (
                "from pkg import _leaf\nfrom ._leaf import _Y\n\ndef f():\n    import pkg.b\n"
            ),
            "pkg/b.py": "import pkg.a\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": (
                "from .. import _leaf\nfrom pkg.a import _hidden\nfrom pkg.sub.d import _ok\n"
            ),
            "pkg/sub/d.py": "from pkg._leaf import X\n",
        },
    )
    graph = imports(modules)
    assert cycles(import_graph(modules, graph)) == [["pkg.a", "pkg.b"]]
    (tmp_path / "pkg" / "e.py").write_text("def flags(p):\n    p.add_argument('--x')\n")
    assert argument_parsing(_toy(tmp_path, {})) == {"pkg.e": [2]}
    (tmp_path / "pkg" / "f.py").write_text(
        "def f():\n    import json\n\n"
        "def g():\n    # why\n    import json\n    import os\n\n    import sys\n"
    )
    lazy = unexplained_lazy_imports(_toy(tmp_path, {}))
    assert lazy == ["pkg.a:5", "pkg.f:2", "pkg.f:9"]
    assert [line.split(" imports ")[1] for line in private_crossings(modules, graph)] == [
        "pkg._leaf",
        "pkg.a._hidden",
        "pkg._leaf.X",
    ]


#: the modules that parse arguments: the entry point, its shared argument types, the
#: sub-commands' modules (and every ``cli`` module) and the race's shared flags
COMMAND_LINE = {
    "ksvd_bench.cli",
    "ksvd_bench.cliargs",
    "ksvd_bench.race.commands",
    "ksvd_bench.roofline_cli",
}


PARSER_CALLS = {"add_argument", "add_argument_group", "add_parser", "add_subparsers", "parse_args"}


def argument_parsing(modules):
    """``{module: [line]}`` of every ``argparse`` import and parser call (``add_argument``,
    ``add_parser``...) outside the command-line modules."""
    out = {}
    for name, path in modules.items():
        if name in COMMAND_LINE or name.endswith(".cli"):
            continue
        lines = []
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
                lines.append(node.lineno)
            elif isinstance(node, ast.ImportFrom) and node.module == "argparse":
                lines.append(node.lineno)
            elif isinstance(node, ast.Attribute) and node.attr in PARSER_CALLS:
                lines.append(node.lineno)
        if lines:
            out[name] = sorted(set(lines))
    return out


def test_only_the_command_line_parses_arguments():
    # the studies compute; argument parsing is in the command-line modules
    assert argument_parsing(source_modules()) == {}


def unexplained_lazy_imports(modules):
    """Imports inside functions with no comment saying why: ``["module:line"]``.

    A comment on the import's lines, or on a line above it in the same block of lines (no
    blank line between), explains the import and the imports that follow it there
    (``"#"`` anywhere on those lines counts).
    """
    out = []
    for name, path in modules.items():
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text, filename=str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                own = lines[node.lineno - 1 : node.end_lineno]
                explained = any("#" in line for line in own)
                i = node.lineno - 2
                while not explained and i >= fn.lineno and lines[i].strip():
                    explained = "#" in lines[i]
                    i -= 1
                if not explained:
                    out.append(f"{name}:{node.lineno}")
    return sorted(set(out))


def test_every_import_inside_a_function_says_why():
    # an import inside a function is there for start-up (scikit-learn, matplotlib), an
    # optional dependency (dask, numba-cuda), or the order of loading (numpy after the
    # command line has set OpenBLAS's spin): a comment says which; every other import is at
    # the top of its module
    unexplained = unexplained_lazy_imports(source_modules())
    assert unexplained == []
