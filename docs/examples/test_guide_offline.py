"""docs/offline.md: your own program, run with no API key and no network."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from claude_trio import ExecuteParams, collect, open_session
from claude_trio.offline import (
    Reply,
    hermetic_env,
    open_model_double,
    open_offline_model,
    turns,
)

pytestmark = pytest.mark.e2e  # each runs the real claude CLI


async def ask_offline(prompt: str, project: Path) -> str:
    """The built-in offline model: it answers any prompt (it echoes it)."""
    async with open_offline_model() as offline:
        params = ExecuteParams(prompt=prompt, cwd=str(project))
        async with open_session(params, env=offline.env) as session:
            transcript = await collect(session.events)
    return transcript.text


async def ask_scripted(prompt: str, project: Path, cli_home: Path) -> str:
    """Your own script: each request the CLI makes gets the next reply."""
    script = turns(
        Reply.tool_use("Bash", {"command": "ls"}, id="toolu_ls"),
        Reply.text("The folder holds notes.txt."),
    )
    async with open_model_double(script) as double:
        # sandbox=True lets the CLI run its tools unasked as root (a container, CI)
        env = hermetic_env(double.base_url, cli_home, sandbox=True)
        params = ExecuteParams(prompt=prompt, cwd=str(project))
        async with open_session(params, env=env) as session:
            transcript = await collect(session.events)
    print([call.name for call in transcript.tool_calls])  # ['Bash']
    return transcript.text


async def record_offline(prompt: str, project: Path, cassette: Path) -> None:
    """A cassette of your own prompt, to replay in tests with claude_trio.testing.replay."""
    async with open_offline_model() as offline:
        params = ExecuteParams(prompt=prompt, cwd=str(project))
        async with open_session(params, env=offline.env, record_to=cassette) as session:
            await collect(session.events)


async def test_the_offline_model_answers_any_prompt(tmp_path: Path) -> None:
    with trio.fail_after(60):
        assert await ask_offline("What is trio?", tmp_path) == "You said: What is trio?"


async def test_a_scripted_model_answers_what_you_wrote(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("x")
    with trio.fail_after(60):
        text = await ask_scripted("what is here?", project, tmp_path / "cli-home")
    assert text == "The folder holds notes.txt."


async def test_a_cassette_of_your_prompt_is_recorded_offline(tmp_path: Path) -> None:
    cassette = tmp_path / "mine.jsonl"
    with trio.fail_after(60):
        await record_offline("hello", tmp_path, cassette)
    assert cassette.read_text().count("\n") > 5
