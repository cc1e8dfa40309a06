"""The package's shape, read from the source (AST) and from ARCHITECTURE.md, so the document and
the code cannot drift apart.

The layer order is data: ARCHITECTURE.md's "Layers" table, bottom row first, says which folders and
modules each folder may import. Every import statement counts, at module level and inside functions
(a deferred import still ties the two modules together: the Spark entry's dispatch, the catalog's
lazy facade); only ``TYPE_CHECKING`` blocks are left out, since they never run. On top of the table:
no folder cycle, no module cycle, no private name reached across folders, and no module over
:data:`MAX_LINES` lines unless ARCHITECTURE.md's "Long modules" list says why. Each plugin module
must also import on its own in a fresh interpreter, which is how Airflow's processes meet them.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "airflow_colocate"
ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"
MAX_LINES = 500


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is_package) for every module under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


@dataclass(frozen=True)
class Import:
    """One import statement of the package, resolved to the modules it loads."""

    line: int
    targets: frozenset[str]  # modules of the package the statement needs
    deferred: bool  # inside a function: runs when called, not when imported
    private: tuple[tuple[str, str], ...] = ()  # (module, name) of each _name it takes from a module


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _walk(tree: ast.AST, *, deferred: bool = False):
    """(node, inside a function) for every node that runs, ``TYPE_CHECKING`` blocks left out."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _type_checking(child):
            continue
        yield child, deferred
        inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _walk(child, deferred=inner)


def import_statements(name: str, path: Path, is_package: bool, known: dict) -> list[Import]:
    """Every import statement of module ``name`` that reaches a module of ``known``."""
    package = name if is_package else name.rpartition(".")[0]
    out = []
    for node, deferred in _walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = {a.name for a in node.names if a.name in known}
            private: set[tuple[str, str]] = set()
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            submodules = {f"{base}.{a.name}" for a in node.names} & known.keys()
            targets = set(submodules)
            # `from pkg import sub` needs only the submodule (Python imports it even while pkg's
            # __init__ is still running); a name defined in pkg needs pkg itself.
            if base in known and len(submodules) < len(node.names):
                targets.add(base)
            private = {(base, a.name) for a in node.names if _private(a.name) and base in known}
        else:
            continue
        targets.discard(name)
        if targets:
            out.append(Import(node.lineno, frozenset(targets), deferred, tuple(sorted(private))))
    return out


def imports(name: str, path: Path, is_package: bool, known: dict, *, deferred: bool) -> set[str]:
    """The modules of ``known`` that ``name`` imports; with ``deferred``, also inside functions."""
    return {t for i in import_statements(name, path, is_package, known) if deferred or not i.deferred
            for t in i.targets}


def import_graph(root: Path, *, deferred: bool = False) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, is_pkg, known, deferred=deferred) for name, (path, is_pkg) in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each as one cycle
    through it so the failure names the imports to untangle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
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
            if len(component) > 1:
                found.append(_cycle_through(graph, set(component)))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return found


def _cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One import path from the component's first module back to itself (breadth first)."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return sorted(component)


def _explain(found: list[list[str]]) -> str:
    return "import cycles: " + "; ".join(" -> ".join(c) for c in found)


# ---------------------------------------------------------------------- the layer table


@dataclass(frozen=True)
class Layer:
    folder: str  # a folder of the package, or the package itself (its __init__.py)
    may_import: tuple[str, ...]  # folders ("storage") or modules ("storage.layout"), relative to the package


