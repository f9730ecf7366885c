"""``claude_trio.protocol`` is sans-I/O: importing every module of it never imports trio.

The check runs in a fresh interpreter, the normal way a user imports it: the front door
(``claude_trio/__init__.py``) loads its trio-based names lazily, so the only trio import that could
appear is one of protocol's own (or of the front door, which must stay lazy).
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import textwrap

import claude_trio.protocol


def protocol_modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages(
            claude_trio.protocol.__path__, prefix="claude_trio.protocol."
        )
    )


def test_the_configuration_modules_are_found() -> None:
    modules = set(protocol_modules())
    for name in ("config.models", "config.params", "config.options", "config.resume",
                 "session.mapper", "session.stop", "fanout.wire", "cluster.records", "errors"):
        assert f"claude_trio.protocol.{name}" in modules


def run_isolated(modules: list[str]) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(
        f"""
        import importlib, sys
        for name in {modules!r}:
            importlib.import_module(name)
        loaded = sorted(m for m in sys.modules if m == "trio" or m.startswith("trio."))
        print(len({modules!r}), "imported")
        if loaded:
            raise SystemExit("trio was imported: " + ", ".join(loaded))
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )


def test_importing_all_of_protocol_does_not_import_trio() -> None:
    modules = ["claude_trio.protocol", *protocol_modules()]
    proc = run_isolated(modules)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(modules)} imported" in proc.stdout


def test_the_isolated_check_does_catch_a_trio_import() -> None:
    # Guards the guard: the same harness fails when something in the list imports trio.
    proc = run_isolated(["claude_trio.protocol.config.models", "trio"])
    assert proc.returncode != 0
    assert "trio was imported" in proc.stderr
