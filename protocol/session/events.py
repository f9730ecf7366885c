"""The unified event vocabulary.

Every event is a frozen, keyword-only attrs class. They share the fields of :class:`EventBase`:

* ``turn`` - the execution's turn number (1 for the first turn; 0 for events raised before any
  turn began, e.g. an error while connecting). A "turn" is one CLI result's worth of work.
* ``seq`` - the per-session sequence number: strictly increasing over every event one session
  emits, across turns and executions.
* ``is_subagent`` / ``subagent_task_id`` - attribution to a subagent. ``is_subagent`` can be
  True with ``subagent_task_id=None`` when a subagent's message arrived before its
  ``task_started`` (the TypeScript library accepts that degradation too).
* ``raw`` - the SDK message (or raw CLI frame) the event came from, or ``None`` for events we
  synthesize (aborts, pushes, user-input bookkeeping).

``Event`` is the closed union of every kind; match on it with ``match``/``assert_never``.
Each class has a ``kind`` class attribute with the TypeScript library's snake_case name, used by
``--json`` and the gateway codec.

Terminal events (``TERMINAL_KINDS``): ``result``, ``aborted`` and a fatal ``error`` end a turn;
nothing after a turn's terminal event belongs to that turn. The one that ends the execution (a
final ``result``, an ``aborted``, a fatal ``error``) carries its ``outcome``
(:class:`~.outcomes.Outcome`, ``outcomes.py``); every other event has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar

import attrs

from claude_trio.protocol.session.outcomes import (
    AbortPhase,
    Outcome,
    error_outcome,
    result_outcome,
)
from claude_trio.protocol.session.usage import Usage

# ---------------------------------------------------------------------------------------------
# Content blocks of a normalized message (the TypeScript library's ContentBlock)
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TextContent:
    text: str
    type: ClassVar[str] = "text"


@attrs.frozen(kw_only=True)
class ThinkingContent:
    thinking: str
    signature: str | None = None
    type: ClassVar[str] = "thinking"


@attrs.frozen(kw_only=True)
class ToolUseContent:
    tool_use_id: str
    name: str
    input: Mapping[str, Any]
    type: ClassVar[str] = "tool_use"


@attrs.frozen(kw_only=True)
class ToolResultContent:
    tool_use_id: str
    content: Any
    is_error: bool | None = None
    type: ClassVar[str] = "tool_result"


@attrs.frozen(kw_only=True)
class TodoItem:
    """One entry of a todo list. ``id`` is synthesized from the index when the tool has none."""

    id: str
    content: str
    status: str  # "pending" | "in_progress" | "completed" (| "deleted" for the Task* family)
    active_form: str | None = None


@attrs.frozen(kw_only=True)
class TodoListContent:
    """Replaces a TodoWrite / Task* ``tool_use`` block inside a normalized message."""

    tool_use_id: str
    items: tuple[TodoItem, ...]
    type: ClassVar[str] = "todo_list"


@attrs.frozen(kw_only=True)
class UnknownContent:
    """A block the SDK models but we do not map (server tool use, ...): kept, not dropped."""

    block: Any
    type: ClassVar[str] = "unknown"


ContentBlock: TypeAlias = (
    TextContent
    | ThinkingContent
    | ToolUseContent
    | ToolResultContent
    | TodoListContent
    | UnknownContent
)


@attrs.frozen(kw_only=True)
class NormalizedMessage:
    """One whole API message (all of its content blocks), or a user message with tool results."""

    role: Literal["assistant", "user"]
    content: tuple[ContentBlock, ...]
    message_id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    error: str | None = None  # the SDK's AssistantMessage.error (e.g. "server_error")


# ---------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class EventBase:
    turn: int = 0
    seq: int = 0
    is_subagent: bool = False
    subagent_task_id: str | None = None
    raw: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(kw_only=True)
class AdapterReady(EventBase):
    """The first event of every execution whose CLI started (after warnings only): the
    configuration it really runs with. An execution that fails or is aborted before the CLI
    starts has none.

    Everything resolved (the model id, thinking, the tools, the provider, the versions), with
    every secret masked (``protocol/config/redact.py``). Warnings about the configuration (an option
    converted or ignored, a version not verified) come before it.
    """

    model: str | None
    fallback_model: str | None = None
    provider: str = "anthropic"
    base_url: str | None = None
    thinking: Mapping[str, Any] | None = None
    effort: str | None = None
    permission_mode: str | None = None
    plan_mode: bool = False
    tools: tuple[str, ...] | None = None
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    cwd: str | None = None
    max_turns: int | None = None
    max_budget_usd: float | None = None
    run_timeout: float | None = None
    idle_timeout: float | None = None
    subagents: tuple[str, ...] = ()
    output_schema: bool = False
    images: int = 0
    resume_session_id: str | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    sdk_version: str | None = None
    cli_version: str | None = None
    custom_tools: tuple[str, ...] = ()
    """The session's in-process tools, as the model sees them (``mcp__trio__<name>``)."""
    hooks: tuple[str, ...] = ()
    """The session's hooks (``PreToolUse hook 'no_rm' (Bash)``)."""
    inline_skills: tuple[str, ...] = ()
    """The session's inline skills, as the model sees them (``inline:<name>``)."""
    allowed_paths: tuple[str, ...] = ()
    """The path scope (``protocol/extensions/scope.py``), normalized: paths the file tools may read
    and write, ..."""
    read_only_paths: tuple[str, ...] = ()
    """... read only, ..."""
    disallowed_paths: tuple[str, ...] = ()
    """... and neither."""
    add_dirs: tuple[str, ...] = ()
    """Working directories the CLI got besides ``cwd``."""
    scope_enforcement: str | None = None
    """``"hard"`` or ``"soft"`` with a path scope, else ``None``."""
    bash_sandboxed: bool = False
    """Bash runs in the CLI's OS sandbox (a scoped execution whose sandbox can run)."""
    setting_sources: tuple[str, ...] | None = None
    """The settings files the CLI loads (``None``: its default, all of them)."""
    system_prompt: str | None = None
    """Which system prompt the CLI got: ``None`` (empty), ``"custom"``, ``"preset"``,
    ``"preset+append"`` or ``"file:<path>"``."""
    strict_mcp_config: bool = False
    """Only ``mcp_servers`` (and the session's own tools) start: no ``.mcp.json``, user or
    plugin servers."""
    session_id: str | None = None
    """The id asked for the new conversation (``ExecuteParams.session_id``)."""
    fork_session: bool = False
    resume_session_at: str | None = None
    resume_drops_turn: str | None = None
    betas: tuple[str, ...] = ()
    task_budget: int | None = None
    include_hook_events: bool = False
    verbatim_prompts: bool = False
    client_app: str | None = None
    """The identifier sent with API requests (``""``: none; ``None``: the SDK's default)."""
    prompt: str | None = None
    """The execution's prompt, as it was sent to the CLI (a continuation's own; its images are
    counted in ``images``), so a replay of the session holds both sides of the conversation
    (``None`` from a peer that does not send it)."""
    kind: ClassVar[str] = "adapter_ready"