def _section(text: str, title: str) -> str:
    """The body of the ``## <title>...`` section of a markdown text ('' when there is none)."""
    match = re.search(rf"^## {re.escape(title)}.*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""


def layer_table(text: str) -> list[Layer]:
    """The "Layers" table of ARCHITECTURE.md's text, bottom row first."""
    rows = [line.strip() for line in _section(text, "Layers").splitlines() if line.strip().startswith("|")]
    assert rows, "ARCHITECTURE.md has no table under '## Layers'"
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert cells[0] == ["folder", "what lives there", "may import"], f"unexpected header {cells[0]}"
    layers = []
    for row in cells[2:]:
        (folder,) = re.findall(r"`([^`]+)`", row[0])[:1] or [row[0]]
        layers.append(Layer(folder.rstrip("/"), tuple(re.findall(r"`([^`]+)`", row[2]))))
    return layers


def table_problems(layers: list[Layer], known: dict, root: str) -> list[str]:
    """What makes the table unusable as layers: a row naming a row not below it (the only way
    folders could import each other both ways), a folder without a row, a row without a folder."""
    problems = []
    below: set[str] = set()
    for layer in layers:
        if layer.folder in below:
            problems.append(f"row `{layer.folder}` appears twice")
        for entry in layer.may_import:
            folder = entry.split(".")[0]
            module = root if entry == root else f"{root}.{entry}"
            if folder not in below:
                problems.append(f"row `{layer.folder}` may import `{entry}`, which is not a row above it in the table")
            elif "." in entry and module not in known:
                problems.append(f"row `{layer.folder}` may import `{entry}`, which is no module of the package")
        below.add(layer.folder)
    for name in known:
        if folder_of(name, known, root) is None:
            problems.append(f"{name} is a loose module: give it a folder (only the package's __init__ may stay)")
    folders = {folder_of(n, known, root) for n in known} - {None}
    problems += [f"folder `{f}` has no row in the table" for f in sorted(folders - below)]
    problems += [f"row `{f}` names no folder of the package" for f in sorted(below - folders)]
    return problems


def folder_of(name: str, known: dict, root: str) -> str | None:
    """The row a module belongs to: its top folder, the package for its __init__, None when loose."""
    if name == root:
        return root
    parts = name.split(".")
    inside = len(parts) > 2 or known.get(name, (None, False))[1]  # a folder may lack an __init__.py
    return parts[1] if inside else None


def allowed(layer: Layer, target: str, root: str) -> bool:
    for entry in layer.may_import:
        if entry == root:  # the package's __init__, not everything in it
            if target == root:
                return True
        elif target == f"{root}.{entry}" or target.startswith(f"{root}.{entry}."):
            return True
    return False


def layer_violations(root_dir: Path, layers: list[Layer]) -> list[str]:
    """Each import that leaves its folder for one its row does not name: ``file:line: why``."""
    known = modules(root_dir)
    root = root_dir.name
    by_folder = {layer.folder: layer for layer in layers}
    out = []
    for name, (path, is_package) in sorted(known.items()):
        source = folder_of(name, known, root)
        layer = by_folder.get(source)
        if layer is None:
            continue  # table_problems names it
        for statement in import_statements(name, path, is_package, known):
            for target in sorted(statement.targets):
                if folder_of(target, known, root) == source or allowed(layer, target, root):
                    continue
                rule = ", ".join(f"`{e}`" for e in layer.may_import) or "nothing of the package"
                out.append(f"{path.relative_to(root_dir.parent)}:{statement.line}: {name} imports {target}"
                           f"{' (deferred)' if statement.deferred else ''}, but row `{source}` may import only {rule}")
    return out


def folder_graph(root_dir: Path) -> dict[str, set[str]]:
    known = modules(root_dir)
    root = root_dir.name
    graph: dict[str, set[str]] = {}
    for name, targets in import_graph(root_dir, deferred=True).items():
        source = folder_of(name, known, root) or name
        graph.setdefault(source, set()).update({folder_of(t, known, root) or t for t in targets} - {source})
    for targets in list(graph.values()):
        for t in targets:
            graph.setdefault(t, set())
    return graph


def private_imports(root_dir: Path) -> list[str]:
    """Each use of a private name (``_name``) of a module in another folder: taken by ``from m
    import _name`` or reached as ``m._name`` through an imported module."""
    known = modules(root_dir)
    root = root_dir.name
    out = []
    for name, (path, is_package) in sorted(known.items()):
        source = folder_of(name, known, root) or name
        where = path.relative_to(root_dir.parent)
        for statement in import_statements(name, path, is_package, known):
            for module, private in statement.private:
                if (folder_of(module, known, root) or module) != source:
                    out.append(f"{where}:{statement.line}: {name} imports {module}.{private}")
        tree = ast.parse(path.read_text(), filename=str(path))
        bound = _module_names(tree, name, is_package, known)
        for node, _ in _walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                module = _dotted(node.value, bound)
                if module in known and (folder_of(module, known, root) or module) != source:
                    out.append(f"{where}:{node.lineno}: {name} uses {module}.{node.attr}")
    return out


def _module_names(tree: ast.AST, name: str, is_package: bool, known: dict) -> dict[str, str]:
    """Local name -> package module, for every name an import binds to a module."""
    package = name if is_package else name.rpartition(".")[0]
    bound = {}
    for node, _ in _walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in known:
                    bound[a.asname] = a.name
                elif not a.asname:
                    bound[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            for a in node.names:
                if f"{base}.{a.name}" in known:
                    bound[a.asname or a.name] = f"{base}.{a.name}"
    return bound


def _dotted(node: ast.AST, bound: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, bound)
        return f"{base}.{node.attr}" if base else None
    return None


def long_module_reasons(text: str) -> dict[str, str]:
    """ARCHITECTURE.md's "Long modules" list: path inside the package -> the one-line reason."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^- `([^`]+)`[:\s—-]*(.*)$",
                                                                    _section(text, "Long modules"), re.M)}


def long_modules(root_dir: Path, reasons: dict[str, str], limit: int = MAX_LINES) -> list[str]:
    """A module over ``limit`` lines without a reason, and a reason for a module no longer that long."""
    out = []
    sizes = {str(p.relative_to(root_dir)): len(p.read_text().splitlines()) for p, _ in modules(root_dir).values()}
    for rel, lines in sorted(sizes.items()):
        if lines > limit and not reasons.get(rel):
            out.append(f"{rel} has {lines} lines (over {limit}): split it or say why in ARCHITECTURE.md's Long modules")
    for rel in sorted(r for r in reasons if ": " not in r):  # "path: function" entries are functions
        if sizes.get(rel, 0) <= limit:
            out.append(f"ARCHITECTURE.md's Long modules names {rel}, which is not over {limit} lines: drop the entry")
    return out


MAX_FUNCTION_LINES = 80


def function_lengths(root_dir: Path) -> dict[str, int]:
    """``path: Qualified.name`` -> lines of its body, its docstring left out (the docstring says
    why; the body is what a reader follows), for every function of the package."""
    out = {}
    for path, _ in modules(root_dir).values():
        rel = str(path.relative_to(root_dir))

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    body = child.body
                    documented = (len(body) > 1 and isinstance(body[0], ast.Expr)
                                  and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str))
                    out[f"{rel}: {prefix}{child.name}"] = child.end_lineno - body[1 if documented else 0].lineno + 1
                    visit(child, f"{prefix}{child.name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")

        visit(ast.parse(path.read_text()), "")
    return out


def long_functions(lengths: dict[str, int], reasons: dict[str, str], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """A function over ``limit`` lines without a reason, and a reason for one no longer that long."""
    out = [f"{name} has {n} lines (over {limit}): split it or say why in ARCHITECTURE.md's Long modules"
           for name, n in sorted(lengths.items()) if n > limit and not reasons.get(name)]
    out += [f"ARCHITECTURE.md's Long modules names {name}, which is not over {limit} lines: drop the entry"
            for name in sorted(reasons) if ": " in name and lengths.get(name, 0) <= limit]
    return out


# ---------------------------------------------------------------------- the checks themselves


ADAPTER_FOLDERS = ("cli", "operators", "sensors")
MAX_ADAPTER_LINES = 150
# Modules of those folders that hold what the adapters share rather than an action of their own;
# they too may hold no catalog transaction, but they are not held to the adapters' length.
ADAPTER_SUPPORT = {
    "cli/base.py": "the command classes, the environment and the refusal line every command shares",
    "cli/output.py": "how every listing and report is printed, as a table or JSON",
    "cli/params.py": "the option types: every value checked before a command runs",
    "operators/base.py": "the spark-submit run every operator inherits: its hook, conf and jars",
}
TRANSACTION_CALLS = {"tx", "atomic", "begin", "connect", "sessionmaker", "Session"}


def adapter_modules(root_dir: Path) -> list[Path]:
    """The modules that turn a user's call (a command, a task, an HTTP request) into ``jobs/`` calls."""
    found = [p for folder in ADAPTER_FOLDERS for p in sorted((root_dir / folder).glob("*.py"))]
    return found + sorted((root_dir / "plugins").glob("routes_*.py"))


def thick_adapters(root_dir: Path, support: dict[str, str], limit: int = MAX_ADAPTER_LINES) -> list[str]:
    """Adapters over ``limit`` lines, and any that opens a catalog transaction of its own."""
    problems = []
    for path in adapter_modules(root_dir):
        rel = path.relative_to(root_dir).as_posix()
        text = path.read_text()
        n = len(text.splitlines())
        if n > limit and rel not in support:
            problems.append(f"{rel}: {n} lines, over {limit}: move what it decides into jobs/ (or split it)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if name in TRANSACTION_CALLS:
                    problems.append(f"{rel}:{node.lineno}: {name}(): a transaction of its own; call a jobs/ function")
    return problems


def test_the_check_finds_a_long_adapter_and_one_with_a_transaction(tmp_path):
    root = _write(tmp_path, {"pkg/cli/thin.py": "def run(catalog):\n    return catalog.tables.get('t')\n",
                             "pkg/cli/long.py": "x = 1\n" * 151,
                             "pkg/cli/tx.py": "def run(catalog):\n    with catalog.atomic('table.alter', 't'):\n        pass\n",
                             "pkg/plugins/routes_x.py": "def f(db):\n    db.tx(lambda s: s)\n",
                             "pkg/plugins/page.py": "def f(db):\n    db.tx(lambda s: s)\n"})
    assert thick_adapters(root, {}) == [
        "cli/long.py: 151 lines, over 150: move what it decides into jobs/ (or split it)",
        "cli/tx.py:2: atomic(): a transaction of its own; call a jobs/ function",
        "plugins/routes_x.py:2: tx(): a transaction of its own; call a jobs/ function"]
    assert thick_adapters(root, {"cli/long.py": "why"})[0].startswith("cli/tx.py")


def test_adapters_are_thin_and_open_no_transaction():
    assert not thick_adapters(PACKAGE, ADAPTER_SUPPORT), "\n".join(thick_adapters(PACKAGE, ADAPTER_SUPPORT))


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root / "pkg"


def test_the_check_finds_a_deferred_cycle_like_the_old_api_and_page(tmp_path):
    """api imported page inside a route and page imported api inside render_page."""
    root = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/plugins/__init__.py": "PREFIX = '/x'\n",
        "pkg/plugins/api.py": "from pkg.plugins import auth\n\ndef route():\n    from pkg.plugins.page import render\n",
        "pkg/plugins/page.py": "def render():\n    from .api import GROUP_REF\n",
        "pkg/plugins/auth.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.plugins import api\n",
    })
    assert cycles(import_graph(root)) == []
    assert cycles(import_graph(root, deferred=True)) == [["pkg.plugins.api", "pkg.plugins.page", "pkg.plugins.api"]]


def test_the_check_finds_an_import_time_cycle_through_a_package(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "from pkg.a import A\n",
        "pkg/a.py": "from .b import B\nA = 1\n",
        "pkg/b.py": "from pkg import A\nB = 2\n",
        "pkg/c.py": "import pkg.a\n",
        "pkg/d.py": "from pkg import c\n",  # a submodule: needs pkg.c, not pkg
    })
    graph = import_graph(root)
    assert graph["pkg.b"] == {"pkg"} and graph["pkg.d"] == {"pkg.c"} and graph["pkg.a"] == {"pkg.b"}
    assert cycles(graph) == [["pkg", "pkg.a", "pkg.b", "pkg"]]


