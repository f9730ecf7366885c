"""Hooks over the fake CLI: a ``hook_callback`` request's way to a trio function in the session
and back, its deadline, its failure, an abort while it runs, and the stop gate's precedence, at
exact virtual times."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from session_kit import assert_no_leak, check_stream, collect, fake_session

from claude_trio import Aborted, Error, ExecuteParams, Result
from claude_trio.actors.extensions.hooks import CLI_TIMEOUT_MARGIN, SessionHooks
from claude_trio.actors.extensions.tool_runner import CallbackRunner, run_tool_runner
from claude_trio.actors.session.core import STOPPED
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.hooks import Hook, HookDecision, HookInput, hook
from claude_trio.protocol.session.events import AdapterReady, Event, HookInvoked
from claude_trio.testing import FakeCLI, FakeTurn


def ancestors(task: trio.lowlevel.Task) -> list[trio.lowlevel.Task]:
    chain = []
    nursery = task.parent_nursery
    while nursery is not None:
        chain.append(nursery.parent_task)
        nursery = nursery.parent_task.parent_nursery
    return chain


def user_hook_ids(cli: FakeTurn, event: str) -> list[str]:
    """The callback ids of the session's own hooks for ``event`` (the stop gate's left out)."""
    ids = cli.process.hook_callback_ids[event]
    return ids[1:] if event == "PreToolUse" else ids


def bash_input(command: str, tool_use_id: str = "toolu_1") -> dict[str, Any]:
    return {
        "hook_event_name": "PreToolUse",
        "session_id": "s",
        "cwd": "/tmp",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": tool_use_id,
    }


@hook("PreToolUse", matcher="Bash")
async def no_rm(call: HookInput) -> HookDecision | None:
    if str((call.tool_input or {}).get("command", "")).startswith("rm "):
        return HookDecision.deny("rm is not allowed here")
    return None


def invoked(events: list[Event]) -> list[HookInvoked]:
    return [e for e in events if isinstance(e, HookInvoked)]


async def test_a_pre_tool_use_hook_runs_in_the_session_and_its_deny_reaches_the_cli(
    autojump_clock: trio.testing.MockClock,
) -> None:
    test_task = trio.lowlevel.current_task()
    seen: list[Any] = []

    async def guard(call: HookInput) -> HookDecision | None:
        seen.append((call.tool_name, call.tool_use_id, test_task in ancestors(
            trio.lowlevel.current_task())))
        await trio.sleep(0.5)
        return await no_rm.callback(call)

    answers: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        [hook_id] = user_hook_ids(cli, "PreToolUse")
        rm = bash_input("rm -rf /")
        answers.append(await cli.hook_callback(hook_id, rm, tool_use_id="toolu_1"))
        answers.append(trio.current_time())
        answers.append(await cli.hook_callback(hook_id, bash_input("ls", "toolu_2")))
        await cli.text("done")

    fake = FakeCLI(script)
    guard_hook = Hook(event="PreToolUse", matcher="Bash", callback=guard)
    async with fake_session(fake, hooks=[guard_hook]) as session:
        events = await collect(session)
    check_stream(events)
    assert seen == [("Bash", "toolu_1", True), ("Bash", "toolu_2", True)]
    denied, at, passed = answers
    assert denied == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "rm is not allowed here",
        }
    }
    assert at == 0.5
    assert passed == {}
    first, second = invoked(events)
    assert (first.hook_event, first.hook_name, first.decision) == ("PreToolUse", "guard", "deny")
    assert (first.tool_name, first.tool_use_id, first.reason) == (
        "Bash",
        "toolu_1",
        "rm is not allowed here",
    )
    assert (second.decision, second.tool_use_id) == ("none", "toolu_2")
    # Registered after the stop gate, with the matcher and a CLI deadline past ours.
    hooks = fake.transports[0].initialize_request["hooks"]  # type: ignore[index]
    gate, user = hooks["PreToolUse"]
    assert gate["matcher"] is None
    assert user["matcher"] == "Bash"
    assert user["timeout"] == ExecuteParams(prompt="x").hook_timeout + CLI_TIMEOUT_MARGIN
    ready = events[0]
    assert isinstance(ready, AdapterReady)
    assert ready.hooks == ("PreToolUse hook 'guard' (Bash)",)
    assert isinstance(events[-1], Result)
    assert_no_leak(fake)


async def test_a_hook_that_runs_past_its_timeout_is_cancelled_at_that_exact_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cancelled_at: list[float] = []

    @hook("PreToolUse", timeout=3.0)
    async def slow(call: HookInput) -> HookDecision:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancelled_at.append(trio.current_time())
            raise
        return HookDecision.allow()

    answers: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        [hook_id] = user_hook_ids(cli, "PreToolUse")
        await trio.sleep(1)
        answers.append(await cli.hook_callback(hook_id, bash_input("ls")))
        answers.append(trio.current_time())
        await cli.text("ok")

    async with fake_session(FakeCLI(script), hooks=[slow]) as session:
        events = await collect(session)
    check_stream(events)
    assert cancelled_at == [4.0]
    answer, at = answers
    assert at == 4.0
    reason = "the PreToolUse hook 'slow' did not answer within 3 s and was cancelled"
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"  # fails closed
    assert answer["hookSpecificOutput"]["permissionDecisionReason"] == reason
    [error] = [e for e in events if isinstance(e, Error)]
    assert (error.code, error.fatal, error.message) == ("callback", False, reason)
    [call] = invoked(events)
    assert call.decision == "failed"
    assert isinstance(events[-1], Result)


async def test_the_session_s_hook_timeout_is_the_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @hook("Notification")
    async def slow(call: HookInput) -> None:
        await trio.sleep(100)

    answers: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        [hook_id] = user_hook_ids(cli, "Notification")
        data = {"hook_event_name": "Notification", "message": "hi", "notification_type": "x"}
        answers.append(await cli.hook_callback(hook_id, data))
        answers.append(trio.current_time())
        await cli.text("ok")

    params = ExecuteParams(prompt="hi", hook_timeout=7.5)
    async with fake_session(FakeCLI(script), params=params, hooks=[slow]) as session:
        events = await collect(session)
    assert answers == [{}, 7.5]  # no opinion: only a PreToolUse hook fails closed
    assert [e.decision for e in invoked(events)] == ["failed"]


async def test_a_hook_that_raises_is_an_error_event_and_the_turn_finishes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @hook("PostToolUse")
    async def audit(call: HookInput) -> None:
        raise RuntimeError(f"audit log full ({call.tool_response})")

    @hook("UserPromptSubmit")
    async def wrong(call: HookInput) -> HookDecision:
        return HookDecision.deny("a prompt has no permission")

    answers: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        [post] = user_hook_ids(cli, "PostToolUse")
        [prompt] = user_hook_ids(cli, "UserPromptSubmit")
        data = {"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_response": "x"}
        answers.append(await cli.hook_callback(post, data, tool_use_id="toolu_9"))
        data = {"hook_event_name": "UserPromptSubmit", "prompt": "hello"}
        answers.append(await cli.hook_callback(prompt, data))
        await cli.text("finished")

    async with fake_session(FakeCLI(script), hooks=[audit, wrong]) as session:
        events = await collect(session)
    check_stream(events)
    assert answers == [{}, {}]
    errors = [e for e in events if isinstance(e, Error)]
    assert [e.message for e in errors] == [
        "the PostToolUse hook 'audit' raised RuntimeError: audit log full (x)",
        "the UserPromptSubmit hook 'wrong' returned a decision its event cannot take: "
        "permission is for PreToolUse and PermissionRequest hooks, not UserPromptSubmit",
    ]
    assert all(e.code == "callback" and not e.fatal for e in errors)
    assert [(e.decision, e.tool_use_id) for e in invoked(events)] == [
        ("failed", "toolu_9"),
        ("failed", None),
    ]
    last = events[-1]
    assert isinstance(last, Result)
    assert last.final


async def test_abort_while_a_hook_runs_cancels_it_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cancelled_at: list[float] = []
    started = trio.Event()

    @hook("PreToolUse")
    async def waits(call: HookInput) -> HookDecision:
        started.set()
        try:
            await trio.sleep(50)
        except trio.Cancelled:
            cancelled_at.append(trio.current_time())
            raise
        return HookDecision.allow()

    async def script(cli: FakeTurn) -> None:
        [hook_id] = user_hook_ids(cli, "PreToolUse")
        await cli.hook_callback(hook_id, bash_input("ls"))
        await cli.text("never")

    fake = FakeCLI(script)
    async with fake_session(fake, hooks=[waits]) as session, trio.open_nursery() as nursery:

        async def abort_soon() -> None:
            await started.wait()
            await trio.sleep(2)
            await session.abort()

        nursery.start_soon(abort_soon)
        events = await collect(session)
    check_stream(events)
    assert cancelled_at == [2.0]
    assert isinstance(events[-1], Aborted)
    assert not [e for e in events if isinstance(e, Error)]
    assert_no_leak(fake)


async def test_the_stop_gate_beats_a_hook_that_allows(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A stop while a hook that allows is still running (it shields itself from the
    cancellation), and a call that comes after the stop: both are denied, the second one
    without running the hook at all."""
    stopping = False
    ran: list[str] = []
    events: list[Event] = []

    async def allow_anyway(call: HookInput) -> HookDecision:
        nonlocal stopping
        ran.append(str(call.tool_use_id))
        with trio.CancelScope(shield=True):
            stopping = True  # the execution starts stopping while the hook runs
            await trio.sleep(1)
        return HookDecision.allow("fine by me")

    runner = CallbackRunner()
    hooks = SessionHooks(
        [Hook(event="PreToolUse", callback=allow_anyway)],
        runner=runner,
        timeout=10.0,
        emit=events.append,
        stopping=lambda: stopping,
        stopped_reason=STOPPED,
    )
    [matcher] = hooks.matchers()["PreToolUse"]
    [callback] = matcher.hooks
    async with trio.open_nursery() as nursery:
        await nursery.start(run_tool_runner, runner)
        started = trio.current_time()
        during = await callback(bash_input("ls", "toolu_1"), "toolu_1", {"signal": None})
        assert trio.current_time() - started == 1  # the hook ran to its end, shielded
        after = await callback(bash_input("ls", "toolu_2"), "toolu_2", {"signal": None})
        runner.close()
    deny = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": STOPPED,
        }
    }
    assert during == deny
    assert after == deny
    assert ran == ["toolu_1"]
    assert [(e.decision, e.tool_use_id) for e in invoked(events)] == [
        ("stopped", "toolu_1"),
        ("stopped", "toolu_2"),
    ]


