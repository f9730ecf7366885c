"""Mapper: one test per row of the event mapping table and per rule of
protocol/session/mapper.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import attrs
import claude_agent_sdk as sdk
import pytest
import sdk_frames as f

from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.protocol.session import events as ev
from claude_trio.protocol.session.mapper import Mapper
from claude_trio.protocol.session.outcomes import Outcome


def feed(mapper: Mapper, *messages: sdk.Message) -> list[ev.Event]:
    out: list[ev.Event] = []
    for message in messages:
        out.extend(mapper.feed(message))
    return out


def kinds(events: list[ev.Event]) -> list[str]:
    return [event.kind for event in events]


def of(events: list[ev.Event], cls: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, cls)]


# --- stream events ------------------------------------------------------------------------


def test_text_delta_row_carries_message_id_and_block_index() -> None:
    mapper = Mapper()
    out = feed(
        mapper, f.init(), f.message_start("msg_1"), f.content_block_start(0), f.text_delta("Hel", 0)
    )
    (delta,) = of(out, ev.TextDelta)
    assert (delta.text, delta.message_id, delta.index, delta.turn) == ("Hel", "msg_1", 0, 1)
    assert delta.is_subagent is False


def test_thinking_delta_row() -> None:
    mapper = Mapper()
    out = feed(
        mapper, f.init(), f.message_start("msg_1"), f.thinking_delta("hmm", 0), f.signature_delta(0)
    )
    (delta,) = of(out, ev.ThinkingDelta)
    assert (delta.text, delta.message_id, delta.index) == ("hmm", "msg_1", 0)
    assert kinds(out) == ["turn_started", "thinking"]


def test_other_stream_events_emit_nothing() -> None:
    mapper = Mapper()
    out = feed(
        mapper,
        f.message_start("msg_1"),
        f.content_block_start(0),
        f.content_block_stop(0),
        f.message_delta(),
        f.message_stop(),
    )
    assert out == []
    assert mapper.turn_open  # but a main-thread stream event opens the turn


def test_subagent_delta_is_attributed_through_the_task_map() -> None:
    mapper = Mapper()
    feed(mapper, f.init())
    (before,) = mapper.feed(f.text_delta("early", parent_tool_use_id="toolu_agent"))
    assert before.is_subagent is True
    assert before.subagent_task_id is None  # before task_started: graceful degradation
    feed(mapper, f.task_started("task_a", "toolu_agent"))
    (after,) = mapper.feed(f.text_delta("late", parent_tool_use_id="toolu_agent"))
    assert (after.is_subagent, after.subagent_task_id) == (True, "task_a")


# --- assistant messages -------------------------------------------------------------------


def test_assistant_blocks_sharing_message_id_become_one_message() -> None:
    mapper = Mapper()
    out = feed(
        mapper,
        f.init(),
        f.assistant("msg_1", f.thinking_block("plan")),
        f.assistant("msg_1", f.text_block("Hello")),
        f.assistant("msg_2", f.text_block("Second")),
    )
    (first,) = of(out, ev.AssistantMessage)
    assert first.message == ev.NormalizedMessage(
        role="assistant",
        content=(
            ev.ThinkingContent(thinking="plan", signature="EqQBCkYIBxgCKkB"),
            ev.TextContent(text="Hello"),
        ),
        message_id="msg_1",
        model=f.MODEL,
    )
    assert len(first.raw) == 2
    # msg_2 is still buffered; the result flushes it before the terminal event.
    out = mapper.feed(f.result())
    assert kinds(out) == ["assistant_message", "result"]
    assert out[0].message.content == (ev.TextContent(text="Second"),)


def test_message_start_of_the_next_message_flushes_the_buffer() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.message_start("msg_1"), f.assistant("msg_1", f.text_block("a")))
    out = mapper.feed(f.message_start("msg_2"))
    assert kinds(out) == ["assistant_message"]
    assert out[0].message.message_id == "msg_1"


def test_tool_use_is_emitted_at_once_and_the_message_later() -> None:
    mapper = Mapper()
    feed(mapper, f.init())
    out = mapper.feed(f.assistant("msg_1", f.tool_use_block("toolu_1", "Bash", {"command": "ls"})))
    (tool_use,) = out
    assert isinstance(tool_use, ev.ToolUse)
    assert (tool_use.tool_use_id, tool_use.name, tool_use.input) == (
        "toolu_1",
        "Bash",
        {"command": "ls"},
    )
    out = mapper.feed(f.tool_result("toolu_1", "file.txt"))
    assert kinds(out) == ["assistant_message", "assistant_message", "tool_result"]
    assert out[0].message.content == (
        ev.ToolUseContent(tool_use_id="toolu_1", name="Bash", input={"command": "ls"}),
    )


def test_unknown_blocks_are_kept_as_unknown_content() -> None:
    mapper = Mapper()
    frame = f.assistant_frame(
        "msg_1",
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
    )
    feed(mapper, f.init(), f.parse(frame))
    (message,) = of(mapper.feed(f.result()), ev.AssistantMessage)
    (block,) = message.message.content
    assert isinstance(block, ev.UnknownContent)
    assert isinstance(block.block, sdk.ServerToolUseBlock)


def test_assistant_error_is_carried_in_the_normalized_message() -> None:
    mapper = Mapper()
    feed(
        mapper,
        f.init(),
        f.assistant("msg_1", f.text_block("API Error: 500"), error="server_error"),
    )
    out = mapper.feed(
        f.result(is_error=True, terminal_reason="api_error", api_error_status=500, errors=["boom"])
    )
    message, error, result = out
    assert message.message.error == "server_error"
    assert isinstance(result, ev.Result)
    assert (result.is_error, result.api_error_status, result.errors) == (True, 500, ("boom",))
    # R18: the API failure is also an error event of its own, carrying the status, not terminal
    assert isinstance(error, ev.Error)
    assert (error.code, error.status, error.fatal) == ("api_error", 500, False)


def test_a_successful_result_has_no_api_error_event() -> None:
    mapper = Mapper()
    out = feed(mapper, f.init(), f.result())
    assert kinds(out) == ["turn_started", "result"]


def test_a_stream_that_broke_off_and_was_asked_again_is_flagged() -> None:
    # R17: msg_1 streamed two deltas, then the API stream failed; the CLI asked again and got
    # msg_2 without streaming. The deltas of msg_1 must be recognizable as void.
    mapper = Mapper()
    out = feed(
        mapper,
        f.init(),
        f.message_start("msg_1"),
        f.content_block_start(0),
        f.text_delta("this stream brea", 0),
        f.assistant("msg_2", f.text_block("recovered")),
        f.result(),
    )
    (warning,) = of(out, ev.WarningEvent)
    assert warning.code == "stream_restarted"
    assert "msg_1" in warning.message
    assert kinds(out).index("text_delta") < kinds(out).index("warning")
    assert kinds(out).index("warning") < kinds(out).index("assistant_message")


def test_a_normal_streamed_message_is_not_flagged_as_restarted() -> None:
    mapper = Mapper()
    out = feed(
        mapper,
        f.init(),
        f.message_start("msg_1"),
        f.text_delta("hi", 0),
        f.assistant("msg_1", f.text_block("hi")),
        f.message_start("msg_2"),
        f.text_delta("more", 0),
        f.assistant("msg_2", f.text_block("more")),
        f.result(),
    )
    assert not of(out, ev.WarningEvent)


def test_every_tool_use_id_is_reported_at_most_once() -> None:
    mapper = Mapper()
    block = f.tool_use_block("toolu_1", "Read", {"file_path": "/a"})
    out = feed(mapper, f.init(), f.assistant("msg_1", block), f.assistant("msg_1", block))
    assert len(of(out, ev.ToolUse)) == 1


def test_skill_tool_emits_skill_invoked_as_well() -> None:
    mapper = Mapper()
    out = feed(
        mapper,
        f.init(),
        f.assistant("msg_1", f.tool_use_block("toolu_s", "Skill", {"skill": "pdf"})),
    )
    assert kinds(out) == ["turn_started", "tool_use", "skill_invoked"]
    assert (out[2].skill, out[2].tool_use_id) == ("pdf", "toolu_s")


# --- todos --------------------------------------------------------------------------------

TODOS = {
    "todos": [
        {"content": "Write code", "status": "in_progress", "activeForm": "Writing code"},
        {"content": "Test it", "status": "pending", "activeForm": "Testing it"},
    ]
}


def test_todo_write_becomes_todo_list_updated_and_its_result_is_suppressed() -> None:
    mapper = Mapper()
    assert mapper.todo_snapshot is None
    out = feed(
        mapper, f.init(), f.assistant("msg_1", f.tool_use_block("toolu_t", "TodoWrite", TODOS))
    )
    (update,) = of(out, ev.TodoListUpdated)
    assert not of(out, ev.ToolUse)
    assert [(i.id, i.content, i.status) for i in update.items] == [
        ("0", "Write code", "in_progress"),
        ("1", "Test it", "pending"),
    ]
    assert (update.tool_use_id, update.tool_name, update.source) == (
        "toolu_t",
        "TodoWrite",
        "model-tool",
    )
    out = mapper.feed(
        f.tool_result(
            "toolu_t",
            "Todos have been modified successfully.",
            tool_use_result={"oldTodos": [], "newTodos": TODOS["todos"]},
        )
    )
    # The message with the TodoWrite block is flushed; the result itself is gone.
    (message,) = out
    assert isinstance(message, ev.AssistantMessage)
    assert message.message.content == (
        ev.TodoListContent(tool_use_id="toolu_t", items=update.items),
    )
    result = mapper.feed(f.result())[-1]
    assert isinstance(result, ev.Result)
    assert result.todo_list_snapshot == update.items
    assert mapper.todo_snapshot == update.items


def test_a_refused_todo_write_is_reported_and_taken_back() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.assistant("msg_1", f.tool_use_block("toolu_1", "TodoWrite", TODOS)))
    feed(mapper, f.tool_result("toolu_1", "Todos have been modified successfully."))
    kept = mapper.todo_snapshot
    changed = {"todos": [{"content": "Ship it", "status": "pending", "activeForm": "Shipping"}]}
    out = feed(mapper, f.assistant("msg_2", f.tool_use_block("toolu_2", "TodoWrite", changed)))
    assert [i.content for i in of(out, ev.TodoListUpdated)[0].items] == ["Ship it"]
    refusal = "<tool_use_error>InputValidationError</tool_use_error>"
    out = mapper.feed(f.tool_result("toolu_2", refusal, is_error=True))
    (warning,) = of(out, ev.WarningEvent)
    assert warning.code == "todo_refused"
    assert "InputValidationError" in warning.message
    assert "toolu_2" in warning.message
    (update,) = of(out, ev.TodoListUpdated)
    assert update.items == kept  # the refused call's change is taken back
    assert mapper.todo_snapshot == kept
    assert not of(out, ev.ToolResult)


def test_result_snapshot_is_none_when_todos_were_never_used() -> None:
    mapper = Mapper()
    (_, result) = feed(mapper, f.init(), f.result())
    assert isinstance(result, ev.Result)
    assert result.todo_list_snapshot is None


def test_task_create_takes_its_id_from_the_tool_result() -> None:
    mapper = Mapper()
    out = feed(
        mapper,
        f.init(),
        f.assistant(
            "msg_1",
            f.tool_use_block("toolu_c", "TaskCreate", {"subject": "Fix bug", "description": "d"}),
        ),
    )
    (pending,) = of(out, ev.TodoListUpdated)
    assert [(i.id, i.content) for i in pending.items] == [("toolu_c", "Fix bug")]
    out = mapper.feed(
        f.tool_result(
            "toolu_c",
            "Task #1 created successfully: Fix bug",
            tool_use_result={"task": {"id": "1", "subject": "Fix bug"}},
        )
    )
    assert not of(out, ev.ToolResult)
    (created,) = of(out, ev.TodoListUpdated)
    assert [(i.id, i.status) for i in created.items] == [("1", "pending")]
    out = mapper.feed(
        f.assistant(
            "msg_2",
            f.tool_use_block("toolu_u", "TaskUpdate", {"taskId": "1", "status": "completed"}),
        )
    )
    (updated,) = of(out, ev.TodoListUpdated)
    assert [(i.id, i.status) for i in updated.items] == [("1", "completed")]
    assert updated.tool_name == "TaskUpdate"


def test_task_list_and_task_get_are_suppressed_without_update() -> None:
    mapper = Mapper()
    out = feed(
        mapper,
        f.init(),
        f.assistant("msg_1", f.tool_use_block("toolu_l", "TaskList", {})),
        f.tool_result("toolu_l", "No tasks found"),
        f.assistant("msg_2", f.tool_use_block("toolu_g", "TaskGet", {"taskId": "1"})),
        f.tool_result("toolu_g", "Task not found"),
    )
    assert not of(out, ev.TodoListUpdated)
    assert not of(out, ev.ToolUse)
    assert not of(out, ev.ToolResult)
    assert mapper.todo_snapshot is None


def test_subagent_todo_write_is_an_ordinary_tool_use() -> None:
    mapper = Mapper()
    out = feed(
        mapper,
        f.init(),
        f.assistant(
            "msg_s",
            f.tool_use_block("toolu_t", "TodoWrite", TODOS),
            parent_tool_use_id="toolu_agent",
        ),
    )
    (tool_use,) = of(out, ev.ToolUse)
    assert tool_use.is_subagent
    assert mapper.todo_snapshot is None


# --- user messages ------------------------------------------------------------------------


def test_tool_result_row_emits_user_message_and_tool_result_with_is_error() -> None:
    mapper = Mapper()
    feed(
        mapper,
        f.init(),
        f.assistant("msg_1", f.tool_use_block("toolu_1", "Bash", {"command": "false"})),
    )
    out = mapper.feed(f.tool_result("toolu_1", "exit 1", is_error=True))
    assistant, user, tool_result = out
    assert assistant.message.role == "assistant"
    assert user.message == ev.NormalizedMessage(
        role="user",
        content=(ev.ToolResultContent(tool_use_id="toolu_1", content="exit 1", is_error=True),),
    )
    assert isinstance(tool_result, ev.ToolResult)
    assert (tool_result.is_error, tool_result.tool_name, tool_result.content) == (
        True,
        "Bash",
        "exit 1",
    )


def test_echo_of_a_push_emits_nothing_and_reports_the_uuid() -> None:
    mapper = Mapper()
    (pushed,) = mapper.push_accepted(text="hi", uuid="u-1", timestamp=1.5)
    assert pushed == ev.UserMessage(text="hi", uuid="u-1", timestamp=1.5, turn=1, seq=1)
    assert mapper.feed(f.user_echo("hi", "u-1")) == []
    assert mapper.feed(f.user_echo("again", "u-2", as_blocks=True)) == []
    assert mapper.pop_consumed_uuids() == ["u-1", "u-2"]
    assert mapper.pop_consumed_uuids() == []


# --- subagent lifecycle -------------------------------------------------------------------


def test_task_started_row() -> None:
    mapper = Mapper()
    (started,) = mapper.feed(f.task_started("task_a", "toolu_agent", "Explore"))
    assert isinstance(started, ev.SubagentStarted)
    assert (started.task_id, started.tool_use_id, started.description, started.task_type) == (
        "task_a",
        "toolu_agent",
        "Explore",
        "local_agent",
    )
    assert mapper.tasks_in_flight == {"task_a"}


def test_task_progress_row() -> None:
    mapper = Mapper()
    mapper.feed(f.task_started("task_a", "toolu_agent"))
    (progress,) = mapper.feed(f.task_progress("task_a", "toolu_agent", "Grep"))
    assert isinstance(progress, ev.SubagentProgress)
    assert (progress.task_id, progress.last_tool_name) == ("task_a", "Grep")
    assert progress.usage == {"total_tokens": 1200, "tool_uses": 2, "duration_ms": 900}


def test_task_notification_row_completes_once() -> None:
    mapper = Mapper()
    mapper.feed(f.task_started("task_a", "toolu_agent"))
    (done,) = mapper.feed(f.task_notification("task_a", "toolu_agent", "failed"))
    assert isinstance(done, ev.SubagentCompleted)
    assert (done.status, done.summary, done.tool_use_id) == (
        "failed",
        "Found 3 modules",
        "toolu_agent",
    )
    assert mapper.tasks_in_flight == frozenset()
    assert mapper.feed(f.task_updated("task_a", "failed")) == []


@pytest.mark.parametrize("status", ["completed", "failed", "stopped", "killed"])
def test_terminal_task_updated_completes_the_task(status: str) -> None:
    mapper = Mapper()
    mapper.feed(f.task_started("task_a", "toolu_agent"))
    (done,) = mapper.feed(f.task_updated("task_a", status))
    assert isinstance(done, ev.SubagentCompleted)
    assert (done.status, done.tool_use_id) == (status, "toolu_agent")
    assert mapper.tasks_in_flight == frozenset()
    assert mapper.feed(f.task_notification("task_a", "toolu_agent")) == []


def test_non_terminal_task_updated_is_progress() -> None:
    mapper = Mapper()
    mapper.feed(f.task_started("task_a", "toolu_agent"))
    (progress,) = mapper.feed(f.task_updated("task_a", "running"))
    assert isinstance(progress, ev.SubagentProgress)
    assert mapper.tasks_in_flight == {"task_a"}


# --- system messages and others -----------------------------------------------------------


def test_init_row_opens_the_turn_with_session_and_model() -> None:
    mapper = Mapper()
    (started,) = mapper.feed(f.init(session_id="sess-9", model="claude-opus-4-7"))
    assert isinstance(started, ev.TurnStarted)
    assert (started.session_id, started.model, started.turn, started.seq) == (
        "sess-9",
        "claude-opus-4-7",
        1,
        1,
    )
    assert mapper.turn_open


def test_compact_boundary_row_is_flush() -> None:
    (flush,) = Mapper().feed(f.compact_boundary(trigger="manual", pre_tokens=1234))
    assert isinstance(flush, ev.Flush)
    assert (flush.trigger, flush.pre_tokens) == ("manual", 1234)


def test_api_retry_row_is_retry() -> None:
    (retry,) = Mapper().feed(f.api_retry(attempt=2, max_retries=10, delay_ms=1100, status=529))
    assert isinstance(retry, ev.Retry)
    assert (retry.attempt, retry.max_retries, retry.delay_ms, retry.error_status, retry.error) == (
        2,
        10,
        1100.0,
        529,
        "overloaded_error",
    )


def test_tool_use_summary_row_is_one_summary_event_not_a_tool_use() -> None:
    mapper = Mapper()
    out = mapper.feed(f.tool_use_summary("Read 3 files", ["toolu_1", "toolu_2"]))
    (summary,) = out
    assert isinstance(summary, ev.ToolUseSummary)
    assert not isinstance(summary, ev.ToolUse | ev.ToolResult)
    assert summary.kind == "tool_use_summary"
    assert (summary.summary, summary.preceding_tool_use_ids) == (
        "Read 3 files",
        ("toolu_1", "toolu_2"),
    )
    assert summary.summary_id is not None
    assert not summary.is_subagent
    # The same frame again (same uuid) is reported once.
    again = mapper.feed(f.tool_use_summary("Read 3 files", ["toolu_1"], uuid=summary.summary_id))
    assert again == []


def test_tool_calls_counted_from_events_leave_summaries_out() -> None:
    mapper = Mapper()
    events = mapper.feed(f.assistant("msg_1", f.tool_use_block("toolu_1", "Read", {"a": 1})))
    events += mapper.feed(f.tool_use_summary("Read a file", ["toolu_1"]))
    events += mapper.feed(f.tool_use_summary("Read it again", ["toolu_1"]))
    assert [e.name for e in events if isinstance(e, ev.ToolUse)] == ["Read"]
    assert len([e for e in events if isinstance(e, ev.ToolUseSummary)]) == 2


def test_tool_use_summary_with_parent_is_attributed_to_the_subagent() -> None:
    mapper = Mapper()
    mapper.feed(f.task_started("task_a", "toolu_agent"))
    out = mapper.feed(f.tool_use_summary("Searched", ["toolu_9"], parent_tool_use_id="toolu_agent"))
    assert [(type(e), e.is_subagent, e.subagent_task_id) for e in out] == [
        (ev.ToolUseSummary, True, "task_a")
    ]


def test_other_system_subtypes_pass_through() -> None:
    (passthrough,) = Mapper().feed(f.system_other("status", status="compacting"))
    assert isinstance(passthrough, ev.Passthrough)
    assert passthrough.frame_type == "system:status"
    assert passthrough.data["status"] == "compacting"


def test_rate_limit_not_allowed_is_a_warning() -> None:
    (warning,) = Mapper().feed(f.rate_limit("allowed_warning"))
    assert isinstance(warning, ev.WarningEvent)
    assert warning.code == "rate_limit"
    assert "allowed_warning" in warning.message


def test_rate_limit_allowed_passes_through() -> None:
    (passthrough,) = Mapper().feed(f.rate_limit("allowed"))
    assert isinstance(passthrough, ev.Passthrough)
    assert passthrough.frame_type == "rate_limit_event"


def test_conversation_reset_passes_through() -> None:
    (passthrough,) = Mapper().feed(f.conversation_reset())
    assert isinstance(passthrough, ev.Passthrough)
    assert passthrough.frame_type == "conversation_reset"


# --- results and usage --------------------------------------------------------------------


def test_result_row_carries_usage_totals_and_fields() -> None:
    mapper = Mapper()
    feed(mapper, f.init())
    (first,) = mapper.feed(
        f.result(
            usage=f.api_usage(input_tokens=10, output_tokens=5, cache_read=90),
            total_cost_usd=0.2,
            user_message_uuids=["u-1"],
            text="All done",
        )
    )
    assert isinstance(first, ev.Result)
    assert (first.usage.input_tokens, first.usage.cache_read_input_tokens) == (100, 90)
    assert first.usage.cost_usd == pytest.approx(0.2)
    assert (first.text, first.user_message_uuids, first.session_id) == (
        "All done",
        ("u-1",),
        f.SESSION_ID,
    )
    assert (first.subtype, first.terminal_reason, first.stop_reason, first.final) == (
        "success",
        "completed",
        "end_turn",
        False,
    )
    feed(mapper, f.init())
    (second,) = mapper.feed(f.result(total_cost_usd=0.5))
    assert second.turn == 2
    assert second.usage.cost_usd == pytest.approx(0.3)
    assert second.session_usage.cost_usd == pytest.approx(0.5)
    assert second.execution_usage.input_tokens == 110
    assert mapper.ledger.session == second.session_usage


def test_assistant_usage_snapshots_are_never_counted() -> None:
    mapper = Mapper()
    out = feed(
        mapper,
        f.init(),
        f.assistant("msg_1", f.text_block("a")),
        f.assistant("msg_1", f.text_block("b")),
        f.result(usage=f.api_usage(input_tokens=3, output_tokens=4)),
    )
    (result,) = of(out, ev.Result)
    assert (result.session_usage.input_tokens, result.session_usage.output_tokens) == (3, 4)


# --- turn fencing -------------------------------------------------------------------------


def test_turns_are_numbered_and_seq_strictly_increases() -> None:
    mapper = Mapper()
    out = feed(
        mapper,
        f.init(),
        f.text_delta("a"),
        f.result(),
        f.init(),
        f.text_delta("b"),
        f.result(),
    )
    assert [e.turn for e in out] == [1, 1, 1, 2, 2, 2]
    assert [e.seq for e in out] == [1, 2, 3, 4, 5, 6]
    assert not mapper.turn_open


def test_events_between_turns_carry_the_next_turn_number() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.result())
    (pushed,) = mapper.push_accepted(text="more", uuid="u-2", timestamp=2.0)
    (warning,) = mapper.feed(f.rate_limit("rejected"))
    (stamped,) = [mapper.stamp(ev.WarningEvent(message="note"))]
    assert (pushed.turn, warning.turn, stamped.turn) == (2, 2, 2)
    assert not mapper.turn_open
    (started,) = mapper.feed(f.init())
    assert started.turn == 2
    assert stamped.seq < started.seq


def test_stamp_refuses_terminal_events() -> None:
    mapper = Mapper()
    with pytest.raises(LocalProtocolError, match="terminal"):
        mapper.stamp(ev.Error(message="x", code="internal"))
    non_fatal = mapper.stamp(ev.Error(message="x", code="callback", fatal=False))
    assert non_fatal.seq == 1


def test_start_execution_restarts_turns_but_not_seq() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.result())
    mapper.start_execution()
    (started,) = mapper.feed(f.init())
    assert (started.turn, started.seq) == (1, 3)


def test_start_execution_with_an_open_turn_is_a_local_error() -> None:
    mapper = Mapper()
    mapper.feed(f.init())
    with pytest.raises(LocalProtocolError, match="turn 1 is open"):
        mapper.start_execution()


def test_events_before_any_execution_are_turn_zero() -> None:
    mapper = Mapper()
    (error,) = mapper.stream_ended(ev.Error(message="no initialize answer", code="cli_timeout"))
    assert (error.turn, error.fatal) == (0, True)


def test_cli_result_after_abort_request_becomes_aborted_with_usage() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.text_delta("partial"))
    assert mapper.abort_requested() == []
    assert mapper.aborting
    # Content still arriving after the abort request is real: it is mapped.
    (late_delta,) = mapper.feed(f.text_delta("more"))
    assert late_delta.turn == 1
    (aborted,) = mapper.feed(
        f.interrupted_result(usage=f.api_usage(input_tokens=7, output_tokens=1))
    )
    assert isinstance(aborted, ev.Aborted)
    assert (aborted.reason, aborted.session_id, aborted.turn) == (
        "aborted_streaming",
        f.SESSION_ID,
        1,
    )
    assert aborted.usage is not None
    assert aborted.usage.input_tokens == 7
    assert mapper.turn_aborted() == []  # already answered: idempotent
    assert not mapper.aborting


def test_a_turn_the_stop_gate_stopped_is_the_abort_s_answer() -> None:
    """After an abort, the stop gate denies the next tool call and stops the turn there
    (``continue: false``); the CLI's result for it (``hook_stopped``) answers the abort."""
    mapper = Mapper()
    feed(mapper, f.init(), f.text_delta("about to run a tool"))
    mapper.abort_requested()
    (aborted,) = mapper.feed(
        f.result(terminal_reason="hook_stopped", stop_reason="tool_use", num_turns=2)
    )
    assert isinstance(aborted, ev.Aborted)
    assert (aborted.turn, aborted.outcome) == (1, Outcome.ABORTED)
    assert mapper.turn_aborted() == []  # answered once
    # Without an abort pending it is a hook's stop, as the CLI says.
    feed(mapper, f.init())
    (result,) = mapper.feed(f.result(terminal_reason="hook_stopped", stop_reason="tool_use"))
    assert isinstance(result, ev.Result)
    assert result.terminal_reason == "hook_stopped"


