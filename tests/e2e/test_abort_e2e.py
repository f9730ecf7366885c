"""Abort through the real CLI: one ``aborted`` terminal event, promptly, and no CLI left behind.

Wherever the abort lands (the model's text streaming, a tool running, a question waiting for
the user), ``abort()`` must return well under our deadlines (``DriverConfig``: control 5 s,
abort grace 3 s), the stream must end with exactly one ``aborted`` event, a pending question
must be resolved ``cancelled``, the ``claude`` process must be gone, and the next session must
work.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from helpers_proc import assert_no_cli_left, assert_one_final_terminal

from claude_trio import DriverConfig, ExecuteParams, open_session
from claude_trio.protocol.session.events import (
    Aborted,
    Event,
    Result,
    TextDelta,
    ToolUse,
    UserInputRequest,
    UserInputResolved,
    is_terminal,
)
from claude_trio.testing.model_double import (
    ModelDouble,
    Reply,
    Rule,
    Script,
    is_main_agent,
)

pytestmark = pytest.mark.e2e

# The CLI confirms an interrupt of a streaming turn or a pending question within ~0.3 s: far
# below DriverConfig's abort_grace (3 s) and control_timeout (5 s), so an abort that waited for
# either would fail this.
PROMPT_ABORT = 2.0
# A running Bash tool is another matter: CLI 2.1.332 acknowledges the interrupt at once but sends
# its result ~1.3-1.8 s later (more on a loaded box), and abort() waits up to abort_grace for it
# (it carries the interrupted turn's usage). The bound: our grace plus a margin, still below the
# tool's 5 s sleep, so an abort that waited for the tool fails.
TOOL_ABORT = DriverConfig().abort_grace + 1.0
ASK_INPUT = {
    "questions": [
        {
            "question": "Proceed?",
            "header": "Go",
            "options": [
                {"label": "Yes", "description": "go on"},
                {"label": "No", "description": "stop"},
            ],
            "multiSelect": False,
        }
    ]
}
ASK = Reply.tool_use("AskUserQuestion", ASK_INPUT)
SLOW_TEXT = Reply.text("a long streamed text " * 20, event_delay=0.05, chunk_size=8)
AGAIN = "again?"


def prompted(text: str) -> Any:
    return lambda request: is_main_agent(request) and request.last_user_text == text


def script(first: Reply) -> Script:
    """``first`` for the aborted session's prompt, then a reply for the follow-up session."""
    return Script(
        [
            Rule(reply=first, when=prompted("go")),
            Rule(reply=Reply.text("still here"), when=prompted(AGAIN)),
        ]
    )


async def never_answer(request: UserInputRequest) -> Any:
    await trio.sleep_forever()


async def next_session_works(env: dict[str, str]) -> None:
    events: list[Event] = []
    async with open_session(ExecuteParams(prompt=AGAIN), env=env) as session:
        events.extend([event async for event in session.events])
    assert_no_cli_left()
    result = assert_one_final_terminal(events)
    assert isinstance(result, Result)
    assert result.text == "still here"


@pytest.mark.parametrize(
    ("first", "abort_on", "on_user_input", "bound"),
    [
        (SLOW_TEXT, TextDelta, None, PROMPT_ABORT),
        (
            Reply.tool_use("Bash", {"command": "sleep 5", "description": "wait"}),
            ToolUse,
            None,
            TOOL_ABORT,
        ),
        (
            Reply.tool_use("AskUserQuestion", ASK_INPUT),
            UserInputRequest,
            never_answer,
            PROMPT_ABORT,
        ),
        (Reply.tool_use("AskUserQuestion", ASK_INPUT), UserInputRequest, "manual", PROMPT_ABORT),
    ],
    ids=["mid-stream", "mid-tool", "question-handler", "question-manual"],
)
async def test_abort_ends_with_one_aborted_event_and_no_cli(
    model_double: ModelDouble,
    hermetic: dict[str, str],
    first: Reply,
    abort_on: type[Event],
    on_user_input: Any,
    bound: float,
) -> None:
    model_double.responder = script(first)
    events: list[Event] = []
    took: list[float] = []
    with trio.fail_after(60):
        async with open_session(
            ExecuteParams(prompt="go"), env=hermetic, on_user_input=on_user_input
        ) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, abort_on) and not took:
                    asked = len(model_double.message_requests)
                    t0 = trio.current_time()
                    await session.abort()
                    took.append(trio.current_time() - t0)
        assert_no_cli_left()
        # No model request after the abort: a tool call the stop gate denied stops the turn
        # there, not handed to the model in one more request before the interrupt lands.
        assert len(model_double.message_requests) == asked
        aborted = assert_one_final_terminal(events)
        assert isinstance(aborted, Aborted)
        assert [e for e in events if is_terminal(e)] == [aborted]
        assert took[0] < bound, f"abort() took {took[0]:.2f} s"
        assert aborted.turn == 1
        if abort_on is UserInputRequest:
            [request] = [e for e in events if isinstance(e, UserInputRequest)]
            [resolved] = [e for e in events if isinstance(e, UserInputResolved)]
            assert (resolved.request_id, resolved.outcome) == (request.request_id, "cancelled")
            assert events.index(resolved) < events.index(aborted)
        await next_session_works(hermetic)


async def test_abort_twice_is_idempotent(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = script(SLOW_TEXT)
    events: list[Event] = []
    with trio.fail_after(60):
        async with open_session(ExecuteParams(prompt="go"), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, TextDelta) and not session.ended:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(session.abort)
                        nursery.start_soon(session.abort)
                    await session.abort()
                    assert session.ended
    assert_no_cli_left()
    aborted = assert_one_final_terminal(events)
    assert isinstance(aborted, Aborted)
    assert [e for e in events if is_terminal(e)] == [aborted]


async def test_abort_after_the_end_is_a_no_op(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = script(Reply.text("done"))
    events: list[Event] = []
    with trio.fail_after(60):
        async with open_session(ExecuteParams(prompt="go"), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
            t0 = trio.current_time()
            await session.abort()
            assert trio.current_time() - t0 < PROMPT_ABORT
            events.extend([event async for event in session.events])
    assert_no_cli_left()
    result = assert_one_final_terminal(events)
    assert isinstance(result, Result)
    assert result.text == "done"
    assert not any(isinstance(e, Aborted) for e in events)


async def test_leaving_the_block_early_stops_the_cli(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = script(SLOW_TEXT)
    events: list[Event] = []
    with trio.fail_after(60):
        async with open_session(ExecuteParams(prompt="go"), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, TextDelta):
                    break
        # The stream still holds what was queued up to the end: read it to the last event.
        events.extend([event async for event in session.events])
        assert_no_cli_left()
        aborted = assert_one_final_terminal(events)
        assert isinstance(aborted, Aborted)
        await next_session_works(hermetic)
