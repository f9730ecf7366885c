"""docs/testing.md, "A scripted CLI": your code against FakeCLI, in exact virtual time."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from claude_trio import ExecuteParams, UserInputRequest, collect, open_session
from claude_trio.testing import FakeCLI, FakeTurn


# The code under test: what your application does with a session.
async def review(prompt: str, *, transport_factory: Any = None) -> str:
    params = ExecuteParams(prompt=prompt)
    async with open_session(params, transport_factory=transport_factory) as session:
        transcript = await collect(session.events)
    tools = ", ".join(call.name for call in transcript.tool_calls) or "no tools"
    return f"{transcript.text} ({tools})"


# The script: what the CLI does in this test's turn.
async def reads_then_answers(turn: FakeTurn) -> None:
    tool = await turn.tool_use("Read", {"file_path": "app.py"})
    await turn.sleep(2.0)  # the tool takes two seconds
    await turn.tool_result(tool, "print('hi')")
    await turn.text("app.py prints hi.", chunk=4, delay=0.1)


async def test_review_reports_the_answer_and_the_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(reads_then_answers)
    answer = await review("what does app.py do?", transport_factory=fake)
    assert answer == "app.py prints hi. (Read)"
    assert trio.current_time() == pytest.approx(2.0 + 5 * 0.1)  # virtual seconds, exact
    [prompt] = fake.transport.user_messages
    assert prompt["message"]["content"] == "what does app.py do?"


# The scripted_session fixture opens a real session on a fresh FakeCLI in one line.
async def asks_a_question(turn: FakeTurn) -> None:
    question = {"question": "Deploy now?", "options": [{"label": "yes"}, {"label": "no"}]}
    reply = await turn.ask_permission("AskUserQuestion", {"questions": [question]})
    answer = reply["updatedInput"]["answers"]["Deploy now?"]
    await turn.text(f"You said {answer}.")


async def test_questions_reach_the_handler(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async def cautious_user(request: UserInputRequest) -> Any:
        await trio.sleep(3.0)  # the user thinks it over
        return {"Deploy now?": "no"}

    async with scripted_session(asks_a_question, on_user_input=cautious_user) as session:
        transcript = await collect(session.events)
    assert transcript.text == "You said no."
    [exchange] = transcript.questions
    assert exchange.outcome == "answered"
    assert trio.current_time() == pytest.approx(3.0)
