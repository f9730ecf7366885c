"""Showing a unified event stream to a person in a terminal, or as JSON lines to a program.

:class:`Renderer` turns events into what someone watching an agent wants to see: the answer
streamed as it is written, thinking dimmed, one compact line per tool call and result, the todo
list as a checklist, subagents indented under the ``Agent`` call that started them, retries and
warnings in yellow, errors in red, and a usage/cost line at the end of each turn.

It is synchronous on purpose: ``feed`` only writes to a ``rich`` console, so the caller's event
loop calls it directly. Everything is printed as :class:`rich.text.Text` (never markup), so a tool
output containing ``[bold]`` is shown as is. When the console is not a terminal (a pipe, a file,
a test) the output is plain text: no ANSI codes, no spinner.

:func:`ask_interactively` asks the user a :class:`UserInputRequest` through an injected async
``read_line`` (the CLI reads stdin in a thread; tests script it).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TextIO, assert_never

import trio
from rich.console import Console
from rich.status import Status
from rich.text import Text

from claude_trio.protocol.fanout.codec import dumps, event_text, to_json_safe
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    AssistantMessage,
    ControlApplied,
    Error,
    Event,
    Flush,
    HookInvoked,
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
    TodoListUpdated,
    ToolResult,
    ToolUse,
    ToolUseSummary,
    TurnStarted,
    UserInputRequest,
    UserInputResolved,
    UserMessage,
    WarningEvent,
    is_terminal,
)
from claude_trio.protocol.session.outcomes import AbortPhase, Outcome
from claude_trio.protocol.session.usage import Usage

INDENT = "  "
RESULT_PREVIEW_LINES = 3
LINE_PREVIEW_CHARS = 120
INPUT_PREVIEW_CHARS = 80

# The input field that best says what a well-known tool call does.
_TOOL_SUMMARY_KEYS: Mapping[str, str] = {
    "Bash": "command",
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
    "Grep": "pattern",
    "Glob": "pattern",
    "WebFetch": "url",
    "WebSearch": "query",
    "Agent": "description",
    "Task": "description",
    "Skill": "skill",
}

_TODO_MARKS: Mapping[str, str] = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}

STYLE_THINKING = "dim italic"
STYLE_TOOL = "cyan"
STYLE_OK = "green"
STYLE_WARN = "yellow"
STYLE_ERROR = "bold red"
STYLE_USER = "bold magenta"
STYLE_QUESTION = "bold blue"
STYLE_DIM = "dim"


class EventSink(Protocol):
    """What the ``claude-trio`` command feeds events into: a :class:`Renderer` or JSON lines."""

    def feed(self, event: Event) -> None: ...

    def close(self) -> None: ...


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def summarize_tool_input(name: str, tool_input: Mapping[str, Any]) -> str:
    """A short, one-line description of a tool call's input."""
    key = _TOOL_SUMMARY_KEYS.get(name)
    if key is not None and isinstance(tool_input.get(key), str):
        return shorten(tool_input[key], INPUT_PREVIEW_CHARS)
    if not tool_input:
        return ""
    encoded = json.dumps(to_json_safe(tool_input), ensure_ascii=False)
    return shorten(encoded, INPUT_PREVIEW_CHARS)


def tool_result_text(content: Any) -> str:
    """The readable text of a tool result (a string, or the CLI's list of content blocks)."""
    match content:
        case None:
            return ""
        case str():
            return content
        case list() | tuple():
            parts = []
            for item in content:
                if isinstance(item, Mapping) and isinstance(item.get("text"), str):
                    parts.append(item["text"])
                elif isinstance(item, Mapping) and item.get("type") == "image":
                    parts.append("[image]")
                else:
                    parts.append(tool_result_text(item))
            return "\n".join(parts)
        case _:
            return json.dumps(to_json_safe(content), ensure_ascii=False)


_PHASE_WORDS: dict[AbortPhase, str] = {
    "starting": "before the first turn",
    "streaming": "while the model answered",
    "tools": "while a tool ran",
    "between_turns": "between turns",
}


