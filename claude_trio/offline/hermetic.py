"""The environment that runs the real bundled ``claude`` CLI with no key and no network.

Pass :func:`hermetic_env` as ``ClaudeAgentOptions.env``; point it at a
:class:`~claude_trio.offline.model_double.ModelDouble`. Each variable is there for a reason that was
checked against CLI 2.1.332 (see ``docs/sdk-facts.md``): without ``CLAUDE_CONFIG_DIR`` the CLI
writes ``~/.claude``; without ``CLAUDE_CODE_TMPDIR`` it leaves files in the system temp dir; without
``CLAUDE_CODE_MAX_RETRIES=0`` one API error costs ~190 s of retries (401 included); the
``DISABLE_*`` switches keep it from phoning home, so the only requests go to ``ANTHROPIC_BASE_URL``.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import claude_agent_sdk

from claude_trio.actors.session.sdk_private import BUNDLED_FOLDER
from claude_trio.protocol.errors import CLIError

__all__ = ["DUMMY_API_KEY", "bundled_cli_path", "hermetic_env"]

DUMMY_API_KEY = "sk-ant-double-0000000000000000"


def hermetic_env(
    base_url: str,
    tmp_path: Path | str,
    *,
    sandbox: bool = False,
    max_retries: int = 0,
) -> dict[str, str]:
    """The env for a CLI that talks only to ``base_url`` and keeps its files under ``tmp_path``.

    ``sandbox=True`` adds ``IS_SANDBOX=1``: the CLI refuses ``bypassPermissions`` as root without
    it (tests here run as root). ``max_retries`` is ``CLAUDE_CODE_MAX_RETRIES``; raise it only in a
    test about retries (each retry backs off for real seconds). The config and tmp folders are
    created, since the CLI expects them to exist.

    ``HOME`` is a folder under ``tmp_path`` too: the CLI's Bash tool snapshots the user's shell
    by running their startup files, and a run must depend neither on the machine's ``~/.bashrc``
    nor on what it starts (a version manager whose lock a killed tool leaves behind would hang
    every later Bash call).
    """
    root = Path(tmp_path)
    config_dir = root / "config"
    tmp_dir = root / "tmp"
    home = root / "home"
    for folder in (config_dir, tmp_dir, home):
        folder.mkdir(parents=True, exist_ok=True)
    env = {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": DUMMY_API_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "HOME": str(home),
        "CLAUDE_CODE_TMPDIR": str(tmp_dir),
        "CLAUDE_CODE_MAX_RETRIES": str(max_retries),
        # The CLI sends even 127.0.0.1 through HTTP(S)_PROXY when one is set in the environment.
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    if sandbox:
        env["IS_SANDBOX"] = "1"
    return env


def bundled_cli_path() -> Path:
    """The ``claude`` binary shipped inside the installed ``claude-agent-sdk`` wheel."""
    name = "claude.exe" if platform.system() == "Windows" else "claude"
    path = Path(claude_agent_sdk.__file__).parent / BUNDLED_FOLDER / name
    if not path.is_file() or not os.access(path, os.X_OK):
        raise CLIError(
            f"the bundled claude CLI is missing or not executable at {path}; "
            "reinstall claude-agent-sdk from a platform wheel (it ships the binary)"
        )
    return path
