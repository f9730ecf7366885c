"""A conversation from the transcript the CLI wrote, as ``session/update`` notifications.

``session/load`` replays a session's events from its host; when the host no longer holds them
(its replay evicted the oldest, or a local fleet forgot the finished session) the agent falls
back to the transcript the CLI keeps under its config folder,
``<CLAUDE_CONFIG_DIR>/projects/<project>/<session id>.jsonl`` (an ACP session's CLI runs
under the ACP session id, so the id finds the file). :func:`find_transcript` locates it,
:func:`read_entries` reads its lines, and :func:`transcript_updates` maps the conversation
(the SDK's ``SessionMessage`` list, the rewound branches left out) with the same rules as a
live turn's events (``protocol/editor/updates.py``):

=====================================  ==========================================================
transcript                             update
=====================================  ==========================================================
a user prompt (its text blocks)        ``user_message_chunk``
assistant text / thinking              ``agent_message_chunk`` / ``agent_thought_chunk``
assistant ``tool_use``                 ``tool_call`` (kind, title, locations, diffs)
user ``tool_result``                   ``tool_call_update``: ``completed`` or ``failed``
=====================================  ==========================================================
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from acp.helpers import (
    SessionUpdate,
    update_agent_message_text,
    update_agent_thought_text,
    update_user_message_text,
)
from claude_agent_sdk import SessionMessage

from claude_trio.protocol.editor.updates import tool_call_start, tool_result_update

__all__ = ["config_dir", "find_transcript", "read_entries", "transcript_updates"]


def config_dir(env: Mapping[str, str], environ: Mapping[str, str]) -> Path:
    """The CLI's config folder: ``CLAUDE_CONFIG_DIR`` of the sessions' ``env``, else of this
    process's ``environ``, else ``.claude`` in the home folder (``HOME`` looked up the same
    way)."""
    chosen = env.get("CLAUDE_CONFIG_DIR") or environ.get("CLAUDE_CONFIG_DIR")
    if chosen:
        return Path(chosen)
    home = env.get("HOME") or environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".claude"


def find_transcript(config: Path, session_id: str) -> Path | None:
    """The transcript of ``session_id`` in any project under ``config`` (None: there is none).
    A session id that is not a plain name finds nothing."""
    if not session_id or "/" in session_id or "\\" in session_id or session_id.startswith("."):
        return None
    for candidate in sorted((config / "projects").glob(f"*/{session_id}.jsonl")):
        if candidate.is_file():
            return candidate
    return None


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The transcript's JSON lines (a torn or corrupt line, such as the last one of a CLI
    killed mid-write, is skipped)."""
    entries: list[dict[str, Any]] = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def transcript_updates(messages: Iterable[SessionMessage]) -> list[SessionUpdate]:
    """The conversation as the updates a load sends, in order (module docstring)."""
    out: list[SessionUpdate] = []
    for message in messages:
        body = message.message if isinstance(message.message, Mapping) else {}
        for block in _blocks(body.get("content")):
            kind = block.get("type")
            if message.type == "user":
                if kind == "text" and block.get("text"):
                    out.append(update_user_message_text(str(block["text"])))
                elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
                    out.append(
                        tool_result_update(
                            block["tool_use_id"],
                            block.get("content"),
                            is_error=bool(block.get("is_error")),
                        )
                    )
            elif kind == "text" and block.get("text"):
                out.append(update_agent_message_text(str(block["text"])))
            elif kind == "thinking" and block.get("thinking"):
                out.append(update_agent_thought_text(str(block["thinking"])))
            elif kind == "tool_use" and isinstance(block.get("id"), str):
                tool_input = block.get("input")
                out.append(
                    tool_call_start(
                        block["id"],
                        str(block.get("name", "")),
                        tool_input if isinstance(tool_input, Mapping) else {},
                    )
                )
    return out