def test_late_result_of_an_aborted_turn_never_closes_the_next_turn() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.assistant("msg_1", f.text_block("partial")))
    mapper.abort_requested()
    out = mapper.turn_aborted()
    assert kinds(out) == ["assistant_message", "aborted"]  # nothing lost at the terminal
    assert out[-1].turn == 1
    # The dead turn drains: its content and late result emit nothing, but the cost counts.
    assert mapper.feed(f.text_delta("zombie")) == []
    assert mapper.feed(f.interrupted_result(total_cost_usd=0.4)) == []
    assert mapper.ledger.session.cost_usd == pytest.approx(0.4)
    (started,) = mapper.feed(f.init())
    assert started.turn == 2
    (result,) = mapper.feed(f.result(total_cost_usd=0.5))
    assert isinstance(result, ev.Result)
    assert result.turn == 2
    assert result.usage.cost_usd == pytest.approx(0.1)
    assert result.session_usage.cost_usd == pytest.approx(0.5)


def test_new_init_ends_draining_even_without_the_late_result() -> None:
    mapper = Mapper()
    feed(mapper, f.init())
    mapper.turn_aborted()
    out = feed(mapper, f.init(), f.text_delta("fresh"), f.result())
    assert kinds(out) == ["turn_started", "text_delta", "result"]
    assert {e.turn for e in out} == {2}


