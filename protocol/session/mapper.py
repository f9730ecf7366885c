"""SDK messages -> unified events: the sans-I/O mapper (one per session).

``Mapper.feed(message)`` takes one message as ``claude_agent_sdk`` yields it and returns the
events it causes, stamped with the execution's ``turn`` and the session's ``seq``. Everything
that is not a message - a push accepted, an abort, the end of the input - is an *input* of the
machine too (``push_accepted``, ``abort_requested``, ``turn_aborted``, ``stream_ended``), like
``h11``'s ``receive_data(None)``. Nothing here blocks or imports trio.

Rules
=====

The rules are all here; their code is in three modules: this one (the machine: stamping, turn
fencing, assistant and user messages, the inputs), ``mapper_tools.py`` (the todo list of R10
and the subagent tasks of R13-R14) and ``mapper_system.py`` (the events of system messages,
notices and results: R15, R16, R18 and the ``Aborted`` of R5).

Stamping
  R1. ``seq`` starts at 1 and grows by one for every event the mapper returns (``stamp`` too):
      strictly increasing over the session, across executions.
  R2. ``turn`` is the turn of the current execution: 1 for its first turn. ``start_execution``
      restarts the count. Events that arrive while no turn is open (a push accepted, a subagent
      notification, a rate-limit notice between two turns) carry the number of the NEXT turn,
      the one they lead into, so nothing is ever stamped with a turn after that turn's terminal
      event. Before the first execution started that number is 0 (events.py: "an error while
      connecting"); ``feed`` and ``push_accepted`` start the first execution themselves.

Turn fencing
  R3. A turn opens at the first *turn message* after the previous terminal event. Turn
      messages: ``init``, ``compact_boundary``, ``api_retry``, results, and main-thread
      (``parent_tool_use_id is None``) stream events, assistant, user and tool_use_summary
      messages. Subagent messages, task lifecycle messages, rate-limit notices and other system
      messages never open a turn: a background subagent works between its parent's turns.
  R4. A turn is closed by exactly one terminal event: ``Result``, ``Aborted`` or a fatal
      ``Error``. The next turn is numbered one more.
  R5. ``abort_requested()`` marks an abort as pending; it emits nothing. Every abort is then
      answered by exactly one ``Aborted``: the CLI's own result for the aborting turn
      (``subtype="error_during_execution"`` or ``terminal_reason="aborted_*"``, or
      ``"hook_stopped"``: the stop gate stops a turn at its next tool call) becomes
      ``Aborted(usage=..., session_id=...)`` instead of a ``Result``; otherwise
      ``turn_aborted()`` (or ``stream_ended()``) synthesizes it. Its ``outcome`` is the
      abort's (``outcomes.py``: ``ABORTED`` unless the abort said otherwise), its ``phase``
      what the execution was doing when the abort was asked for (``activity``, kept by the
      stop machine): ``starting`` before the execution's first turn, ``between_turns`` with no
      turn open, ``tools`` while a main-thread tool call has no result yet, ``streaming``
      otherwise; without one, the CLI's ``aborted_tools`` / ``aborted_streaming``, else the
      activity when the event is made. A turn that completes normally
      while the abort is pending still gets its ``Result`` (it is real), and the abort is then
      answered by an ``Aborted`` of its own turn number from ``turn_aborted()``. Content that
      arrives after ``abort_requested()`` but before the terminal event is mapped as usual:
      the CLI really produced it. Whether an abort is pending, its reason and the drain of
      R6 are the state of the answer, kept by the execution's stop machine (``stop.py``,
      rule 10) that the mapper shares with the session's actors.
  R6. After ``turn_aborted()`` closed an open turn, the mapper *drains* the dead turn: until
      the next ``init`` (or the end of the stream), its turn messages emit nothing and its late
      result is counted in the usage ledger (interrupted turns cost money too) but never
      becomes a ``Result`` - so it cannot close the next turn. Echoed push uuids (and those the
      late result lists), the subagent task map and the task lifecycle are still recorded.
  R7. ``stream_ended(error)``: the end of the CLI's output. A pending abort gives ``Aborted``
      (an ``error`` is then reported first, non-fatal); else ``error`` (made fatal) ends the
      turn; else an open turn ends with ``Error(code="cli_exited")``. With no turn open and
      nothing to report it emits nothing. Background tasks can no longer finish: the in-flight
      set is cleared.

Assistant messages
  R8. The SDK yields one ``AssistantMessage`` per content block, all sharing ``message_id``.
      The blocks are buffered per stream (the main thread, and each subagent by its
      ``parent_tool_use_id``) and emitted as ONE ``AssistantMessage`` event holding every block
      in order. A stream's buffer is flushed when that stream starts another message (an
      assistant block or a ``message_start`` with another id), when that stream's user message
      (tool results) arrives, a subagent's buffer when its task finishes (before
      ``SubagentCompleted``), and all buffers are flushed before any result, ``init`` and
      terminal event, so nothing is lost at a terminal event. A message whose blocks straddle a
      flush is reported as two events with the same ``message_id`` (split, never dropped). A
      block with no ``message_id`` is a message of its own.
  R9. ``ToolUse`` is emitted as soon as its block arrives (before the buffered message): tools
      run before the message is complete. Each ``tool_use`` id is reported at most once. The
      ``Skill`` tool also emits ``SkillInvoked``.
  R10. Todo tools (main thread only, like the CLI's own todo observer): ``TodoWrite``,
      ``TaskCreate`` and ``TaskUpdate`` update the list (``todos.py``) and emit
      ``TodoListUpdated`` with the whole list instead of ``ToolUse``; ``TaskList`` / ``TaskGet``
      emit nothing. In the message their block becomes ``TodoListContent``, and their
      ``tool_result`` is suppressed (event and block). A ``TaskCreate`` result that names the
      task id (or failed) changes the list, so it emits one more ``TodoListUpdated``. A todo
      call the CLI refused (its result ``is_error``) is reported as
      ``WarningEvent(code="todo_refused")`` with the CLI's message, and its change is taken
      back (one more ``TodoListUpdated``) when no later todo call changed the list since.

User messages
  R11. A user message with ``tool_result`` blocks -> ``AssistantMessage(role="user")`` with its
      blocks, then one ``ToolResult`` per block (``is_error`` passed through, ``tool_name`` from
      the remembered ``tool_use``).
  R12. A user message with only text is the CLI's echo of something we sent (with
      ``replay-user-messages``): ``push_accepted`` already emitted its ``UserMessage``, so it
      emits nothing. Its ``uuid`` is queued for ``pop_consumed_uuids()``, which the actor
      drains after each ``feed`` into ``ExecutionLifecycle.consumed``. The uuids listed by a
      swallowed late result (R6) are queued there too; a ``Result`` carries its own
      ``user_message_uuids`` for ``ExecutionLifecycle.result_arrived``.

Subagents
  R13. Every message with ``parent_tool_use_id`` is ``is_subagent=True``; ``subagent_task_id``
      comes from the ``tool_use_id -> task_id`` map filled by ``task_started`` (None before it).
  R14. ``task_started`` -> ``SubagentStarted``; ``task_progress`` and non-terminal
      ``task_updated`` -> ``SubagentProgress``; ``task_notification`` and terminal
      ``task_updated`` (completed/failed/stopped/killed) -> ``SubagentCompleted``, once per
      task. ``tasks_in_flight`` = started and not completed.

System and other messages
  R15. ``init`` -> ``TurnStarted``; ``compact_boundary`` -> ``Flush``; ``api_retry`` -> ``Retry``;
      ``tool_use_summary`` (the actor re-wraps the raw frame, which the SDK parser drops, as a
      ``SystemMessage`` with that subtype and the frame as ``data``; the CLI's frame is
      ``{summary, preceding_tool_use_ids, uuid, session_id}``) -> one ``ToolUseSummary``
      (never a ``ToolUse``: it is no tool call), once per uuid; any other subtype ->
      ``Passthrough("system:<subtype>")``.
      ``Passthrough`` events (also ``RateLimitEvent`` with status ``allowed`` and
      ``ConversationResetMessage`` below) are emitted only when the mapper was made with
      ``passthrough=True``; otherwise those messages emit nothing (and take no ``seq``).
      ``RateLimitEvent`` -> ``WarningEvent(code="rate_limit")`` unless its status is
      ``allowed`` (then ``Passthrough``); ``ConversationResetMessage`` -> ``Passthrough``.
  R16. A result -> ``Result`` with the turn's usage and running totals from the ``UsageLedger``
      (``accounting.py``), ``todo_list_snapshot`` (None if no todo tool was ever used) and
      ``final=False``: whether it ends the execution is the actor's call (``lifecycle.py``).
      With an output schema, a successful result's ``structured_output`` is checked against it
      and a ``WarningEvent(code="structured_output_invalid")`` before the result says where it
      does not follow it (or that it is missing).
  R17. A stream whose message started (``message_start`` / deltas) but another message began
      before any complete block of it arrived broke off (a mid-stream API error; the CLI asks
      again, possibly without streaming): ``WarningEvent(code="stream_restarted")`` naming the
      void message id, so a consumer can drop its deltas.
  R18. A result that failed on the model API (``is_error`` with ``api_error_status`` or
      ``terminal_reason="api_error"``) is preceded by a non-fatal
      ``Error(code="api_error", status=N)``, so consumers can filter API failures by kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, assert_never

import attrs
import claude_agent_sdk as sdk
from jsonschema import Draft202012Validator

from claude_trio.protocol.checks import is_int
from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.protocol.session import mapper_system, todos
from claude_trio.protocol.session.accounting import UsageLedger
from claude_trio.protocol.session.events import (
    Aborted,
    AssistantMessage,
    ContentBlock,
    Error,
    Event,
    NormalizedMessage,
    Passthrough,
    SkillInvoked,
    SubagentCompleted,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    TodoItem,
    ToolResult,
    ToolResultContent,
    ToolUse,
    ToolUseContent,
    UnknownContent,
    UserMessage,
    WarningEvent,
    copy_event,
    is_terminal,
)
from claude_trio.protocol.session.mapper_system import TOOL_USE_SUMMARY, parent_of
from claude_trio.protocol.session.mapper_tools import SubagentTasks, TodoTracker
from claude_trio.protocol.session.outcomes import AbortPhase, Outcome
from claude_trio.protocol.session.stop import StopMachine
from claude_trio.protocol.session.usage import normalize_usage

__all__ = ["SKILL_TOOL", "TOOL_USE_SUMMARY", "Mapper"]

SKILL_TOOL = "Skill"

_E = TypeVar("_E", bound=Event)

# Frozen events are written once, right after the mapper builds them (see Mapper._stamp).
_set_field = object.__setattr__


@attrs.define
class _Buffer:
    """The blocks of one API message seen so far (rule R8)."""

    message_id: str | None
    parent_tool_use_id: str | None
    model: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    blocks: list[ContentBlock] = attrs.Factory(list)
    raws: list[sdk.AssistantMessage] = attrs.Factory(list)


class Mapper:
    """The SDK -> unified event state machine of one session. See the module's rules."""

    def __init__(
        self,
        *,
        passthrough: bool = True,
        output_schema: Mapping[str, Any] | None = None,
        stop: StopMachine | None = None,
        hook_events: bool = False,
    ) -> None:
        """``stop``: the execution's stop machine, shared with the session's actors; it keeps
        the state of the answer to an abort (``stop.py``, rule 10). By default a private one.
        ``hook_events``: the CLI's hook lifecycle frames (``system:hook_*``, sent with
        ``include_hook_events``) are passthrough events even when ``passthrough`` is off."""
        self._stop = stop if stop is not None else StopMachine()
        self._passthrough = passthrough
        self._hook_events = hook_events
        self._output_validator = (
            Draft202012Validator(dict(output_schema)) if output_schema is not None else None
        )
        self._seq = 0
        self._turn = 0
        self._turn_started = False
        self._turn_open = False
        self._execution_started = False
        self._buffers: dict[str | None, _Buffer] = {}
        self._stream_message_ids: dict[str | None, str] = {}
        self._last_assistant_ids: dict[str | None, str] = {}
        self._tasks = SubagentTasks()
        # The same dict, read by _emit for every subagent event (no lookup through _tasks).
        self._task_by_tool_use = self._tasks.task_by_tool_use
        self._tool_names: dict[str, str] = {}
        self._reported: set[str] = set()
        self._summaries: set[str] = set()  # the uuids of the tool-use summaries reported
        # Main-thread tool calls of the open turn with no result yet (an abort's phase).
        self._running_tools: set[str] = set()
        self._todos = TodoTracker()
        self._ledger = UsageLedger()
        self._consumed: list[str] = []
        # The input of the latest main-thread model call, and the model: the context used.
        self._context_tokens: int | None = None
        self._model: str | None = None
        self._turn_started = False  # a turn of this execution started (errors' phase)

    # -- state -----------------------------------------------------------------------------

    @property
    def turn(self) -> int:
        """The open turn's number, or the last closed one's (0 before the first turn)."""
        return self._turn

    @property
    def turn_open(self) -> bool:
        return self._turn_open

    @property
    def aborting(self) -> bool:
        """An abort was requested and is not answered by an ``Aborted`` yet."""
        return self._stop.abort_pending

    @property
    def tasks_in_flight(self) -> frozenset[str]:
        return frozenset(self._tasks.in_flight)

    @property
    def ledger(self) -> UsageLedger:
        return self._ledger

    @property
    def todo_snapshot(self) -> tuple[TodoItem, ...] | None:
        return self._todos.snapshot

    def pop_consumed_uuids(self) -> list[str]:
        """The uuids of echoed user messages seen since the last call (rule R12)."""
        consumed, self._consumed = self._consumed, []
        return consumed

    # -- inputs other than SDK messages ----------------------------------------------------

    def start_execution(self) -> None:
        """A new execution begins: turns count from 1 again and the execution usage restarts."""
        if self._turn_open:
            raise LocalProtocolError(
                f"start_execution() while turn {self._turn} is open; end it first "
                "(a result, turn_aborted() or stream_ended())"
            )
        self._execution_started = True
        self._turn = 0
        self._turn_started = False
        self._stop.execution_started()
        self._ledger.start_execution()

    def stamp(self, event: _E) -> _E:
        """Stamp a copy of an event synthesized outside the mapper (user input, warnings,
        errors); the caller's event is left as it was."""
        if is_terminal(event):
            raise LocalProtocolError(
                f"stamp() got a terminal {event.kind} event; end a turn with "
                "turn_aborted() or stream_ended(error) so the turn is closed exactly once"
            )
        return self._stamp(copy_event(event))

    def push_accepted(
        self, *, text: str, uuid: str, timestamp: float, images: int = 0
    ) -> list[Event]:
        """A push was accepted onto the input channel: its ``UserMessage`` event."""
        self._ensure_execution()
        message = UserMessage(text=text, uuid=uuid, timestamp=timestamp, images=images)
        return [self._stamp(message)]

    def abort_requested(
        self, reason: str | None = None, outcome: Outcome | None = None
    ) -> list[Event]:
        """Mark an abort as pending (rule R5). Emits nothing; idempotent. ``reason``, when
        given, is the ``Aborted`` event's reason even when the CLI confirms the abort with a
        reason of its own (a timeout says which); ``outcome``, when given, its outcome (the
        first one given stays)."""
        self._stop.abort_requested(reason, outcome)
        return []

    def turn_aborted(
        self, reason: str = "aborted", outcome: Outcome = Outcome.ABORTED
    ) -> list[Event]:
        """Synthesize the ``Aborted`` terminal if the abort has none yet (rules R5, R6);
        ``outcome`` unless the pending abort has one."""
        events: list[Event] = []
        stop = self._stop
        if self._turn_open:
            self._flush_all(events)
            self._terminal(events, self._aborted(reason, outcome), drain=True)
        elif stop.abort_pending:
            self._terminal(events, self._aborted(reason, outcome))
        return events

    def _aborted(self, reason: str, outcome: Outcome = Outcome.ABORTED) -> Aborted:
        stop = self._stop
        return Aborted(
            reason=stop.abort_reason or reason,
            outcome=stop.abort_outcome or outcome,
            phase=stop.abort_phase or self.activity,
        )

    @property
    def activity(self) -> AbortPhase:
        """What the execution is doing, as an abort's ``phase`` names it (rule R5)."""
        if not self._turn_started:
            return "starting"
        if not self._turn_open:
            return "between_turns"
        return "tools" if self._running_tools else "streaming"

    def stream_ended(self, error: Error | None = None) -> list[Event]:
        """The CLI's output ended (rule R7)."""
        events: list[Event] = []
        self._flush_all(events)
        self._tasks.in_flight.clear()
        stop = self._stop
        stop.drain_ended()
        terminal: Event
        if stop.abort_pending:
            if error is not None:
                events.append(self._stamp(attrs.evolve(error, fatal=False)))
            terminal = self._aborted("aborted")
        elif error is not None:
            terminal = attrs.evolve(error, fatal=True)
        elif self._turn_open:
            terminal = Error(
                code="cli_exited",
                message=f"the CLI's output ended before the result of turn {self._turn}",
            )
        else:
            return events
        self._terminal(events, terminal)
        return events

    # -- SDK messages ----------------------------------------------------------------------

    def feed(self, message: sdk.Message) -> list[Event]:
        """Map one SDK message to the events it causes (possibly none)."""
        self._ensure_execution()
        events: list[Event] = []
        match message:
            case sdk.StreamEvent():
                self._on_stream_event(message, events)
            case sdk.AssistantMessage():
                self._on_assistant(message, events)
            case sdk.UserMessage():
                self._on_user(message, events)
            case sdk.ResultMessage():
                self._on_result(message, events)
            case sdk.TaskStartedMessage():
                self._subagent(self._tasks.started(message), message, events)
            case sdk.TaskProgressMessage():
                self._subagent(self._tasks.progress(message), message, events)
            case sdk.TaskNotificationMessage():
                self._subagent(self._tasks.notified(message), message, events)
            case sdk.TaskUpdatedMessage():
                self._subagent(self._tasks.updated(message), message, events)
            case sdk.SystemMessage():
                self._on_system(message, events)
            case sdk.RateLimitEvent():
                notice = mapper_system.rate_limit(message)
                if isinstance(notice, Passthrough):
                    self._pass(events, notice)
                else:
                    self._emit(events, notice)
            case sdk.ConversationResetMessage():
                self._pass(events, mapper_system.conversation_reset(message))
            case _:
                assert_never(message)
        return events

    # -- stream events and assistant messages ----------------------------------------------

    def _on_stream_event(self, message: sdk.StreamEvent, events: list[Event]) -> None:
        if self._stop.draining:
            return
        parent = message.parent_tool_use_id
        if parent is None:
            self._open_turn()
        event = message.event
        event_type = event.get("type")
        if event_type == "content_block_delta":
            # The hot path: nearly every frame of a turn is a text or thinking delta.
            delta = event.get("delta")
            if not isinstance(delta, Mapping):
                return
            delta_type = delta.get("type")
            if delta_type == "text_delta":
                cls: type[TextDelta | ThinkingDelta] = TextDelta
                text = delta.get("text")
            elif delta_type == "thinking_delta":
                cls = ThinkingDelta
                text = delta.get("thinking")
            else:
                return  # signature / input_json deltas: the complete blocks carry them
            index = event.get("index")
            self._emit(
                events,
                cls(
                    text=text if isinstance(text, str) else "",
                    message_id=self._stream_message_ids.get(parent),
                    index=index if is_int(index) else None,
                    raw=message,
                ),
                parent=parent,
            )
            return
        match event_type:
            case "message_start":
                body = event.get("message")
                message_id = body.get("id") if isinstance(body, Mapping) else None
                if isinstance(message_id, str):
                    self._check_restart(parent, message_id, events)
                    self._stream_message_ids[parent] = message_id
                    buffer = self._buffers.get(parent)
                    if buffer is not None and buffer.message_id != message_id:
                        self._flush(parent, events)
            case _:
                pass  # message_delta, content_block_start/stop, message_stop, ping: state only

    def _on_assistant(self, message: sdk.AssistantMessage, events: list[Event]) -> None:
        if self._stop.draining:
            return
        parent = message.parent_tool_use_id
        if parent is None:
            self._open_turn()
        if message.message_id is not None:
            self._check_restart(parent, message.message_id, events)
            self._last_assistant_ids[parent] = message.message_id
        buffer = self._buffers.get(parent)
        if buffer is not None and (
            message.message_id is None or buffer.message_id != message.message_id
        ):
            self._flush(parent, events)
            buffer = None
        if buffer is None:
            buffer = self._buffers[parent] = _Buffer(
                message_id=message.message_id, parent_tool_use_id=parent
            )
        buffer.raws.append(message)
        if parent is None:
            self._model = message.model or self._model
            if message.usage:
                self._context_tokens = normalize_usage(message.usage).input_tokens
        buffer.model = message.model or buffer.model
        buffer.stop_reason = message.stop_reason or buffer.stop_reason
        buffer.error = buffer.error or message.error
        for block in message.content:
            buffer.blocks.append(self._assistant_block(block, parent, events))
        if message.message_id is None:
            self._flush(parent, events)

    def _check_restart(self, parent: str | None, message_id: str, events: list[Event]) -> None:
        """R17: a streamed message that never completed before another one began."""
        streamed = self._stream_message_ids.get(parent)
        if (
            streamed is None
            or streamed == message_id
            or self._last_assistant_ids.get(parent) == streamed
        ):
            return
        del self._stream_message_ids[parent]
        self._emit(
            events,
            WarningEvent(
                message=f"the model's stream broke off before message {streamed} completed; "
                f"the CLI asked again (message {message_id}). Deltas of {streamed} are void.",
                code="stream_restarted",
            ),
            parent=parent,
        )

    def _assistant_block(
        self, block: sdk.ContentBlock, parent: str | None, events: list[Event]
    ) -> ContentBlock:
        match block:
            case sdk.TextBlock():
                return TextContent(text=block.text)
            case sdk.ThinkingBlock():
                return ThinkingContent(thinking=block.thinking, signature=block.signature)
            case sdk.ToolUseBlock():
                return self._tool_use(block, parent, events)
            case sdk.ToolResultBlock():
                return ToolResultContent(
                    tool_use_id=block.tool_use_id, content=block.content, is_error=block.is_error
                )
            case sdk.ServerToolUseBlock() | sdk.ServerToolResultBlock():
                return UnknownContent(block=block)
            case _:
                assert_never(block)

    def _tool_use(
        self, block: sdk.ToolUseBlock, parent: str | None, events: list[Event]
    ) -> ContentBlock:
        self._tool_names[block.id] = block.name
        if parent is None:
            self._running_tools.add(block.id)
        first = block.id not in self._reported
        self._reported.add(block.id)
        if parent is None and block.name in todos.TODO_TOOLS:
            content, update = self._todos.call(block, first=first)
            if update is not None:
                self._emit(events, update)
            return content
        if first:
            self._emit(
                events,
                ToolUse(tool_use_id=block.id, name=block.name, input=block.input, raw=block),
                parent=parent,
            )
            skill = block.input.get("skill")
            if block.name == SKILL_TOOL and isinstance(skill, str):
                self._emit(
                    events,
                    SkillInvoked(skill=skill, tool_use_id=block.id, raw=block),
                    parent=parent,
                )
        return ToolUseContent(tool_use_id=block.id, name=block.name, input=block.input)

    def _flush(self, parent: str | None, events: list[Event]) -> None:
        buffer = self._buffers.pop(parent, None)
        if buffer is None:
            return
        normalized = NormalizedMessage(
            role="assistant",
            content=tuple(buffer.blocks),
            message_id=buffer.message_id,
            model=buffer.model,
            stop_reason=buffer.stop_reason,
            error=buffer.error,
        )
        self._emit(
            events, AssistantMessage(message=normalized, raw=tuple(buffer.raws)), parent=parent
        )

    def _flush_all(self, events: list[Event]) -> None:
        for parent in list(self._buffers):
            self._flush(parent, events)

    # -- user messages ---------------------------------------------------------------------

    def _on_user(self, message: sdk.UserMessage, events: list[Event]) -> None:
        content = message.content
        if isinstance(content, str) or not any(
            isinstance(block, sdk.ToolResultBlock) for block in content
        ):
            if message.uuid is not None:
                self._consumed.append(message.uuid)
            if message.parent_tool_use_id is None and not self._stop.draining:
                self._open_turn()
            return
        if self._stop.draining:
            return
        parent = message.parent_tool_use_id
        if parent is None:
            self._open_turn()
        self._flush(parent, events)
        results = [block for block in content if isinstance(block, sdk.ToolResultBlock)]
        if parent is None:
            self._running_tools.difference_update(block.tool_use_id for block in results)
        blocks: list[ContentBlock] = []
        tool_results: list[ToolResult] = []
        for block in content:
            match block:
                case sdk.ToolResultBlock():
                    todo_tool = self._todos.tool_uses.get(block.tool_use_id)
                    if todo_tool is not None:
                        # A todo tool's result is suppressed; it may change the list (R10).
                        for event in self._todos.result(
                            block,
                            todo_tool,
                            message.tool_use_result if len(results) == 1 else None,
                        ):
                            self._emit(events, event)
                        continue
                    blocks.append(
                        ToolResultContent(
                            tool_use_id=block.tool_use_id,
                            content=block.content,
                            is_error=block.is_error,
                        )
                    )
                    tool_results.append(
                        ToolResult(
                            tool_use_id=block.tool_use_id,
                            content=block.content,
                            is_error=block.is_error,
                            tool_name=self._tool_names.get(block.tool_use_id),
                            raw=block,
                        )
                    )
                case sdk.TextBlock():
                    blocks.append(TextContent(text=block.text))
                case sdk.ToolUseBlock():
                    blocks.append(
                        ToolUseContent(tool_use_id=block.id, name=block.name, input=block.input)
                    )
                case _:
                    blocks.append(UnknownContent(block=block))
        if blocks:
            normalized = NormalizedMessage(role="user", content=tuple(blocks))
            self._emit(events, AssistantMessage(message=normalized, raw=message), parent=parent)
        for result in tool_results:
            self._emit(events, result, parent=parent)

    # -- results ---------------------------------------------------------------------------

    def _on_result(self, message: sdk.ResultMessage, events: list[Event]) -> None:
        self._flush_all(events)
        usage = self._ledger.record_result(message)
        uuids = mapper_system.consumed_uuids(message)
        if self._stop.draining:
            # The aborted turn's late result: counted, not reported (R6); the pushes it took in
            # are consumed all the same, and only this queue can tell the actor so (R12).
            self._stop.drain_ended()
            self._consumed.extend(uuids)
            return
        self._open_turn()
        terminal: Event
        if self._stop.abort_pending and mapper_system.is_abort_result(message):
            stop = self._stop
            terminal = mapper_system.aborted(
                message,
                reason=stop.abort_reason,
                usage=usage,
                outcome=stop.abort_outcome or Outcome.ABORTED,
                phase=stop.abort_phase,
                activity=self.activity,
            )
        else:
            error = mapper_system.api_error(message)
            if error is not None:
                self._emit(events, error)
            warning = mapper_system.structured_output_warning(self._output_validator, message)
            if warning is not None:
                self._emit(events, warning)
            terminal = mapper_system.result(
                message,
                usage=usage,
                uuids=uuids,
                todo_list_snapshot=self._todos.snapshot,
                context_tokens=self._context_tokens,
                model=self._model,
            )
        self._terminal(events, terminal)

    # -- subagent tasks ------------------------------------------------------------------

    def _subagent(
        self, event: Event | None, message: sdk.SystemMessage, events: list[Event]
    ) -> None:
        """Emit a subagent task's event (R14); None: a task that already completed."""
        if event is None:
            return
        if isinstance(event, SubagentCompleted) and event.tool_use_id is not None:
            # The subagent's last message is still buffered (R8): it belongs before its end.
            self._flush(event.tool_use_id, events)
        self._emit(events, event, parent=parent_of(message))

    # -- system messages -------------------------------------------------------------------

    def _on_system(self, message: sdk.SystemMessage, events: list[Event]) -> None:
        match message.subtype:
            case "init":
                self._stop.drain_ended()
                self._flush_all(events)
                self._open_turn()
                self._emit(events, mapper_system.turn_started(message))
            case "compact_boundary" if not self._stop.draining:
                self._open_turn()
                self._emit(events, mapper_system.compacted(message))
            case "api_retry" if not self._stop.draining:
                self._open_turn()
                self._emit(events, mapper_system.retry(message))
            case "tool_use_summary" if not self._stop.draining:
                self._on_tool_use_summary(message, events)
            case "compact_boundary" | "api_retry" | "tool_use_summary":
                pass  # draining an aborted turn (R6)
            case _:
                self._pass(events, mapper_system.other_system(message))

    def _on_tool_use_summary(self, message: sdk.SystemMessage, events: list[Event]) -> None:
        parent = parent_of(message)
        if parent is None:
            self._open_turn()
        summary = mapper_system.tool_use_summary(message, next_seq=self._seq + 1)
        if summary.summary_id in self._summaries:
            return
        self._summaries.add(summary.summary_id or "")
        self._emit(events, summary, parent=parent)

    # -- stamping and turns ----------------------------------------------------------------

    def _ensure_execution(self) -> None:
        if not self._execution_started:
            self.start_execution()

    def _turn_number(self) -> int:
        if not self._execution_started:
            return 0
        return self._turn if self._turn_open else self._turn + 1

    def _open_turn(self) -> None:
        if not self._turn_open:
            self._turn += 1
            self._turn_open = True
            self._turn_started = True

    def _stamp(self, event: _E) -> _E:
        """Set ``turn`` and ``seq`` on an event this mapper has just built, in place.

        Nobody else holds the event yet, so writing its two fields is safe, and it is the hot
        path (once per delta): ``attrs.evolve`` would build every event twice.
        """
        self._seq += 1
        _set_field(event, "turn", self._turn_number())
        _set_field(event, "seq", self._seq)
        if isinstance(event, Error) and event.phase is None:
            # Before the execution's first turn started, an error is about starting.
            _set_field(event, "phase", "runtime" if self._turn_started else "init")
        return event

    def _emit(self, events: list[Event], event: Event, *, parent: str | None = None) -> None:
        if parent is not None:
            _set_field(event, "is_subagent", True)
            _set_field(event, "subagent_task_id", self._task_by_tool_use.get(parent))
        events.append(self._stamp(event))

    def _pass(self, events: list[Event], event: Passthrough) -> None:
        """A frame with no unified meaning: an event only when passthrough is on (R15)."""
        if self._passthrough or (
            self._hook_events and event.frame_type.startswith("system:hook_")
        ):
            self._emit(events, event)

    def _terminal(self, events: list[Event], event: Event, *, drain: bool = False) -> None:
        """Close the open turn (or consume the next number when none is open) with ``event``;
        ``drain``: an ``Aborted`` that closes a turn the CLI is still finishing (R6)."""
        if isinstance(event, Error) and event.phase is None:
            _set_field(event, "phase", "runtime" if self._turn_started else "init")
        if not self._turn_open:  # a number of its own, not a turn that started
            self._turn += 1
            self._turn_open = True
        events.append(self._stamp(event))
        self._turn_open = False
        self._running_tools.clear()
        if isinstance(event, Aborted):
            self._stop.answered(drain=drain)
