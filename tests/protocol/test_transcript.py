"""``Transcript.of``: an execution's events sorted into answer, calls, subagents, questions."""

from __future__ import annotations

from stream_kit import answer, call, numbered, result, said, sub, usage

from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Question,
    SubagentCompleted,
    SubagentStarted,
    TextDelta,
    TodoItem,
    TodoListUpdated,
    ToolResult,
    ToolUse,
    ToolUseSummary,
    UserInputRequest,
    UserInputResolved,
    UserMessage,
    WarningEvent,
)
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.transcript import Transcript, ends_execution
from claude_trio.protocol.session.usage import Usage


def test_rule_5_the_answer_is_the_final_results_text() -> None:
    events = numbered(
        TextDelta(text="Hel", message_id="m-1"),
        said("Hello"),
        result(text="Hello, final"),
    )
    transcript = Transcript.of(events)
    assert transcript.text == "Hello, final"
    assert [m.message_id for m in transcript.messages] == ["m-1"]
    assert transcript.terminal is events[-1]
    assert transcript.events == tuple(events)


def test_rule_5_without_a_result_text_the_last_message_is_the_answer() -> None:
    events = numbered(said("first", "m-1"), said("second", "m-2"), Aborted(reason="stop"))
    transcript = Transcript.of(events)
    assert transcript.text == "second"
    assert isinstance(transcript.terminal, Aborted)


def test_rule_3_tool_calls_pair_with_their_results_wherever_reported() -> None:
    events = numbered(
        call("t-1"),
        call("t-2", "Bash"),
        answer("t-2", "listing", is_error=True),
        answer("t-1", "contents"),
        call("t-3"),
        answer("t-orphan"),
        result(),
    )
    calls = Transcript.of(events).tool_calls
    assert [(c.tool_use_id, c.name, c.output, c.is_error) for c in calls] == [
        ("t-1", "Read", "contents", False),
        ("t-2", "Bash", "listing", True),
        ("t-3", "Read", None, False),
    ]
    assert calls[0].input == {"file_path": "a"}
    assert calls[2].result is None


def test_rules_1_and_2_subagents_have_transcripts_of_their_own_nested_under_their_parent() -> None:
    events = numbered(
        call("agent-1", "Agent"),
        SubagentStarted(task_id="task-a", tool_use_id="agent-1", description="survey"),
        call("ls", "Bash", **sub("task-a")),
        answer("ls", "a.py", **sub("task-a")),
        call("agent-2", "Agent", **sub("task-a")),
        SubagentStarted(
            task_id="task-b", tool_use_id="agent-2", description="deeper", **sub("task-a")
        ),
        said("deep answer", "m-b", **sub("task-b")),
        SubagentCompleted(
            task_id="task-b", tool_use_id="agent-2", status="completed", **sub("task-a")
        ),
        said("survey done", "m-a", **sub("task-a")),
        SubagentCompleted(task_id="task-a", tool_use_id="agent-1", status="failed"),
        answer("agent-1", "report"),
        said("all done", "m-main"),
        result(text=None),
    )
    main = Transcript.of(events)
    assert main.text == "all done"
    assert [c.tool_use_id for c in main.tool_calls] == ["agent-1"]
    [a] = main.subagents
    assert (a.task_id, a.description, a.status) == ("task-a", "survey", "failed")
    assert a.transcript.text == "survey done"
    assert [c.tool_use_id for c in a.transcript.tool_calls] == ["ls", "agent-2"]
    assert a.transcript.terminal is None
    assert a.transcript.usage is None
    [b] = a.transcript.subagents
    assert (b.task_id, b.status, b.transcript.text) == ("task-b", "completed", "deep answer")
    assert b.transcript.events == (events[6],)
    # The subagent's events hold its own and those of the subagent below it.
    assert [e.seq for e in a.transcript.events] == [3, 4, 5, 6, 7, 8, 9]
    assert [r.task_id for r in main.all_subagents] == ["task-a", "task-b"]


def test_rule_1_subagent_events_before_their_task_is_known_are_gathered_apart() -> None:
    events = numbered(
        said("early", "m-x", is_subagent=True),
        said("main", "m-main"),
        result(text=None),
    )
    main = Transcript.of(events)
    [early] = main.subagents
    assert (early.task_id, early.started, early.transcript.text) == (None, None, "early")
    assert main.text == "main"