def test_abort_between_turns_is_answered_by_one_aborted() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.result())
    mapper.abort_requested()
    (aborted,) = mapper.turn_aborted()
    assert isinstance(aborted, ev.Aborted)
    assert aborted.turn == 2
    assert mapper.turn_aborted() == []


def test_turn_completing_while_abort_pending_keeps_its_result() -> None:
    mapper = Mapper()
    feed(mapper, f.init())
    mapper.abort_requested()
    (result,) = mapper.feed(f.result())
    assert isinstance(result, ev.Result)
    (aborted,) = mapper.turn_aborted()
    assert isinstance(aborted, ev.Aborted)
    assert aborted.turn == 2


def test_turn_aborted_without_an_open_turn_or_request_is_a_no_op() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.result())
    assert mapper.turn_aborted() == []


def test_stream_end_mid_turn_is_a_fatal_error_after_flushing() -> None:
    mapper = Mapper()
    feed(
        mapper,
        f.init(),
        f.task_started("task_a", "toolu_agent"),
        f.assistant("msg_1", f.text_block("x")),
    )
    out = mapper.stream_ended()
    assert kinds(out) == ["assistant_message", "error"]
    assert out[1].code == "cli_exited"
    assert out[1].fatal
    assert mapper.tasks_in_flight == frozenset()
    assert not mapper.turn_open


