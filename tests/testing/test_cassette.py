"""Cassettes through real sessions: record on the scripted CLI, replay through the real SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from claude_trio import (
    Aborted,
    Accepted,
    Error,
    Event,
    ExecuteParams,
    Result,
    TextDelta,
    ToolUse,
    UserInputRequest,
    collect,
    open_session,
)
from claude_trio.actors.session.pool import open_cli_pool
from claude_trio.actors.session.sdk_private import BUNDLED_CLI_VERSION
from claude_trio.cli.demo import FINAL_ANSWERS, answer_demo_question, demo_params
from claude_trio.errors import CassetteError
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.testing import (
    DEMO_ABORT_CASSETTE,
    DEMO_CASSETTE,
    CassetteMismatchError,
    CassetteVersionWarning,
    FakeCLI,
    FakeTurn,
    check_contract,
    load_cassette,
    replay,
)


def normalized(events: list[Event]) -> list[Event]:
    """Events with what differs between two runs of one session blanked: wall-clock stamps,
    deadlines on the trio clock, and the uuids the session picks at random."""
    out = []
    for event in events:
        changes: dict[str, Any] = {}
        for name, blank in (
            ("timestamp", 0.0),
            ("deadline", None),
            ("uuid", ""),
            ("user_message_uuids", ()),
        ):
            if hasattr(event, name):
                changes[name] = blank
        out.append(attrs.evolve(event, **changes))
    return out


async def run(
    factory: Any, *, prompt: str = "go", on_event: Any = None, **kwargs: Any
) -> tuple[list[Event], float]:
    """Every event of one session, and the virtual time its final event arrived."""
    events: list[Event] = []
    ended_at = 0.0
    async with open_session(ExecuteParams(prompt=prompt), transport_factory=factory, **kwargs) as s:
        async for event in s.events:
            events.append(event)
            ended_at = trio.current_time()
            if on_event is not None:
                await on_event(s, event)
    return events, ended_at


async def answer_blue(request: UserInputRequest) -> Any:
    await trio.sleep(1.5)
    return {"Which color?": "blue"}


ASK = {
    "questions": [
        {
            "question": "Which color?",
            "header": "Color",
            "options": [{"label": "red"}, {"label": "blue"}],
            "multiSelect": False,
        }
    ]
}


async def asks(cli: FakeTurn) -> None:
    await cli.text("Let me ask.", chunk=3, delay=0.2)
    await cli.ask_permission("AskUserQuestion", ASK)
    read = await cli.tool_use("Read", {"file_path": "a.py"}, id="toolu_read")
    await cli.sleep(0.5)
    await cli.tool_result(read, "print('hi')")
    await cli.text("Blue it is.", chunk=4, delay=0.1)


async def test_a_recorded_session_replays_to_the_same_events_at_the_same_times(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    cassette = tmp_path / "asks.jsonl"
    start = trio.current_time()
    recorded, recorded_end = await run(FakeCLI(asks), on_user_input=answer_blue, record_to=cassette)
    recorded_end -= start
    player = replay(cassette)
    start = trio.current_time()
    replayed, replayed_end = await run(player, on_user_input=answer_blue)
    assert player.mismatches == []
    assert normalized(replayed) == normalized(recorded)
    check_contract(replayed)
    # Exact under the mock clock: the final event at the recorded time.
    assert replayed_end - start == pytest.approx(recorded_end)
    assert recorded_end == pytest.approx(0.2 * 4 + 1.5 + 0.5 + 0.1 * 3)
    # A second replay from the same factory plays it again from the start.
    again, _ = await run(player, on_user_input=answer_blue)
    assert normalized(again) == normalized(recorded)


async def test_asap_timing_plays_as_fast_as_the_session_writes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    cassette = tmp_path / "asks.jsonl"
    recorded, _ = await run(FakeCLI(asks), on_user_input=answer_blue, record_to=cassette)
    start = trio.current_time()
    replayed, ended = await run(replay(cassette, timing="asap"), on_user_input=answer_blue)
    assert normalized(replayed) == normalized(recorded)
    assert ended - start == pytest.approx(1.5)  # only the answer's own delay is left


async def test_the_demo_cassette_replays_the_demo(
    replay_cassette: Any, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    cassette = load_cassette(DEMO_CASSETTE)
    assert cassette.header.cli_version == BUNDLED_CLI_VERSION
    result_at = next(r.t for r in cassette.reads() if r.value.get("type") == "result")
    start = trio.current_time()
    async with open_session(
        demo_params(tmp_path),
        on_user_input=answer_demo_question,
        transport_factory=replay_cassette(DEMO_CASSETTE),
    ) as session:
        transcript = await collect(session.events)
        ended = trio.current_time() - start
    check_contract(transcript.events)
    assert transcript.text == FINAL_ANSWERS["Sensors"]
    assert [c.name for c in transcript.tool_calls] == ["Read", "Agent", "AskUserQuestion"]
    [survey] = transcript.subagents
    assert [c.name for c in survey.transcript.tool_calls] == ["Bash"]
    [question] = transcript.questions
    assert question.answer == {"Which part should the summary focus on?": "Sensors"}
    assert ended == pytest.approx(result_at)
    assert isinstance(transcript.terminal, Result)
    assert transcript.terminal.usage.output_tokens == 7 * 60


async def test_the_aborted_demo_cassette_replays_the_abort(
    replay_cassette: Any, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    events: list[Event] = []
    async with open_session(
        demo_params(tmp_path),
        on_user_input=answer_demo_question,
        transport_factory=replay_cassette(DEMO_ABORT_CASSETTE),
    ) as session:
        async for event in session.events:
            events.append(event)
            if isinstance(event, UserInputRequest):
                await session.abort()
    check_contract(events)
    assert isinstance(events[-1], Aborted)
    assert events[-1].usage is not None  # the interrupted turn's, as the CLI reported it
    [resolved] = [e for e in events if e.kind == "user_input_resolved"]
    assert resolved.outcome == "cancelled"  # type: ignore[union-attr]


async def test_a_write_the_cassette_did_not_record_fails_with_the_first_difference(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def other_answer(request: UserInputRequest) -> Any:
        await trio.sleep(0.4)
        return {q.question: q.options[-1] for q in request.questions}

    player = replay(DEMO_CASSETTE)
    async with open_session(
        demo_params(tmp_path), on_user_input=other_answer, transport_factory=player
    ) as session:
        events = [e async for e in session.events]
    [mismatch] = player.mismatches
    first_line = mismatch.splitlines()[0]
    assert "write #9 (control_response to " in first_line
    assert "is not what the cassette recorded" in first_line
    assert (
        "at response.response.updatedInput.answers.Which part should the summary focus on?: "
        "the cassette has 'Sensors', the test wrote 'Storage'"
    ) in first_line
    assert '+     "Which part should the summary focus on?": "Storage"' in mismatch.splitlines()
    # The session ends with the mismatch as its error: the replayed CLI hung up.
    last = events[-1]
    assert isinstance(last, Error)
    assert last.code == "cli_exited"
    assert "is not what the cassette recorded" in last.message
    check_contract(events)
    with pytest.raises(CassetteMismatchError, match="write #9"):
        player.check()


async def test_pushes_and_aborts_are_matched_to_what_was_recorded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def long_tool(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "make"}, id="toolu_make")
        await cli.sleep(3.0)
        await cli.tool_result(tool, "built")
        await cli.text("done", delay=1.0)

    async def push_then_abort(session: Any, event: Event) -> None:
        if isinstance(event, ToolUse):
            assert isinstance(await session.push("also run the tests"), Accepted)
        elif isinstance(event, TextDelta):
            await session.abort()

    cassette = tmp_path / "stop.jsonl"
    recorded, _ = await run(
        FakeCLI([long_tool, long_tool]), on_event=push_then_abort, record_to=cassette
    )
    assert isinstance(recorded[-1], Aborted)
    writes = [r.value for r in load_cassette(cassette).writes()]
    assert [w["type"] for w in writes] == [
        "control_request",
        "user",
        "user",
        "control_request",
    ]
    assert writes[3]["request"] == {"subtype": "interrupt", "cancel_queued": True}
    player = replay(cassette)
    replayed, _ = await run(player, on_event=push_then_abort)
    assert player.mismatches == []
    assert normalized(replayed) == normalized(recorded)

    # The same cassette, and the test forgets the push: the replay waits for it, then fails.
    async def abort_only(session: Any, event: Event) -> None:
        if isinstance(event, TextDelta):
            await session.abort()

    strict = replay(cassette, patience=2.0)
    start = trio.current_time()
    forgot, ended = await run(strict, on_event=abort_only)
    [mismatch] = strict.mismatches
    assert "the cassette waits for the test to write user message 'also run the tests'" in (
        mismatch
    )
    assert "nothing came for 2 s after it was due" in mismatch
    assert isinstance(forgot[-1], Error)
    push_at = next(
        r.t
        for r in load_cassette(cassette).writes()
        if r.value["type"] == "user" and r.value["message"]["content"] == "also run the tests"
    )
    assert ended - start == pytest.approx(push_at + 2.0)


async def test_leaving_a_replay_early_ends_it_without_a_hang(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    player = replay(DEMO_CASSETTE)
    start = trio.current_time()
    async with open_session(
        demo_params(tmp_path), on_user_input=answer_demo_question, transport_factory=player
    ) as session:
        async for event in session.events:
            if isinstance(event, TextDelta):
                break
    # The stop's interrupt is a write the cassette does not have: reported, and the replayed
    # CLI is killed at once rather than waited for.
    [mismatch] = player.mismatches
    assert "(control_request interrupt): the cassette recorded no such write here" in mismatch
    [transport] = player.transports
    assert transport.killed
    assert transport.closed
    # Gone the moment the first text delta was read: nothing waited for a grace period.
    first_text = next(
        r.t
        for r in load_cassette(DEMO_CASSETTE).reads()
        if r.value.get("event", {}).get("delta", {}).get("type") == "text_delta"
    )
    assert trio.current_time() - start == pytest.approx(first_text)


async def test_secrets_never_reach_the_cassette(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def leaky(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Bash", {"command": "env"}, id="toolu_env")
        await cli.tool_result(
            tool,
            "ANTHROPIC_API_KEY=sk-ant-api03-real-key-0123456789\nDEPLOY_TOKEN=dtok-7f3a9c1e2b\n"
            "HOME=/root",
        )
        await cli.text("your deploy token dtok-7f3a9c1e2b is set")

    cassette = tmp_path / "leaky.jsonl"
    recorded, _ = await run(
        FakeCLI(leaky), env={"DEPLOY_TOKEN": "dtok-7f3a9c1e2b"}, record_to=cassette
    )
    text = cassette.read_text()
    assert "sk-ant-api03-real-key" not in text
    assert "dtok-7f3a9c1e2b" not in text
    assert "HOME=/root" in text
    replayed, _ = await run(replay(cassette))
    [result] = [e for e in replayed if isinstance(e, Result)]
    assert result.text == "your deploy token *** is set"
    assert any("ANTHROPIC_API_KEY=***" in str(getattr(e, "content", "")) for e in replayed)
    assert len(replayed) == len(recorded)


async def test_another_cli_version_replays_with_a_warning(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    lines = DEMO_CASSETTE.read_text().splitlines()
    header = json.loads(lines[0]) | {"cli_version": "2.0.0"}
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join([json.dumps(header), *lines[1:]]))
    with pytest.warns(CassetteVersionWarning, match=r"recorded with claude CLI 2\.0\.0"):
        player = replay(old)
    async with open_session(
        demo_params(tmp_path), on_user_input=answer_demo_question, transport_factory=player
    ) as session:
        transcript = await collect(session.events)
    assert transcript.text == FINAL_ANSWERS["Sensors"]
    assert player.mismatches == []


def test_a_malformed_cassette_fails_naming_the_file_and_line(tmp_path: Path) -> None:
    lines = DEMO_CASSETTE.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:5], '{"t": 0.9, "read": ', *lines[5:]]))
    with pytest.raises(CassetteError, match=rf"{broken}, line 6: not JSON"):
        replay(broken)
    with pytest.raises(CassetteError, match="no such cassette"):
        load_cassette(tmp_path / "missing.jsonl")
    with pytest.raises(InvalidParamsError, match="invalid timing='fast'"):
        replay(DEMO_CASSETTE, timing="fast")  # type: ignore[arg-type]
    with pytest.raises(InvalidParamsError, match="invalid patience=0"):
        replay(DEMO_CASSETTE, patience=0)


async def test_record_to_is_refused_before_anything_starts(tmp_path: Path) -> None:
    params = ExecuteParams(prompt="hi")
    bad = [
        (tmp_path / "no" / "such" / "c.jsonl", "does not exist"),
        (tmp_path, "a file path, not a folder"),
        (42, "None or the path of a file to write"),
    ]
    for record_to, problem in bad:
        with pytest.raises(InvalidParamsError, match=problem):
            async with open_session(params, transport_factory=FakeCLI(), record_to=record_to):
                pass
    async with open_cli_pool(params, size=1, transport_factory=FakeCLI()) as pool:
        with pytest.raises(InvalidParamsError, match="not with pool="):
            async with open_session(params, pool=pool, record_to=tmp_path / "c.jsonl"):
                pass