@attrs.frozen(kw_only=True)
class TurnStarted(EventBase):
    """The CLI began a turn (its ``init`` system message). Carries the session id early."""

    session_id: str | None = None
    model: str | None = None
    kind: ClassVar[str] = "turn_started"


@attrs.frozen(kw_only=True)
class TextDelta(EventBase):
    text: str
    message_id: str | None = None
    index: int | None = None
    kind: ClassVar[str] = "text_delta"


@attrs.frozen(kw_only=True)
class ThinkingDelta(EventBase):
    text: str
    message_id: str | None = None
    index: int | None = None
    kind: ClassVar[str] = "thinking"


@attrs.frozen(kw_only=True)
class AssistantMessage(EventBase):
    """One whole message: role ``assistant`` per API message, role ``user`` for tool results."""

    message: NormalizedMessage
    kind: ClassVar[str] = "assistant_message"


@attrs.frozen(kw_only=True)
class ToolUse(EventBase):
    """The model called a tool (one per ``tool_use`` id). The CLI's summaries of tool calls
    are :class:`ToolUseSummary` events, never a ``ToolUse``."""

    tool_use_id: str
    name: str
    input: Mapping[str, Any]
    synthetic: bool = False
    """Never set by this version; a peer of an older one set it on the ``tool_use`` it built
    from a tool-use summary."""
    kind: ClassVar[str] = "tool_use"


