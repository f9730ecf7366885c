"""A moved turn continues (``protocol/cluster/move.py`` rules 9-11), as a user runs it: real
``claude-trio worker`` processes (the real CLI against the Messages API double), a real
``redis-server``, two gateways over ``RedisFleet``.

A turn calls the Bash tool three times, each call appending its number to a file. Right after
the second tool result is in the event stream, the worker running the turn is killed with
SIGKILL (the model double holds its next answer, so its CLI cannot go on meanwhile). Another
worker takes the session over: the file reads 1, 2, 3 once each, the model double was never
asked again for a call it had already made, and the turn's events, read through the other
gateway, are exact apart from the move event, which names the call the turn resumed after.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path

import pytest
import trio
from cluster_kit import TOKEN, open_gateway

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, RemoteSession, connect_gateway
from claude_trio.protocol.cluster.move import CONTINUE_PROMPT
from claude_trio.protocol.session.events import Event, Result, ToolResult, ToolUse
from claude_trio.protocol.session.lifecycle import Accepted
from claude_trio.testing import RedisServer, hermetic_env
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, Response
from claude_trio.testing.processes import CommandProcess, command_env, open_worker_process

pytestmark = pytest.mark.e2e

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
PUSH = "also remember 42"


def worker(
    tmp_path: Path, name: str, url: str, base_url: str
) -> AbstractAsyncContextManager[CommandProcess]:
    """``claude-trio worker`` whose CLIs talk to the model double (its own config folder:
    another machine)."""
    env = command_env(hermetic_env(base_url, tmp_path / name, sandbox=True))
    return open_worker_process(
        tmp_path, name, url,
        "--max-live", "1", "--dead-after", "2", "--drain-grace", "10", "--log-json",
        env=env, check_exit=False, stop_timeout=30,
    )  # fmt: skip


class Model:
    """Three Bash calls, then ``done``; the first answer after the second result is held
    (the model is still thinking when the worker dies). Every request is kept."""

    def __init__(self, counter: Path) -> None:
        self.counter = counter
        self.held = trio.Event()  # never set: that CLI is killed
        self.seen: list[ModelRequest] = []
        self.answered: list[str] = []  # the tool call ids it answered with, in order

    def __call__(self, request: ModelRequest) -> Response | None:
        if request.is_tool_use_summary:
            return None  # the double's own summary reply
        self.seen.append(request)
        n = len(request.tool_results)
        if n < 3:
            call = f"toolu_move_{n + 1}"
            self.answered.append(call)
            held = n == 2 and self.answered.count(call) == 1
            return Reply.tool_use(
                "Bash",
                {"command": f"echo {n + 1} >> {self.counter}", "description": f"append {n + 1}"},
                id=call,
                gate=self.held if held else None,
            )
        return Reply.text("done; noted 42" if PUSH in " ".join(request.user_texts) else "done")


async def drain(session: RemoteSession, into: list[Event]) -> None:
    async for event in session.events:
        into.append(event)


async def run_moved_turn(
    tmp_path: Path, redis_server: RedisServer, double: ModelDouble, *, push: bool
) -> tuple[Model, list[Event], list[Event], list[Event]]:
    url = redis_server.url
    work = tmp_path / "work"
    work.mkdir()
    model = Model(tmp_path / "count.txt")
    double.responder = model
    async with AsyncExitStack() as stack:
        _, port_one = await stack.enter_async_context(
            open_gateway(url, cwd_root=str(work), remote_tools="all")
        )
        _, port_two = await stack.enter_async_context(
            open_gateway(url, cwd_root=str(work), remote_tools="all")
        )
        one = await stack.enter_async_context(
            connect_gateway(f"ws://127.0.0.1:{port_one}/", token=TOKEN, config=CLIENT)
        )
        two = await stack.enter_async_context(
            connect_gateway(f"ws://127.0.0.1:{port_two}/", token=TOKEN, config=CLIENT)
        )
        with trio.fail_after(150):
            doomed = await stack.enter_async_context(worker(tmp_path, "w1", url, double.base_url))
            session = await one.open(
                ExecuteParams(prompt="count to three", permission_mode="bypassPermissions")
            )
            first: list[Event] = []
            async for event in session.events:
                first.append(event)
                if isinstance(event, ToolResult) and event.tool_use_id == "toolu_move_2":
                    break
            if push:
                assert isinstance(await session.push(PUSH), Accepted)
            await doomed.kill()  # and its CLI, orphaned: not this test's to leave behind
            await stack.enter_async_context(worker(tmp_path, "w2", url, double.base_url))
            last = first[-1].seq
            session.close()
            rest: list[Event] = []
            await drain(await two.attach(session.id, last_seq=last), rest)
            whole: list[Event] = []
            async with connect_gateway(
                f"ws://127.0.0.1:{port_two}/", token=TOKEN, config=CLIENT
            ) as fresh:
                await drain(await fresh.attach(session.id, last_seq=0), whole)
    return model, first, rest, whole


def check(
    model: Model, counter: Path, first: list[Event], rest: list[Event], whole: list[Event]
) -> None:
    shown = [(e.seq, e.kind, getattr(e, "message", None)) for e in whole]
    assert counter.read_text() == "1\n2\n3\n", shown
    assert [e.seq for e in whole] == list(range(1, len(whole) + 1))
    assert first + rest == whole  # exact: nothing lost, nothing twice, in order
    moved = [e for e in whole if e.kind == "warning" and e.code == "session_moved"]
    assert len(moved) == 1, shown
    assert "continues after tool call toolu_move_2 (Bash)" in moved[0].message
    calls = [e.tool_use_id for e in whole if isinstance(e, ToolUse)]
    results = [e.tool_use_id for e in whole if isinstance(e, ToolResult)]
    assert calls == results == ["toolu_move_1", "toolu_move_2", "toolu_move_3"], shown
    final = whole[-1]
    assert isinstance(final, Result), final
    assert final.final
    assert not final.is_error, final
    # The model double's side: each call was asked for once; the one held when the worker
    # died was asked again (its CLI never saw it); after the move the model got both results.
    assert model.answered == ["toolu_move_1", "toolu_move_2", "toolu_move_3", "toolu_move_3"]
    after = model.seen[3:]
    assert after, "no request after the move"
    assert all({"toolu_move_1", "toolu_move_2"} <= set(r.tool_results) for r in after)
    assert CONTINUE_PROMPT in after[0].last_user_text


async def test_a_turn_moved_after_its_second_tool_result_runs_no_tool_again(
    tmp_path: Path, redis_server: RedisServer, model_double: ModelDouble
) -> None:
    model, first, rest, whole = await run_moved_turn(
        tmp_path, redis_server, model_double, push=False
    )
    check(model, tmp_path / "count.txt", first, rest, whole)
    assert whole[-1].text == "done"  # type: ignore[attr-defined]


async def test_a_push_accepted_before_the_kill_is_delivered_once(
    tmp_path: Path, redis_server: RedisServer, model_double: ModelDouble
) -> None:
    model, first, rest, whole = await run_moved_turn(
        tmp_path, redis_server, model_double, push=True
    )
    check(model, tmp_path / "count.txt", first, rest, whole)
    texts = [e.text for e in whole if isinstance(e, Result)]
    assert any("noted 42" in (t or "") for t in texts), texts
    # The model saw it once: delivered again by the new worker, never twice.
    assert json.dumps(model.seen[-1].messages).count(PUSH) == 1
