"""Streaming input through the real CLI: where a push lands decides how many turns there are.

* A push while a tool runs is folded by the CLI into the running turn: one result, listing the
  prompt's uuid and the push's.
* A push while the model's text streams lands after that turn's result: one more turn.
* A push after the execution ended is rejected, never silently dropped.
"""

from __future__ import annotations

import pytest
import trio
from helpers_proc import assert_no_cli_left, assert_one_final_terminal

from claude_trio import ExecuteParams, ImageInput, open_session
from claude_trio.protocol.session.events import Event, Result, TextDelta, ToolUse, UserMessage
from claude_trio.protocol.session.lifecycle import Accepted, Rejected
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, turns

pytestmark = pytest.mark.e2e

PUSH = "please also say bye"


def answer_push(request: ModelRequest) -> Reply:
    return Reply.text(f"you said: {request.last_user_text}")


async def test_push_while_a_tool_runs_is_folded_into_the_turn(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": "sleep 1; echo hi", "description": "wait"}),
        answer_push,
    )
    events: list[Event] = []
    receipts: list[Accepted | Rejected] = []
    with trio.fail_after(60):
        async with open_session(ExecuteParams(prompt="run it"), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, ToolUse) and not event.synthetic:
                    receipts.append(await session.push(PUSH))
    assert_no_cli_left()
    result = assert_one_final_terminal(events)

    [accepted] = receipts
    assert isinstance(accepted, Accepted)
    [pushed] = [e for e in events if isinstance(e, UserMessage)]
    assert (pushed.text, pushed.uuid, pushed.turn) == (PUSH, accepted.uuid, 1)
    [only_result] = [e for e in events if isinstance(e, Result)]
    assert only_result is result
    assert result.turn == 1
    assert events.index(pushed) < events.index(result)
    assert len(result.user_message_uuids) == 2
    assert accepted.uuid in result.user_message_uuids
    # The push reached the model in the same turn: the CLI folds it into the follow-up request
    # after the tool ("The user sent a new message while you were working: ...").
    assert len(model_double.message_requests) == 2
    folded = model_double.message_requests[1].last_user_text
    assert PUSH in folded
    assert folded != PUSH
    assert result.text == f"you said: {folded}"


async def test_push_while_text_streams_starts_the_next_turn(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = turns(
        Reply.text("a long streamed text " * 8, event_delay=0.05, chunk_size=8),
        answer_push,
    )
    events: list[Event] = []
    receipts: list[Accepted | Rejected] = []
    with trio.fail_after(60):
        async with open_session(ExecuteParams(prompt="talk"), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, TextDelta) and not receipts:
                    receipts.append(await session.push(PUSH))
            late = await session.push("too late")
            usage = session.usage_by_turn
    assert_no_cli_left()
    assert_one_final_terminal(events)

    [accepted] = receipts
    assert isinstance(accepted, Accepted)
    first, second = (e for e in events if isinstance(e, Result))
    assert (first.turn, first.final, second.turn, second.final) == (1, False, 2, True)
    assert accepted.uuid not in first.user_message_uuids
    assert second.user_message_uuids == (accepted.uuid,)
    assert second.text == f"you said: {PUSH}"
    assert [r.last_user_text for r in model_double.message_requests] == ["talk", PUSH]
    # Usage: per turn what the double reported (10 in / 5 out each), summed over the execution.
    assert [(u.input_tokens, u.output_tokens) for u in usage.turns] == [(10, 5), (10, 5)]
    assert (second.execution_usage.input_tokens, second.execution_usage.output_tokens) == (20, 10)
    assert late == Rejected(reason="the execution has ended")


async def test_push_after_the_end_is_rejected(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = turns(Reply.text("hello"))
    events: list[Event] = []
    with trio.fail_after(60):
        async with open_session(ExecuteParams(prompt="hi"), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
            assert await session.push("anyone there?") == Rejected(reason="the execution has ended")
            assert session.push_nowait("still?") == Rejected(reason="the execution has ended")
    assert_no_cli_left()
    result = assert_one_final_terminal(events)
    assert isinstance(result, Result)
    assert result.text == "hello"
    assert not any(isinstance(e, UserMessage) for e in events)
    assert len(model_double.message_requests) == 1


PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99"
    b"=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
)


async def test_a_push_with_images_reaches_the_model_as_image_blocks(
    model_double: ModelDouble, hermetic: dict[str, str]
) -> None:
    model_double.responder = turns(
        Reply.text("a long streamed text " * 8, event_delay=0.05, chunk_size=8),
        Reply.text("a dot"),
    )
    image = ImageInput.from_bytes(PNG)
    events: list[Event] = []
    receipts: list[Accepted | Rejected] = []
    with trio.fail_after(60):
        async with open_session(ExecuteParams(prompt="talk"), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, TextDelta) and not receipts:
                    receipts.append(await session.push("what is this?", images=[image]))
    assert_no_cli_left()
    assert_one_final_terminal(events)
    [accepted] = receipts
    assert isinstance(accepted, Accepted)
    first, second = model_double.message_requests
    assert not any(
        block.get("type") == "image"
        for message in first.messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
    )
    last = second.messages[-1]
    assert last["role"] == "user"
    blocks = last["content"]
    [image_block] = [b for b in blocks if b.get("type") == "image"]
    assert image_block["source"] == image.block()["source"]
    texts = [str(b.get("text", "")).strip() for b in blocks if b.get("type") == "text"]
    assert "what is this?" in texts
    assert blocks.index(image_block) < [b.get("text", "").strip() for b in blocks].index(
        "what is this?"
    )
