"""A fleet's continuation resumes the conversation as it is now: what addressed its first start
(a fork, a chosen id, a truncation) is not sent again, the session's other options are."""

from __future__ import annotations

import trio
import trio.testing
from session_kit import CONFIG

from claude_trio import ExecuteParams, open_fleet
from claude_trio.testing import FakeCLI, FakeTurn

SID = "123e4567-e89b-42d3-a456-426614174000"
AT = "0b6f6a1e-5d2c-4b8e-9f1a-2c3d4e5f6a7b"


async def say(cli: FakeTurn) -> None:
    await cli.text("ok")


async def test_a_continuation_drops_the_first_starts_addressing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(say)
    params = ExecuteParams(
        prompt="first",
        resume_session_id="old",
        fork_session=True,
        session_id=SID,
        resume_session_at=AT,
        strict_mcp_config=True,
        betas=["context-1m-2025-08-07"],
    )
    async with open_fleet(max_live=1, transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(params)
        await fs.wait_closed()
        cli_id = fs.claude_session_id
        await fleet.continue_(fs.id, "second")
        await fs.wait_closed()
    first, second = (transport.options for transport in fake.transports)
    assert (first.resume, first.fork_session, first.session_id, first.resume_session_at) == (
        "old", True, SID, AT
    )  # fmt: skip
    assert (second.resume, second.fork_session, second.session_id) == (cli_id, False, None)
    assert second.resume_session_at is None
    assert (second.strict_mcp_config, second.betas) == (True, ["context-1m-2025-08-07"])
