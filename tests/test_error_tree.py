"""One exception tree: every error claude-trio defines derives from ``ClaudeTrioError``, lives in
one module (``claude_trio.errors``; the testing kit's in ``claude_trio.testing``) and is drawn,
with its parent and its built-in bases, in the tree of ``claude_trio.errors``' docstring."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import claude_trio
import claude_trio.testing
from claude_trio import errors

ROOT = Path(__file__).resolve().parent.parent
_LINE = re.compile(r"^((?:│   |    )*)(├── |└── )?(\w+)(?: \(([\w, ]+)\))?")


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the package, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(claude_trio.__path__, "claude_trio."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and not issubclass(value, Warning)
                and value.__module__ == module.__name__
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def drawn_tree() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each class drawn in ``claude_trio.errors``' docstring -> (its parent, the built-in
    bases drawn in parentheses)."""
    drawn: dict[str, tuple[str, tuple[str, ...]]] = {}
    for block in re.findall(r"::\n\n((?:    .*\n)+)", errors.__doc__ or ""):
        stack: list[str] = []
        for line in block.splitlines():
            match = _LINE.match(line[4:])
            assert match is not None, line
            prefix, branch, name, extra = match.groups()
            depth = len(prefix) // 4 + (1 if branch else 0)
            del stack[depth:]
            if depth:
                parent = stack[-1]
                bases = tuple(b.strip() for b in extra.split(",")) if extra else ()
                assert name not in drawn, f"{name} is drawn twice"
                drawn[name] = (parent, bases)
            stack.append(name)
    return drawn


def test_the_drawing_is_read() -> None:
    drawn = drawn_tree()
    assert drawn["UnknownModelError"] == ("InvalidParamsError", ())
    assert drawn["UnknownSessionError"] == ("ClaudeTrioError", ("KeyError",))
    assert drawn["ContractViolationError"] == ("ClaudeTrioError", ("AssertionError",))


def test_every_exception_of_the_package_is_a_claude_trio_error_in_one_module() -> None:
    found = exception_classes()
    assert "claude_trio.client.GatewayError" not in found  # defined once, in the errors module
    assert "claude_trio.protocol.errors.GatewayError" in found
    for qualified, cls in found.items():
        if cls.__name__.startswith("_"):
            continue  # private to its module: it never reaches a caller
        assert issubclass(cls, errors.ClaudeTrioError), qualified
        if qualified.startswith("claude_trio.testing."):
            assert getattr(claude_trio.testing, cls.__name__) is cls, qualified
            assert cls.__name__ in claude_trio.testing.__all__, qualified
        else:
            assert cls.__module__ == "claude_trio.protocol.errors", qualified
            assert getattr(errors, cls.__name__) is cls, qualified
            assert cls.__name__ in errors.__all__, qualified


def test_the_drawing_is_the_tree() -> None:
    found = {cls.__name__: cls for cls in exception_classes().values()}
    public = {name for name in found if not name.startswith("_")}
    drawn = drawn_tree()
    assert set(drawn) == public - {"ClaudeTrioError"}
    for name, (parent, extra) in drawn.items():
        bases = found[name].__bases__
        assert bases[0] is found[parent], f"{name} is drawn under {parent}: {bases}"
        assert tuple(base.__name__ for base in bases[1:]) == extra, name


def test_every_name_of_the_errors_module_is_an_error_or_its_code() -> None:
    for name in errors.__all__:
        value = getattr(errors, name)
        assert name == "WireErrorCode" or issubclass(value, errors.ClaudeTrioError), name


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (errors.InvalidParamsError, ValueError),
        (errors.UnknownSessionError, KeyError),
        (errors.BatchFileError, ValueError),
        (errors.HookDecisionError, ValueError),
        (errors.ModelDoubleRunaway, AssertionError),
    ],
)
def test_an_error_that_was_a_builtin_one_still_is(
    cls: type[Exception], builtin: type[Exception]
) -> None:
    assert issubclass(cls, builtin)


ERROR_HOMES = {"claude_trio", "claude_trio.errors", "claude_trio.protocol.errors"}


def _package(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in ("actors", "protocol"):
        parts.insert(0, "claude_trio")
    return ".".join(parts[:-1])


def test_errors_are_imported_from_their_module_only() -> None:
    """Nobody imports an error from a module that used to define it, or that uses it."""
    kit = {
        name
        for name in claude_trio.testing.__all__
        if isinstance(getattr(claude_trio.testing, name), type)
        and issubclass(getattr(claude_trio.testing, name), Exception)
    } - set(errors.__all__)
    stray = []
    for folder in ("actors", "protocol", "claude_trio", "tests", "scripts", "docs/examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.relative_to(ROOT).parts[:2] in (
                ("claude_trio", "actors"),
                ("claude_trio", "protocol"),
            ):
                continue  # the symlinks to actors/ and protocol/
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ImportFrom):
                    continue
                module = node.module or ""
                if node.level:
                    package = _package(path).split(".")
                    package = package[: len(package) - (node.level - 1)]
                    module = ".".join([*package, module] if module else package)
                if not module.startswith("claude_trio"):
                    continue  # another library's error of the same name
                for alias in node.names:
                    if alias.name in errors.__all__ and module not in ERROR_HOMES:
                        stray.append(f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name}")
                    if alias.name in kit and not module.startswith("claude_trio.testing"):
                        stray.append(f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name}")
    assert stray == []


def test_every_error_the_docs_name_is_where_they_say() -> None:
    """README and the client's docstring name errors a user catches: each is a
    ClaudeTrioError importable from ``claude_trio.errors`` (the kit's from
    ``claude_trio.testing``), as README says."""
    import claude_trio.client

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(all `GatewayError`s, in `claude_trio.errors`)" in readme
    named = set(re.findall(r"`(\w+(?:Error|Runaway))`", readme))
    docstring = claude_trio.client.__doc__ or ""
    named |= set(re.findall(r":class:`~?(?:[\w.]*\.)?(\w+Error)`", docstring))
    assert {"GatewayUnavailableError", "ConnectionLostError", "SessionLostError"} <= named
    for name in sorted(named):
        home = errors if hasattr(errors, name) else claude_trio.testing
        assert issubclass(getattr(home, name), errors.ClaudeTrioError), name
        assert name in home.__all__, name
