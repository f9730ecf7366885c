"""Every event of a session's stream, the values events carry, and what they add up to.

A session's ``events`` (a fleet's subscription, a remote session's events) yield
:data:`Event`: one of the classes below, each with a ``kind`` (its wire name) and the
``seq`` and ``turn`` it was stamped with. Match on the classes::

    match event:
        case TextDelta(text=text): ...
        case Result(usage=usage, final=True): ...

:func:`is_terminal` tells the events that end a turn; the one that ends the execution carries
its :class:`Outcome` (``COMPLETED``, ``ABORTED``, ``RUN_TIMEOUT``, ``MAX_TURNS``, ``NOT_STARTED``,
...), and an ``aborted`` its :data:`AbortPhase`::

    match terminal.outcome:
        case Outcome.COMPLETED: ...
        case Outcome.RUN_TIMEOUT | Outcome.IDLE_TIMEOUT: ...

``collect`` (``claude_trio.streams``) adds a stream up to a :class:`Transcript`. :class:`Usage`
is what a turn or an execution cost; ``add_usage`` / ``sum_usage`` add figures up.

This module imports no trio: a websocket client can use it on its own.
"""

from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    AssistantMessage,
    ControlApplied,
    Error,
    Event,
    EventBase,
    Flush,
    HookInvoked,
    NormalizedMessage,
    Passthrough,
    Question,
    Result,
    Retry,
    SkillInvoked,
    SubagentCompleted,
    SubagentProgress,
    SubagentStarted,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    TodoItem,
    TodoListContent,
    TodoListUpdated,
    ToolResult,
    ToolResultContent,
    ToolUse,
    ToolUseContent,
    ToolUseSummary,
    TurnStarted,
    UnknownContent,
    UserInputRequest,
    UserInputResolved,
    UserMessage,
    WarningEvent,
    is_terminal,
)
from claude_trio.protocol.session.outcomes import AbortPhase, Outcome
from claude_trio.protocol.session.transcript import Exchange, SubagentRun, ToolCall, Transcript
from claude_trio.protocol.session.usage import Usage, add_usage, normalize_usage, sum_usage

__all__ = [
    "AbortPhase",
    "Aborted",
    "AdapterReady",
    "AssistantMessage",
    "ControlApplied",
    "Error",
    "Event",
    "EventBase",
    "Exchange",
    "Flush",
    "HookInvoked",
    "NormalizedMessage",
    "Outcome",
    "Passthrough",
    "Question",
    "Result",
    "Retry",
    "SkillInvoked",
    "SubagentCompleted",
    "SubagentProgress",
    "SubagentRun",
    "SubagentStarted",
    "TextContent",
    "TextDelta",
    "ThinkingContent",
    "ThinkingDelta",
    "TodoItem",
    "TodoListContent",
    "TodoListUpdated",
    "ToolCall",
    "ToolResult",
    "ToolResultContent",
    "ToolUse",
    "ToolUseContent",
    "ToolUseSummary",
    "Transcript",
    "TurnStarted",
    "UnknownContent",
    "Usage",
    "UserInputRequest",
    "UserInputResolved",
    "UserMessage",
    "WarningEvent",
    "add_usage",
    "is_terminal",
    "normalize_usage",
    "sum_usage",
]
