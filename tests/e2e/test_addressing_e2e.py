"""Addressing a conversation over the real bundled CLI: a chosen session id, and a fork from a
given message that drops the turn after it (``session_id``, ``resume_session_at``,
``resume_drops_turn``)."""

from __future__ import annotations

import uuid
from pathlib import Path

import attrs
import pytest
from helpers import dump, kinds, of_type, params, run_session

from claude_trio.protocol.session.events import (
    AdapterReady,
    AssistantMessage,
    Result,
    TurnStarted,
)
from claude_trio.testing.model_double import ModelDouble, Reply, turns

pytestmark = pytest.mark.e2e


async def test_a_chosen_session_id_is_the_conversations_id(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(Reply.text("hi"))
    chosen = str(uuid.uuid4())

    events = await run_session(params(tmp_path, "hello", session_id=chosen), hermetic)

    [ready] = of_type(events, AdapterReady)
    [started] = of_type(events, TurnStarted)
    [result] = of_type(events, Result)
    assert ready.session_id == chosen
    assert started.session_id == result.session_id == chosen, dump(events)


def message_uuid(event: AssistantMessage) -> str:
    """The transcript uuid of an assistant message (from the SDK message it was made of)."""
    raws = event.raw if isinstance(event.raw, tuple) else (event.raw,)
    [found] = {raw.uuid for raw in raws if getattr(raw, "uuid", None)}
    assert isinstance(found, str)
    return found


async def test_a_fork_from_a_message_leaves_out_the_turn_it_drops(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(
        Reply.text("noted A"), Reply.text("noted B"), Reply.text("forked")
    )
    first_params = params(tmp_path, "first: A")
    first_events = await run_session(first_params, hermetic)
    [first] = of_type(first_events, Result)
    [kept] = [e for e in of_type(first_events, AssistantMessage) if e.raw is not None]
    second_events = await run_session(
        attrs.evolve(first_params, prompt="second: B", resume_session_id=first.session_id),
        hermetic,
    )
    [second] = of_type(second_events, Result)
    assert second.session_id == first.session_id
    fork_id = str(uuid.uuid4())

    fork_events = await run_session(
        attrs.evolve(
            first_params,
            prompt="third: C",
            resume_session_id=first.session_id,
            fork_session=True,
            session_id=fork_id,
            resume_session_at=message_uuid(kept),
            resume_drops_turn=second.user_message_uuids[0],
        ),
        hermetic,
    )

    assert kinds(fork_events)[-1] == "result", dump(fork_events)
    [fork] = of_type(fork_events, Result)
    assert (fork.is_error, fork.text, fork.session_id) == (False, "forked", fork_id)
    *_, fork_request = model_double.message_requests
    assert "first: A" in fork_request.user_texts
    assert "third: C" in fork_request.user_texts
    assert "second: B" not in fork_request.user_texts
