"""The package's import graph has no cycles, read from the source (AST) so that a cycle fails here
whatever order a process happens to import things in.

Across the package only import-time imports count (module level, not under ``TYPE_CHECKING``):
those are the ones that break with a half-initialised module. Deferred imports inside functions are
a legitimate way to load a heavy or optional module late (the Spark entry's dispatch, the catalog's
lazy facade). The plugin is held to more: its modules form layers, deferred imports included, so
the page can never reach back into the app. Each plugin module must also import on its own in a
fresh interpreter, which is how Airflow's processes meet them.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "airflow_colocate"


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


def imports(name: str, path: Path, is_package: bool, known: dict, *, deferred: bool) -> set[str]:
    """The modules of ``known`` that ``name`` imports; with ``deferred``, also inside functions."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not deferred:
                continue
            if isinstance(child, ast.If) and _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name in known)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(parent + ([base] if base else []))
                submodules = {f"{base}.{a.name}" for a in child.names} & known.keys()
                found.update(submodules)
                # `from pkg import sub` needs only the submodule (Python imports it even while pkg's
                # __init__ is still running); a name defined in pkg needs pkg itself.
                if base in known and len(submodules) < len(child.names):
                    found.add(base)
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    found.discard(name)
    return found


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


# ---------------------------------------------------------------------- the check itself


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


# ---------------------------------------------------------------------- the package


def test_the_package_has_no_import_time_cycles():
    found = cycles(import_graph(PACKAGE))
    assert not found, _explain(found)


PLUGINS = sorted(n for n in modules(PACKAGE) if n == "airflow_colocate.plugins" or n.startswith("airflow_colocate.plugins."))


def test_the_plugin_has_no_cycles_even_through_deferred_imports():
    graph = import_graph(PACKAGE, deferred=True)
    plugin_graph = {n: graph[n] & set(PLUGINS) for n in PLUGINS}
    found = cycles(plugin_graph)
    assert not found, _explain(found)
    # Only the plugin builds the app; the page and what it shows never reach for it.
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
    """Every Airflow process loads the plugin, only the API server serves the app; and links.py
    reads PREFIX from the package in every task, so the package itself stays light."""
    run = _fresh("import sys\n"
                 "import airflow_colocate.plugins as p\n"
                 "light = sorted(m for m in sys.modules if m.startswith(('airflow_colocate.plugins.', 'fastapi')))\n"
                 "assert p.PREFIX == '/api/colocate' and light == [], light\n"
                 "from airflow_colocate.plugins.plugin import ColocatePlugin, app\n"
                 "assert 'airflow_colocate.plugins.app' not in sys.modules\n"
                 "assert ColocatePlugin.fastapi_apps[0]['app'] is app and app._app is None\n"
                 "from airflow_colocate.links import page_url\n"
                 "assert page_url('1.1').endswith('/api/colocate/ui?group=1.1'), page_url('1.1')\n", tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
