"""Stop means stop, through the real CLI: once ``abort()`` returns or the block is left, the
agent starts no new tool and the CLI is gone.

Every test runs a Bash tool that would leave a file behind a little later (``sleep; touch``),
stops the session at a different moment, then waits past the tool's sleep: the file must never
appear, no ``claude`` may be left, and the execution ends with exactly one terminal event.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from helpers_proc import assert_no_cli_left, assert_one_final_terminal

from claude_trio import DriverConfig, ExecuteParams, open_session
from claude_trio.actors.session import driver, stopper
from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Event,
    Result,
    TextDelta,
    ToolUse,
    is_terminal,
)
from claude_trio.testing.model_double import ModelDouble, Reply, Rule, Script, is_main_agent

pytestmark = pytest.mark.e2e

# The tool's delay before its side effect: long enough that a stop lands first, short enough
# to wait out in a test.
TOOL_DELAY = 1.5
PROMPT = "go"
PUSH = "and then touch it again"


def mark_file(tmp_path: Path) -> Path:
    return tmp_path / "work" / "mark"


def leaves_a_file(mark: Path) -> Reply:
    command = f"sleep {TOOL_DELAY}; touch {mark}"
    return Reply.tool_use("Bash", {"command": command, "description": "wait, then touch"})


def script(first: Reply, mark: Path) -> Script:
    """``first`` for the prompt; a push (or anything after it) would touch the file at once."""

    def said(text: str) -> Any:
        return lambda request: is_main_agent(request) and request.last_user_text == text

    touch = Reply.tool_use("Bash", {"command": f"touch {mark}", "description": "touch"})
    return Script(
        [
            Rule(reply=first, when=said(PROMPT)),
            Rule(reply=touch, when=lambda request: PUSH in " ".join(request.user_texts)),
            Rule(reply=Reply.text("done")),
        ]
    )


def execute(tmp_path: Path) -> ExecuteParams:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return ExecuteParams(prompt=PROMPT, cwd=str(work))


async def assert_stopped_for_good(mark: Path, events: list[Event]) -> Aborted:
    """The CLI is gone now, and the tool's side effect never happens."""
    assert_no_cli_left()
    await trio.sleep(TOOL_DELAY + 1.0)
    assert not await trio.Path(mark).exists(), "a tool ran on after the stop"
    terminal = assert_one_final_terminal(events)
    assert isinstance(terminal, Aborted), terminal
    assert [e for e in events if is_terminal(e)] == [terminal]
    # Stopping never sits out a deadline: the CLI confirmed at once.
    assert not [e for e in events if isinstance(e, Error) and e.code == "cli_timeout"], events
    return terminal


