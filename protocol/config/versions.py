"""Which claude-agent-sdk and CLI versions claude-trio was verified with (pure).

claude-trio relies on private names of ``claude-agent-sdk`` (``actors/session/sdk_private.py``) and
on behaviours of the CLI (``docs/sdk-facts.md``). Both move with every SDK minor. Rules:

1. :data:`VERIFIED_SDK` and :data:`VERIFIED_CLI` are the ranges the test suite ran against
   (``pyproject.toml`` pins the SDK to its range).
2. A version outside its range is not refused: the session starts, and a ``warning``
   (``code="untested_version"``) comes before ``adapter_ready`` naming both versions and the
   range. A private name that is actually missing is a clear error at import
   (``sdk_private``).
"""

from __future__ import annotations

import functools
import re

VERIFIED_SDK: tuple[str, str] = ("0.2.189", "0.2.189")
"""The lowest and highest ``claude-agent-sdk`` versions verified, inclusive."""

VERIFIED_CLI: tuple[str, str] = ("2.1.332", "2.1.332")
"""The lowest and highest bundled ``claude`` CLI versions verified, inclusive."""


@functools.lru_cache(maxsize=64)  # every session checks the same few versions
def _parse(version: str) -> tuple[int, ...] | None:
    match = re.match(r"(\d+(?:\.\d+)*)", version.strip())
    if match is None:
        return None
    return tuple(int(part) for part in match.group(1).split("."))


def in_range(version: str | None, verified: tuple[str, str]) -> bool:
    """Whether ``version`` lies in ``verified`` (an unknown or unreadable version does not)."""
    if version is None:
        return False
    parsed, low, high = _parse(version), _parse(verified[0]), _parse(verified[1])
    if parsed is None or low is None or high is None:
        return False
    return low <= parsed <= high


def version_warnings(sdk_version: str | None, cli_version: str | None) -> list[str]:
    """The warning texts for versions outside what was verified (rule 2)."""
    out = []
    for what, version, verified in (
        ("claude-agent-sdk", sdk_version, VERIFIED_SDK),
        ("the claude CLI", cli_version, VERIFIED_CLI),
    ):
        if not in_range(version, verified):
            low, high = verified
            span = low if low == high else f"{low} to {high}"
            out.append(
                f"{what} {version or '(unknown version)'} is not a version claude-trio was "
                f"verified with ({span}); it may behave differently"
            )
    return out
