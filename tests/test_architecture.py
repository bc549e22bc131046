"""Structure rules of the package: no import cycles between modules nor between packages,
torch-free messages and workers, one import-path resolver."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ml_arl.core.import_path import ImportPathError, is_import_path, resolve, resolve_class, split

PACKAGE = Path(__file__).resolve().parents[1] / "ml_arl"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def import_graph() -> dict[str, set[str]]:
    """module -> the ml_arl modules it imports, anywhere in its file (inside functions and
    TYPE_CHECKING blocks too: a lazy import is still an import)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name and target != "ml_arl":  # ml_arl/__init__ holds the version only
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), plus self-loops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
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
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_every_module_and_known_edges() -> None:
    graph = import_graph()
    assert "ml_arl.training.controller" in graph and "ml_arl.acting.worker_protocol" in graph
    assert "ml_arl.acting.worker_protocol" in graph["ml_arl.acting.env_runner"]
    assert "ml_arl.training.controller" in graph["ml_arl.cli.learn"]  # a lazy import counts


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def package_of(module: str) -> str:
    """The room a module is in: ml_arl.X for every module of subpackage X (at any depth), a
    top-level module (ml_arl.api.train, ml_arl.acting.worker_protocol...) is its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """package -> the packages it imports: an import from any module of ml_arl.a to any module of
    ml_arl.b is an edge a -> b (the module graph's edges, lazy and TYPE_CHECKING imports included)."""
    packages: dict[str, set[str]] = {package_of(m): set() for m in graph}
    for module, targets in graph.items():
        for target in targets:
            if package_of(target) != package_of(module):
                packages[package_of(module)].add(package_of(target))
    return packages


def test_the_package_graph_folds_modules_into_their_packages() -> None:
    assert package_of("ml_arl.envs.backends.pipelined") == "ml_arl.envs" and package_of("ml_arl.api.train") == "ml_arl.api"
    assert package_graph({"ml_arl.a.x": {"ml_arl.a.y", "ml_arl.b.z"}, "ml_arl.a.y": set(), "ml_arl.b.z": {"ml_arl.c"},
                          "ml_arl.c": set()}) == {"ml_arl.a": {"ml_arl.b"}, "ml_arl.b": {"ml_arl.c"}, "ml_arl.c": set()}
    packages = package_graph(import_graph())
    assert "ml_arl.training" in packages["ml_arl.cli"]  # cli.learn's lazy import of training.controller
    assert "ml_arl.envs" not in packages["ml_arl.trainers"]


def test_no_package_imports_one_that_imports_it_back() -> None:
    """The rooms form layers: no chain of imports leads from a package back into itself (e.g.
    run -> trackers -> report -> study -> cli -> run). Each cycle is named with the module imports
    that close it."""
    graph = import_graph()
    found = cycles(package_graph(graph))
    explained = []
    for component in found:
        edges = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                       if package_of(m) in component and package_of(t) in component and package_of(m) != package_of(t))
        explained.append(" <-> ".join(component) + " (" + "; ".join(edges) + ")")
    assert not found, "package cycles: " + " | ".join(explained)


def rooms_in_the_map() -> list[str]:
    """The rooms docs/ARCHITECTURE.md lists under "The map", in its order ("- `training/`: ..." is ml_arl.training)."""
    text = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## The map", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"^- `([a-z_]+)(?:/|\.py)`:", section, flags=re.MULTILINE)
    return [f"ml_arl.{name}" for name in found]


def test_the_architecture_map_lists_every_room_above_what_it_imports() -> None:
    packages = package_graph(import_graph())
    listed = rooms_in_the_map()
    rooms = sorted(set(packages) - {"ml_arl"})  # ml_arl/__init__.py is said in a sentence below the list
    assert sorted(listed) == rooms, {"missing": sorted(set(rooms) - set(listed)), "not a room": sorted(set(listed) - set(rooms))}
    place = {room: i for i, room in enumerate(listed)}
    upward = [f"{room} -> {target}" for room in listed for target in sorted(packages[room])
              if target in place and place[target] < place[room]]
    assert not upward, f"docs/ARCHITECTURE.md lists these rooms below a room they import: {upward}"


def test_messages_and_the_acting_side_are_torch_free() -> None:
    """What workers import (every module of ml_arl.acting; the Ray actor needs ray) must not pull in
    torch (fast start, small memory)."""
    code = (
        "import sys, pkgutil, importlib, ml_arl.acting; "
        "[importlib.import_module('ml_arl.acting.' + m.name) for m in pkgutil.iter_modules(ml_arl.acting.__path__) "
        "if m.name != 'ray_actor']; "
        "import ml_arl.core.experience, ml_arl.core.actor_weights, ml_arl.envs.backends.subprocess_env_manager; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_import_path_resolver() -> None:
    assert split("pkg.mod:Name.attr") == ("pkg.mod", "Name.attr")
    assert resolve("ml_arl.core.import_path:resolve") is resolve
    assert resolve("collections:OrderedDict.fromkeys") is not None
    assert is_import_path("a.b:C") and not is_import_path("a/b:C") and not is_import_path("ppo")
    with pytest.raises(ImportPathError, match="cannot import module 'no_such_module_here'"):
        resolve("no_such_module_here:X")
    with pytest.raises(ImportPathError, match="has no attribute 'Missing'"):
        resolve("ml_arl.core.import_path:Missing")
    with pytest.raises(ImportPathError, match="not an import path"):
        resolve("not a path")
    with pytest.raises(ImportPathError, match="is not a subclass of"):
        resolve_class("ml_arl.core.import_path:split", Exception)
    assert resolve_class("ml_arl.core.import_path:ImportPathError", ValueError) is ImportPathError


def test_one_resolver_for_import_paths() -> None:
    """Only ml_arl.core.import_path calls importlib.import_module."""
    users = sorted(
        name for name, path in _modules().items()
        if "import_module(" in path.read_text(encoding="utf-8") and name != "ml_arl.core.import_path"
    )
    assert users == [], users


MAX_MODULE_LINES = 500  # issue 24: a module has one job
MAX_CLASS_LINES = 300  # a class that grows past this is split first


def test_no_module_or_class_over_its_size_limit() -> None:
    """Every module of ml_arl/ (generated protobuf code aside) stays within 500 lines and every
    class within 300: the limits docs/development.md gives."""
    too_long = []
    for name, path in _modules().items():
        if ".protocol.communicator_objects" in name:
            continue  # generated by protoc (make protos)
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    too_long.append(f"{name}.{node.name}: {lines} lines")
    assert not too_long, too_long