@attrs.frozen(kw_only=True)
class ToolResult(EventBase):
    tool_use_id: str
    content: Any
    is_error: bool | None = None
    tool_name: str | None = None
    synthetic: bool = False
    kind: ClassVar[str] = "tool_result"


@attrs.frozen(kw_only=True)
class ToolUseSummary(EventBase):
    """The CLI's one-line summary of the tool calls before it (its ``tool_use_summary``
    frame, written with ``CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES``): not a tool call itself.

    ``summary`` is the CLI's text; ``preceding_tool_use_ids`` the ``tool_use`` ids it sums
    up; ``summary_id`` the frame's uuid (``seq-<N>`` when the CLI gave none).
    """

    summary: str
    preceding_tool_use_ids: tuple[str, ...] = ()
    summary_id: str | None = None
    kind: ClassVar[str] = "tool_use_summary"


@attrs.frozen(kw_only=True)
class SkillInvoked(EventBase):
    """The model opened a skill (the ``Skill`` tool). The tool_use event is still emitted."""

    skill: str
    tool_use_id: str
    kind: ClassVar[str] = "skill_invoked"


@attrs.frozen(kw_only=True)
class HookInvoked(EventBase):
    """The CLI called one of the session's hooks (``protocol/extensions/hooks.py``), and what it
    decided.

    ``decision``: ``allow`` / ``deny`` / ``ask`` (a ``PreToolUse`` permission), ``block``,
    ``stop``, ``context`` (only additional context), ``none`` (no opinion), ``failed`` (the hook
    raised, returned something its event cannot take, or timed out: an ``error`` event says
    which, and the CLI got the safe answer), ``stopped`` (the execution was stopping: a tool is
    denied, whatever the hook said). ``reason`` is what the decision tells the model or user.
    """

    hook_event: str
    hook_name: str
    decision: str
    tool_name: str | None = None
    tool_use_id: str | None = None
    reason: str | None = None
    kind: ClassVar[str] = "hook_invoked"


@attrs.frozen(kw_only=True)
class ControlApplied(EventBase):
    """The CLI confirmed a live control of the session (``Session.set_model``,
    ``set_permission_mode``, ``rewind_files``; ``protocol/extensions/controls.py``).

    ``control`` names it; ``value`` is the new model id (``None``: the CLI's default), the new
    permission mode, or the user message uuid the files were rewound to.
    """

    control: Literal["set_model", "set_permission_mode", "rewind_files"]
    value: str | None = None
    kind: ClassVar[str] = "control_applied"


@attrs.frozen(kw_only=True)
class SubagentStarted(EventBase):
    task_id: str
    tool_use_id: str | None
    description: str
    task_type: str | None = None
    kind: ClassVar[str] = "subagent_started"


@attrs.frozen(kw_only=True)
class SubagentProgress(EventBase):
    task_id: str
    tool_use_id: str | None
    description: str | None = None
    last_tool_name: str | None = None
    usage: Mapping[str, Any] | None = None
    kind: ClassVar[str] = "subagent_progress"


@attrs.frozen(kw_only=True)
class SubagentCompleted(EventBase):
    """A subagent reached a terminal state (``completed`` | ``failed`` | ``stopped`` | ...)."""

    task_id: str
    tool_use_id: str | None
    status: str
    summary: str | None = None
    usage: Mapping[str, Any] | None = None
    kind: ClassVar[str] = "subagent_completed"


@attrs.frozen(kw_only=True)
class Flush(EventBase):
    """The CLI is about to compact history (``compact_boundary``): checkpoint now."""

    trigger: str | None = None  # "manual" | "auto"
    pre_tokens: int | None = None
    kind: ClassVar[str] = "flush"