def test_rule_4_questions_pair_with_their_resolution() -> None:
    ask = UserInputRequest(
        request_id="ask-1", source="model-tool", questions=(Question(question="Which?"),)
    )
    events = numbered(
        ask,
        UserInputRequest(request_id="ask-2", source="mcp-elicitation", message="ok?"),
        UserInputResolved(request_id="ask-1", outcome="answered", answer={"Which?": "A"}),
        result(),
    )
    first, second = Transcript.of(events).questions
    assert (first.request_id, first.outcome, first.answer) == ("ask-1", "answered", {"Which?": "A"})
    assert (second.request_id, second.outcome, second.answer) == ("ask-2", None, None)


def test_an_expired_question_has_no_answer() -> None:
    events = numbered(
        UserInputRequest(request_id="q", source="model-tool"),
        UserInputResolved(request_id="q", outcome="expired", answer={"ignored": 1}),
        result(),
    )
    [exchange] = Transcript.of(events).questions
    assert (exchange.outcome, exchange.answer) == ("expired", None)


def test_rule_7_todos_are_the_last_list() -> None:
    first = (TodoItem(id="1", content="read", status="in_progress"),)
    last = (TodoItem(id="1", content="read", status="completed"),)
    events = numbered(
        TodoListUpdated(items=first, tool_use_id="t-1", tool_name="TodoWrite"),
        TodoListUpdated(items=last, tool_use_id="t-2", tool_name="TodoWrite"),
        result(),
    )
    assert Transcript.of(events).todos == last


def test_rule_6_usage_is_the_executions_including_an_aborted_turn() -> None:
    events = numbered(
        result(final=False, usage=usage(10, 0.5), execution_usage=usage(10, 0.5)),
        Aborted(reason="stop", usage=usage(3, 0.25), turn=2),
    )
    assert Transcript.of(events).usage == Usage(input_tokens=13, output_tokens=13, cost_usd=0.75)
    assert Transcript.of(numbered(said("x"))).usage is None


def test_pushes_errors_and_warnings_are_listed() -> None:
    push = UserMessage(text="more", uuid="u-1", timestamp=0.0)
    warning = WarningEvent(message="careful", code="rate_limit")
    failure = Error(message="boom", code="cli_exited")
    hiccup = Error(message="hiccup", code="transport", fatal=False)
    events = numbered(push, warning, hiccup, failure)
    transcript = Transcript.of(events)
    assert transcript.user_messages == (events[0],)
    assert transcript.warnings == (events[1],)
    assert transcript.errors == (events[2], events[3])
    assert transcript.terminal is events[3]
    assert transcript.results == ()


def test_ends_execution_is_the_final_result_an_abort_or_a_fatal_error() -> None:
    assert ends_execution(result(final=True))
    assert not ends_execution(result(final=False))
    assert ends_execution(Aborted())
    assert ends_execution(Error(message="x", code="internal"))
    assert not ends_execution(Error(message="x", code="internal", fatal=False))
    assert not ends_execution(TextDelta(text="x"))


def test_rule_3_tool_use_summaries_are_kept_apart_from_the_calls() -> None:
    summary = ToolUseSummary(summary="Read a", preceding_tool_use_ids=("t-1",), summary_id="u-1")
    # An older peer's form of a summary: a synthetic tool_use / tool_result pair.
    older_use = ToolUse(
        tool_use_id="tool_use_summary:u-2",
        name="tool_use_summary",
        input={"preceding_tool_use_ids": ["t-1"]},
        synthetic=True,
    )
    older_result = ToolResult(tool_use_id=older_use.tool_use_id, content="Read a again")
    events = numbered(call("t-1"), answer("t-1"), summary, older_use, older_result, result())
    transcript = Transcript.of(events)
    assert [c.tool_use_id for c in transcript.tool_calls] == ["t-1"]
    summaries = transcript.tool_summaries
    assert [(s.summary, s.preceding_tool_use_ids, s.summary_id) for s in summaries] == [
        ("Read a", ("t-1",), "u-1"),
        ("Read a again", ("t-1",), "u-2"),
    ]


def test_the_transcript_says_how_the_execution_ended() -> None:
    assert Transcript.of(numbered(result())).outcome is Outcome.COMPLETED
    timed_out = Aborted(reason="run_timeout: ...", outcome=Outcome.RUN_TIMEOUT, phase="tools")
    assert Transcript.of(numbered(call("t-1"), timed_out)).outcome is Outcome.RUN_TIMEOUT
    assert Transcript.of(numbered(call("t-1"))).outcome is None  # cut short