async def test_the_failure_permission_and_subagent_start_hooks_reach_their_functions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The three events a session gained: each registered under its own event with its
    matcher, called with its typed input, and its decision in the CLI's shape."""
    seen: list[HookInput] = []

    @hook("PostToolUseFailure", matcher="Bash")
    async def on_failure(call: HookInput) -> HookDecision:
        seen.append(call)
        return HookDecision.context(f"the command failed: {call.error}")

    @hook("PermissionRequest", matcher="Write")
    async def approve_writes(call: HookInput) -> HookDecision | None:
        seen.append(call)
        if str((call.tool_input or {}).get("file_path", "")).startswith("/tmp/"):
            return HookDecision.allow()
        return HookDecision.deny("only /tmp")

    @hook("SubagentStart", matcher="Explore")
    async def on_start(call: HookInput) -> HookDecision:
        seen.append(call)
        return HookDecision.context("be brief")

    answers: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        [failure] = user_hook_ids(cli, "PostToolUseFailure")
        [permission] = user_hook_ids(cli, "PermissionRequest")
        [start] = user_hook_ids(cli, "SubagentStart")
        data: dict[str, Any] = {
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": "false"},
            "tool_use_id": "toolu_f",
            "error": "Exit code 1",
            "is_interrupt": False,
        }
        answers.append(await cli.hook_callback(failure, data, tool_use_id="toolu_f"))
        for path in ("/tmp/a", "/etc/passwd"):
            data = {
                "hook_event_name": "PermissionRequest",
                "tool_name": "Write",
                "tool_input": {"file_path": path, "content": "x"},
                "permission_suggestions": [{"type": "setMode", "mode": "acceptEdits"}],
            }
            answers.append(await cli.hook_callback(permission, data))
        data = {"hook_event_name": "SubagentStart", "agent_id": "a-1", "agent_type": "Explore"}
        answers.append(await cli.hook_callback(start, data))
        await cli.text("ok")

    fake = FakeCLI(script)
    async with fake_session(fake, hooks=[on_failure, approve_writes, on_start]) as session:
        events = await collect(session)
    check_stream(events)
    failed, allowed, denied, started = answers
    assert failed == {
        "hookSpecificOutput": {
            "hookEventName": "PostToolUseFailure",
            "additionalContext": "the command failed: Exit code 1",
        }
    }
    assert allowed["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    assert denied["hookSpecificOutput"]["decision"] == {"behavior": "deny", "message": "only /tmp"}
    assert started["hookSpecificOutput"]["additionalContext"] == "be brief"
    assert [(c.event, c.error, c.agent_type) for c in seen] == [
        ("PostToolUseFailure", "Exit code 1", None),
        ("PermissionRequest", None, None),
        ("PermissionRequest", None, None),
        ("SubagentStart", None, "Explore"),
    ]
    assert seen[1].permission_suggestions == ({"type": "setMode", "mode": "acceptEdits"},)
    assert [(e.hook_event, e.decision, e.reason) for e in invoked(events)] == [
        ("PostToolUseFailure", "context", None),
        ("PermissionRequest", "allow", None),
        ("PermissionRequest", "deny", "only /tmp"),
        ("SubagentStart", "context", None),
    ]
    registered = fake.transports[0].initialize_request["hooks"]  # type: ignore[index]
    assert [registered[e][0]["matcher"] for e in (
        "PostToolUseFailure", "PermissionRequest", "SubagentStart")] == ["Bash", "Write", "Explore"]


async def test_the_stop_gate_denies_a_permission_request_whatever_its_hook_says(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    events: list[Event] = []

    async def allow_all(call: HookInput) -> HookDecision:
        ran.append(str(call.tool_name))
        await trio.lowlevel.checkpoint()
        return HookDecision.allow()

    runner = CallbackRunner()
    hooks = SessionHooks(
        [Hook(event="PermissionRequest", callback=allow_all)],
        runner=runner,
        timeout=10.0,
        emit=events.append,
        stopping=lambda: True,
        stopped_reason=STOPPED,
    )
    [matcher] = hooks.matchers()["PermissionRequest"]
    [callback] = matcher.hooks
    data = {"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {}}
    async with trio.open_nursery() as nursery:
        await nursery.start(run_tool_runner, runner)
        answer = await callback(data, None, {"signal": None})
        runner.close()
    assert ran == []  # never started
    assert answer == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": STOPPED},
        }
    }
    assert [e.decision for e in invoked(events)] == ["stopped"]


async def test_a_hook_call_from_a_subagent_is_attributed_to_a_subagent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        [hook_id] = user_hook_ids(cli, "PreToolUse")
        data = {**bash_input("ls", "toolu_sub"), "agent_id": "a-1", "agent_type": "Explore"}
        await cli.hook_callback(hook_id, data)
        await cli.hook_callback(hook_id, bash_input("ls", "toolu_main"))
        await cli.text("ok")

    async with fake_session(FakeCLI(script), hooks=[no_rm]) as session:
        events = await collect(session)
    check_stream(events)
    calls = [(e.tool_use_id, e.is_subagent, e.subagent_task_id) for e in invoked(events)]
    assert calls == [("toolu_sub", True, None), ("toolu_main", False, None)]


async def test_hooks_are_checked_before_anything_starts() -> None:
    fake = FakeCLI(lambda cli: cli.text("x"))
    with pytest.raises(InvalidParamsError, match="hooks"):
        async with fake_session(fake, hooks=[no_rm.callback]):
            pass
    assert fake.transports == []


async def test_a_fleet_gives_its_hooks_to_every_session_and_checks_them_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from session_kit import CONFIG

    from claude_trio import open_fleet

    answers: list[Any] = []

    async def script(cli: FakeTurn) -> None:
        [hook_id] = user_hook_ids(cli, "PreToolUse")
        answers.append(await cli.hook_callback(hook_id, bash_input(f"rm {cli.prompt}")))
        await cli.text("ok")

    with pytest.raises(InvalidParamsError, match=r"hooks\[0\]"):
        async with open_fleet(transport_factory=FakeCLI(script), hooks=["no_rm"]):
            pass
    fake = FakeCLI(script)
    async with open_fleet(transport_factory=fake, config=CONFIG, hooks=[no_rm]) as fleet:
        sessions = [await fleet.start(ExecuteParams(prompt=name)) for name in ("a", "b")]
        for fs in sessions:
            with fs.subscribe_nowait(None, max_queue=1000) as sub:
                events = [event async for event in sub]
            check_stream(events)
            assert [e.decision for e in invoked(events)] == ["deny"]
    assert [a["hookSpecificOutput"]["permissionDecision"] for a in answers] == ["deny", "deny"]