@attrs.frozen(kw_only=True)
class Question:
    question: str
    header: str | None = None
    options: tuple[str, ...] = ()
    multi_select: bool = False


@attrs.frozen(kw_only=True)
class UserInputRequest(EventBase):
    """The model (AskUserQuestion), an MCP server (elicitation) or a tool call waiting for
    approval (``tool_permission``) asks the user something.

    For ``tool_permission`` (``protocol/extensions/approvals.py``): ``tool_name`` and ``tool_input``
    are the call; ``suggestions`` the permission updates the CLI proposes for "always allow" (its
    wire form: ``{"type": "addRules", "rules": [{"toolName", "ruleContent"}], ...}``);
    ``blocked_path`` the path that made it ask; ``decision_reason``, ``title``,
    ``display_name`` and ``description`` the CLI's words for the prompt, when it gives them.
    """

    request_id: str
    source: Literal["model-tool", "mcp-elicitation", "tool_permission"]
    questions: tuple[Question, ...] = ()  # model-tool
    message: str | None = None  # mcp-elicitation
    server_name: str | None = None
    requested_schema: Mapping[str, Any] | None = None
    deadline: float | None = None  # trio clock time after which the request expires
    tool_name: str | None = None  # tool_permission
    tool_input: Mapping[str, Any] | None = None
    tool_use_id: str | None = None
    agent_id: str | None = None
    suggestions: tuple[Mapping[str, Any], ...] = ()
    blocked_path: str | None = None
    decision_reason: str | None = None
    title: str | None = None
    display_name: str | None = None
    description: str | None = None
    kind: ClassVar[str] = "user_input_request"


@attrs.frozen(kw_only=True)
class UserInputResolved(EventBase):
    """What became of a user-input request.

    ``outcome``: ``answered`` (the answer went to the CLI), ``expired`` (nobody answered by the
    deadline: the CLI got an explicit no-answer), ``cancelled`` (the session aborted or ended),
    ``withdrawn`` (the CLI cancelled the request), ``failed`` (the answer callback raised; the
    CLI got an error reply and ``detail`` names the error).
    """

    request_id: str
    outcome: Literal["answered", "expired", "cancelled", "withdrawn", "failed"]
    answer: Any = None
    detail: str | None = None
    kind: ClassVar[str] = "user_input_resolved"


@attrs.frozen(kw_only=True)
class TodoListUpdated(EventBase):
    items: tuple[TodoItem, ...]
    tool_use_id: str
    tool_name: str  # "TodoWrite" | "TaskCreate" | "TaskUpdate" | ...
    source: Literal["model-tool"] = "model-tool"
    kind: ClassVar[str] = "todo_list_updated"


@attrs.frozen(kw_only=True)
class UserMessage(EventBase):
    """A push was accepted onto the input channel (emitted before the model responds)."""

    text: str
    uuid: str
    timestamp: float  # wall-clock seconds since the epoch
    images: int = 0  # how many images it carries
    kind: ClassVar[str] = "user_message"


@attrs.frozen(kw_only=True)
class Retry(EventBase):
    """The CLI retries an API call (its ``api_retry`` system message)."""

    attempt: int | None = None
    max_retries: int | None = None
    delay_ms: float | None = None
    error_status: int | None = None
    error: str | None = None
    kind: ClassVar[str] = "retry"


@attrs.frozen(kw_only=True)
class WarningEvent(EventBase):
    """Something the user should know that does not end anything (e.g. a rate-limit notice)."""

    message: str
    code: str | None = None
    rate_limit_status: str | None = None
    """For ``code="rate_limit"``: the CLI's status (``allowed_warning``, ``rejected``)."""
    resets_at: float | None = None
    """For ``code="rate_limit"``: when the limit resets, seconds since the epoch."""
    rate_limit_type: str | None = None
    """For ``code="rate_limit"``: which limit (``five_hour``, ``seven_day``, ...)."""
    kind: ClassVar[str] = "warning"


@attrs.frozen(kw_only=True)
class Passthrough(EventBase):
    """A frame or message we do not map, kept rather than dropped (forward compatibility)."""

    frame_type: str
    data: Any = None
    kind: ClassVar[str] = "passthrough"


