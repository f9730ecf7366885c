"""The mapper's event builders for system messages, notices and results (pure functions).

``mapper.py`` decides *when* an SDK message opens or closes a turn and stamps what it emits;
the functions here only say *which* event a message is: ``init``, ``compact_boundary``,
``api_retry``, ``tool_use_summary`` and other system messages, rate-limit notices and
conversation resets (rule R15), and a result's ``Result`` or ``Aborted`` with the warnings and
errors before it (rules R5, R16, R18). Every event is returned unstamped (``turn`` and ``seq``
are the mapper's). Nothing here keeps state, blocks or imports trio.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import claude_agent_sdk as sdk
from jsonschema import Draft202012Validator

from claude_trio.protocol.checks import is_int
from claude_trio.protocol.config.models import context_window
from claude_trio.protocol.session.accounting import TurnUsage
from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Flush,
    Passthrough,
    Result,
    Retry,
    TodoItem,
    ToolUseSummary,
    TurnStarted,
    WarningEvent,
)
from claude_trio.protocol.session.outcomes import AbortPhase, Outcome, abort_phase_of

TOOL_USE_SUMMARY = "tool_use_summary"


def opt_int(value: Any) -> int | None:
    """``value`` if it is an int (never a bool), else None: a peer's field read leniently."""
    return value if is_int(value) else None


def opt_str(value: Any) -> str | None:
    """``value`` if it is a string, else None."""
    return value if isinstance(value, str) else None


def parent_of(message: sdk.SystemMessage) -> str | None:
    """The ``parent_tool_use_id`` of a system message: the subagent it belongs to (R13)."""
    return opt_str(message.data.get("parent_tool_use_id"))


# -- system messages (R15) --------------------------------------------------------------------


def turn_started(message: sdk.SystemMessage) -> TurnStarted:
    """``init`` -> ``TurnStarted``."""
    data = message.data
    return TurnStarted(
        session_id=opt_str(data.get("session_id")),
        model=opt_str(data.get("model")),
        raw=message,
    )


def compacted(message: sdk.SystemMessage) -> Flush:
    """``compact_boundary`` -> ``Flush``."""
    metadata = message.data.get("compact_metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    return Flush(
        trigger=opt_str(metadata.get("trigger")),
        pre_tokens=opt_int(metadata.get("pre_tokens")),
        raw=message,
    )


def retry(message: sdk.SystemMessage) -> Retry:
    """``api_retry`` -> ``Retry``."""
    data = message.data
    delay = data.get("retry_delay_ms")
    return Retry(
        attempt=opt_int(data.get("attempt")),
        max_retries=opt_int(data.get("max_retries")),
        delay_ms=float(delay) if isinstance(delay, int | float) else None,
        error_status=opt_int(data.get("error_status")),
        error=opt_str(data.get("error")),
        raw=message,
    )


def tool_use_summary(message: sdk.SystemMessage, *, next_seq: int) -> ToolUseSummary:
    """``tool_use_summary`` -> ``ToolUseSummary`` (the summary, the preceding tool use ids).
    Without a ``uuid`` in the frame its ``summary_id`` is made from ``next_seq``, the ``seq``
    the event gets."""
    data = message.data
    preceding = data.get("preceding_tool_use_ids")
    preceding_ids = (
        tuple(i for i in preceding if isinstance(i, str)) if isinstance(preceding, list) else ()
    )
    return ToolUseSummary(
        summary=opt_str(data.get("summary")) or "",
        preceding_tool_use_ids=preceding_ids,
        summary_id=opt_str(data.get("uuid")) or f"seq-{next_seq}",
        raw=message,
    )


def other_system(message: sdk.SystemMessage) -> Passthrough:
    """Any other subtype -> ``Passthrough("system:<subtype>")``."""
    return Passthrough(frame_type=f"system:{message.subtype}", data=message.data, raw=message)


def rate_limit(message: sdk.RateLimitEvent) -> WarningEvent | Passthrough:
    """A rate-limit notice -> ``WarningEvent(code="rate_limit")``, or a ``Passthrough`` when
    its status is ``allowed``."""
    info = message.rate_limit_info
    if info.status == "allowed":
        return Passthrough(frame_type="rate_limit_event", data=info.raw, raw=message)
    return WarningEvent(
        code="rate_limit",
        message=(
            f"rate limit status {info.status!r}"
            f" (type {info.rate_limit_type}, resets at {info.resets_at})"
        ),
        rate_limit_status=info.status,
        resets_at=None if info.resets_at is None else float(info.resets_at),
        rate_limit_type=info.rate_limit_type,
        raw=message,
    )


