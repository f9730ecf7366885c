"""What an execution did, read back from its events: the :class:`Transcript` (pure, no trio).

``Transcript.of(events)`` takes the events of one execution, in order (a session's stream, a
fleet subscription's, a gateway client's), and sorts them into what a program usually wants
afterwards. ``claude_trio.collect`` builds one from a live stream. Rules:

1. **Who did what.** An event belongs to the main agent unless ``is_subagent``; a subagent's
   event belongs to the task named by ``subagent_task_id``. A subagent's own
   ``subagent_started`` / ``subagent_completed`` belong to the agent that started it (they are
   attributed that way). Subagent events that arrived before their task was known
   (``is_subagent`` with no ``subagent_task_id``) are gathered under one subagent whose
   ``task_id`` is ``None``.
2. **Nesting.** Each subagent has a transcript of its own, listed under the agent that
   started it (``subagents``), so a subagent's subagent is found under it, not under the main
   agent. ``events`` of a transcript are its agent's events and those of every subagent below
   it; the main agent's transcript holds every event given.
3. **Tool calls** pair each ``tool_use`` with the ``tool_result`` of the same id, wherever
   the result was reported; a call is listed under the agent that made it, in the order the
   calls were made, with ``result=None`` while it has none. Results without a call are left
   out of ``tool_calls`` (``claude_trio.testing.check_contract`` reports them). The CLI's
   tool-use summaries (``tool_use_summary`` events) are not calls the agent made: they are in
   ``tool_summaries`` (an older peer's synthetic ``tool_use`` / ``tool_result`` pair of a
   summary is read as one ``ToolUseSummary`` too).
4. **Questions** pair each ``user_input_request`` with its ``user_input_resolved``.
5. **Text.** ``text`` is the answer: the final result's ``text`` when the CLI gave one, else
   the text blocks of the agent's last assistant message that has any (a message of tool
   calls only is passed over), else ``""``.
6. **Usage** (main agent only) is the execution's: the last result's ``execution_usage``,
   plus the usage of an interrupted turn that an ``aborted`` event reports after it.
   ``None`` when no event reported any.
7. **Todos** are the agent's last ``todo_list_updated`` list (empty when it kept none).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from claude_trio.protocol.session.events import (
    Aborted,
    AssistantMessage,
    Error,
    Event,
    NormalizedMessage,
    Result,
    SubagentCompleted,
    SubagentStarted,
    TextContent,
    TodoItem,
    TodoListUpdated,
    ToolResult,
    ToolUse,
    ToolUseSummary,
    UserInputRequest,
    UserInputResolved,
    UserMessage,
    WarningEvent,
    is_terminal,
)
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.usage import Usage, add_usage

__all__ = [
    "Exchange",
    "SubagentRun",
    "ToolCall",
    "Transcript",
    "ends_execution",
]


def ends_execution(event: Event) -> bool:
    """True for the one event that ends an execution: a final result, an abort, a fatal error."""
    if isinstance(event, Result):
        return event.final
    return is_terminal(event)


@attrs.frozen(kw_only=True)
class ToolCall:
    """One tool call and its result (``None`` while none was reported)."""

    use: ToolUse
    result: ToolResult | None = None

    @property
    def tool_use_id(self) -> str:
        return self.use.tool_use_id

    @property
    def name(self) -> str:
        return self.use.name

    @property
    def input(self) -> Any:
        return self.use.input

    @property
    def output(self) -> Any:
        """The result's content (``None`` without a result)."""
        return None if self.result is None else self.result.content

    @property
    def is_error(self) -> bool:
        """The tool reported a failure (False without a result)."""
        return self.result is not None and bool(self.result.is_error)


@attrs.frozen(kw_only=True)
class Exchange:
    """A question (``user_input_request``) and what became of it (``None`` while pending)."""

    request: UserInputRequest
    resolved: UserInputResolved | None = None

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def outcome(self) -> str | None:
        """``answered``, ``expired``, ``cancelled``, ``withdrawn``, ``failed``, or ``None``."""
        return None if self.resolved is None else self.resolved.outcome

    @property
    def answer(self) -> Any:
        """The answer given, when the outcome is ``answered`` (else ``None``)."""
        if self.resolved is None or self.resolved.outcome != "answered":
            return None
        return self.resolved.answer