@attrs.frozen(kw_only=True)
class Result(EventBase):
    """The end of one turn. In streaming-input mode an execution has one per delivered turn.

    ``usage`` is this turn's (the CLI's per-turn usage, normalized) with ``cost_usd`` the
    difference of the CLI's cumulative cost; ``execution_usage`` and ``session_usage`` are the
    running totals including this turn. ``final`` is True on the result that ends the execution,
    and only that one has an ``outcome`` (``COMPLETED``, ``MAX_TURNS``, ``BUDGET_EXCEEDED``, ...:
    ``outcomes.result_outcome``, derived from the other fields).
    """

    subtype: str
    is_error: bool
    session_id: str | None
    usage: Usage
    execution_usage: Usage
    session_usage: Usage
    num_turns: int | None = None
    duration_ms: int | None = None
    stop_reason: str | None = None
    terminal_reason: str | None = None
    text: str | None = None
    errors: tuple[str, ...] = ()
    api_error_status: int | None = None
    user_message_uuids: tuple[str, ...] = ()
    todo_list_snapshot: tuple[TodoItem, ...] | None = None
    structured_output: Any = None
    """With ``output_schema``: the final answer as the schema asked for it."""
    context_tokens: int | None = None
    """The input of the turn's last model call: how much of the context it used."""
    context_window: int | None = None
    """The model's context window, when known (from the CLI, else ``models.CONTEXT_WINDOWS``)."""
    final: bool = False
    outcome: Outcome | None = None
    """How the execution ended, on the final result only (None on every other)."""
    kind: ClassVar[str] = "result"

    def __attrs_post_init__(self) -> None:
        if not self.final:
            _set_outcome(self, None)
        elif self.outcome is None:
            outcome = result_outcome(
                subtype=self.subtype,
                is_error=self.is_error,
                terminal_reason=self.terminal_reason,
                api_error_status=self.api_error_status,
            )
            _set_outcome(self, outcome)

    @property
    def context_share(self) -> float | None:
        """The share of the context window the turn's last model call used (0 to 1)."""
        if self.context_tokens is None or not self.context_window:
            return None
        return self.context_tokens / self.context_window


@attrs.frozen(kw_only=True)
class Aborted(EventBase):
    """The execution was stopped before its end. Terminal: exactly one per aborted execution,
    whatever arrives later.

    ``outcome`` says what stopped it: ``ABORTED`` (``abort()``), ``CLOSED`` (the session's
    block was left, a fleet closed), ``RUN_TIMEOUT``, ``IDLE_TIMEOUT``. ``phase`` is what it
    was doing then (``starting``, ``streaming``, ``tools``, ``between_turns``; None from a
    peer that did not say). ``reason`` is for people: ``aborted``, the CLI's own
    ``aborted_tools`` / ``aborted_streaming``, or a sentence (``run_timeout: the execution ran
    for 30 s``); dispatch on ``outcome``, not on it.
    """

    reason: str = "aborted"
    usage: Usage | None = None  # the interrupted turn's usage when the CLI reported it
    session_id: str | None = None
    outcome: Outcome = Outcome.ABORTED
    phase: AbortPhase | None = None
    kind: ClassVar[str] = "aborted"


ErrorCode = Literal[
    "api_error",  # the model API failed (status in ``status``)
    "cli_exited",  # the CLI process died
    "cli_not_found",  # the claude binary is missing / not executable
    "cli_timeout",  # the CLI did not answer initialize / a control request in time
    "transport",  # a malformed or oversize line, a broken pipe
    "config",  # bad options the CLI refused (root + bypassPermissions, ...)
    "callback",  # a user callback raised
    "internal",  # a bug of ours
    "budget_exhausted",  # a fleet's governor refused the start: a budget is spent
]