TABLE = """# A package

## Layers

| folder | what lives there | may import |
| --- | --- | --- |
| `pkg` | the version | — |
| `low/` | helpers | — |
| `mid/` | the middle | `low` |
| `top/` | the surface | `pkg`, `mid.b` |

## Next
"""


def test_the_table_is_read_bottom_first_and_must_name_only_rows_below(tmp_path):
    layers = layer_table(TABLE)
    assert layers == [Layer("pkg", ()), Layer("low", ()), Layer("mid", ("low",)), Layer("top", ("pkg", "mid.b"))]
    root = _write(tmp_path, {"pkg/__init__.py": "", "pkg/low/__init__.py": "", "pkg/mid/__init__.py": "",
                             "pkg/mid/b.py": "", "pkg/top/__init__.py": "", "pkg/loose.py": ""})
    known = modules(root)
    assert table_problems(layers, known, "pkg") == [
        "pkg.loose is a loose module: give it a folder (only the package's __init__ may stay)"]
    upside_down = [Layer("pkg", ()), Layer("low", ("mid",)), Layer("mid", ("low",)), Layer("top", ("mid.c",))]
    assert table_problems(upside_down, known, "pkg")[:2] == [
        "row `low` may import `mid`, which is not a row above it in the table",
        "row `top` may import `mid.c`, which is no module of the package"]


