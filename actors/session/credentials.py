"""The look for a credential before a session starts its CLI: which of the files of
``protocol/config/credentials.py`` exist, and what they say (the rules are there)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from claude_agent_sdk import ClaudeAgentOptions

from claude_trio.protocol.config.credentials import credential_files, missing_credentials

__all__ = ["credentials_refusal"]

_MAX_READ = 1024 * 1024  # a settings or state file; a bigger one is not read past this


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read(_MAX_READ)
    except OSError:
        return None


def _home() -> str | None:
    try:
        return str(Path.home())
    except RuntimeError:  # no HOME and no password entry
        return None


def credentials_refusal(
    options: ClaudeAgentOptions, environ: Mapping[str, str] | None = None
) -> str | None:
    """Why the CLI of ``options`` would have no way to reach a model, or ``None`` when it has
    one. ``environ``: the environment it inherits (``os.environ``)."""
    env = {**(os.environ if environ is None else environ), **options.env}
    cwd = None if options.cwd is None else os.fspath(options.cwd)
    logins, searched = credential_files(env, cwd=cwd or os.getcwd(), home=_home())
    logged_in = any(bool(_read(path)) for path in logins)
    texts = [text for text in map(_read, searched) if text]
    if options.settings:
        texts.append(options.settings)  # inline JSON, or the path of a file
        text = _read(options.settings) if len(options.settings) < 4096 else None
        if text:
            texts.append(text)
    return missing_credentials(env, logged_in=logged_in, texts=texts, platform=sys.platform)
