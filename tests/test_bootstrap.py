"""The setup scripts where apt-get is missing: ``scripts/demo`` sets up only what the demo needs
and starts; ``scripts/bootstrap --test`` says what the tests will miss and goes on.

Each runs on a copy of the scripts in a folder whose ``.venv`` is already set up (a stand-in
``python`` and ``claude-trio``), with a ``PATH`` that holds a few basic programs and none of
``apt-get``, ``redis-server``, ``bwrap`` or ``socat``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
BASICS = ("bash", "sh", "dirname", "sha256sum", "cut", "cat", "uname", "id")
ABSENT = ("apt-get", "redis-server", "bwrap", "socat", "sudo", "chromium", "chromedriver")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for name in ("bootstrap", "ensure-redis", "ensure-chromium", "demo"):
        shutil.copy(SCRIPTS / name, root / "scripts" / name)
    pyproject = root / "pyproject.toml"
    pyproject.write_text('[project]\nname = "claude-trio"\n')
    venv = root / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".claude-trio-bootstrap").write_text(
        hashlib.sha256(pyproject.read_bytes()).hexdigest() + "\n"
    )
    for name, body in (("python", "exit 0"), ("claude-trio", 'echo "claude-trio $*"')):
        program = venv / "bin" / name
        program.write_text(f"#!/bin/sh\n{body}\n")
        program.chmod(0o755)
    return root


@pytest.fixture
def bare_path(tmp_path: Path) -> str:
    """A PATH with the basic programs the scripts use, and no package manager."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in BASICS:
        found = shutil.which(name)
        assert found is not None, name
        (folder / name).symlink_to(found)
    assert not any(shutil.which(name, path=str(folder)) for name in ABSENT)
    return str(folder)


def run(checkout: Path, bare_path: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("bash") or "bash", *argv],
        cwd=checkout,
        env={"PATH": bare_path, "HOME": os.environ.get("HOME", "/")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_demo_starts_where_apt_get_is_missing(checkout: Path, bare_path: str) -> None:
    done = run(checkout, bare_path, "scripts/demo", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "claude-trio demo --json\n"
    assert "apt-get" not in done.stderr
    assert "redis" not in done.stderr


def test_the_test_setup_says_what_it_cannot_install_and_goes_on(
    checkout: Path, bare_path: str
) -> None:
    done = run(checkout, bare_path, "scripts/bootstrap", "--test")
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "redis-server is not installed and there is no apt-get here" in said
    assert "bubblewrap (bwrap) or socat is missing" in said
    assert "chromium or chromedriver is not installed and there is no apt-get here" in said
    assert "chromium is missing: the web console's" in said


def test_an_unknown_bootstrap_argument_is_refused(checkout: Path, bare_path: str) -> None:
    done = run(checkout, bare_path, "scripts/bootstrap", "--tests")
    assert done.returncode == 2
    assert "unknown argument --tests" in done.stderr
