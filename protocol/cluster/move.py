"""Where a moved turn goes on from (pure, no trio, no I/O): rules 9-11 of the cluster.

Rules 1-8 are in ``records.py``; these refine rule 5 (moving a session) for a turn that a
dead worker left in flight.

9. **The store never lags the stream.** A worker mirrors each conversation to the session store
   as the CLI writes it (the SDK's eager flush: a ``transcript_mirror`` frame per transcript
   write). The CLI writes a tool result's ``user`` frame on stdout *before* the mirror frame that
   holds it, and the SDK appends to the store in the background, so a worker stores a
   ``tool_result`` event only once the store holds that result (bounded by
   ``WorkerConfig.store_wait``; past it the event is stored anyway and the worker logs
   ``transcript_behind``: a move then resumes before that tool call, which may run again).
10. **The resume point** of a moved execution is the last tool result in the stored transcript
    after which no tool call of the conversation is left without its result (a batch of
    parallel calls counts once all its results are there), among the tool calls the
    execution's stored events name (so a result of an earlier execution is never taken for
    one of this turn's). :func:`resume_point` finds it; None means the turn starts again from
    its prompt (rule 5).
11. **Continuing.** With a resume point, the new CLI resumes the conversation up to and
    including that result (``resume_session_at``) and is sent :data:`CONTINUE_PROMPT`: the CLI
    folds it into the same user message as the tool result, so the model's next request holds
    every finished call and its result and no finished tool runs again. A tool call the
    transcript holds with no result (it had started, or was about to, when the worker died) is
    *cut off*: the model is asked again from before it and may call it again; the
    ``session_moved`` warning names them. An accepted push is read when a stored result lists
    it or the transcript up to the resume point holds it (its uuid); only the others are
    delivered again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from claude_trio.protocol.session.events import Event, ToolResult, ToolUse

__all__ = ["CONTINUE_PROMPT", "ResumePoint", "resume_point", "transcript_uuids"]

CONTINUE_PROMPT = (
    "[The session moved to another worker after the tool results above. Continue the task "
    "from where you left off; do not repeat tool calls whose results you already have.]"
)
"""The continuation message a moved turn's CLI is sent after its last stored tool result."""


@attrs.frozen(kw_only=True)
class ResumePoint:
    """Rule 10: resume the conversation at transcript entry ``uuid``, the result of tool call
    ``tool_use_id`` (``tool_name``); ``cut_off``: tool calls after it that had no result."""

    uuid: str
    tool_use_id: str
    tool_name: str | None
    cut_off: tuple[str, ...] = ()


def _blocks(entry: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == kind]


def _conversation(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The main conversation's messages, in order (sidechains and bookkeeping entries out)."""
    return [
        e
        for e in entries
        if e.get("type") in ("user", "assistant")
        and not e.get("isSidechain")
        and isinstance(e.get("uuid"), str)
    ]


def resume_point(
    stored: Sequence[Event], transcript: Sequence[Mapping[str, Any]]
) -> ResumePoint | None:
    """Rule 10: ``stored``, the execution's events in the stream; ``transcript``, the
    conversation's entries as the session store holds them (``SessionStore.load``)."""
    ours = {
        e.tool_use_id for e in stored if isinstance(e, ToolUse | ToolResult) and not e.is_subagent
    }
    names = {e.tool_use_id: e.name for e in stored if isinstance(e, ToolUse)}
    pending: dict[str, None] = {}  # tool calls without a result yet, in order
    best: ResumePoint | None = None
    for entry in _conversation(transcript):
        for use in _blocks(entry, "tool_use"):
            if isinstance(use.get("id"), str):
                pending[use["id"]] = None
                names.setdefault(use["id"], str(use.get("name") or ""))
        results = [r.get("tool_use_id") for r in _blocks(entry, "tool_result")]
        for done in results:
            pending.pop(done, None)  # type: ignore[arg-type]
        if results and not pending:
            last = results[-1]
            if isinstance(last, str) and last in ours:
                best = ResumePoint(
                    uuid=str(entry["uuid"]), tool_use_id=last, tool_name=names.get(last)
                )
    if best is None:
        return None
    after = False
    cut: list[str] = []
    for entry in _conversation(transcript):
        if after:
            cut += [u["id"] for u in _blocks(entry, "tool_use") if isinstance(u.get("id"), str)]
        elif entry["uuid"] == best.uuid:
            after = True
    cut += [e.tool_use_id for e in stored if isinstance(e, ToolUse) and not e.is_subagent]
    before = _ids_up_to(transcript, best.uuid)
    cut_off = tuple(dict.fromkeys(c for c in cut if c not in before))
    return attrs.evolve(best, cut_off=cut_off)


def _ids_up_to(transcript: Sequence[Mapping[str, Any]], uuid: str) -> set[str]:
    """The tool call ids the conversation holds up to and including entry ``uuid``."""
    ids: set[str] = set()
    for entry in _conversation(transcript):
        ids |= {u["id"] for u in _blocks(entry, "tool_use") if isinstance(u.get("id"), str)}
        if entry["uuid"] == uuid:
            break
    return ids


def transcript_uuids(transcript: Sequence[Mapping[str, Any]], up_to: str) -> set[str]:
    """The uuids of the conversation's messages up to and including ``up_to`` (rule 11: a push
    whose uuid is among them was read)."""
    out: set[str] = set()
    for entry in _conversation(transcript):
        out.add(str(entry["uuid"]))
        if entry["uuid"] == up_to:
            break
    return out
