"""No import cycles between claude-trio's modules (type-only imports count too).

One exception: inside one package, a private module (``_name``) may name its owner's class for
its annotations only (``if TYPE_CHECKING:``), as the fake CLI's parts do with the process they
belong to: that is one object graph split in files, not two modules depending on each other.

A cycle means two modules that cannot be understood, tested or changed apart; every one that
ever appeared (the driver and the pool, the command and its runner) was broken by moving the
shared piece into a module of its own. The graph is read from the source (``ast``); a lazy
``importlib.import_module("...")`` with a literal name is an edge like any other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import claude_trio

ROOT = Path(claude_trio.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = ["claude_trio", *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for folder in (ROOT, ROOT / "actors", ROOT / "protocol"):
        for path in folder.rglob("*.py"):
            found[_module_name(folder / path.relative_to(folder))] = path
    return found


def _type_only_nodes(tree: ast.Module) -> set[int]:
    """The ids of import nodes under ``if TYPE_CHECKING:``."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(child) for child in ast.walk(node))
    return found


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    type_only = _type_only_nodes(tree)
    private = module.rpartition(".")[2].startswith("_")
    out: set[str] = set()
    for node in ast.walk(tree):
        if private and id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "importlib.import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_the_graph_is_read_from_every_layer() -> None:
    modules = _modules()
    assert {
        "claude_trio.actors.session.open",
        "claude_trio.protocol.session.mapper",
        "claude_trio.cli",
    } <= set(modules)


def test_no_module_imports_itself_through_others() -> None:
    modules = _modules()
    known = set(modules)
    graph = {name: _imports(name, path, known) for name, path in modules.items()}
    # Package __init__ modules re-export their own submodules: an edge into the package
    # itself is not a dependency of the submodule.
    for name in graph:
        graph[name] = {dep for dep in graph[name] if not name.startswith(dep + ".")}
    assert _cycles(graph) == []


def test_the_product_never_imports_its_testing_kit() -> None:
    # What both need (the offline model, the hermetic environment) lives in the product,
    # claude_trio.offline, and the kit re-exports it: `serve --offline` must not run on a
    # test module, and the kit may change for its tests' sake alone.
    modules = _modules()
    known = set(modules)
    kit = {name for name in modules if name.startswith("claude_trio.testing")}
    assert "claude_trio.offline.model_double" in known
    # The scan sees the kit's own imports of itself (relative ones included):
    assert kit & _imports("claude_trio.testing", modules["claude_trio.testing"], known)
    offenders = {
        name: sorted(_imports(name, path, known) & kit)
        for name, path in modules.items()
        if name not in kit
    }
    assert {name: found for name, found in offenders.items() if found} == {}
