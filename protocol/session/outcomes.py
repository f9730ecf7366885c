"""How an execution ended: one typed :class:`Outcome` on the event that ends it (pure, no I/O).

Every execution ends with exactly one terminal event (a ``result`` with ``final=True``, an
``aborted``, or a fatal ``error``), and that event's ``outcome`` says how it ended, as a value a
``match`` can dispatch on instead of a string to parse::

    match event.outcome:
        case Outcome.COMPLETED: ...
        case Outcome.RUN_TIMEOUT | Outcome.IDLE_TIMEOUT: ...
        case Outcome.MAX_TURNS | Outcome.BUDGET_EXCEEDED: ...
        case None: ...  # not the end of the execution (a non-final result, a non-fatal error)

Rules:

1. ``outcome`` is set on exactly the events that end an execution, and ``None`` on every other
   ``result`` and ``error``: :class:`~.events.Result` when ``final``, :class:`~.events.Error`
   when ``fatal``, and every :class:`~.events.Aborted` (default ``ABORTED``).
2. A final result's outcome follows from its fields (:func:`result_outcome`), a fatal error's
   from its ``code`` (:func:`error_outcome`), so an event built without one (by a peer of an
   older version, too) gets it when it is made. An ``aborted`` event's outcome is given by
   what stopped the execution (``abort()``, a deadline, the session left) and cannot be
   derived; its ``reason`` string stays as it was, for people to read.
3. ``AbortPhase`` (``Aborted.phase``) is what the execution was doing when the stop was asked
   for: ``starting`` (no turn had begun: nothing ran), ``streaming`` (the model was
   answering), ``tools`` (a tool call was running), ``between_turns`` (the turn had ended; the
   execution was waiting for a background task or a queued push). The session sees it from
   the events so far (``Mapper.activity``); the CLI's own confirmation (``terminal_reason``
   ``aborted_tools`` / ``aborted_streaming``) is used only when the session could not say.
"""

from __future__ import annotations

import enum
from typing import Literal, TypeAlias

__all__ = [
    "ABORT_PHASES",
    "AbortPhase",
    "Outcome",
    "abort_phase_of",
    "error_outcome",
    "result_outcome",
]


class Outcome(enum.StrEnum):
    """How an execution ended (see the module docstring). Its value is its wire name."""

    COMPLETED = "completed"
    """The CLI's last result succeeded (``result``, ``final=True``)."""
    MAX_TURNS = "max_turns"
    """``ExecuteParams.max_turns`` was reached (``result``, subtype ``error_max_turns``)."""
    BUDGET_EXCEEDED = "budget_exceeded"
    """``ExecuteParams.max_budget_usd`` was reached (``result``, ``error_max_budget_usd``)."""
    OUTPUT_RETRIES_EXCEEDED = "output_retries_exceeded"
    """With an output schema, the model gave up producing a valid structured output
    (``result``, ``error_max_structured_output_retries``)."""
    API_ERROR = "api_error"
    """The model API failed (``result`` with ``api_error_status`` or ``terminal_reason``
    ``api_error`` / ``prompt_too_long`` / ``model_error`` / ``image_error``; a non-fatal
    ``error`` with code ``api_error`` comes before it)."""
    TOOL_ABORTED = "tool_aborted"
    """The CLI ended the turn itself at a tool call, without ``abort()``: a tool approval
    denied with ``interrupt`` (``result``, ``error_during_execution``, ``terminal_reason``
    ``aborted_tools``). An ``abort()`` during a tool is ``ABORTED`` with phase ``tools``."""
    HOOK_STOPPED = "hook_stopped"
    """A hook stopped the execution (``HookDecision.stop()``; ``result``, ``terminal_reason``
    ``hook_stopped`` / ``stop_hook_prevented``)."""
    FAILED = "failed"
    """The CLI's last result is an error none of the above names (``result``: its
    ``subtype``, ``terminal_reason`` and ``errors`` say which), or a fatal ``error`` of a
    code this list does not name."""
    ABORTED = "aborted"
    """``abort()`` (a session's, a fleet's, the gateway's ``abort`` op, ``run_batch``'s
    deadline) stopped it (``aborted``, with its ``phase``)."""
    CLOSED = "closed"
    """The ``async with open_session(...)`` block was left before the end (``break``, an
    exception, a cancellation), a fleet closed or drained before it ran, or a cluster's
    session had nothing left to run (its record gone; moved after its last turn) (``aborted``)."""
    RUN_TIMEOUT = "run_timeout"
    """``ExecuteParams.run_timeout`` passed (``aborted``)."""
    IDLE_TIMEOUT = "idle_timeout"
    """``ExecuteParams.idle_timeout`` passed without a frame from the CLI (``aborted``)."""
    CLI_EXITED = "cli_exited"
    """The CLI died, or its output broke (a fatal ``error``, code ``cli_exited`` or
    ``transport``)."""
    CLI_TIMEOUT = "cli_timeout"
    """The CLI did not answer ``initialize`` within ``connect_timeout``, or stopped answering
    mid-turn and was killed (a fatal ``error``, code ``cli_timeout``)."""
    NOT_STARTED = "not_started"
    """Nothing was started: options the CLI cannot run with, no credential, a missing or
    unexecutable CLI (a fatal ``error``, code ``config`` or ``cli_not_found``, ``phase``
    ``init``). Every check that refuses to start a CLI ends with a fatal ``config`` error, so
    with this outcome."""
    INTERNAL = "internal"
    """A bug of claude-trio's, or a session's task failed (a fatal ``error``, code
    ``internal`` or ``callback``)."""


