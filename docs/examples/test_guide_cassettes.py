"""docs/testing.md, "Cassettes": record a session once, replay it in every test run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from claude_trio import ExecuteParams, collect, open_session
from claude_trio.cli.demo import answer_demo_question, demo_params
from claude_trio.testing import DEMO_CASSETTE, FakeCLI, FakeTurn, load_cassette, replay


async def test_the_demo_replays_without_a_cli(
    replay_cassette: Any, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    async with open_session(
        demo_params(tmp_path),
        on_user_input=answer_demo_question,
        transport_factory=replay_cassette(DEMO_CASSETTE),
    ) as session:
        transcript = await collect(session.events)
        ended = trio.current_time() - start
    assert transcript.text.startswith("You picked Sensors.")
    [survey] = transcript.subagents
    assert [call.name for call in survey.transcript.tool_calls] == ["Bash"]
    # Exact, in virtual time: the result comes when it came in the recording.
    [result] = [r for r in load_cassette(DEMO_CASSETTE).reads() if r.value["type"] == "result"]
    assert ended == pytest.approx(result.t)


async def says_hello(turn: FakeTurn) -> None:
    await turn.text("Hello!", chunk=2, delay=0.5)


async def test_record_once_then_replay(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    cassette = tmp_path / "hello.jsonl"
    params = ExecuteParams(prompt="say hello")
    # Recorded here from a scripted CLI; from the real one: `claude-trio run "say hello"
    # --record hello.jsonl`, or open_session(params, record_to="hello.jsonl").
    async with open_session(
        params, transport_factory=FakeCLI(says_hello), record_to=cassette
    ) as session:
        recorded = await collect(session.events)
    async with open_session(params, transport_factory=replay(cassette)) as session:
        replayed = await collect(session.events)
    assert replayed.text == recorded.text == "Hello!"


async def test_a_different_prompt_is_caught(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    cassette = tmp_path / "hello.jsonl"
    async with open_session(
        ExecuteParams(prompt="say hello"), transport_factory=FakeCLI(says_hello), record_to=cassette
    ) as session:
        await collect(session.events)
    player = replay(cassette)
    goodbye = ExecuteParams(prompt="say goodbye")
    async with open_session(goodbye, transport_factory=player) as session:
        events = [event async for event in session.events]
    [mismatch] = player.mismatches
    assert "the cassette has 'say hello', the test wrote 'say goodbye'" in mismatch
    assert events[-1].kind == "error"  # the replayed CLI hung up
