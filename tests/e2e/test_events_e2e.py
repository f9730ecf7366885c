"""The unified event stream of ``open_session`` over the real bundled CLI and the model double.

Each test scripts the Messages API double, runs one execution to its end through
``claude_trio.open_session`` and asserts the events: kinds, order, ids, subagent attribution and
usage numbers computed from what the double reported. ``run_session`` (helpers.py) also checks
that exactly one event ends the execution, nothing follows it, and no ``claude`` child is left.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from helpers import (
    dump,
    kinds,
    of_type,
    params,
    run_session,
    sonnet_cost,
)

from claude_trio.actors.session.open import Session
from claude_trio.protocol.session.events import (
    AssistantMessage,
    Event,
    Flush,
    NormalizedMessage,
    Result,
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
    ToolUse,
    ToolUseContent,
    TurnStarted,
    UserMessage,
    WarningEvent,
)
from claude_trio.protocol.session.lifecycle import Accepted
from claude_trio.protocol.session.usage import Usage, add_usage
from claude_trio.testing.model_double import (
    ModelDouble,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    ReplyUsage,
    Rule,
    Script,
    is_main_agent,
    is_subagent,
    turns,
)

pytestmark = pytest.mark.e2e


def expected_usage(reply: ReplyUsage, cost: float) -> Usage:
    """The usage convention: input = fresh + cache read + cache creation; cache fields subsets."""
    return Usage(
        input_tokens=reply.input_tokens
        + reply.cache_read_input_tokens
        + reply.cache_creation_input_tokens,
        output_tokens=reply.output_tokens,
        cache_read_input_tokens=reply.cache_read_input_tokens,
        cache_creation_input_tokens=reply.cache_creation_input_tokens,
        cost_usd=cost,
    )


def assert_usage(actual: Usage, expected: Usage) -> None:
    assert actual == Usage(
        input_tokens=expected.input_tokens,
        output_tokens=expected.output_tokens,
        cache_read_input_tokens=expected.cache_read_input_tokens,
        cache_creation_input_tokens=expected.cache_creation_input_tokens,
        cost_usd=actual.cost_usd,
    )
    assert actual.cost_usd == pytest.approx(expected.cost_usd, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# 1. Text and thinking deltas, one assistant_message per API message, usage and cost per turn


async def test_thinking_and_text_deltas_messages_and_per_turn_usage_over_two_turns(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    """Turn 1 thinks and answers; a push while it streams becomes turn 2.

    Usage per turn is the double's usage in the library's convention and its cost is the difference
    of the CLI's cumulative ``total_cost_usd`` (Sonnet 4.5 list prices).
    """
    first_usage = ReplyUsage(
        input_tokens=100,
        output_tokens=20,
        cache_read_input_tokens=50,
        cache_creation_input_tokens=30,
    )
    second_usage = ReplyUsage(
        input_tokens=7, output_tokens=3, cache_read_input_tokens=200, cache_creation_input_tokens=0
    )
    model_double.responder = turns(
        Reply(
            blocks=(
                ReplyThinking(thinking="pondering deeply"),
                ReplyText(text="Hello from the double"),
            ),
            usage=first_usage,
            chunk_size=8,
            event_delay=0.02,  # the push below lands while turn 1 still streams
        ),
        Reply.text("second answer", usage=second_usage),
    )
    receipts: list[object] = []

    async def push_once(session: Session, event: Event) -> None:
        await trio.lowlevel.checkpoint()
        if isinstance(event, TextDelta) and not receipts:
            receipts.append(await session.push("and once more"))

    events = await run_session(params(tmp_path, "say hello"), hermetic, on_event=push_once)

    [receipt] = receipts
    assert isinstance(receipt, Accepted), dump(events)
    # Deltas: thinking first (block 0), then text (block 1), all naming the API message id.
    thinking = of_type(events, ThinkingDelta)
    assert "".join(d.text for d in thinking) == "pondering deeply"
    text_1 = [d for d in of_type(events, TextDelta) if d.turn == 1]
    assert [d.text for d in text_1] == ["Hello fr", "om the d", "ouble"]
    assert {(d.message_id, d.index) for d in thinking} == {("msg_double_0001", 0)}
    assert {(d.message_id, d.index) for d in text_1} == {("msg_double_0001", 1)}
    assert events.index(thinking[-1]) < events.index(text_1[0])

    # One assistant_message per API message, holding all of its blocks.
    messages = of_type(events, AssistantMessage)
    assert [m.message for m in messages] == [
        NormalizedMessage(
            role="assistant",
            content=(
                ThinkingContent(thinking="pondering deeply", signature="double-signature"),
                TextContent(text="Hello from the double"),
            ),
            message_id="msg_double_0001",
            model="claude-sonnet-4-5",
        ),
        NormalizedMessage(
            role="assistant",
            content=(TextContent(text="second answer"),),
            message_id="msg_double_0002",
            model="claude-sonnet-4-5",
        ),
    ]
    assert [(m.turn, m.is_subagent) for m in messages] == [(1, False), (2, False)]

    [pushed] = of_type(events, UserMessage)
    assert (pushed.text, pushed.uuid, pushed.turn) == ("and once more", receipt.uuid, 1)
    assert kinds(events) == [
        "adapter_ready",
        "turn_started",
        "user_message",
        "assistant_message",
        "result",
        "turn_started",
        "assistant_message",
        "result",
    ], dump(events)

    first, second = of_type(events, Result)
    assert [(r.turn, r.final, r.is_error, r.subtype) for r in (first, second)] == [
        (1, False, False, "success"),
        (2, True, False, "success"),
    ]
    assert first.session_id == second.session_id == of_type(events, TurnStarted)[0].session_id
    assert second.user_message_uuids == (receipt.uuid,)
    assert (first.text, second.text) == ("Hello from the double", "second answer")

    # Per turn: the double's usage, normalized; cost = difference of the CLI's cumulative cost.
    cumulative = [r.raw.total_cost_usd for r in (first, second)]
    assert cumulative == pytest.approx(
        [sonnet_cost(first_usage), sonnet_cost(first_usage, second_usage)], rel=1e-9
    )
    turn_1 = expected_usage(first_usage, sonnet_cost(first_usage))
    turn_2 = expected_usage(second_usage, cumulative[1] - cumulative[0])
    assert turn_1.input_tokens == 180  # 100 fresh + 50 cache read + 30 cache creation
    assert_usage(first.usage, turn_1)
    assert_usage(second.usage, turn_2)
    assert second.usage.cost_usd == pytest.approx(sonnet_cost(second_usage), rel=1e-9)
    assert_usage(second.execution_usage, add_usage(turn_1, turn_2))
    assert_usage(second.session_usage, add_usage(turn_1, turn_2))


# ---------------------------------------------------------------------------------------------
# 2. A built-in tool: tool_use / tool_result with is_error passed through


async def test_bash_success_and_failure_map_to_tool_events_with_is_error(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    ok_input = {"command": "echo hi", "description": "say hi"}
    fail_input = {"command": "echo oops >&2; exit 3", "description": "fail on purpose"}
    model_double.responder = turns(
        Reply.tool_use("Bash", ok_input, id="toolu_ok"),
        Reply.tool_use("Bash", fail_input, id="toolu_fail"),
        Reply.text("both ran"),
    )

    events = await run_session(params(tmp_path, "run two commands"), hermetic)

    assert [(e.tool_use_id, e.name, dict(e.input)) for e in of_type(events, ToolUse)] == [
        ("toolu_ok", "Bash", ok_input),
        ("toolu_fail", "Bash", fail_input),
    ]
    results = of_type(events, ToolResult)
    assert [(r.tool_use_id, r.tool_name, r.is_error, r.content) for r in results] == [
        ("toolu_ok", "Bash", False, "hi"),
        ("toolu_fail", "Bash", True, "Exit code 3\noops"),
    ]
    # The tool results the double got are the ones we reported.
    last = model_double.message_requests[-1]
    assert last.tool_result_text("toolu_ok") == "hi"
    assert last.tool_result_text("toolu_fail") == "Exit code 3\noops"
    assert last.tool_results["toolu_fail"].get("is_error") is True
    assert not last.tool_results["toolu_ok"].get("is_error")

    # Per round trip: tool_use, the assistant message, the user message with the result, then
    # the tool_result event; one result for the whole turn.
    assert kinds(events) == [
        "adapter_ready",
        "turn_started",
        "tool_use",
        "assistant_message",
        "assistant_message",
        "tool_result",
        "tool_use",
        "assistant_message",
        "assistant_message",
        "tool_result",
        "assistant_message",
        "result",
    ], dump(events)
    user_messages = [
        m.message for m in of_type(events, AssistantMessage) if m.message.role == "user"
    ]
    assert [
        [(b.tool_use_id, b.is_error) for b in m.content]  # type: ignore[union-attr]
        for m in user_messages
    ] == [[("toolu_ok", False)], [("toolu_fail", True)]]
    [result] = of_type(events, Result)
    assert (result.final, result.is_error, result.num_turns, result.todo_list_snapshot) == (
        True,
        False,
        3,
        None,
    )


# ---------------------------------------------------------------------------------------------
# 3. Todos: both tool families -> todo_list_updated, never raw tool events


async def test_todo_write_becomes_todo_list_updated_and_the_results_snapshot(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    todos = [
        {"content": "read the code", "status": "in_progress", "activeForm": "Reading the code"},
        {"content": "write tests", "status": "pending", "activeForm": "Writing tests"},
    ]
    model_double.responder = turns(
        Reply.tool_use("TodoWrite", {"todos": todos}, id="toolu_todo"),
        Reply.text("planned"),
    )
    env = {**hermetic, "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1", "CLAUDE_CODE_ENABLE_TASKS": "0"}

    events = await run_session(params(tmp_path, "make a plan"), env)

    items = (
        TodoItem(
            id="0", content="read the code", status="in_progress", active_form="Reading the code"
        ),
        TodoItem(id="1", content="write tests", status="pending", active_form="Writing tests"),
    )
    [updated] = of_type(events, TodoListUpdated)
    assert (updated.items, updated.tool_use_id, updated.tool_name) == (
        items,
        "toolu_todo",
        "TodoWrite",
    )
    assert of_type(events, ToolUse) == [], dump(events)
    assert of_type(events, ToolResult) == [], dump(events)
    assert kinds(events) == [
        "adapter_ready",
        "turn_started",
        "todo_list_updated",
        "assistant_message",
        "assistant_message",
        "result",
    ], dump(events)
    assert of_type(events, AssistantMessage)[0].message.content == (
        TodoListContent(tool_use_id="toolu_todo", items=items),
    )
    # The CLI really ran the tool: the double got its result.
    assert model_double.message_requests[-1].tool_result_text("toolu_todo")
    [result] = of_type(events, Result)
    assert result.final
    assert result.todo_list_snapshot == items


async def test_a_todo_write_the_cli_refuses_is_reported_and_changes_nothing(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    # A status the tool does not know: the CLI refuses the call before running it.
    refused = [{"content": "read the code", "status": "someday", "activeForm": "Reading"}]
    model_double.responder = turns(
        Reply.tool_use("TodoWrite", {"todos": refused}, id="toolu_bad"),
        Reply.text("oops"),
    )
    env = {**hermetic, "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1", "CLAUDE_CODE_ENABLE_TASKS": "0"}

    events = await run_session(params(tmp_path, "make a plan"), env)

    refusal = model_double.message_requests[-1].tool_result_text("toolu_bad")
    assert refusal, "the CLI answered the call"
    [warning] = [e for e in of_type(events, WarningEvent) if e.code == "todo_refused"]
    assert "toolu_bad" in warning.message
    updates = of_type(events, TodoListUpdated)
    # Reported when the model asked, taken back when the CLI refused: the list is empty again.
    assert [u.items for u in updates][-1] == ()
    [result] = of_type(events, Result)
    assert result.todo_list_snapshot == ()


async def test_task_create_and_update_become_todo_list_updated_and_the_results_snapshot(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(
        Reply.tool_use(
            "TaskCreate",
            {"subject": "write tests", "description": "e2e", "activeForm": "Writing tests"},
            id="toolu_create",
        ),
        Reply.tool_use("TaskUpdate", {"taskId": "1", "status": "in_progress"}, id="toolu_update"),
        Reply.text("on it"),
    )
    env = hermetic  # the todo tools are on by default

    events = await run_session(params(tmp_path, "track a task"), env)

    # The CLI picked the id "1" and said so in the TaskCreate result.
    last = model_double.message_requests[-1]
    assert (last.tool_result_text("toolu_create") or "").startswith("Task #1 created successfully")
    assert (last.tool_result_text("toolu_update") or "").startswith("Updated task #1")

    pending = TodoItem(
        id="toolu_create", content="write tests", status="pending", active_form="Writing tests"
    )
    created = TodoItem(id="1", content="write tests", status="pending", active_form="Writing tests")
    started = TodoItem(
        id="1", content="write tests", status="in_progress", active_form="Writing tests"
    )
    assert [(u.tool_name, u.tool_use_id, u.items) for u in of_type(events, TodoListUpdated)] == [
        ("TaskCreate", "toolu_create", (pending,)),  # the call, before the CLI named the id
        ("TaskCreate", "toolu_create", (created,)),  # its result named the id
        ("TaskUpdate", "toolu_update", (started,)),
    ]
    assert of_type(events, ToolUse) == [], dump(events)
    assert of_type(events, ToolResult) == [], dump(events)
    [result] = of_type(events, Result)
    assert result.final
    assert result.todo_list_snapshot == (started,)


# ---------------------------------------------------------------------------------------------
# 6. Subagents through the Agent tool


AGENT_INPUT = {
    "description": "count files",
    "prompt": "count the files",
    "subagent_type": "general-purpose",
}


def subagent_view(events: list[Event]) -> list[tuple[str, bool, str | None]]:
    return [
        (e.kind, e.is_subagent, e.subagent_task_id)  # type: ignore[union-attr]
        for e in events
        if e.is_subagent
    ]


async def test_foreground_agent_reports_its_lifecycle_and_attributes_its_messages(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    # The Agent tool's schema (request tools[]) defers to its description, which says agents run
    # in the background by default and ``run_in_background: false`` keeps one in the foreground.
    agent_input = {**AGENT_INPUT, "run_in_background": False}
    model_double.responder = Script(
        [
            Rule(
                when=is_subagent,
                reply=Reply(
                    blocks=(
                        ReplyText(text="let me look"),
                        ReplyToolUse(
                            id="toolu_sub",
                            name="Bash",
                            input={"command": "echo 3", "description": "count"},
                        ),
                    )
                ),
            ),
            Rule(when=is_subagent, reply=Reply.text("sub: 3 files")),
            Rule(when=is_main_agent, reply=Reply.tool_use("Agent", agent_input, id="toolu_agent")),
            Rule(when=is_main_agent, reply=Reply.text("the agent counted 3")),
        ]
    )

    events = await run_session(params(tmp_path, "delegate"), hermetic)

    assert "run_in_background" in json.dumps(
        [t for t in model_double.message_requests[0].body["tools"] if t["name"] == "Agent"]
    )
    [started] = of_type(events, SubagentStarted)
    [completed] = of_type(events, SubagentCompleted)
    task = started.task_id
    assert (started.tool_use_id, started.description, started.is_subagent) == (
        "toolu_agent",
        "count files",
        False,
    )
    assert (completed.task_id, completed.tool_use_id, completed.status) == (
        task,
        "toolu_agent",
        "completed",
    )
    progress = of_type(events, SubagentProgress)
    assert [(p.task_id, p.tool_use_id, p.last_tool_name) for p in progress] == [
        (task, "toolu_agent", "Bash")
    ]

    # Everything the subagent did carries is_subagent and its task id, and nothing else does.
    assert subagent_view(events) == [
        ("tool_use", True, task),
        ("assistant_message", True, task),
        ("assistant_message", True, task),
        ("tool_result", True, task),
        ("assistant_message", True, task),
    ], dump(events)
    sub_messages = [m.message for m in of_type(events, AssistantMessage) if m.is_subagent]
    assert [m.content for m in sub_messages] == [
        (
            TextContent(text="let me look"),
            ToolUseContent(
                tool_use_id="toolu_sub",
                name="Bash",
                input={"command": "echo 3", "description": "count"},
            ),
        ),
        sub_messages[1].content,
        (TextContent(text="sub: 3 files"),),
    ]
    [sub_result] = [r for r in of_type(events, ToolResult) if r.is_subagent]
    assert (sub_result.tool_use_id, sub_result.content, sub_result.is_error) == (
        "toolu_sub",
        "3",
        False,
    )

    # Order: started < the subagent's work < completed < the Agent tool's result < the result.
    index = events.index
    sub_events = [e for e in events if e.is_subagent]
    [agent_result] = [r for r in of_type(events, ToolResult) if r.tool_use_id == "toolu_agent"]
    assert index(started) < index(sub_events[0])
    assert index(sub_events[-1]) < index(completed) < index(agent_result)
    assert "sub: 3 files" in json.dumps(agent_result.content)
    [result] = of_type(events, Result)
    assert result.final
    assert result.turn == 1


async def test_background_agent_keeps_the_execution_open_until_its_follow_up_turn(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    """The first result comes while the agent still runs: it is not final, and the CLI's
    follow-up turn (the task notification) and its result end the execution."""
    release_subagent = trio.Event()  # the subagent answers only after the first result
    agent_input = {**AGENT_INPUT, "run_in_background": True}
    model_double.responder = Script(
        [
            Rule(when=is_subagent, reply=Reply.text("sub: 3 files", gate=release_subagent)),
            Rule(when=is_main_agent, reply=Reply.tool_use("Agent", agent_input, id="toolu_agent")),
            Rule(when=is_main_agent, reply=Reply.text("the agent is on it")),
            Rule(when=is_main_agent, reply=Reply.text("the agent counted 3")),
        ]
    )

    async def release_after_first_result(session: Session, event: Event) -> None:
        await trio.lowlevel.checkpoint()
        if isinstance(event, Result) and not release_subagent.is_set():
            assert not session.ended  # the background agent keeps the execution open
            release_subagent.set()

    events = await run_session(
        params(tmp_path, "delegate"), hermetic, on_event=release_after_first_result
    )

    [started] = of_type(events, SubagentStarted)
    [completed] = of_type(events, SubagentCompleted)
    task = started.task_id
    first, second = of_type(events, Result)
    assert [(r.turn, r.final, r.is_error) for r in (first, second)] == [
        (1, False, False),
        (2, True, False),
    ]
    assert (started.turn, started.tool_use_id) == (1, "toolu_agent")
    assert (completed.task_id, completed.status, completed.turn) == (task, "completed", 2)

    [sub_message] = [m for m in of_type(events, AssistantMessage) if m.is_subagent]
    assert (sub_message.subagent_task_id, sub_message.message.content) == (
        task,
        (TextContent(text="sub: 3 files"),),
    )
    assert subagent_view(events) == [("assistant_message", True, task)]
    index = events.index
    [turn_2_start] = [t for t in of_type(events, TurnStarted) if t.turn == 2]
    assert index(first) < index(sub_message) < index(completed) < index(turn_2_start)
    assert index(turn_2_start) < index(second)
    main_texts = [
        m.message.content for m in of_type(events, AssistantMessage)
        if not m.is_subagent and m.message.role == "assistant" and m.turn == 2
    ]  # fmt: skip
    assert main_texts == [(TextContent(text="the agent counted 3"),)]

    # The follow-up turn was the CLI telling the model the agent finished.
    follow_up = [r for r in model_double.message_requests if is_main_agent(r)][-1]
    assert task in json.dumps(follow_up.messages[-1])
    assert second.usage.output_tokens == 5
    assert second.usage.input_tokens == 10


# ---------------------------------------------------------------------------------------------
# 7. /compact -> flush


async def test_compact_push_after_history_emits_flush(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    summary = ReplyUsage(input_tokens=40, output_tokens=12)
    model_double.responder = turns(
        Reply.text("first answer", chunk_size=4, event_delay=0.02),
        Reply.text("<summary>we said hello</summary>", usage=summary),  # the summarization
    )
    receipts: list[object] = []

    async def compact_once(session: Session, event: Event) -> None:
        await trio.lowlevel.checkpoint()
        if isinstance(event, TextDelta) and not receipts:
            receipts.append(await session.push("/compact"))

    events = await run_session(params(tmp_path, "hello"), hermetic, on_event=compact_once)

    [receipt] = receipts
    assert isinstance(receipt, Accepted)
    first_request, summarization = model_double.message_requests
    assert first_request.last_user_text == "hello"
    assert "first answer" in json.dumps(summarization.messages)  # the history to summarize
    assert "TEXT ONLY" in summarization.last_user_text

    [flush] = of_type(events, Flush)
    assert (flush.trigger, flush.turn) == ("manual", 2)
    assert flush.pre_tokens is not None
    assert flush.pre_tokens > 0
    assert kinds(events) == [
        "adapter_ready",
        "turn_started",
        "user_message",
        "assistant_message",
        "result",
        "turn_started",
        "flush",
        "result",
    ], dump(events)
    first, second = of_type(events, Result)
    assert (first.final, second.final, second.is_error) == (False, True, False)
    assert second.user_message_uuids == (receipt.uuid,)
    # The summarization is priced into the compact turn (its tokens are not in the usage).
    assert second.usage.cost_usd == pytest.approx(sonnet_cost(summary), rel=1e-9)