@attrs.frozen(kw_only=True)
class SubagentRun:
    """One subagent: how it started and ended, and its own :class:`Transcript`.

    ``task_id`` is ``None`` for the events of subagents that arrived before their task was
    known (rule 1).
    """

    task_id: str | None
    started: SubagentStarted | None
    completed: SubagentCompleted | None
    transcript: Transcript

    @property
    def description(self) -> str | None:
        return None if self.started is None else self.started.description

    @property
    def status(self) -> str | None:
        """``completed``, ``failed``, ``stopped``, ... or ``None`` while it runs."""
        return None if self.completed is None else self.completed.status


@attrs.frozen(kw_only=True)
class Transcript:
    """An agent's part of an execution, sorted (see the module docstring for the rules)."""

    events: tuple[Event, ...]
    """Every event of this agent and of the subagents below it, in order (rule 2)."""
    text: str
    """The answer (rule 5)."""
    messages: tuple[NormalizedMessage, ...]
    """The agent's assistant messages, whole, in order."""
    tool_calls: tuple[ToolCall, ...]
    """The agent's tool calls, each with its result (rule 3)."""
    tool_summaries: tuple[ToolUseSummary, ...]
    """The CLI's summaries of the agent's tool calls, in order (rule 3)."""
    subagents: tuple[SubagentRun, ...]
    """The subagents this agent started, in start order (rule 2)."""
    todos: tuple[TodoItem, ...]
    """The agent's todo list as last updated (rule 7)."""
    questions: tuple[Exchange, ...]
    """Questions asked of the user and their answers (rule 4)."""
    user_messages: tuple[UserMessage, ...]
    """Pushes accepted during the execution."""
    results: tuple[Result, ...]
    """Each turn's ``result`` (the main agent's)."""
    errors: tuple[Error, ...]
    """Every ``error`` event (the fatal one too, which is also ``terminal``)."""
    warnings: tuple[WarningEvent, ...]
    usage: Usage | None
    """The execution's usage (rule 6); ``None`` for a subagent and when none was reported."""
    terminal: Result | Aborted | Error | None
    """The event that ended the execution (``None`` for a subagent, or a stream cut short)."""

    @property
    def outcome(self) -> Outcome | None:
        """How the execution ended (the terminal event's ``outcome``; ``outcomes.py``), or
        ``None`` for a subagent and a stream cut short."""
        return None if self.terminal is None else self.terminal.outcome

    @property
    def all_subagents(self) -> tuple[SubagentRun, ...]:
        """Every subagent at any depth, parents before their children."""
        found: list[SubagentRun] = []
        for run in self.subagents:
            found.append(run)
            found.extend(run.transcript.all_subagents)
        return tuple(found)

    @classmethod
    def of(cls, events: Iterable[Event]) -> Transcript:
        """The main agent's transcript of ``events`` (one execution, in order)."""
        return _Builder(tuple(events)).build()


# An agent is the main agent (None), a subagent task id, or the subagents not attributed yet.
_MAIN: str | None = None


class _Unattributed:
    def __repr__(self) -> str:
        return "<subagent events before their task was known>"


_UNATTRIBUTED = _Unattributed()
_Agent = str | None | _Unattributed


def _agent_of(event: Event) -> _Agent:
    if not event.is_subagent:
        return _MAIN
    if event.subagent_task_id is None:
        return _UNATTRIBUTED
    return event.subagent_task_id


def _message_text(message: NormalizedMessage) -> str:
    return "".join(block.text for block in message.content if isinstance(block, TextContent))