def test_stream_end_with_an_error_uses_it_as_the_fatal_terminal() -> None:
    mapper = Mapper()
    feed(mapper, f.init())
    error = ev.Error(message="CLI exited with code 137", code="cli_exited", fatal=False)
    (terminal,) = mapper.stream_ended(error)
    assert terminal == attrs.evolve(error, fatal=True, turn=1, seq=2, phase="runtime")


def test_an_error_before_the_first_turn_is_an_init_error() -> None:
    mapper = Mapper()
    mapper.start_execution()
    (terminal,) = mapper.stream_ended(ev.Error(message="no CLI", code="cli_not_found"))
    assert terminal.phase == "init"
    stamped = mapper.stamp(ev.Error(message="late", code="transport", fatal=False))
    assert stamped.phase == "init"
    feed(mapper, f.init())
    assert mapper.stamp(ev.Error(message="x", code="transport", fatal=False)).phase == "runtime"


def test_stream_end_while_aborting_is_aborted_and_reports_the_error() -> None:
    mapper = Mapper()
    feed(mapper, f.init())
    mapper.abort_requested()
    out = mapper.stream_ended(ev.Error(message="pipe closed", code="transport"))
    assert kinds(out) == ["error", "aborted"]
    assert out[0].fatal is False


def test_stream_end_between_turns_emits_nothing() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.result())
    assert mapper.stream_ended() == []