AbortPhase: TypeAlias = Literal["starting", "streaming", "tools", "between_turns"]
"""What an aborted execution was doing when it was stopped (rule 3)."""

ABORT_PHASES: tuple[AbortPhase, ...] = ("starting", "streaming", "tools", "between_turns")

_BY_SUBTYPE = {
    "error_max_turns": Outcome.MAX_TURNS,
    "error_max_budget_usd": Outcome.BUDGET_EXCEEDED,
    "error_max_structured_output_retries": Outcome.OUTPUT_RETRIES_EXCEEDED,
}

_BY_TERMINAL_REASON = {
    "max_turns": Outcome.MAX_TURNS,
    "budget_exhausted": Outcome.BUDGET_EXCEEDED,
    "structured_output_retry_exhausted": Outcome.OUTPUT_RETRIES_EXCEEDED,
    "api_error": Outcome.API_ERROR,
    "prompt_too_long": Outcome.API_ERROR,
    "model_error": Outcome.API_ERROR,
    "image_error": Outcome.API_ERROR,
    "aborted_tools": Outcome.TOOL_ABORTED,
    "hook_stopped": Outcome.HOOK_STOPPED,
    "stop_hook_prevented": Outcome.HOOK_STOPPED,
}

_BY_ERROR_CODE = {
    "config": Outcome.NOT_STARTED,
    "cli_not_found": Outcome.NOT_STARTED,
    "cli_exited": Outcome.CLI_EXITED,
    "transport": Outcome.CLI_EXITED,
    "cli_timeout": Outcome.CLI_TIMEOUT,
    "api_error": Outcome.API_ERROR,
    "internal": Outcome.INTERNAL,
    "callback": Outcome.INTERNAL,
    "budget_exhausted": Outcome.BUDGET_EXCEEDED,
}


def result_outcome(
    *,
    subtype: str,
    is_error: bool,
    terminal_reason: str | None = None,
    api_error_status: int | None = None,
) -> Outcome:
    """The outcome of an execution that ended with this result (rule 2)."""
    by_subtype = _BY_SUBTYPE.get(subtype)
    if by_subtype is not None:
        return by_subtype
    by_reason = _BY_TERMINAL_REASON.get(terminal_reason or "")
    if by_reason is not None and (is_error or by_reason is Outcome.HOOK_STOPPED):
        return by_reason
    if is_error and api_error_status is not None:
        return Outcome.API_ERROR
    if is_error or subtype != "success":
        return Outcome.FAILED
    return Outcome.COMPLETED


def error_outcome(code: str) -> Outcome:
    """The outcome of an execution that ended with a fatal error of this code (rule 2)."""
    return _BY_ERROR_CODE.get(code, Outcome.FAILED)


def abort_phase_of(terminal_reason: str | None) -> AbortPhase | None:
    """The phase the CLI's confirmation of an interrupt names, if it names one (rule 3)."""
    match terminal_reason:
        case "aborted_tools":
            return "tools"
        case "aborted_streaming":
            return "streaming"
        case _:
            return None
