"""The CLI's transcripts on disk, read where a session needs them (before it starts).

A resumed conversation's cost so far is in its transcript (``cost-state`` rows), which the CLI
reads to restore its cumulative cost counter; the session reads the same number so the first
turn's cost is that turn's alone (``protocol/session/accounting.py``, rule 7).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from pathlib import Path

import trio

from claude_trio.protocol.session.accounting import transcript_cost


def config_dir(env: Mapping[str, str]) -> Path:
    """The CLI's config folder for a CLI started with ``env`` over this process's environment."""
    configured = env.get("CLAUDE_CONFIG_DIR") or os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else Path.home() / ".claude"


def _read_cost(folder: Path, session_id: str) -> float | None:
    pattern = str(folder / "projects" / "*" / f"{glob.escape(session_id)}.jsonl")
    for path in sorted(glob.glob(pattern)):
        try:
            with open(path, encoding="utf-8", errors="replace") as lines:
                cost = transcript_cost(lines)
        except OSError:
            continue
        if cost is not None:
            return cost
    return None


async def resumed_cost(env: Mapping[str, str], session_id: str) -> float | None:
    """The cost the conversation ``session_id`` carries over, if its transcript says."""
    return await trio.to_thread.run_sync(_read_cost, config_dir(env), session_id)