def aborted_label(event: Aborted) -> str:
    """``aborted``, with what stopped it unless it was ``abort()`` and what it was doing:
    ``aborted [run_timeout] while a tool ran``."""
    label = "aborted"
    if event.outcome is not Outcome.ABORTED:
        label += f" [{event.outcome.value}]"
    if event.phase is not None:
        label += " " + _PHASE_WORDS[event.phase]
    return label


def format_usage(usage: Usage) -> str:
    """``in 1,200 tok (cache read 1,000) · out 80 tok · $0.0123``."""
    cache = []
    if usage.cache_read_input_tokens:
        cache.append(f"cache read {usage.cache_read_input_tokens:,}")
    if usage.cache_creation_input_tokens:
        cache.append(f"cache write {usage.cache_creation_input_tokens:,}")
    cached = f" ({', '.join(cache)})" if cache else ""
    return (
        f"in {usage.input_tokens:,} tok{cached} · out {usage.output_tokens:,} tok"
        f" · ${usage.cost_usd:.4f}"
    )


class Renderer:
    """Renders unified events on a ``rich`` console; see the module docstring.

    State kept between events: whether a streamed line is still open (so the next block starts
    on a fresh line), which messages were already streamed as deltas (their whole
    ``assistant_message`` is not printed again), tool names by id (to label results), and the
    indentation depth of each tool call and subagent task (the subagent tree).
    """

    def __init__(
        self,
        console: Console,
        *,
        show_thinking: bool = True,
        spinner: bool = True,
        resumable: bool = True,
    ) -> None:
        self.console = console
        self.show_thinking = show_thinking
        #: Whether the session outlives the command, so that the final result can offer
        #: ``--resume ID`` (not for the demo or ``--offline``: their CLI's folder is deleted).
        self.resumable = resumable
        #: Whether :meth:`wait` shows a spinner (on a terminal) while the next event is awaited.
        self.spinner = spinner
        self._open_style: str | None = None  # style of the streamed line still open, if any
        self._streamed_ids: set[str | None] = set()
        self._tool_names: dict[str, str] = {}
        self._tool_depth: dict[str, int] = {}
        self._task_depth: dict[str, int] = {}
        self._status: Status | None = None

    # -- waiting spinner ----------------------------------------------------------------------

    def wait(self, message: str = "waiting for Claude…") -> None:
        """Show a spinner until the next output; a no-op when the console is not a terminal
        or the renderer was made with ``spinner=False``."""
        if not self.spinner or not self.console.is_terminal:
            return
        if self._status is None:
            self._status = self.console.status(Text(message, style=STYLE_DIM))
            self._status.start()
        else:
            self._status.update(Text(message, style=STYLE_DIM))

    def _stop_waiting(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def close(self) -> None:
        """Stop the spinner and end an open streamed line."""
        self._stop_waiting()
        self._end_line()

    # -- output helpers -----------------------------------------------------------------------

    def _end_line(self) -> None:
        if self._open_style is not None:
            self.console.print()
            self._open_style = None

    def _stream(self, text: str, style: str | None) -> None:
        """Print a delta inline; a change between thinking and text starts a new line."""
        if not text:
            return
        if self._open_style is not None and self._open_style != (style or ""):
            self._end_line()
        self.console.print(Text(text, style=style or ""), end="", soft_wrap=True)
        self._open_style = None if text.endswith("\n") else (style or "")

    def _line(self, depth: int, text: str | Text, style: str = "") -> None:
        self._end_line()
        body = text if isinstance(text, Text) else Text(text, style=style)
        self.console.print(
            Text(INDENT * depth) + body, no_wrap=True, overflow="ellipsis", highlight=False
        )

    def _message(self, text: str, style: str) -> None:
        """A warning or an error: whole, wrapped by the terminal (it says what to do)."""
        self._end_line()
        self.console.print(Text(text, style=style), highlight=False)

    def _block(self, depth: int, text: str, style: str = "") -> None:
        """Several lines of free text (a subagent's message), indented, wrapped by the terminal."""
        self._end_line()
        for line in text.splitlines() or [""]:
            self.console.print(Text(INDENT * depth + line, style=style), soft_wrap=True)

    def _depth(self, event: Event) -> int:
        """How deep ``event`` sits in the subagent tree (0: the main agent)."""
        if not event.is_subagent:
            return 0
        if event.subagent_task_id is None:  # arrived before its task_started: one level
            return 1
        return self._task_depth.get(event.subagent_task_id, 1)

    # -- events -------------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """Render one event."""
        self._stop_waiting()
        match event:
            case AdapterReady():
                parts = [event.model or "default model"]
                if event.provider != "anthropic":
                    parts.append(f"via {event.provider}")
                if event.plan_mode:
                    parts.append("plan mode")
                if event.cli_version:
                    parts.append(f"claude {event.cli_version}")
                self._line(0, " · ".join(parts), STYLE_DIM)
            case TurnStarted():
                if event.turn <= 1:
                    model = f" · {event.model}" if event.model else ""
                    self._line(0, f"session {event.session_id or '(new)'}{model}", STYLE_DIM)
            case TextDelta():
                self._streamed_ids.add(event.message_id)
                self._stream(event.text, None)
            case ThinkingDelta():
                self._streamed_ids.add(event.message_id)
                if self.show_thinking:
                    self._stream(event.text, STYLE_THINKING)
            case AssistantMessage():
                self._assistant_message(event)
            case ToolUse():
                self._tool_use(event)
            case ToolResult():
                self._tool_result(event)
            case ToolUseSummary():
                summary = " ".join(event.summary.split())
                self._line(
                    self._depth(event), "· " + shorten(summary, LINE_PREVIEW_CHARS), STYLE_DIM
                )
            case SkillInvoked():
                self._line(self._depth(event), f"skill {event.skill}", STYLE_TOOL)
            case HookInvoked():
                self._hook_invoked(event)
            case ControlApplied():
                value = event.value if event.value is not None else "(default)"
                self._line(0, f"» {event.control.replace('_', ' ')}: {value}", STYLE_DIM)
            case SubagentStarted():
                self._subagent_started(event)
            case SubagentProgress():
                depth = self._task_depth.get(event.task_id, self._depth(event) + 1)
                what = event.last_tool_name or event.description or "working"
                self._line(depth, f"· {shorten(what, LINE_PREVIEW_CHARS)}", STYLE_DIM)
            case SubagentCompleted():
                self._subagent_completed(event)
            case Flush():
                trigger = f" ({event.trigger})" if event.trigger else ""
                self._line(0, f"— compacting history{trigger} —", STYLE_DIM)
            case UserInputRequest():
                self._user_input_request(event)
            case UserInputResolved():
                self._line(0, f"? request {event.request_id}: {event.outcome}", STYLE_DIM)
            case TodoListUpdated():
                self._todo_list(event.items, self._depth(event))
            case UserMessage():
                self._line(0, Text("» you: ", style=STYLE_USER) + Text(event.text))
            case Retry():
                self._retry(event)
            case WarningEvent():
                code = f" [{event.code}]" if event.code else ""
                self._message(f"warning{code}: {event.message}", STYLE_WARN)
            case Passthrough():
                pass  # unmapped frames are for programs (--json), not for people
            case Result():
                self._result(event)
            case Aborted():
                self._line(0, f"{aborted_label(event)}: {event.reason}", STYLE_WARN)
                if event.usage is not None:
                    self._line(0, f"─ {format_usage(event.usage)}", STYLE_DIM)
            case Error():
                self._error(event)
            case _:
                assert_never(event)
        # Spin while the next event is awaited, but never over an open streamed line (the live
        # display would overwrite it) nor while the user is being asked something.
        quiet = isinstance(event, TextDelta | ThinkingDelta | UserInputRequest)
        if self._open_style is None and not quiet and not is_terminal(event):
            self.wait()

    def _assistant_message(self, event: AssistantMessage) -> None:
        message = event.message
        if message.role == "user" or message.message_id in self._streamed_ids:
            # Tool results come as their own events; streamed text was already shown.
            return
        depth = self._depth(event)
        for block in message.content:
            match block:
                case TextContent():
                    self._block(depth, block.text)
                case ThinkingContent():
                    if self.show_thinking:
                        self._block(depth, block.thinking, STYLE_THINKING)
                case _:
                    pass  # tool calls, results and todo lists have their own events
        if message.error is not None:
            self._line(depth, f"error: {message.error}", STYLE_ERROR)

    def _tool_use(self, event: ToolUse) -> None:
        depth = self._depth(event)
        self._tool_names[event.tool_use_id] = event.name
        self._tool_depth[event.tool_use_id] = depth
        if event.synthetic:
            return  # an older peer's tool-use summary: its result line carries the summary
        summary = summarize_tool_input(event.name, event.input)
        line = Text("→ ", style=STYLE_TOOL) + Text(event.name, style="bold " + STYLE_TOOL)
        if summary:
            line += Text(f"({summary})")
        self._line(depth, line)

    def _tool_result(self, event: ToolResult) -> None:
        depth = self._tool_depth.get(event.tool_use_id, self._depth(event))
        name = event.tool_name or self._tool_names.get(event.tool_use_id, "tool")
        lines = tool_result_text(event.content).strip().splitlines()
        if event.synthetic:
            self._line(depth, "· " + shorten(" ".join(lines), LINE_PREVIEW_CHARS), STYLE_DIM)
            return
        if event.is_error:
            head = Text(f"✗ {name} failed", style=STYLE_ERROR)
        else:
            head = Text(f"✓ {name}", style=STYLE_OK)
        if not lines:
            self._line(depth + 1, head)
            return
        head += Text(": " + shorten(lines[0], LINE_PREVIEW_CHARS))
        self._line(depth + 1, head)
        for line in lines[1:RESULT_PREVIEW_LINES]:
            self._line(depth + 2, shorten(line, LINE_PREVIEW_CHARS), STYLE_DIM)
        hidden = len(lines) - RESULT_PREVIEW_LINES
        if hidden > 0:
            self._line(depth + 2, f"… (+{hidden} more lines)", STYLE_DIM)

    def _subagent_started(self, event: SubagentStarted) -> None:
        parent = (
            self._tool_depth.get(event.tool_use_id) if event.tool_use_id is not None else None
        )
        if parent is None:
            # Unknown Agent call: nest under whoever reported it (never under the task itself).
            parent = 0 if event.subagent_task_id == event.task_id else self._depth(event)
        depth = parent + 1
        self._task_depth[event.task_id] = depth
        kind = f" [{event.task_type}]" if event.task_type else ""
        self._line(depth, f"↳ subagent{kind}: {event.description}", STYLE_TOOL)

    def _subagent_completed(self, event: SubagentCompleted) -> None:
        depth = self._task_depth.get(event.task_id, self._depth(event) + 1)
        ok = event.status == "completed"
        mark = "✓" if ok else "✗"
        summary = f": {shorten(event.summary, LINE_PREVIEW_CHARS)}" if event.summary else ""
        style = STYLE_OK if ok else STYLE_ERROR
        self._line(depth, f"{mark} subagent {event.status}{summary}", style)

    def _todo_list(self, items: Sequence[TodoItem], depth: int) -> None:
        done = sum(item.status == "completed" for item in items)
        shown = [item for item in items if item.status != "deleted"]
        self._line(depth, f"Todos ({done}/{len(shown)} done)", "bold")
        for item in shown:
            mark = _TODO_MARKS.get(item.status, "[?]")
            text = item.active_form if item.status == "in_progress" and item.active_form else None
            style = STYLE_DIM if item.status == "completed" else ""
            self._line(depth + 1, f"{mark} {text or item.content}", style)

    def _user_input_request(self, event: UserInputRequest) -> None:
        match event.source:
            case "model-tool":
                for question in event.questions:
                    self._line(0, f"? {question.question}", STYLE_QUESTION)
                    if question.options:
                        self._line(1, " / ".join(question.options), STYLE_DIM)
            case "mcp-elicitation":
                server = event.server_name or "an MCP server"
                self._line(0, f"? {server} asks: {event.message or ''}", STYLE_QUESTION)
            case "tool_permission":
                self._line(0, f"? {approval_title(event)}", STYLE_QUESTION)
                preview = dumps(to_json_safe(event.tool_input or {}))
                self._line(1, shorten(preview, LINE_PREVIEW_CHARS), STYLE_DIM)
            case _:
                assert_never(event.source)

    def _hook_invoked(self, event: HookInvoked) -> None:
        """One line per hook call: which hook, for what, and what it decided. A call with no
        opinion is dim; one that stopped something is a warning; a failed one an error (its
        ``error`` event says why)."""
        what = f" {event.tool_name}" if event.tool_name else ""
        reason = f": {shorten(event.reason, LINE_PREVIEW_CHARS)}" if event.reason else ""
        style = {
            "deny": STYLE_WARN,
            "block": STYLE_WARN,
            "stop": STYLE_WARN,
            "stopped": STYLE_WARN,
            "failed": STYLE_ERROR,
        }.get(event.decision, STYLE_DIM)
        line = f"hook {event.hook_event} {event.hook_name}{what} -> {event.decision}{reason}"
        self._line(self._depth(event), line, style)

    def _retry(self, event: Retry) -> None:
        attempt = ""
        if event.attempt is not None:
            of = f"/{event.max_retries}" if event.max_retries is not None else ""
            attempt = f" {event.attempt}{of}"
        delay = f" in {event.delay_ms / 1000:.1f}s" if event.delay_ms is not None else ""
        why = [str(part) for part in (event.error_status, event.error) if part is not None]
        reason = f" ({' '.join(why)})" if why else ""
        self._line(0, f"retrying API call{attempt}{delay}{reason}", STYLE_WARN)

    def _error(self, event: Error) -> None:
        status = f" (HTTP {event.status})" if event.status is not None else ""
        label = "error" if event.fatal else "error (continuing)"
        self._message(f"{label} [{event.code}]{status}: {event.message}", STYLE_ERROR)
        if event.detail:
            self._block(1, event.detail, STYLE_DIM)

    def _result(self, event: Result) -> None:
        if event.is_error:
            reason = event.terminal_reason or event.subtype
            status = f" (HTTP {event.api_error_status})" if event.api_error_status else ""
            self._line(0, f"turn ended in error: {reason}{status}", STYLE_ERROR)
            for error in event.errors:
                self._line(1, error, STYLE_ERROR)
        parts = [format_usage(event.usage)]
        if event.num_turns is not None:
            parts.append(f"{event.num_turns} turn{'s' if event.num_turns != 1 else ''}")
        if event.duration_ms is not None:
            parts.append(f"{event.duration_ms / 1000:.1f}s")
        self._line(0, "─ " + " · ".join(parts), STYLE_DIM)
        if event.final and event.execution_usage != event.usage:
            self._line(0, f"─ total: {format_usage(event.execution_usage)}", STYLE_DIM)
        if event.final and event.session_id and self.resumable:
            self._line(0, f"─ resume with --resume {event.session_id}", STYLE_DIM)


class JsonLinesRenderer:
    """One compact JSON object per event and line (``event_to_json``), flushed per event."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def feed(self, event: Event) -> None:
        self.stream.write(event_text(event) + "\n")  # valid UTF-8 whatever the CLI sent
        self.stream.flush()

    def close(self) -> None:
        self.stream.flush()


# ---------------------------------------------------------------------------------------------
# Asking the user
# ---------------------------------------------------------------------------------------------

ReadLine = Callable[[str], Awaitable[str | None]]
"""Reads one line after showing ``prompt``; ``None`` at end of input."""


async def ask_interactively(
    request: UserInputRequest, *, console: Console, read_line: ReadLine
) -> dict[str, Any]:
    """Ask the user ``request`` and return the answer in the shape the broker expects.

    * ``model-tool`` (AskUserQuestion): ``{question_text: label}``; several labels (multi-select)
      are joined by ``", "``. The user types an option's number (``1,3`` for several) or free
      text. End of input returns ``{}``: the model is told the user did not answer.
    * ``mcp-elicitation``: ``{"action": "accept", "content": {...}}`` with one value per property
      of ``requested_schema`` (converted to the property's JSON type), or
      ``{"action": "decline"}`` when the first answer is empty or the input ends.
    * ``tool_permission``: ``y`` allow, ``n`` deny (then an optional message for the model),
      ``e`` allow with an edited input (a JSON object), ``a`` always allow (for the session);
      the answer's JSON form (``protocol/extensions/approvals.py``). End of input denies, saying no
      one answered at the terminal.
    """
    await trio.lowlevel.checkpoint()  # trio's rule: every path checkpoints, even with no prompt
    match request.source:
        case "model-tool":
            return await _ask_questions(request.questions, console, read_line)
        case "mcp-elicitation":
            return await _ask_elicitation(request, console, read_line)
        case "tool_permission":
            return await _ask_approval(request, console, read_line)
        case _:
            assert_never(request.source)


TERMINAL_NO_ANSWER = "No one answered the permission request at the terminal (end of input)."


def approval_title(request: UserInputRequest) -> str:
    """One line for a tool approval: the CLI's own sentence when it gives one."""
    if request.title:
        return request.title
    what = request.display_name or request.tool_name or "a tool"
    about = f": {request.description}" if request.description else ""
    return f"Allow {what}{about}?"


async def _ask_approval(
    request: UserInputRequest, console: Console, read_line: ReadLine
) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    console.print()
    console.print(Text(approval_title(request), style=STYLE_QUESTION))
    console.print(Text(json.dumps(to_json_safe(request.tool_input or {}), indent=2)))
    if request.blocked_path:
        console.print(Text(f"path: {request.blocked_path}", style=STYLE_DIM))
    if request.decision_reason:
        console.print(Text(f"why: {request.decision_reason}", style=STYLE_DIM))
    while True:
        line = await read_line("[y]es / [n]o / [e]dit input / [a]lways allow: ")
        if line is None:
            return {"decision": "deny", "message": TERMINAL_NO_ANSWER}
        match line.strip().lower():
            case "y" | "yes":
                return {"decision": "allow"}
            case "a" | "always":
                return {"decision": "always"}
            case "n" | "no":
                message = await read_line("Tell the model why (empty: no reason): ")
                if message is None or not message.strip():
                    return {"decision": "deny"}
                return {"decision": "deny", "message": message.strip()}
            case "e" | "edit":
                edited = await _read_json_object(console, read_line)
                if edited is None:
                    return {"decision": "deny", "message": TERMINAL_NO_ANSWER}
                return {"decision": "allow", "input": edited}
            case _:
                console.print(Text("Please answer y, n, e or a.", style=STYLE_WARN))


async def _read_json_object(console: Console, read_line: ReadLine) -> dict[str, Any] | None:
    """A JSON object typed on one line (asked again until it is one); None at end of input."""
    while True:
        line = await read_line("New input (a JSON object on one line): ")
        if line is None:
            return None
        try:
            value = json.loads(line)
        except ValueError as exc:
            console.print(Text(f"Not JSON: {exc}", style=STYLE_WARN))
            continue
        if isinstance(value, dict):
            return value
        console.print(Text("Please type a JSON object ({...}).", style=STYLE_WARN))


async def _ask_questions(
    questions: Sequence[Question], console: Console, read_line: ReadLine
) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()  # there may be no question to ask
    answers: dict[str, Any] = {}
    for question in questions:
        console.print()
        if question.header:
            console.print(Text(question.header, style=STYLE_DIM))
        console.print(Text(question.question, style=STYLE_QUESTION))
        for number, label in enumerate(question.options, start=1):
            console.print(Text(f"  {number}. {label}"))
        hint = "numbers separated by commas" if question.multi_select else "a number"
        prompt = f"Choose {hint}, or type an answer: " if question.options else "Answer: "
        while True:
            line = await read_line(prompt)
            if line is None:
                return {}
            answer = _choice(line.strip(), question)
            if answer is not None:
                break
            console.print(Text(f"Please enter 1-{len(question.options)} or text.", STYLE_WARN))
        if answer:
            answers[question.question] = answer
    return answers


def _choice(line: str, question: Question) -> str | None:
    """The label(s) ``line`` picks, ``line`` itself as free text, or None for a bad number."""
    tokens = [t.strip() for t in line.split(",")] if question.multi_select else [line]
    if not line or not question.options or not all(t.isdigit() for t in tokens):
        return line
    numbers = [int(t) for t in tokens]
    if not all(1 <= n <= len(question.options) for n in numbers):
        return None
    return ", ".join(question.options[n - 1] for n in numbers)


async def _ask_elicitation(
    request: UserInputRequest, console: Console, read_line: ReadLine
) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()  # the schema may have no property to ask for
    decline: dict[str, Any] = {"action": "decline"}
    server = request.server_name or "An MCP server"
    console.print()
    console.print(Text(f"{server} asks: {request.message or ''}", style=STYLE_QUESTION))
    schema = request.requested_schema or {}
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        line = await read_line("Accept? [y/N] ")
        if line is None or line.strip().lower() not in ("y", "yes"):
            return decline
        return {"action": "accept", "content": {}}
    console.print(Text("(an empty first answer declines)", style=STYLE_DIM))
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    content: dict[str, Any] = {}
    first = True
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        prompt = _property_prompt(name, spec)
        while True:
            line = await read_line(prompt)
            if line is None or (first and not line.strip()):
                return decline
            first = False
            value, problem = _convert(line.strip(), spec, required=name in required_names)
            if problem is None:
                break
            console.print(Text(problem, style=STYLE_WARN))
        if value is not None:
            content[name] = value
    return {"action": "accept", "content": content}


def _property_prompt(name: str, spec: Mapping[str, Any]) -> str:
    details = [str(spec.get("type", "string"))]
    if isinstance(spec.get("description"), str):
        details.append(spec["description"])
    enum = spec.get("enum")
    if isinstance(enum, list):
        details.append("one of " + ", ".join(f"{i}={v}" for i, v in enumerate(enum, start=1)))
    default = f" [{spec['default']}]" if "default" in spec else ""
    title = spec.get("title") if isinstance(spec.get("title"), str) else name
    return f"{title} ({'; '.join(details)}){default}: "


_TRUE = frozenset({"y", "yes", "true", "1"})
_FALSE = frozenset({"n", "no", "false", "0"})


def _convert(line: str, spec: Mapping[str, Any], *, required: bool) -> tuple[Any, str | None]:
    """``(value, None)`` for a valid answer, ``(None, problem)`` otherwise.

    An empty answer takes the property's default, or leaves an optional property out.
    """
    if not line:
        if "default" in spec:
            return spec["default"], None
        return None, ("a value is required" if required else None)
    enum = spec.get("enum")
    if isinstance(enum, list) and enum:
        if line.isdigit() and 1 <= int(line) <= len(enum):
            return enum[int(line) - 1], None
        if line in [str(v) for v in enum]:
            return next(v for v in enum if str(v) == line), None
        return None, "choose one of: " + ", ".join(str(v) for v in enum)
    match spec.get("type"):
        case "integer":
            try:
                return int(line), None
            except ValueError:
                return None, f"{line!r} is not an integer"
        case "number":
            try:
                return float(line), None
            except ValueError:
                return None, f"{line!r} is not a number"
        case "boolean":
            if line.lower() in _TRUE:
                return True, None
            if line.lower() in _FALSE:
                return False, None
            return None, "answer yes or no"
        case _:
            return line, None
