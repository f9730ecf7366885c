"""The testing kit's pytest fixtures (loaded through the ``pytest11`` entry point)."""

from __future__ import annotations

from typing import Any

import trio
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

from claude_trio.testing import FakeCLI, FakeTurn, prompt_stream, user_message
from claude_trio.testing.pytest_plugin import FakeCLIFactory


async def test_fake_cli_fixture_drives_a_client(fake_cli: FakeCLI, autojump_clock: Any) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.sleep(1.5)
        await cli.text(f"echo {cli.prompt}")

    fake_cli.responder = script
    options = ClaudeAgentOptions()
    async with ClaudeSDKClient(options, transport=fake_cli.transport_for(options)) as client:
        await client.query(prompt_stream(user_message("ping", uuid="u-1")))
        messages = [m async for m in client.receive_response()]
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert (result.result, result.user_message_uuids) == ("echo ping", ["u-1"])
    assert trio.current_time() == 1.5


async def test_factory_reports_script_errors_and_unclosed_processes(autojump_clock: Any) -> None:
    async def broken(cli: FakeTurn) -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("boom")

    factory = FakeCLIFactory()
    fake = factory(broken)
    options = ClaudeAgentOptions()
    client = ClaudeSDKClient(options, transport=fake.transport_for(options))
    await client.connect()
    await client.query(prompt_stream(user_message("go", uuid="u-1")))
    await fake.transport._done.wait()
    assert factory.problems() == [
        "fake CLI script raised: RuntimeError('boom')",
        "fake CLI process 1 was connected but never closed",
    ]
    await client.disconnect()
    assert factory.problems() == ["fake CLI script raised: RuntimeError('boom')"]


async def test_scripted_session_runs_a_real_session_in_one_line(
    scripted_session: Any, autojump_clock: Any
) -> None:
    from claude_trio import Result, TextDelta

    async def script(cli: FakeTurn) -> None:
        await cli.text("scripted", chunk=4)

    async with scripted_session(script, "say it") as session:
        events = [event async for event in session.events]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "scripted"
    assert isinstance(events[-1], Result)
    assert events[-1].final
    assert scripted_session.fake.transport.user_messages[0]["message"]["content"] == "say it"
    assert scripted_session.fake.transport.closed
