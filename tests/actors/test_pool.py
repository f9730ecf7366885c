"""The warm pool over the fake CLI: leases, misses, routing of callbacks, teardown."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing
from session_kit import CONFIG, assert_no_leak, check_stream, collect

from claude_trio import ExecuteParams, InvalidParamsError, Result, UserInputRequest, open_session
from claude_trio.actors.session.pool import open_cli_pool
from claude_trio.testing import FakeCLI, FakeTurn

TEMPLATE = ExecuteParams(prompt="template", model="sonnet")


async def test_a_session_takes_a_warm_cli_and_the_slot_starts_a_new_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI()
    async with open_cli_pool(TEMPLATE, size=1, transport_factory=fake, config=CONFIG) as pool:
        await trio.testing.wait_all_tasks_blocked()
        assert pool.statistics().ready == 1
        warm = fake.transport
        assert warm.connected
        assert not warm.user_messages  # started and initialized, waiting for a prompt
        params = ExecuteParams(prompt="go", model="sonnet")
        async with open_session(params, pool=pool, config=CONFIG) as session:
            assert pool.statistics().leased == 1
            events = await collect(session)
        check_stream(events)
        assert isinstance(events[-1], Result)
        assert warm.user_messages[0]["message"]["content"] == "go"  # ran on the warm CLI
        await trio.testing.wait_all_tasks_blocked()
        stats = pool.statistics()
        assert (stats.hits, stats.misses, stats.leased, stats.ready) == (1, 0, 0, 1)
        assert warm.closed  # retired after its session
        assert len(fake.transports) == 2  # and replaced by a fresh one
    assert_no_leak(fake)


async def test_with_no_warm_cli_ready_the_session_starts_cold(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI()
    async with open_cli_pool(TEMPLATE, size=1, transport_factory=fake, config=CONFIG) as pool:
        # No checkpoint yet: the slot has not connected anything.
        params = ExecuteParams(prompt="go", model="sonnet")
        async with open_session(params, pool=pool, config=CONFIG) as session:
            events = await collect(session)
        check_stream(events)
        assert pool.statistics().misses == 1
    assert_no_leak(fake)


async def test_params_that_differ_from_the_template_are_refused_clearly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI()
    async with open_cli_pool(TEMPLATE, size=1, transport_factory=fake, config=CONFIG) as pool:
        with pytest.raises(InvalidParamsError, match="template except prompt"):
            async with open_session(ExecuteParams(prompt="x", model="opus"), pool=pool):
                pass
        with pytest.raises(InvalidParamsError, match="on_user_input"):
            async with open_session(
                ExecuteParams(prompt="x", model="sonnet"), pool=pool, on_user_input="manual"
            ):
                pass
    assert_no_leak(fake)


async def test_an_asking_template_needs_user_input_and_its_warm_cli_asks_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    asking = ExecuteParams(prompt="-", model="sonnet", permission_mode="default")
    with pytest.raises(InvalidParamsError, match=r"user_input.*open_cli_pool\(user_input=True\)"):
        async with open_cli_pool(asking, size=1, transport_factory=FakeCLI(), config=CONFIG):
            pass  # never reached
    replies: list[dict[str, Any]] = []

    async def script(cli: FakeTurn) -> None:
        replies.append(await cli.ask_permission("Bash", {"command": "ls"}))

    fake = FakeCLI(script)
    async with open_cli_pool(
        asking, size=1, user_input=True, transport_factory=fake, config=CONFIG
    ) as pool:
        await trio.testing.wait_all_tasks_blocked()
        params = attrs.evolve(asking, prompt="go")

        async def handler(request: UserInputRequest) -> Any:
            await trio.lowlevel.checkpoint()
            return "deny"

        async with open_session(params, pool=pool, on_user_input=handler, config=CONFIG) as s:
            await collect(s)
        assert pool.statistics().hits == 1
    assert fake.transports[0].options.permission_mode == "default"
    assert replies == [{"behavior": "deny", "message": "The user denied this tool call."}]
    assert_no_leak(fake)


async def test_a_warm_cli_routes_questions_to_the_session_that_leased_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []

    async def script(cli: FakeTurn) -> None:
        replies.append(
            await cli.ask_permission(
                "AskUserQuestion", {"questions": [{"question": "Q?", "options": []}]}
            )
        )

    fake = FakeCLI(script)

    async def handler(request: UserInputRequest) -> Any:
        return "yes"

    async with open_cli_pool(
        TEMPLATE, size=1, user_input=True, transport_factory=fake, config=CONFIG
    ) as pool:
        await trio.testing.wait_all_tasks_blocked()
        params = ExecuteParams(prompt="go", model="sonnet")
        async with open_session(params, pool=pool, on_user_input=handler, config=CONFIG) as s:
            events = await collect(s)
        check_stream(events)
        assert pool.statistics().hits == 1
    assert replies[0]["updatedInput"]["answers"] == {"Q?": "yes"}
    assert_no_leak(fake)


async def test_a_slot_that_cannot_start_backs_off_and_reports_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(unanswered={"initialize"})
    async with open_cli_pool(TEMPLATE, size=1, transport_factory=fake, config=CONFIG) as pool:
        await trio.sleep(CONFIG.connect_timeout + 0.1)
        stats = pool.statistics()
        assert stats.failures == 1
        assert stats.last_error is not None
        assert "initialize" in stats.last_error
        assert stats.ready == 0
    assert_no_leak(fake)


async def test_a_pool_of_hard_scoped_clis_is_refused_without_the_bash_sandbox(
    tmp_path: Any,
) -> None:
    """Checked when the pool opens, before any CLI starts: the pool's warm CLIs would
    otherwise start and fail later, with no session to say why."""
    template = ExecuteParams(prompt="-", cwd=str(tmp_path), allowed_paths=[str(tmp_path)])
    no_sandbox = {"PATH": str(tmp_path)}  # no bwrap, no socat
    with pytest.raises(InvalidParamsError) as info:
        async with open_cli_pool(template, env=no_sandbox):
            pass  # pragma: no cover - refused before the block
    assert info.value.field == "template.scope_enforcement"
    assert "apt-get install bubblewrap socat" in str(info.value)
    # A scripted CLI (transport_factory) runs no Bash: nothing to look up.
    async with open_cli_pool(template, env=no_sandbox, transport_factory=FakeCLI(), size=1):
        pass
