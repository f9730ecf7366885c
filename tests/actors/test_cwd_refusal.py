"""A working directory that is not there: the execution is refused before the CLI starts, with
one ``config`` error naming the path, not a ``cli_exited`` of a CLI that could not start."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from claude_agent_sdk import ClaudeAgentOptions
from session_kit import CONFIG, check_stream, collect

from claude_trio import Error, ExecuteParams, open_session
from claude_trio.actors.session.driver import missing_cwd


def cwd_of(kind: str, tmp: Path) -> Path:
    if kind == "file":
        (tmp / "a-file").write_text("x")
        return tmp / "a-file"
    return tmp / "no" / "such" / "folder"


@pytest.mark.parametrize(
    ("kind", "problem"), [("missing", "does not exist"), ("file", "is not a directory")]
)
async def test_a_cwd_that_is_not_a_directory_is_one_config_error(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, kind: str, problem: str
) -> None:
    cwd = str(cwd_of(kind, tmp_path))
    start = trio.current_time()
    async with open_session(ExecuteParams(prompt="hi", cwd=cwd), config=CONFIG) as session:
        events = await collect(session)
    check_stream(events)
    (event,) = events
    assert isinstance(event, Error)
    assert event.code == "config"
    assert event.phase == "init"
    assert f"cwd={cwd!r} {problem}" in event.message
    assert "Create the directory first" in event.message
    assert trio.current_time() == start  # nothing was started, nothing waited for


def test_an_existing_or_unset_cwd_passes_the_check(tmp_path: Path) -> None:
    assert missing_cwd(ClaudeAgentOptions(cwd=str(tmp_path))) is None
    assert missing_cwd(ClaudeAgentOptions(cwd=tmp_path)) is None
    assert missing_cwd(ClaudeAgentOptions()) is None