def conversation_reset(message: sdk.ConversationResetMessage) -> Passthrough:
    """A conversation reset -> ``Passthrough("conversation_reset")``."""
    return Passthrough(
        frame_type="conversation_reset",
        data={
            "new_conversation_id": message.new_conversation_id,
            "session_id": message.session_id,
        },
        raw=message,
    )


# -- results (R5, R16, R18) -------------------------------------------------------------------


def consumed_uuids(result: sdk.ResultMessage) -> list[str]:
    """The uuids of the pushes the result's turn took in (R12)."""
    return result.user_message_uuids or (
        [result.user_message_uuid] if result.user_message_uuid else []
    )


def is_abort_result(result: sdk.ResultMessage) -> bool:
    """The CLI's own result for a turn it aborted (R5), or that a hook stopped while the abort
    was pending: the stop gate denies every tool from the abort on and stops the turn there
    (``actors/session/stopper.py``)."""
    reason = result.terminal_reason or ""
    return (
        result.subtype == "error_during_execution"
        or reason.startswith("aborted")
        or reason == "hook_stopped"
    )


def aborted(
    result: sdk.ResultMessage,
    *,
    reason: str | None,
    usage: TurnUsage,
    outcome: Outcome,
    phase: AbortPhase | None,
    activity: AbortPhase,
) -> Aborted:
    """The ``Aborted`` an aborting turn's own result becomes (R5); ``reason``, ``outcome`` and
    ``phase``: the abort's (a ``phase`` of None: the CLI's confirmation says, else
    ``activity``, what the session sees now)."""
    return Aborted(
        reason=reason or result.terminal_reason or "aborted",
        usage=usage.turn,
        session_id=result.session_id,
        outcome=outcome,
        phase=phase or abort_phase_of(result.terminal_reason) or activity,
        raw=result,
    )


def api_error(result: sdk.ResultMessage) -> Error | None:
    """R18: the non-fatal ``Error(code="api_error")`` before a result that failed on the model
    API, or None."""
    if not result.is_error or (
        result.api_error_status is None and result.terminal_reason != "api_error"
    ):
        return None
    status = result.api_error_status
    how = f" (HTTP {status})" if status is not None else " (no HTTP response)"
    return Error(
        message=f"the model API failed{how}: {result.result or ''}",
        code="api_error",
        fatal=False,
        status=status,
        raw=result,
    )


def structured_output_warning(
    validator: Draft202012Validator | None, result: sdk.ResultMessage
) -> WarningEvent | None:
    """With an output schema, a successful result's structured output must follow it (R16):
    a ``warning`` (``structured_output_invalid``) says when it does not, or is missing."""
    if validator is None or result.is_error:
        return None
    output = result.structured_output
    if output is None:
        problem = "the result has no structured output"
    else:
        error = next(iter(validator.iter_errors(output)), None)
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path) or "(the top)"
        problem = f"the structured output does not follow the schema at {where}: "
        problem += error.message
    return WarningEvent(code="structured_output_invalid", message=problem)


def result_context_window(result: sdk.ResultMessage, model: str | None) -> int | None:
    """The CLI's own figure for the turn's model, else the table's."""
    model_usage = result.model_usage or {}
    entry = model_usage.get(model or "") if model else None
    if entry is None and len(model_usage) == 1:
        entry = next(iter(model_usage.values()))
    if isinstance(entry, Mapping):
        window = entry.get("contextWindow")
        if is_int(window) and window > 0:
            return window
    return context_window(model)


def result(
    message: sdk.ResultMessage,
    *,
    usage: TurnUsage,
    uuids: Sequence[str],
    todo_list_snapshot: tuple[TodoItem, ...] | None,
    context_tokens: int | None,
    model: str | None,
) -> Result:
    """A result -> ``Result`` with the turn's usage and the running totals (R16)."""
    return Result(
        subtype=message.subtype,
        is_error=message.is_error,
        session_id=message.session_id,
        usage=usage.turn,
        execution_usage=usage.execution,
        session_usage=usage.session,
        num_turns=message.num_turns,
        duration_ms=message.duration_ms,
        stop_reason=message.stop_reason,
        terminal_reason=message.terminal_reason,
        text=message.result,
        errors=tuple(message.errors or ()),
        api_error_status=message.api_error_status,
        user_message_uuids=tuple(uuids),
        todo_list_snapshot=todo_list_snapshot,
        structured_output=message.structured_output,
        context_tokens=context_tokens,
        context_window=result_context_window(message, model),
        raw=message,
    )