def test_the_check_names_file_line_and_rule_of_an_import_the_table_does_not_allow(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "import os\n\ndef f():\n    from pkg.mid import b\n",  # deferred, still counted
        "pkg/mid/__init__.py": "",
        "pkg/mid/b.py": "from pkg.low import a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top import c\n",
        "pkg/mid/d.py": "from pkg.mid import b\n",  # same folder: always fine
        "pkg/top/__init__.py": "",
        "pkg/top/c.py": "from pkg.mid import b, d\nimport pkg\n",
    })
    assert layer_violations(root, layer_table(TABLE)) == [
        "pkg/low/a.py:4: pkg.low.a imports pkg.mid.b (deferred), but row `low` may import only nothing of the package",
        "pkg/top/c.py:1: pkg.top.c imports pkg.mid.d, but row `top` may import only `pkg`, `mid.b`",
    ]
    assert cycles(folder_graph(root)) == [["low", "mid", "low"]]


def test_the_check_finds_private_names_across_folders_only(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "_x = 1\n__all__ = []\n",
        "pkg/low/b.py": "from pkg.low.a import _x\n",  # same folder: its own business
        "pkg/top/__init__.py": "",
        "pkg/top/c.py": ("from pkg.low.a import __all__\nfrom pkg.low import a\nimport pkg.low.a as alias\n\n"
                         "def f():\n    from pkg.low.a import _x\n    return a._x + alias._x\n"),
    })
    assert private_imports(root) == [
        "pkg/top/c.py:6: pkg.top.c imports pkg.low.a._x",
        "pkg/top/c.py:7: pkg.top.c uses pkg.low.a._x",
        "pkg/top/c.py:7: pkg.top.c uses pkg.low.a._x",
    ]