class _Builder:
    def __init__(self, events: tuple[Event, ...]) -> None:
        self.events = events
        self.own: dict[_Agent, list[Event]] = {}
        self.parent: dict[_Agent, _Agent] = {}
        self.children: dict[_Agent, list[_Agent]] = {}
        self.started: dict[str, SubagentStarted] = {}
        self.completed: dict[str, SubagentCompleted] = {}
        self.results: dict[str, ToolResult] = {}
        self.resolutions: dict[str, UserInputResolved] = {}

    def _adopt(self, agent: _Agent, parent: _Agent) -> None:
        if agent in self.parent or agent is _MAIN:
            return
        self.parent[agent] = parent
        self.children.setdefault(parent, []).append(agent)

    def build(self) -> Transcript:
        for event in self.events:
            agent = _agent_of(event)
            self.own.setdefault(agent, []).append(event)
            if agent is not _MAIN:
                # A task seen before its start (or never started): under the main agent.
                self._adopt(agent, _MAIN)
            match event:
                case SubagentStarted():
                    self.started.setdefault(event.task_id, event)
                    if event.task_id != agent:
                        self._adopt(event.task_id, agent)
                case SubagentCompleted():
                    self.completed.setdefault(event.task_id, event)
                    if event.task_id != agent:
                        self._adopt(event.task_id, agent)
                case ToolResult():
                    self.results.setdefault(event.tool_use_id, event)
                case UserInputResolved():
                    self.resolutions.setdefault(event.request_id, event)
                case _:
                    pass
        return self._transcript(_MAIN)

    def _below(self, agent: _Agent) -> set[_Agent]:
        found = {agent}
        for child in self.children.get(agent, ()):
            found |= self._below(child)
        return found

    def _transcript(self, agent: _Agent) -> Transcript:
        own = self.own.get(agent, [])
        main = agent is _MAIN
        if main:
            events = self.events
        else:
            below = self._below(agent)
            events = tuple(e for e in self.events if _agent_of(e) in below)
        messages = tuple(
            e.message
            for e in own
            if isinstance(e, AssistantMessage) and e.message.role == "assistant"
        )
        calls: list[ToolCall] = []
        summaries: list[ToolUseSummary] = []
        seen_calls: set[str] = set()
        todos: tuple[TodoItem, ...] = ()
        questions: list[Exchange] = []
        for event in own:
            match event:
                case ToolUse() if event.tool_use_id not in seen_calls:
                    seen_calls.add(event.tool_use_id)
                    result = self.results.get(event.tool_use_id)
                    if event.synthetic:
                        summaries.append(_older_summary(event, result))
                    else:
                        calls.append(ToolCall(use=event, result=result))
                case ToolUseSummary():
                    summaries.append(event)
                case TodoListUpdated():
                    todos = event.items
                case UserInputRequest():
                    questions.append(
                        Exchange(request=event, resolved=self.resolutions.get(event.request_id))
                    )
                case _:
                    pass
        terminal: Result | Aborted | Error | None = None
        usage = None
        results = tuple(e for e in own if isinstance(e, Result))
        if main:
            terminal = next(
                (e for e in own if isinstance(e, Result | Aborted | Error) and ends_execution(e)),
                None,
            )
            usage = _execution_usage(own)
        text = ""
        if isinstance(terminal, Result) and terminal.text:
            text = terminal.text
        else:
            text = next((t for t in map(_message_text, reversed(messages)) if t), "")
        subagents = tuple(
            SubagentRun(
                task_id=child if isinstance(child, str) else None,
                started=self.started.get(child) if isinstance(child, str) else None,
                completed=self.completed.get(child) if isinstance(child, str) else None,
                transcript=self._transcript(child),
            )
            for child in self.children.get(agent, ())
        )
        return Transcript(
            events=tuple(events),
            text=text,
            messages=messages,
            tool_calls=tuple(calls),
            tool_summaries=tuple(summaries),
            subagents=subagents,
            todos=todos,
            questions=tuple(questions),
            user_messages=tuple(e for e in own if isinstance(e, UserMessage)),
            results=results,
            errors=tuple(e for e in own if isinstance(e, Error)),
            warnings=tuple(e for e in own if isinstance(e, WarningEvent)),
            usage=usage,
            terminal=terminal,
        )


def _older_summary(use: ToolUse, result: ToolResult | None) -> ToolUseSummary:
    """An older peer's synthetic pair of a tool-use summary, as the one event it now is."""
    preceding = use.input.get("preceding_tool_use_ids")
    content = None if result is None else result.content
    return ToolUseSummary(
        summary=content if isinstance(content, str) else "",
        preceding_tool_use_ids=tuple(i for i in preceding if isinstance(i, str))
        if isinstance(preceding, list | tuple)
        else (),
        summary_id=use.tool_use_id.removeprefix("tool_use_summary:"),
        turn=use.turn,
        seq=use.seq,
        is_subagent=use.is_subagent,
        subagent_task_id=use.subagent_task_id,
    )


def _execution_usage(events: list[Event]) -> Usage | None:
    usage: Usage | None = None
    for event in events:
        if isinstance(event, Result):
            usage = event.execution_usage
        elif isinstance(event, Aborted) and event.usage is not None:
            usage = event.usage if usage is None else add_usage(usage, event.usage)
    return usage
