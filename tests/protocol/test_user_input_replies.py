"""protocol/extensions/user_input.py: answers checked, and exactly one reply per outcome."""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.user_input import (
    CANCELLED_MESSAGE,
    ControlReply,
    ask_user_answers,
    ask_user_reply,
    elicitation_control_reply,
    elicitation_reply,
    elicitation_request,
    normalize_answer,
    questions_from_input,
)
from claude_trio.protocol.session.events import Question, UserInputRequest

ASK = {
    "questions": [
        {
            "question": "Proceed?",
            "header": "Go",
            "options": [{"label": "Yes"}, {"label": "No"}],
            "multiSelect": False,
        }
    ]
}
QUESTIONS = questions_from_input(ASK)


def test_questions_are_read_from_the_tool_input_and_malformed_entries_skipped() -> None:
    assert (Question(question="Proceed?", header="Go", options=("Yes", "No")),) == QUESTIONS
    assert questions_from_input({"questions": "nope"}) == ()
    assert questions_from_input({"questions": [1, {"question": "Q"}]}) == (Question(question="Q"),)


def test_ask_user_answers_accepts_a_mapping_or_a_bare_string_for_one_question() -> None:
    assert ask_user_answers("Yes", QUESTIONS) == {"Proceed?": "Yes"}
    assert ask_user_answers({"Proceed?": ["Yes", "No"]}, QUESTIONS) == {"Proceed?": "Yes, No"}
    with pytest.raises(InvalidParamsError, match="not one of the questions"):
        ask_user_answers({"Other?": "Yes"}, QUESTIONS)
    with pytest.raises(InvalidParamsError, match="AskUserQuestion takes a mapping"):
        ask_user_answers(42, QUESTIONS)


def test_elicitation_answers() -> None:
    assert elicitation_reply({"name": "x"}) == {"action": "accept", "content": {"name": "x"}}
    assert elicitation_reply({"action": "decline"}) == {"action": "decline"}
    with pytest.raises(InvalidParamsError, match="accept, decline, cancel"):
        elicitation_reply({"action": "maybe"})
    with pytest.raises(InvalidParamsError, match="a mapping of field values"):
        elicitation_reply({"action": "accept", "content": [1]})
    with pytest.raises(InvalidParamsError):
        elicitation_reply("yes")


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        ("answered", PermissionResultAllow(updated_input={**ASK, "answers": {"Proceed?": "Yes"}})),
        ("expired", PermissionResultAllow(updated_input=ASK)),
        ("cancelled", PermissionResultDeny(message=CANCELLED_MESSAGE, interrupt=True)),
        ("withdrawn", PermissionResultDeny(message=CANCELLED_MESSAGE, interrupt=True)),
    ],
)
def test_ask_user_reply_table(outcome: Any, expected: Any) -> None:
    assert ask_user_reply(outcome, {"Proceed?": "Yes"}, ASK) == expected


def test_a_failed_question_has_no_permission_result() -> None:
    with pytest.raises(InvalidParamsError, match="error reply"):
        ask_user_reply("failed", "boom", ASK)


ACCEPT = {"action": "accept", "content": {"a": 1}}
NO_ANSWER = {"subtype": "success", "request_id": "r", "response": {"action": "cancel"}}


@pytest.mark.parametrize(
    ("outcome", "value", "frame"),
    [
        ("answered", ACCEPT, {"subtype": "success", "request_id": "r", "response": ACCEPT}),
        ("expired", None, NO_ANSWER),
        ("cancelled", None, NO_ANSWER),
        ("failed", "boom", {"subtype": "error", "request_id": "r", "error": "boom"}),
    ],
)
def test_elicitation_reply_table(outcome: Any, value: Any, frame: dict[str, Any]) -> None:
    reply = elicitation_control_reply("r", outcome, value)
    assert isinstance(reply, ControlReply)
    assert reply.frame() == {"type": "control_response", "response": frame}


def test_a_withdrawn_elicitation_gets_no_reply() -> None:
    assert elicitation_control_reply("r", "withdrawn", None) is None


def test_elicitation_request_reads_the_cli_request() -> None:
    event = elicitation_request(
        "elicit-1",
        {"message": "Name?", "mcp_server_name": 7, "requested_schema": {"type": "object"}},
    )
    assert event == UserInputRequest(
        request_id="elicit-1",
        source="mcp-elicitation",
        message="Name?",
        server_name=None,
        requested_schema={"type": "object"},
    )


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=8,
    )
)
def test_a_malformed_answer_is_refused_with_a_reason_never_forwarded(answer: Any) -> None:
    request = UserInputRequest(request_id="ask-1", source="model-tool", questions=QUESTIONS)
    try:
        normalized = normalize_answer(request, answer)
    except InvalidParamsError as exc:
        refusal = str(exc)
        assert refusal.startswith("invalid answer"), refusal
        return
    # Whatever is accepted is exactly the shape the CLI takes: {question: label}.
    assert set(normalized) <= {"Proceed?"}
    assert all(isinstance(v, str) for v in normalized.values())