@attrs.frozen(kw_only=True)
class Error(EventBase):
    """Something failed. ``fatal=True`` ends the execution (a terminal event), and then
    ``outcome`` says how (``NOT_STARTED``, ``CLI_EXITED``, ``CLI_TIMEOUT``, ``INTERNAL``, ...:
    ``outcomes.error_outcome`` of the ``code`` unless given); a non-fatal error has none."""

    message: str
    code: ErrorCode
    fatal: bool = True
    status: int | None = None
    detail: str | None = None
    phase: Literal["init", "runtime"] | None = None
    """``init`` before the execution's first turn started, ``runtime`` after."""
    errno: int | None = None
    """For a CLI that could not be started: the system's error number."""
    path: str | None = None
    """For a CLI that could not be started: the path tried."""
    outcome: Outcome | None = None
    """How the execution ended, on a fatal error only (None on a non-fatal one)."""
    kind: ClassVar[str] = "error"

    def __attrs_post_init__(self) -> None:
        if not self.fatal:
            _set_outcome(self, None)
        elif self.outcome is None:
            _set_outcome(self, error_outcome(self.code))


# Frozen events: the outcome is settled once, while the event is being made.
_set_field = object.__setattr__


def _set_outcome(event: Result | Error, outcome: Outcome | None) -> None:
    _set_field(event, "outcome", outcome)


Event: TypeAlias = (
    AdapterReady
    | TurnStarted
    | TextDelta
    | ThinkingDelta
    | AssistantMessage
    | ToolUse
    | ToolResult
    | ToolUseSummary
    | SkillInvoked
    | HookInvoked
    | ControlApplied
    | SubagentStarted
    | SubagentProgress
    | SubagentCompleted
    | Flush
    | UserInputRequest
    | UserInputResolved
    | TodoListUpdated
    | UserMessage
    | Retry
    | WarningEvent
    | Passthrough
    | Result
    | Aborted
    | Error
)

EVENT_TYPES: tuple[type[EventBase], ...] = (
    AdapterReady,
    TurnStarted,
    TextDelta,
    ThinkingDelta,
    AssistantMessage,
    ToolUse,
    ToolResult,
    ToolUseSummary,
    SkillInvoked,
    HookInvoked,
    ControlApplied,
    SubagentStarted,
    SubagentProgress,
    SubagentCompleted,
    Flush,
    UserInputRequest,
    UserInputResolved,
    TodoListUpdated,
    UserMessage,
    Retry,
    WarningEvent,
    Passthrough,
    Result,
    Aborted,
    Error,
)

EVENT_KINDS: Mapping[str, type[EventBase]] = {cls.kind: cls for cls in EVENT_TYPES}  # type: ignore[attr-defined]


def is_terminal(event: Event) -> bool:
    """True for the events that end a turn: a result, an abort, a fatal error."""
    if isinstance(event, Result | Aborted):
        return True
    return isinstance(event, Error) and event.fatal


def is_final(event: Event) -> bool:
    """True for the event that ends an execution (a final result, an abort, a fatal error)."""
    return is_terminal(event) and bool(getattr(event, "final", True))


_E = TypeVar("_E", bound=EventBase)
_Copier = tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]
_COPIERS: dict[type, _Copier] = {}


def copy_event(event: _E, **changes: Any) -> _E:
    """What ``attrs.evolve(event, **changes)`` gives: a new event of the same class, its
    ``__init__`` run (validators and all) with ``changes`` over the event's own fields. The
    fields are read in one call instead of evolve's walk over them, which showed on the hot
    path (the final result, the fleet's raw-less copies)."""
    cls = type(event)
    copier = _COPIERS.get(cls)
    if copier is None:
        copier = _copier(cls)
    aliases, read = copier
    kwargs = dict(zip(aliases, read(event), strict=True))
    kwargs.update(changes)
    return cls(**kwargs)


def _copier(cls: type) -> _Copier:
    fields = [f for f in attrs.fields(cls) if f.init]
    names = [f.name for f in fields]
    read: Callable[[Any], tuple[Any, ...]]
    if len(names) > 1:
        read = attrgetter(*names)
    else:
        read = lambda event: tuple(getattr(event, name) for name in names)  # noqa: E731
    copier = (tuple(f.alias for f in fields), read)
    if len(_COPIERS) < 1024:  # event classes are few; a stream of new ones is not kept
        _COPIERS[cls] = copier
    return copier
