"""The terminal renderer, the JSON-lines renderer and interactive answers to user-input requests."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

import pytest
import trio
from rich.console import Console

from claude_trio.cli.render import (
    TERMINAL_NO_ANSWER,
    JsonLinesRenderer,
    Renderer,
    ask_interactively,
)
from claude_trio.protocol.extensions.approvals import check_approval_answer
from claude_trio.protocol.fanout.codec import event_from_json
from claude_trio.protocol.session.events import (
    Aborted,
    AssistantMessage,
    Error,
    Event,
    Flush,
    NormalizedMessage,
    Passthrough,
    Question,
    Result,
    Retry,
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
    UserMessage,
    WarningEvent,
)
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.usage import Usage

USAGE = Usage(
    input_tokens=12_345, output_tokens=678, cache_read_input_tokens=10_000, cost_usd=0.0421
)


def render(events: Sequence[Event], *, show_thinking: bool = True) -> str:
    out = io.StringIO()
    renderer = Renderer(
        Console(file=out, force_terminal=False, width=100), show_thinking=show_thinking
    )
    for event in events:
        renderer.feed(event)
    renderer.close()
    return out.getvalue()


def result(**overrides: object) -> Result:
    fields: dict[str, object] = {
        "subtype": "success",
        "is_error": False,
        "session_id": "sess-1",
        "usage": USAGE,
        "execution_usage": USAGE,
        "session_usage": USAGE,
        "num_turns": 2,
        "duration_ms": 4200,
        "final": True,
    }
    fields.update(overrides)
    return Result(**fields)  # type: ignore[arg-type]


STREAMED_TURN: list[Event] = [
    TurnStarted(turn=1, session_id="sess-1", model="claude-opus-4-6"),
    ThinkingDelta(text="Let me ", message_id="m1"),
    ThinkingDelta(text="think.", message_id="m1"),
    TextDelta(text="Hello ", message_id="m1"),
    TextDelta(text="world.", message_id="m1"),
    AssistantMessage(
        message=NormalizedMessage(
            role="assistant",
            content=(ThinkingContent(thinking="Let me think."), TextContent(text="Hello world.")),
            message_id="m1",
        )
    ),
    result(),
]


def test_deltas_stream_inline_and_whole_message_is_not_repeated() -> None:
    text = render(STREAMED_TURN)
    lines = text.splitlines()
    assert lines[0] == "session sess-1 · claude-opus-4-6"
    # Deltas join on one line; thinking and answer are separate lines; nothing is shown twice.
    assert lines[1] == "Let me think."
    assert lines[2] == "Hello world."
    assert text.count("Hello world.") == 1
    assert "\x1b[" not in text  # not a terminal: plain text, no ANSI codes


def test_thinking_hidden_when_display_is_off() -> None:
    text = render(STREAMED_TURN, show_thinking=False)
    assert "think" not in text
    assert "Hello world." in text


def test_unstreamed_message_is_printed_whole_with_thinking_per_flag() -> None:
    message = AssistantMessage(
        message=NormalizedMessage(
            role="assistant",
            content=(ThinkingContent(thinking="pondering"), TextContent(text="Answer: 42")),
            message_id="m2",
            error="server_error",
        )
    )
    shown = render([message])
    assert "pondering" in shown
    assert "Answer: 42" in shown
    assert "error: server_error" in shown
    assert "pondering" not in render([message], show_thinking=False)


def test_usage_summary_line_has_the_numbers() -> None:
    total = Usage(input_tokens=20_000, output_tokens=1_000, cost_usd=0.1)
    text = render([result(execution_usage=total)])
    assert (
        "─ in 12,345 tok (cache read 10,000) · out 678 tok · $0.0421 · 2 turns · 4.2s" in text
    )
    assert "─ total: in 20,000 tok · out 1,000 tok · $0.1000" in text
    assert "--resume sess-1" in text


def test_error_result_names_the_reason_and_errors() -> None:
    text = render(
        [
            result(
                subtype="error_during_execution",
                is_error=True,
                terminal_reason="api_error",
                api_error_status=529,
                errors=("Overloaded",),
            )
        ]
    )
    assert "turn ended in error: api_error (HTTP 529)" in text
    assert "  Overloaded" in text


def test_tool_calls_are_compact_and_results_truncated() -> None:
    long_output = "\n".join(f"line {i}" for i in range(1, 11))
    text = render(
        [
            ToolUse(tool_use_id="t1", name="Bash", input={"command": "ls  -la\n/tmp"}),
            ToolResult(tool_use_id="t1", content=long_output, is_error=False),
            ToolUse(tool_use_id="t2", name="Custom", input={"x": 1, "y": [1, 2]}),
            ToolResult(tool_use_id="t2", content=[{"type": "text", "text": "[bold]ok"}]),
            ToolUse(tool_use_id="t3", name="Read", input={"file_path": "/nope"}),
            ToolResult(tool_use_id="t3", content="File does not exist.", is_error=True),
            # From a tool_use_summary frame: only the summary is worth a line.
            ToolUse(tool_use_id="s1", name="tool_use_summary", input={"x": 1}, synthetic=True),
            ToolResult(tool_use_id="s1", content="Read 2 files\nok", synthetic=True),
        ]
    )
    assert text.splitlines() == [
        "→ Bash(ls -la /tmp)",
        "  ✓ Bash: line 1",
        "    line 2",
        "    line 3",
        "    … (+7 more lines)",
        '→ Custom({"x": 1, "y": [1, 2]})',
        "  ✓ Custom: [bold]ok",  # markup in tool output is shown literally
        "→ Read(/nope)",
        "  ✗ Read failed: File does not exist.",
        "· Read 2 files ok",
    ]
    assert "line 4" not in text


def test_todo_list_renders_as_checklist_each_time() -> None:
    first = TodoListUpdated(
        items=(
            TodoItem(id="0", content="Write code", status="in_progress", active_form="Writing"),
            TodoItem(id="1", content="Ship", status="pending"),
        ),
        tool_use_id="t1",
        tool_name="TodoWrite",
    )
    second = TodoListUpdated(
        items=(
            TodoItem(id="0", content="Write code", status="completed"),
            TodoItem(id="1", content="Ship", status="in_progress"),
            TodoItem(id="2", content="Old", status="deleted"),
        ),
        tool_use_id="t2",
        tool_name="TaskUpdate",
    )
    assert render([first, second]).splitlines() == [
        "Todos (0/2 done)",
        "  [>] Writing",
        "  [ ] Ship",
        "Todos (1/2 done)",
        "  [x] Write code",
        "  [>] Ship",
    ]


def test_subagent_tree_is_indented_under_its_agent_call() -> None:
    sub: dict[str, Any] = {"is_subagent": True, "subagent_task_id": "task-1"}
    text = render(
        [
            ToolUse(tool_use_id="agent-1", name="Agent", input={"description": "explore"}),
            SubagentStarted(
                task_id="task-1", tool_use_id="agent-1", description="explore", task_type="local"
            ),
            ToolUse(tool_use_id="g1", name="Grep", input={"pattern": "main"}, **sub),
            ToolResult(tool_use_id="g1", content="cli.py:3", **sub),
            AssistantMessage(
                message=NormalizedMessage(
                    role="assistant", content=(TextContent(text="Found it."),), message_id="s1"
                ),
                **sub,
            ),
            SubagentProgress(task_id="task-1", tool_use_id="agent-1", last_tool_name="Grep"),
            # A nested subagent, started from a tool call of the first one.
            ToolUse(tool_use_id="agent-2", name="Agent", input={"description": "dig"}, **sub),
            SubagentStarted(task_id="task-2", tool_use_id="agent-2", description="dig", **sub),
            ToolUse(
                tool_use_id="r1",
                name="Read",
                input={"file_path": "a.py"},
                is_subagent=True,
                subagent_task_id="task-2",
            ),
            SubagentCompleted(task_id="task-2", tool_use_id="agent-2", status="failed"),
            # A task whose Agent call was never seen, attributed to itself: one level deep.
            SubagentStarted(
                task_id="task-3",
                tool_use_id="unseen",
                description="background",
                is_subagent=True,
                subagent_task_id="task-3",
            ),
            SubagentCompleted(
                task_id="task-1", tool_use_id="agent-1", status="completed", summary="done"
            ),
            ToolResult(tool_use_id="agent-1", content="report"),
        ]
    )
    assert text.splitlines() == [
        "→ Agent(explore)",
        "  ↳ subagent [local]: explore",
        "  → Grep(main)",
        "    ✓ Grep: cli.py:3",
        "  Found it.",
        "  · Grep",
        "  → Agent(dig)",
        "    ↳ subagent: dig",
        "    → Read(a.py)",
        "    ✗ subagent failed",
        "  ↳ subagent: background",
        "  ✓ subagent completed: done",
        "  ✓ Agent: report",
    ]


def test_errors_and_warnings_are_shown_whole_however_long() -> None:
    fix = "install bubblewrap and socat (apt-get install bubblewrap socat) or use a soft scope"
    text = render(
        [
            WarningEvent(message="the Bash sandbox is missing: " + fix, code="scope_unconfined"),
            Error(message="a hard path scope cannot start: " + fix, code="config"),
        ]
    )
    assert all(len(line) <= 100 for line in text.splitlines())
    words = " ".join(text.split())
    assert f"warning [scope_unconfined]: the Bash sandbox is missing: {fix}" in words
    assert f"error [config]: a hard path scope cannot start: {fix}" in words


def test_pushes_retries_warnings_errors_and_requests_are_marked() -> None:
    text = render(
        [
            UserMessage(text="also check [red]x", uuid="u1", timestamp=1.0),
            Retry(attempt=2, max_retries=10, delay_ms=1500, error_status=529, error="overloaded"),
            WarningEvent(message="slow down", code="rate_limit"),
            UserInputRequest(
                request_id="r1",
                source="model-tool",
                questions=(Question(question="Which color?", options=("red", "blue")),),
            ),
            UserInputRequest(
                request_id="r2", source="mcp-elicitation", server_name="db", message="Name?"
            ),
            Flush(trigger="auto"),
            Passthrough(frame_type="command_lifecycle", data={"x": 1}),
            Error(message="non-fatal hiccup", code="callback", fatal=False),
            Aborted(reason="user interrupt", usage=Usage(input_tokens=5)),
            Error(message="CLI died", code="cli_exited", status=None, detail="exit 137\nkilled"),
        ]
    )
    assert text.splitlines() == [
        "» you: also check [red]x",
        "retrying API call 2/10 in 1.5s (529 overloaded)",
        "warning [rate_limit]: slow down",
        "? Which color?",
        "  red / blue",
        "? db asks: Name?",
        "— compacting history (auto) —",
        "error (continuing) [callback]: non-fatal hiccup",
        "aborted: user interrupt",
        "─ in 5 tok · out 0 tok · $0.0000",
        "error [cli_exited]: CLI died",
        "  exit 137",
        "  killed",
    ]


def spinning(renderer: Renderer) -> bool:
    return renderer._status is not None


def test_colours_on_a_terminal_and_spinner_stops() -> None:
    out = io.StringIO()
    renderer = Renderer(Console(file=out, force_terminal=True, width=100, color_system="standard"))
    renderer.feed(TurnStarted(turn=1, session_id="s"))
    assert spinning(renderer)  # waiting for the model after the turn started
    renderer.feed(WarningEvent(message="careful"))
    renderer.feed(TextDelta(text="streaming"))
    assert not spinning(renderer)  # never spin over an open streamed line
    renderer.feed(Error(message="bad", code="internal"))
    assert not spinning(renderer)  # terminal event: nothing more to wait for
    renderer.close()
    text = out.getvalue()
    assert "\x1b[33m" in text  # yellow warning
    assert "\x1b[1;31m" in text  # bold red error
    assert "streaming" in text


def test_no_spinner_when_not_a_terminal() -> None:
    out = io.StringIO()
    renderer = Renderer(Console(file=out, force_terminal=False))
    renderer.wait()
    renderer.feed(TurnStarted(turn=1))
    assert not spinning(renderer)


def test_json_lines_renderer_writes_one_compact_object_per_line() -> None:
    out = io.StringIO()
    renderer = JsonLinesRenderer(out)
    events: list[Event] = [TextDelta(text="héllo", seq=1), result(seq=2)]
    for event in events:
        renderer.feed(event)
    renderer.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0] == (
        '{"kind":"text_delta","turn":0,"seq":1,"is_subagent":false,'
        '"subagent_task_id":null,"text":"héllo","message_id":null,"index":null}'
    )
    assert [event_from_json(json.loads(line)) for line in lines] == events


# ---------------------------------------------------------------------------------------------
# ask_interactively
# ---------------------------------------------------------------------------------------------


class ScriptedInput:
    """A ``read_line`` that answers from a script and records the prompts it was shown."""

    def __init__(self, *lines: str | None) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []

    async def __call__(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        await trio.lowlevel.checkpoint()
        return self.lines.pop(0)


def quiet_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=100), out


QUESTIONS = UserInputRequest(
    request_id="r1",
    source="model-tool",
    questions=(
        Question(question="Which color?", header="Color", options=("red", "green", "blue")),
        Question(question="Which sizes?", options=("S", "M", "L"), multi_select=True),
        Question(question="Anything else?"),
    ),
)


async def test_model_questions_accept_numbers_lists_and_free_text() -> None:
    console, out = quiet_console()
    read = ScriptedInput("2", "1, 3", "gift wrap")
    answer = await ask_interactively(QUESTIONS, console=console, read_line=read)
    assert answer == {
        "Which color?": "green",
        "Which sizes?": "S, L",
        "Anything else?": "gift wrap",
    }
    shown = out.getvalue()
    assert "Color\nWhich color?\n  1. red\n  2. green\n  3. blue" in shown
    assert read.prompts == [
        "Choose a number, or type an answer: ",
        "Choose numbers separated by commas, or type an answer: ",
        "Answer: ",
    ]


async def test_model_question_out_of_range_asks_again_and_text_is_kept() -> None:
    console, out = quiet_console()
    read = ScriptedInput("9", "purple", "", "")
    answer = await ask_interactively(QUESTIONS, console=console, read_line=read)
    # 9 is no option: asked again; free text is an answer; empty lines skip a question.
    assert answer == {"Which color?": "purple"}
    assert "Please enter 1-3 or text." in out.getvalue()
    assert len(read.prompts) == 4


async def test_model_questions_end_of_input_gives_no_answer() -> None:
    console, _ = quiet_console()
    answer = await ask_interactively(QUESTIONS, console=console, read_line=ScriptedInput("1", None))
    assert answer == {}


ELICITATION = UserInputRequest(
    request_id="e1",
    source="mcp-elicitation",
    server_name="shop",
    message="Shipping details?",
    requested_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Your name"},
            "quantity": {"type": "integer", "default": 1},
            "express": {"type": "boolean"},
            "size": {"type": "string", "enum": ["S", "M", "L"]},
            "note": {"type": "string"},
        },
        "required": ["name", "express"],
    },
)


async def test_elicitation_reads_and_converts_each_property() -> None:
    console, out = quiet_console()
    read = ScriptedInput("Ada", "three", "3", "", "yes", "2", "")
    answer = await ask_interactively(ELICITATION, console=console, read_line=read)
    assert answer == {
        "action": "accept",
        "content": {"name": "Ada", "quantity": 3, "express": True, "size": "M"},
    }
    shown = out.getvalue()
    assert "shop asks: Shipping details?" in shown
    assert "'three' is not an integer" in shown
    assert "a value is required" in shown  # the required boolean was left empty once
    assert read.prompts[0] == "name (string; Your name): "
    assert read.prompts[1] == "quantity (integer) [1]: "
    assert read.prompts[-2] == "size (string; one of 1=S, 2=M, 3=L): "


async def test_elicitation_default_is_used_for_an_empty_answer() -> None:
    console, _ = quiet_console()
    read = ScriptedInput("Bo", "", "no", "L", "fragile")
    answer = await ask_interactively(ELICITATION, console=console, read_line=read)
    assert answer == {
        "action": "accept",
        "content": {"name": "Bo", "quantity": 1, "express": False, "size": "L", "note": "fragile"},
    }


@pytest.mark.parametrize("script", [("",), (None,), ("Ada", None)])
async def test_elicitation_declines_on_empty_first_answer_or_end_of_input(
    script: tuple[str | None, ...],
) -> None:
    console, _ = quiet_console()
    answer = await ask_interactively(ELICITATION, console=console, read_line=ScriptedInput(*script))
    assert answer == {"action": "decline"}


@pytest.mark.parametrize(
    ("line", "expected"), [("y", "accept"), ("", "decline"), (None, "decline")]
)
async def test_elicitation_without_properties_is_a_yes_no(line: str | None, expected: str) -> None:
    console, _ = quiet_console()
    request = UserInputRequest(request_id="e2", source="mcp-elicitation", message="Proceed?")
    answer = await ask_interactively(request, console=console, read_line=ScriptedInput(line))
    assert answer["action"] == expected
    if expected == "accept":
        assert answer == {"action": "accept", "content": {}}


def test_json_lines_stay_valid_utf8_when_the_cli_sends_a_lone_surrogate() -> None:
    stream = io.StringIO()
    JsonLinesRenderer(stream).feed(TextDelta(text="half a pair: \ud800", seq=1, turn=1))
    line = stream.getvalue()
    line.encode("utf-8")  # would raise for a lone surrogate written as itself
    assert json.loads(line)["text"] == "half a pair: \ud800"


# -- tool approvals at the terminal ------------------------------------------------------------

APPROVAL = UserInputRequest(
    request_id="approve-1",
    source="tool_permission",
    tool_name="Bash",
    tool_input={"command": "rm -rf build"},
    blocked_path="/work/build",
    title="Claude wants to run rm -rf build",
)


@pytest.mark.parametrize(
    ("lines", "answer"),
    [
        (["y"], {"decision": "allow"}),
        (["a"], {"decision": "always"}),
        (["n", ""], {"decision": "deny"}),
        (["n", "  use make clean  "], {"decision": "deny", "message": "use make clean"}),
        (["maybe", "YES"], {"decision": "allow"}),
        (
            ["e", "not json", "[1]", '{"command": "rm -rf build/tmp"}'],
            {"decision": "allow", "input": {"command": "rm -rf build/tmp"}},
        ),
    ],
)
async def test_approvals_are_y_n_e_a_and_every_answer_is_well_formed(
    lines: list[str], answer: dict[str, Any]
) -> None:
    console, out = quiet_console()
    got = await ask_interactively(APPROVAL, console=console, read_line=ScriptedInput(*lines))
    assert got == answer
    checked = check_approval_answer(got)  # what the broker will accept
    assert (checked.decision, checked.input) == (answer["decision"], answer.get("input"))
    shown = out.getvalue()
    assert "Claude wants to run rm -rf build" in shown
    assert '"command": "rm -rf build"' in shown
    assert "path: /work/build" in shown


async def test_approval_retries_say_what_is_expected() -> None:
    console, out = quiet_console()
    read = ScriptedInput("maybe", "e", "not json", "[1]", "{}")
    assert await ask_interactively(APPROVAL, console=console, read_line=read) == {
        "decision": "allow",
        "input": {},
    }
    shown = out.getvalue()
    assert "Please answer y, n, e or a." in shown
    assert "Not JSON" in shown
    assert "Please type a JSON object" in shown


@pytest.mark.parametrize("lines", [[None], ["e", None]])
async def test_end_of_input_at_an_approval_denies_saying_no_one_answered(
    lines: list[str | None],
) -> None:
    console, _ = quiet_console()
    got = await ask_interactively(APPROVAL, console=console, read_line=ScriptedInput(*lines))
    assert got == {"decision": "deny", "message": TERMINAL_NO_ANSWER}


def test_the_renderer_shows_an_approval_with_its_title_and_input() -> None:
    out = io.StringIO()
    renderer = Renderer(Console(file=out, force_terminal=False, width=100))
    renderer.feed(APPROVAL)
    shown = out.getvalue()
    assert "? Claude wants to run rm -rf build" in shown
    assert '{"command":"rm -rf build"}' in shown


def test_a_tool_use_summary_is_one_dim_line_and_an_abort_says_what_stopped_it() -> None:
    text = render(
        [
            ToolUse(tool_use_id="t1", name="Read", input={"file_path": "/a"}),
            ToolResult(tool_use_id="t1", content="x"),
            ToolUseSummary(summary="Read one\nfile", preceding_tool_use_ids=("t1",)),
            Aborted(reason="aborted_tools", phase="tools"),
        ]
    )
    assert text.splitlines() == [
        "→ Read(/a)",
        "  ✓ Read: x",
        "· Read one file",
        "aborted while a tool ran: aborted_tools",
    ]
    timed_out = Aborted(
        reason="run_timeout: the execution ran for 5 s",
        outcome=Outcome.RUN_TIMEOUT,
        phase="between_turns",
    )
    assert render([timed_out]).splitlines() == [
        "aborted [run_timeout] between turns: run_timeout: the execution ran for 5 s"
    ]
