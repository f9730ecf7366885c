"""User input through the real CLI: AskUserQuestion and MCP elicitation, answered or not.

The model double makes the model ask; the answer (or its absence) must reach the model's next
request, because that is the only place the CLI shows what it did with our reply.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from helpers import of_type
from helpers_proc import assert_no_cli_left, assert_one_final_terminal, kinds

from claude_trio import AnswerAccepted, AnswerRejected, ExecuteParams, open_session
from claude_trio.protocol.session.events import (
    Event,
    Question,
    Result,
    ToolResult,
    UserInputRequest,
    UserInputResolved,
)
from claude_trio.testing.mcp_elicit_server import (
    SERVER_NAME,
    TOOL_NAME,
    mcp_elicit_server_config,
)
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, turns

pytestmark = pytest.mark.e2e

ASK_ID = "toolu_ask_1"
QUESTION = "Which colour should the button be?"
ASK_INPUT = {
    "questions": [
        {
            "question": QUESTION,
            "header": "Colour",
            "options": [
                {"label": "Blue", "description": "calm"},
                {"label": "Orange", "description": "loud"},
            ],
            "multiSelect": False,
        }
    ]
}
NEVER: dict[str, Any] = {}  # the elicitation handler never returns

EXPECTED_QUESTIONS = (
    Question(question=QUESTION, header="Colour", options=("Blue", "Orange"), multi_select=False),
)


def echo_tool_result(request: ModelRequest) -> Reply:
    """The follow-up turn: repeat what the tool told the model, so the test can read it."""
    return Reply.text(f"the tool said: {request.tool_result_text(ASK_ID)}")


def ask_script(tool: str, tool_input: dict[str, Any]) -> Any:
    return turns(Reply.tool_use(tool, tool_input, id=ASK_ID), echo_tool_result)


async def run_session(
    params: ExecuteParams,
    env: dict[str, str],
    on_user_input: Any,
    *,
    answer: Any = None,
) -> list[Event]:
    """Run one execution to its end; with ``answer`` set, answer each request via the session."""
    events: list[Event] = []
    async with open_session(params, env=env, on_user_input=on_user_input) as session:
        async for event in session.events:
            events.append(event)
            if isinstance(event, UserInputRequest) and answer is not None:
                receipt = await session.answer(event.request_id, answer)
                assert receipt == AnswerAccepted(request_id=event.request_id)
    assert_no_cli_left()
    assert_one_final_terminal(events)
    return events


def only(events: list[Event], cls: type[Any]) -> Any:
    [event] = of_type(events, cls)  # (a tool-use summary's synthetic events left out)
    return event


def sent_tool_result(double: ModelDouble) -> str:
    text = double.message_requests[-1].tool_result_text(ASK_ID)
    assert text is not None
    return text


# ---------------------------------------------------------------------------------------------
# AskUserQuestion


async def test_ask_user_question_answered_by_handler_reaches_the_model(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = ask_script("AskUserQuestion", ASK_INPUT)
    seen: list[UserInputRequest] = []

    async def handler(request: UserInputRequest) -> str:
        seen.append(request)
        await trio.lowlevel.checkpoint()
        return "Orange"

    with trio.fail_after(60):
        events = await run_session(ExecuteParams(prompt="ask me"), hermetic, handler)

    request = only(events, UserInputRequest)
    assert seen == [request]
    assert request.source == "model-tool"
    assert request.questions == EXPECTED_QUESTIONS
    resolved = only(events, UserInputResolved)
    assert (resolved.request_id, resolved.outcome) == (request.request_id, "answered")
    assert resolved.answer == {QUESTION: "Orange"}
    assert kinds(events).index("user_input_request") < kinds(events).index("user_input_resolved")
    assert only(events, ToolResult).tool_use_id == ASK_ID
    assert "Orange" in sent_tool_result(model_double)
    assert "Blue" not in sent_tool_result(model_double)
    result = only(events, Result)
    assert result.text == f"the tool said: {sent_tool_result(model_double)}"


async def test_ask_user_question_answered_manually(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = ask_script("AskUserQuestion", ASK_INPUT)
    with trio.fail_after(60):
        events = await run_session(
            ExecuteParams(prompt="ask me"), hermetic, "manual", answer={QUESTION: "Blue"}
        )
    request = only(events, UserInputRequest)
    assert request.questions == EXPECTED_QUESTIONS
    resolved = only(events, UserInputResolved)
    assert (resolved.request_id, resolved.outcome) == (request.request_id, "answered")
    assert resolved.answer == {QUESTION: "Blue"}
    assert "Blue" in sent_tool_result(model_double)
    assert "Orange" not in sent_tool_result(model_double)


async def test_answer_for_an_unknown_request_is_rejected(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = ask_script("AskUserQuestion", ASK_INPUT)
    events: list[Event] = []
    with trio.fail_after(60):
        async with open_session(
            ExecuteParams(prompt="ask me"), env=hermetic, on_user_input="manual"
        ) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, UserInputRequest):
                    rejected = await session.answer("ask-999", "Blue")
                    assert isinstance(rejected, AnswerRejected)
                    assert rejected.request_id == "ask-999"
                    assert "ask-999" in rejected.reason
                    assert "pending" in rejected.reason
                    accepted = await session.answer(event.request_id, "Blue")
                    assert accepted == AnswerAccepted(request_id=event.request_id)
                    again = await session.answer(event.request_id, "Orange")
                    assert isinstance(again, AnswerRejected)
                    assert "already answered" in again.reason
    assert_no_cli_left()
    assert_one_final_terminal(events)
    assert only(events, UserInputResolved).outcome == "answered"
    assert "Blue" in sent_tool_result(model_double)


async def test_unanswered_question_expires_and_the_model_is_told(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = ask_script("AskUserQuestion", ASK_INPUT)
    with trio.fail_after(60):
        t0 = trio.current_time()
        events = await run_session(
            ExecuteParams(prompt="ask me", user_input_timeout=0.5), hermetic, "manual"
        )
    request = only(events, UserInputRequest)
    resolved = only(events, UserInputResolved)
    assert (resolved.request_id, resolved.outcome, resolved.answer) == (
        request.request_id,
        "expired",
        None,
    )
    assert request.deadline is not None
    assert t0 < request.deadline
    assert "did not answer" in sent_tool_result(model_double)


# ---------------------------------------------------------------------------------------------
# MCP elicitation


@pytest.mark.parametrize(
    ("reply", "outcome", "server_saw"),
    [
        ({"action": "accept", "content": {"answer": "teal"}}, "answered", "accept: teal"),
        ({"action": "decline"}, "answered", "decline"),
        (NEVER, "expired", "cancel"),
    ],
    ids=["accept", "decline", "expired"],
)
async def test_mcp_elicitation_answer_reaches_the_mcp_tool(
    model_double: ModelDouble,
    hermetic: dict[str, str],
    reply: dict[str, Any],
    outcome: str,
    server_saw: str,
) -> None:
    model_double.responder = ask_script(TOOL_NAME, {"question": "favourite colour?"})
    seen: list[UserInputRequest] = []

    async def handler(request: UserInputRequest) -> dict[str, Any]:
        seen.append(request)
        if reply is NEVER:
            await trio.sleep_forever()  # the broker's deadline (0.5 s) ends the wait
        await trio.lowlevel.checkpoint()
        return reply

    params = ExecuteParams(
        prompt="ask me",
        mcp_servers={SERVER_NAME: mcp_elicit_server_config()},
        user_input_timeout=0.5,
    )
    with trio.fail_after(60):
        events = await run_session(params, hermetic, handler)

    request = only(events, UserInputRequest)
    assert seen == [request]
    assert request.source == "mcp-elicitation"
    assert request.message == "favourite colour?"
    assert request.server_name == SERVER_NAME
    assert request.requested_schema is not None
    assert request.requested_schema["properties"]["answer"]["type"] == "string"
    resolved = only(events, UserInputResolved)
    assert (resolved.request_id, resolved.outcome) == (request.request_id, outcome)
    assert sent_tool_result(model_double) == server_saw
    assert only(events, Result).text == f"the tool said: {server_saw}"