async def test_abort_before_the_cli_started_its_turn_stops_it(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    mark = mark_file(tmp_path)
    model_double.responder = script(leaves_a_file(mark), mark)
    with trio.fail_after(30):
        async with open_session(execute(tmp_path), env=hermetic) as session:
            await session.abort()  # the prompt is written; nothing was read back yet
            assert session.ended
            events = [event async for event in session.events]
    await assert_stopped_for_good(mark, events)
    assert not [e for e in events if isinstance(e, ToolUse)]


async def test_abort_mid_tool_stops_the_tool_and_reports_the_turn_s_usage(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    mark = mark_file(tmp_path)
    model_double.responder = script(leaves_a_file(mark), mark)
    events: list[Event] = []
    with trio.fail_after(30):
        async with open_session(execute(tmp_path), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, ToolUse):
                    await session.abort()
    aborted = await assert_stopped_for_good(mark, events)
    assert aborted.usage is not None  # the CLI's own result of the interrupted turn


@pytest.mark.parametrize("how", ["break", "exception", "deadline"])
async def test_leaving_the_block_mid_tool_stops_the_tool(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path, how: str
) -> None:
    mark = mark_file(tmp_path)
    model_double.responder = script(leaves_a_file(mark), mark)
    events: list[Event] = []

    class Stop(Exception):
        pass

    with trio.fail_after(30), trio.CancelScope() as scope:  # noqa: ASYNC912
        try:
            async with open_session(execute(tmp_path), env=hermetic) as session:
                async for event in session.events:
                    events.append(event)
                    if isinstance(event, ToolUse):
                        if how == "break":
                            break
                        if how == "exception":
                            raise Stop
                        scope.deadline = trio.current_time() + 0.2
        except Stop:  # the caller's own exception comes out as itself, not in a group
            assert how == "exception"
    assert scope.cancelled_caught == (how == "deadline")
    # What was queued up to the end can still be read after the block.
    events.extend([event async for event in session.events])
    await assert_stopped_for_good(mark, events)


async def test_abort_from_a_consumer_that_fell_behind_is_not_held_up(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    # The consumer stops reading while the CLI streams: the stream fills, backpressure parks the
    # SDK's reader, and the CLI's answer to the interrupt arrives on that very reader.
    mark = mark_file(tmp_path)
    # ~6 s of deltas: the turn is still streaming when the consumer aborts.
    long_text = Reply.text("x" * 6000, chunk_size=2, event_delay=0.002)
    model_double.responder = script(long_text, mark)
    events: list[Event] = []
    aborted_once = False
    # The CLI's confirmation comes on the reader the backpressure parked: held up, it never
    # comes and the deadline kills the CLI (cli_timeout). The deadline is longer than the 2 s
    # default so that a machine loaded by other tests cannot pass for that (CI saw it once).
    patient = DriverConfig(interrupt_timeout=10.0)
    with trio.fail_after(30):
        async with open_session(execute(tmp_path), env=hermetic, config=patient) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, TextDelta) and not aborted_once:
                    aborted_once = True
                    # Behind: the stream fills up (polled: nothing signals it).
                    while len(session.events) < 256:  # noqa: ASYNC110
                        await trio.sleep(0.05)
                    await session.abort()
    aborted = await assert_stopped_for_good(mark, events)
    assert aborted.turn == 1
    assert aborted.usage is not None  # the interrupted turn's real usage, not lost


async def test_abort_cancels_a_queued_push_so_no_new_turn_runs(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    # A push while the model streams text is queued by the CLI as the next turn; a plain
    # interrupt would leave it queued and the CLI would run it (here: a tool) right after.
    mark = mark_file(tmp_path)
    slow = Reply.text("a long streamed text " * 20, event_delay=0.05, chunk_size=8)
    model_double.responder = script(slow, mark)
    events: list[Event] = []
    pushed = False
    with trio.fail_after(30):
        async with open_session(execute(tmp_path), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, TextDelta) and not pushed:
                    pushed = True
                    await session.push(PUSH)
                    await trio.sleep(0.3)  # the CLI has it queued now
                    await session.abort()
    await assert_stopped_for_good(mark, events)
    assert not [r for r in model_double.message_requests if PUSH in " ".join(r.user_texts)]


RESUME = "and again"


async def stop_then_resume(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> tuple[str, list[str], str]:
    """Abort mid-tool, then resume the conversation: the history the model is sent on the
    resume (ids and ``tmp_path`` normalized), the stopped CLI's transcript row types, and the
    session id."""
    await trio.Path(tmp_path).mkdir()
    mark = mark_file(tmp_path)
    model_double.responder = script(leaves_a_file(mark), mark)
    events: list[Event] = []
    with trio.fail_after(30):
        async with open_session(execute(tmp_path), env=hermetic) as session:
            async for event in session.events:
                events.append(event)
                if isinstance(event, ToolUse):
                    await session.abort()
    aborted = await assert_stopped_for_good(mark, events)
    assert aborted.usage is not None  # the interrupted turn's result came before the exit
    session_id = aborted.session_id
    assert session_id is not None
    projects = Path(hermetic["CLAUDE_CONFIG_DIR"]) / "projects"
    [transcript] = projects.glob(f"*/{session_id}.jsonl")
    text = await trio.Path(transcript).read_text()
    rows = [json.loads(line)["type"] for line in text.splitlines()]
    seen = len(model_double.message_requests)
    resumed = attrs.evolve(execute(tmp_path), prompt=RESUME, resume_session_id=session_id)
    with trio.fail_after(30):
        async with open_session(resumed, env=hermetic) as session:
            assert isinstance([e async for e in session.events][-1], Result)
    [request] = [
        r
        for r in model_double.message_requests[seen:]
        if is_main_agent(r) and r.last_user_text == RESUME
    ]
    history = json.dumps(request.messages).replace(str(tmp_path), "TMP")
    history = re.sub(r"\b(toolu|msg)_[A-Za-z0-9_]+", r"\1_ID", history)
    return history, rows, session_id


async def test_a_stopped_cli_writes_what_a_resume_needs_before_it_exits(
    model_double: ModelDouble,
    hermetic: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The stop ends the CLI's input as soon as it confirmed the interrupt, and lets it exit on
    # its own: the same transcript, and the same history on a resume, as a CLI whose input
    # ends only once it settled (the way a pool's CLI is stopped), with the interrupted turn
    # whole and the cost row the CLI writes at exit (which a SIGKILL or an earlier SIGTERM
    # would lose).
    fast, fast_rows, _ = await stop_then_resume(model_double, hermetic, tmp_path / "fast")
    settled_first = functools.partial(stopper.start_stopper, reusable=True)
    monkeypatch.setattr(driver, "start_stopper", settled_first)
    slow, slow_rows, _ = await stop_then_resume(model_double, hermetic, tmp_path / "slow")
    # The conversation's rows are the same; the CLI's own bookkeeping rows (tools-used,
    # last-prompt, ...) are written on its own timers, so their number may differ.
    def conversation(rows: list[str]) -> list[str]:
        return [row for row in rows if row in ("user", "assistant")]

    assert conversation(fast_rows) == conversation(slow_rows)
    assert fast_rows[-1] == slow_rows[-1] == "cost-state"
    assert fast == slow
    assert '"tool_use"' in fast  # the interrupted turn is whole
    assert "[Request interrupted by user for tool use]" in fast
