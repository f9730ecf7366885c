"""Cassettes of the real CLI: record a session against the Messages API double, replay it.

The recording is the real bundled ``claude`` talking to the double; the replay is the cassette
played back through the real SDK with no CLI at all, in a fresh trio run on the mock clock (so
its times are exact), with the same environment (which ``adapter_ready`` reports). The two
event streams must be equal, but for what differs between two runs by nature: wall-clock
stamps, deadlines, and the uuids the session picks at random.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from helpers import params, run_session
from helpers_proc import assert_no_cli_left

from claude_trio import Event, Result, UserInputRequest, open_session
from claude_trio.cli.args import build_execute_params, parse_args
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.testing import check_contract, load_cassette, replay
from claude_trio.testing.model_double import ModelDouble, Reply, turns

pytestmark = pytest.mark.e2e

QUESTION = {
    "question": "Which file?",
    "header": "File",
    "options": [{"label": "a.py", "description": ""}, {"label": "b.py", "description": ""}],
    "multiSelect": False,
}


def normalized(events: list[Event]) -> list[Event]:
    """What two runs of one session may differ in, blanked (see the module docstring)."""
    blanks = {"timestamp": 0.0, "deadline": None, "uuid": "", "user_message_uuids": ()}
    return [attrs.evolve(e, **{k: v for k, v in blanks.items() if hasattr(e, k)}) for e in events]


async def pick_a(request: UserInputRequest) -> Any:
    await trio.sleep(0.05)
    return {"Which file?": "a.py"}


def replayed(execute: ExecuteParams, cassette: Path, **session: Any) -> tuple[list[Event], float]:
    """The cassette replayed in a trio run of its own, on the mock clock: the events and the
    virtual time of the final one."""

    async def main() -> tuple[list[Event], float]:
        player = replay(cassette)
        events: list[Event] = []
        async with open_session(execute, transport_factory=player, **session) as s:
            async for event in s.events:
                events.append(event)
            ended = trio.current_time()
        assert player.mismatches == []
        return events, ended

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_a_real_session_recorded_replays_to_the_same_events(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    work = Path(params(tmp_path, "x").cwd or tmp_path)
    (work / "a.py").write_text("print('a')\n")

    model_double.responder = turns(
        Reply.tool_use("AskUserQuestion", {"questions": [QUESTION]}, id="toolu_ask"),
        Reply.tool_use("Read", {"file_path": str(work / "a.py")}, id="toolu_read"),
        Reply.text("a.py prints the letter a.", chunk_size=5, event_delay=0.01),
    )
    cassette = tmp_path / "session.jsonl"
    execute = params(tmp_path, "which file prints what?")
    recorded = await run_session(execute, hermetic, on_user_input=pick_a, record_to=cassette)
    assert isinstance(recorded[-1], Result)
    assert recorded[-1].text == "a.py prints the letter a."
    loaded = load_cassette(cassette)
    assert "sk-ant-double" not in cassette.read_text()  # the hermetic key was scrubbed

    events, ended = await trio.to_thread.run_sync(
        partial(replayed, execute, cassette, on_user_input=pick_a, env=hermetic)
    )
    assert normalized(events) == normalized(recorded)
    check_contract(events)
    result_at = next(r.t for r in loaded.reads() if r.value.get("type") == "result")
    assert ended == pytest.approx(result_at)


async def test_run_record_writes_a_cassette_that_replays(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(Reply.text("Recorded by the command."))
    cassette = tmp_path / "cmd.jsonl"
    argv = ["run", "say something", "--cwd", str(tmp_path), "--record", str(cassette)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "claude_trio.cli", *argv],
            env={**env, **hermetic},
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert "Recorded by the command." in done.stdout.decode()
    assert f"claude-trio: cassette written to {cassette}" in done.stderr.decode()
    assert_no_cli_left()
    # The same arguments give the same session: replayed, it says the same.
    execute = build_execute_params(parse_args(argv))
    events, _ = await trio.to_thread.run_sync(partial(replayed, execute, cassette))
    [result] = [e for e in events if isinstance(e, Result)]
    assert result.final
    assert result.text == "Recorded by the command."
    check_contract(events)