def test_the_check_wants_a_reason_for_each_long_module_and_no_stale_one(tmp_path):
    root = _write(tmp_path, {"pkg/__init__.py": "", "pkg/low/__init__.py": "", "pkg/low/a.py": "x = 1\n" * 4,
                             "pkg/low/b.py": "x = 1\n" * 4, "pkg/low/c.py": "x = 1\n"})
    text = "## Long modules\n\n- `low/a.py`: one loop, read top to bottom\n- `low/c.py`: grew once\n"
    assert long_module_reasons(text) == {"low/a.py": "one loop, read top to bottom", "low/c.py": "grew once"}
    assert long_modules(root, long_module_reasons(text), limit=3) == [
        "low/b.py has 4 lines (over 3): split it or say why in ARCHITECTURE.md's Long modules",
        "ARCHITECTURE.md's Long modules names low/c.py, which is not over 3 lines: drop the entry",
    ]


# ---------------------------------------------------------------------- the package


LAYERS = layer_table(ARCHITECTURE.read_text())


def test_architecture_md_layer_table_is_layers_with_a_row_per_folder():
    problems = table_problems(LAYERS, modules(PACKAGE), PACKAGE.name)
    assert not problems, "\n".join(problems)


def test_every_import_is_allowed_by_the_layer_table():
    found = layer_violations(PACKAGE, LAYERS)
    assert not found, "imports ARCHITECTURE.md's Layers table does not allow:\n" + "\n".join(found)


