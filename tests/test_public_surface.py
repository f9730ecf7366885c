"""The public surface: a small front door written once, and every name the docs use importable
where they say.

``claude_trio/__init__.py`` lists its names once, as the imports under ``TYPE_CHECKING``; the
lazy loader reads that block at run time. These tests pin that the block, ``__all__`` and what
each name loads are one and the same; that each name comes from a named public module; and that
the README, ARCHITECTURE.md, docs/*.md and docs/examples name nothing that does not import.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import claude_trio

ROOT = Path(__file__).resolve().parent.parent
FRONT_DOOR = ROOT / "claude_trio" / "__init__.py"
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))

#: The named public modules, each a thin face over the implementation modules.
PUBLIC_MODULES = (
    "claude_trio.session",
    "claude_trio.params",
    "claude_trio.events",
    "claude_trio.errors",
    "claude_trio.streams",
    "claude_trio.fleet",
    "claude_trio.gateway",
    "claude_trio.client",
    "claude_trio.cluster",
    "claude_trio.batch",
    "claude_trio.skills",
    "claude_trio.offline",
)


def declared() -> list[tuple[str, str, str | None]]:
    """(module, name, alias) for every import of the front door's ``TYPE_CHECKING`` block."""
    tree = ast.parse(FRONT_DOOR.read_text(encoding="utf-8"))
    [block] = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    found = []
    for statement in block.body:
        assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
        assert statement.module is not None
        found += [(statement.module, alias.name, alias.asname) for alias in statement.names]
    return found


def test_all_is_the_declared_list_in_its_order() -> None:
    names = [name for _module, name, _alias in declared()]
    assert claude_trio.__all__ == names
    assert len(set(names)) == len(names)


def test_every_declared_name_is_an_explicit_reexport_of_a_public_module() -> None:
    for module, name, alias in declared():
        assert alias == name, f"{name}: write `{name} as {name}` (mypy's explicit re-export)"
        assert module in PUBLIC_MODULES, f"{name} comes from {module}, not a public module"
        assert name in importlib.import_module(module).__all__, f"{module} does not list {name}"


def test_every_name_loads_what_its_module_holds() -> None:
    for module, name, _alias in declared():
        assert getattr(claude_trio, name) is getattr(importlib.import_module(module), name)


def test_the_front_door_stays_small() -> None:
    # What a user of sessions, fleets, the client and the helpers needs; the rest is in the
    # public modules. A name added here is one every newcomer reads.
    assert 50 <= len(claude_trio.__all__) <= 75


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Sesion'"):
        _ = claude_trio.Sesion  # type: ignore[attr-defined]


def test_star_import_and_dir_give_the_list() -> None:
    namespace: dict[str, object] = {}
    exec("from claude_trio import *", namespace)
    assert set(claude_trio.__all__) <= set(namespace)
    assert set(claude_trio.__all__) <= set(dir(claude_trio))


def test_the_public_modules_list_only_what_they_hold() -> None:
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            assert hasattr(module, name), f"{module_name}.{name}"


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, check=False
    )


def test_the_front_door_and_the_sans_io_faces_import_no_trio() -> None:
    proc = _run(
        """
        import sys
        import claude_trio, claude_trio.errors, claude_trio.events, claude_trio.params
        names = claude_trio.__all__
        assert claude_trio.ExecuteParams and claude_trio.TextDelta and claude_trio.Usage
        loaded = sorted(m for m in sys.modules if m == "trio" or m.startswith("trio."))
        print(len(names), "names; trio modules:", loaded)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("trio modules: []")


def test_a_session_name_loads_on_first_use() -> None:
    proc = _run(
        """
        import sys
        import claude_trio
        assert "claude_trio.actors.session.open" not in sys.modules
        claude_trio.open_session
        assert "claude_trio.actors.session.open" in sys.modules
        """
    )
    assert proc.returncode == 0, proc.stderr


# -- the names the documentation uses --------------------------------------------------------

_FROM_IMPORT = re.compile(r"\bfrom (claude_trio(?:\.\w+)*) import (\([^)]*\)|[\w, ]+)")
_DOTTED = re.compile(r"(?<![\w/.])claude_trio(?:\.\w+)+")


def _resolves(dotted: str) -> bool:
    """Whether ``a.b.c`` is a module, or an attribute chain of the longest module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(value, attribute):
                return False
            value = getattr(value, attribute)
        return True
    return False


def references(text: str) -> tuple[set[tuple[str, str]], set[str]]:
    """The ``from claude_trio... import X`` pairs and the ``claude_trio.x.y`` names in a text
    (markdown or Python: code blocks, inline code and prose alike)."""
    imports = set()
    for module, names in _FROM_IMPORT.findall(text):
        for name in re.sub(r"#[^\n]*", "", names.strip("()")).split(","):
            name = name.split(" as ")[0].strip()
            if name:
                imports.add((module, name))
    return imports, set(_DOTTED.findall(text))


DOCUMENTS = [*PAGES, *EXAMPLES]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_name_the_docs_use_imports_where_they_say(path: Path) -> None:
    imports, dotted = references(path.read_text(encoding="utf-8"))
    missing = [
        f"from {module} import {name}"
        for module, name in sorted(imports)
        if not hasattr(importlib.import_module(module), name)
        and not _resolves(f"{module}.{name}")
    ]
    missing += sorted(name for name in dotted if not _resolves(name))
    assert missing == []


def test_the_docs_scan_finds_imports_and_names() -> None:
    imports, dotted = references(
        "```python\nfrom claude_trio import (\n    ExecuteParams,  # the params\n    Nope,\n)\n```"
        " and `claude_trio.testing.replay()`, `claude_trio.errors`. See claude_trio/errors.py."
    )
    assert imports == {("claude_trio", "ExecuteParams"), ("claude_trio", "Nope")}
    assert dotted == {"claude_trio.testing.replay", "claude_trio.errors"}
    assert not _resolves("claude_trio.testing.nope")
    assert _resolves("claude_trio.testing.replay")


def test_the_docs_name_the_names_they_are_about() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # Used in the README's examples and tables with no module named: the front door has them.
    for name in ("ImageInput", "SubagentDefinition", "redact_secrets", "ExecuteParams"):
        assert name in readme
        assert name in claude_trio.__all__
    assert "adapter_ready" in readme
    assert "AdapterReady" in claude_trio.__all__
