"""docs/testing.md, "The real CLI": the bundled claude against a scripted Messages API."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from claude_trio import ExecuteParams, collect, open_session
from claude_trio.testing import ModelDouble, Reply, ReplyUsage, check_contract, turns

pytestmark = pytest.mark.e2e  # runs a real CLI: select or skip them with -m e2e


async def test_the_real_cli_against_the_model_double(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": "echo hi"}, id="toolu_echo"),
        Reply.text("It printed hi.", usage=ReplyUsage(input_tokens=40, output_tokens=6)),
    )
    params = ExecuteParams(prompt="run echo hi", model="claude-sonnet-4-5", cwd=str(tmp_path))
    with trio.fail_after(60):
        async with open_session(params, env=hermetic) as session:
            transcript = await collect(session.events)
    check_contract(transcript.events)
    [call] = transcript.tool_calls
    assert (call.name, call.output.strip()) == ("Bash", "hi")
    assert transcript.text == "It printed hi."
    assert transcript.usage is not None
    assert transcript.usage.output_tokens > 6  # both API calls are counted
    assert len(model_double.message_requests) == 2