def test_the_package_has_no_folder_cycles():
    found = cycles(folder_graph(PACKAGE))
    assert not found, _explain(found)


def test_the_package_has_no_module_cycles_even_through_deferred_imports():
    found = cycles(import_graph(PACKAGE, deferred=True))
    assert not found, _explain(found)


def test_core_needs_only_the_standard_library():
    """core is the bottom every layer and the Spark executors import: nothing to install for it."""
    core = {n: v for n, v in modules(PACKAGE).items() if n.startswith(f"{PACKAGE.name}.core")}
    outside = set()
    for name, (path, _) in core.items():
        for node, _ in _walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                outside |= {(name, a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                outside.add((name, node.module or ""))
    found = sorted((n, m) for n, m in outside
                   if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != PACKAGE.name)
    assert not found, found


def test_no_module_uses_a_private_name_of_another_folder():
    found = private_imports(PACKAGE)
    assert not found, "private names used across folders (make them public or move them):\n" + "\n".join(found)


def test_long_functions_are_counted_without_their_docstring_and_need_a_reason(tmp_path):
    root = _write(tmp_path, {"pkg/__init__.py": "", "pkg/low/__init__.py": "",
                             "pkg/low/a.py": 'def f():\n    """Why."""\n    x = 1\n    return x\n\n\n'
                                             'class C:\n    def g(self):\n        a = 1\n        b = 2\n        return a + b\n'})
    lengths = function_lengths(root)
    assert lengths == {"low/a.py: f": 2, "low/a.py: C.g": 3}
    assert long_functions(lengths, {"low/a.py: f": "gone"}, limit=2) == [
        "low/a.py: C.g has 3 lines (over 2): split it or say why in ARCHITECTURE.md's Long modules",
        "ARCHITECTURE.md's Long modules names low/a.py: f, which is not over 2 lines: drop the entry",
    ]


def test_no_function_is_long_without_a_reason():
    found = long_functions(function_lengths(PACKAGE), long_module_reasons(ARCHITECTURE.read_text()))
    assert not found, "\n".join(found)


def test_no_module_is_long_without_a_reason():
    found = long_modules(PACKAGE, long_module_reasons(ARCHITECTURE.read_text()))
    assert not found, "\n".join(found)


PLUGINS = sorted(n for n in modules(PACKAGE) if n == "airflow_colocate.plugins" or n.startswith("airflow_colocate.plugins."))


def test_only_the_plugin_builds_the_app():
    """The page and what it shows never reach for the app, so the app can import them."""
    graph = import_graph(PACKAGE, deferred=True)
    assert {n for n in PLUGINS if "airflow_colocate.plugins.app" in graph[n]} == {"airflow_colocate.plugins.plugin"}


def _fresh(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow_home"), "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("module", PLUGINS)
def test_each_plugin_module_imports_alone_in_a_fresh_interpreter(module, tmp_path):
    run = _fresh(f"import {module}", tmp_path)
    assert run.returncode == 0, f"import {module} failed:\n{run.stderr[-3000:]}"


def test_loading_the_plugin_leaves_the_app_unbuilt(tmp_path):
    """Every Airflow process loads the plugin, only the API server serves the app; and every task
    builds its "Colocation" link from core.web, so the plugin package itself stays light."""
    run = _fresh("import sys\n"
                 "import airflow_colocate.plugins\n"
                 "from airflow_colocate.core.web import PREFIX\n"
                 "light = sorted(m for m in sys.modules if m.startswith(('airflow_colocate.plugins.', 'fastapi')))\n"
                 "assert PREFIX == '/api/colocate' and light == [], light\n"
                 "from airflow_colocate.plugins.plugin import ColocatePlugin, app\n"
                 "assert 'airflow_colocate.plugins.app' not in sys.modules\n"
                 "assert ColocatePlugin.fastapi_apps[0]['app'] is app and app._app is None\n"
                 "from airflow_colocate.operators.links import page_url\n"
                 "assert 'airflow_colocate.plugins.app' not in sys.modules\n"
                 "assert page_url('1.1').endswith('/api/colocate/ui?group=1.1'), page_url('1.1')\n", tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
