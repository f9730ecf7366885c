"""The look-up a path scope needs from the machine: which sandbox programs the CLI can find.

The decision (is Bash confinable, what to say when it is not) is the pure
``protocol.scope.sandbox_problem``; this module only looks at the file system.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping

from claude_trio.protocol.extensions.scope import SANDBOX_BINARIES, sandbox_problem

__all__ = ["find_sandbox_binaries", "probe_sandbox"]


def find_sandbox_binaries(platform: str, env: Mapping[str, str]) -> dict[str, bool]:
    """Which of the sandbox programs ``platform`` needs are on ``env``'s ``PATH`` (the
    environment the CLI will run with)."""
    key = "linux" if platform.startswith("linux") else platform
    path = env.get("PATH")
    return {
        binary: shutil.which(binary, path=path) is not None
        for binary, _package in SANDBOX_BINARIES.get(key, ())
    }


def probe_sandbox(env: Mapping[str, str]) -> str | None:
    """Why the CLI's Bash sandbox cannot run on this machine with ``env``, or ``None``."""
    return sandbox_problem(sys.platform, find_sandbox_binaries(sys.platform, env))
