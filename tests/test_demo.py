"""The demo's scripted model, walked through a conversation without a CLI.

The CLI run of the demo is in ``tests/e2e/test_commands.py``; here the script's decisions are
checked request by request, the way the CLI builds them (tool results appended to the history).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from claude_trio.cli import demo
from claude_trio.protocol.session.events import Question, UserInputRequest
from claude_trio.testing.model_double import (
    ModelRequest,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
)

PROJECT = Path("/tmp/demo-project")
SUBAGENT_SYSTEM = [{"type": "text", "text": "x-anthropic-billing-header: cc_is_subagent=true;"}]


def request(messages: Sequence[Mapping[str, Any]], *, system: Any = None) -> ModelRequest:
    body: dict[str, Any] = {"model": "claude-opus-5-5", "stream": True, "messages": list(messages)}
    if system is not None:
        body["system"] = system
    return ModelRequest(
        index=0, method="POST", path="/v1/messages?beta=true", headers=(), body=body
    )


def as_reply(response: Any) -> Reply:
    assert isinstance(response, Reply), response
    return response


def tool_uses(reply: Reply) -> list[ReplyToolUse]:
    return [b for b in reply.blocks if isinstance(b, ReplyToolUse)]


def answer_all(history: list[dict[str, Any]], reply: Reply, results: Mapping[str, str]) -> None:
    """Append ``reply`` and a user message with a result for each of its tool uses."""
    history.append(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": b.id, "name": b.name, "input": dict(b.input)}
                for b in tool_uses(reply)
            ],
        }
    )
    history.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": results.get(b.name, "ok")}
                for b in tool_uses(reply)
            ],
        }
    )


def run_main_agent(ask_result: str) -> tuple[list[ReplyToolUse], Reply]:
    """Every tool call the main agent makes, in order, and its final reply."""
    respond = demo.demo_responder(PROJECT)
    history: list[dict[str, Any]] = [{"role": "user", "content": demo.DEMO_PROMPT}]
    calls: list[ReplyToolUse] = []
    for _ in range(10):
        reply = as_reply(respond(request(history)))
        uses = tool_uses(reply)
        if not uses:
            return calls, reply
        calls.extend(uses)
        answer_all(history, reply, {"AskUserQuestion": ask_result})
    raise AssertionError(f"the script never ended: {[c.name for c in calls]}")


def test_the_main_agent_plans_reads_delegates_asks_and_answers() -> None:
    calls, final = run_main_agent('Your questions have been answered: "Q"="Storage".')
    assert [c.name for c in calls] == [
        "TodoWrite",
        "Read",
        "Agent",
        "TodoWrite",
        "AskUserQuestion",
        "TodoWrite",
    ]
    read, agent, ask = calls[1], calls[2], calls[4]
    assert read.input == {"file_path": str(PROJECT / "README.md")}
    assert agent.input["run_in_background"] is False  # one linear turn
    [question] = ask.input["questions"]
    assert question["question"] == demo.FOCUS_QUESTION
    assert [o["label"] for o in question["options"]] == ["Sensors", "Storage"]
    todo_statuses = [
        [t["status"] for t in c.input["todos"]] for c in calls if c.name == "TodoWrite"
    ]
    assert todo_statuses[0][0] == "in_progress"
    assert todo_statuses[-1] == ["completed"] * 4
    assert final.blocks == (ReplyText(text=demo.FINAL_ANSWERS["Storage"]),)


def test_the_final_answer_follows_the_users_choice() -> None:
    _, sensors = run_main_agent('Your questions have been answered: "Q"="Sensors".')
    _, unanswered = run_main_agent("The user did not answer the questions.")
    assert "You picked Sensors" in str(sensors.blocks[0])
    assert "did not pick" in str(unanswered.blocks[0])


def test_the_first_reply_thinks_then_writes_then_plans() -> None:
    reply = as_reply(demo.demo_responder(PROJECT)(request([{"role": "user", "content": "hi"}])))
    kinds = [type(b) for b in reply.blocks]
    assert kinds == [ReplyThinking, ReplyText, ReplyToolUse]


def test_the_subagent_lists_the_folder_then_reports() -> None:
    respond = demo.demo_responder(PROJECT)
    history: list[dict[str, Any]] = [{"role": "user", "content": "List the files"}]
    first = as_reply(respond(request(history, system=SUBAGENT_SYSTEM)))
    [ls] = tool_uses(first)
    assert (ls.name, ls.input["command"]) == ("Bash", "ls")
    answer_all(history, first, {"Bash": "README.md\nstation.py"})
    report = as_reply(respond(request(history, system=SUBAGENT_SYSTEM)))
    assert tool_uses(report) == []
    assert "README.md, station.py" in str(report.blocks[0])


def test_requests_off_the_script_are_left_to_the_double() -> None:
    respond = demo.demo_responder(PROJECT)
    pending: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash"}]},
    ]
    assert respond(request(pending)) is None
    summary = [
        {
            "type": "text",
            "text": "Write a short summary label describing what these tool calls accomplished",
        }
    ]
    assert respond(request([{"role": "user", "content": "x"}], system=summary)) is None


async def test_the_demo_user_picks_the_first_option_after_a_pause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    question = UserInputRequest(
        request_id="ask-1",
        source="model-tool",
        questions=(Question(question="Q?", options=("A", "B")),),
    )
    start = trio.current_time()
    assert await demo.answer_demo_question(question) == {"Q?": "A"}
    assert trio.current_time() - start == pytest.approx(demo.ANSWER_DELAY)
    elicitation = UserInputRequest(request_id="e-1", source="mcp-elicitation", message="ok?")
    assert await demo.answer_demo_question(elicitation) == {"action": "decline"}


def test_the_demo_project_is_written(tmp_path: Path) -> None:
    demo.write_demo_project(tmp_path / "p")
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["README.md", "station.py"]
    params = demo.demo_params(tmp_path / "p")
    assert params.cwd == str(tmp_path / "p")
    assert params.effective_thinking() == {"type": "adaptive"}