def test_subagent_and_task_messages_do_not_open_a_turn() -> None:
    mapper = Mapper()
    feed(mapper, f.init(), f.result())
    out = feed(
        mapper,
        f.task_progress("task_a", "toolu_agent"),
        f.assistant("msg_s", f.text_block("sub"), parent_tool_use_id="toolu_agent"),
    )
    assert not mapper.turn_open
    assert all(e.turn == 2 for e in out)
    assert kinds(out) == ["subagent_progress"]  # the subagent message is still buffered
    # At the end, the subagent's buffered message is flushed and no turn needs a terminal.
    assert kinds(mapper.stream_ended()) == ["assistant_message"]


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _with_output(output: Any) -> Any:
    return dataclasses.replace(f.result(), structured_output=output)


def test_structured_output_that_follows_the_schema_rides_on_the_result() -> None:
    mapper = Mapper(output_schema=SCHEMA)
    feed(mapper, f.init())
    out = mapper.feed(_with_output({"n": 3}))
    assert not of(out, ev.WarningEvent)
    assert out[-1].structured_output == {"n": 3}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("output", "says"),
    [({"n": "three"}, "at n: 'three' is not of type 'integer'"), (None, "no structured output")],
)
def test_structured_output_that_does_not_follow_it_is_reported_before_the_result(
    output: Any, says: str
) -> None:
    mapper = Mapper(output_schema=SCHEMA)
    feed(mapper, f.init())
    out = mapper.feed(_with_output(output))
    (warning,) = of(out, ev.WarningEvent)
    assert warning.code == "structured_output_invalid"
    assert says in warning.message
    assert kinds(out)[-2:] == ["warning", "result"]
