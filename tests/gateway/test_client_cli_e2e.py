"""The client through three cut connections mid-stream, with the real bundled CLI against
the Messages API double behind the gateway: the events it yields are exactly those of a
local run of the same script (what differs from run to run - ids, times - aside)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from proxy_kit import cut_proxy

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.fanout.fleet import Subscription, open_fleet
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.protocol.fanout.codec import event_to_json
from claude_trio.protocol.fanout.remote import RemotePolicy, remote_params
from claude_trio.protocol.session.events import Event, Result
from claude_trio.testing.model_double import (
    ModelDouble,
    ModelRequest,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    ReplyUsage,
    Response,
)

pytestmark = pytest.mark.e2e

TOKEN = "e2e-client-token-0123456789"
CLIENT = ClientConfig(backoff_base=0.02, backoff_max=0.2, close_timeout=2.0)
LONG = " ".join(f"word{i}" for i in range(300))
# What differs between two runs of one script: the CLI's session id, uuids, times, and the
# double's message ids (it numbers every reply it sends).
VOLATILE = {
    "session_id",
    "uuid",
    "user_message_uuids",
    "timestamp",
    "duration_ms",
    "message_id",
    "summary_id",  # the CLI's summary frames carry a fresh uuid
}


def script(request: ModelRequest) -> Response | None:
    """Think, call a tool, then stream a long answer slowly (so cuts land mid-stream)."""
    if request.is_tool_use_summary:
        return None
    if "toolu_cut_read" not in request.tool_uses:
        return Reply(
            blocks=(
                ReplyThinking(thinking="I will read the file first."),
                ReplyToolUse(
                    id="toolu_cut_read", name="Read", input={"file_path": "/etc/hostname"}
                ),
            ),
            usage=ReplyUsage(input_tokens=50, output_tokens=20),
        )
    return Reply(
        blocks=(ReplyText(text=LONG),),
        usage=ReplyUsage(input_tokens=80, output_tokens=300),
        chunk_size=6,
        event_delay=0.002,
    )


def comparable(events: list[Event]) -> list[Any]:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [strip(event_to_json(e)) for e in events]


async def test_the_client_survives_three_cut_connections_with_the_real_cli_exactly(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = script
    work = tmp_path / "work"
    work.mkdir()
    params = ExecuteParams(prompt="read it, then talk", model="claude-sonnet-4-5")
    # the gateway runs the remote session in the folder it resolved, with every tool
    policy = RemotePolicy(tools="all", cwd_root=str(work))
    local_params = remote_params(params, policy, str(work.resolve()))
    with trio.fail_after(120):
        async with open_fleet(max_live=1, env=hermetic) as fleet:
            # the local run: the fleet's own subscription
            local_session = await fleet.start(local_params)
            subscription = local_session.subscribe_nowait(None, max_queue=100_000)
            assert isinstance(subscription, Subscription)
            with subscription:
                local = [event async for event in subscription]
            async with trio.open_nursery() as nursery:
                port = await nursery.start(
                    partial(
                        serve_gateway, fleet, token=TOKEN, allowed_origins=None,
                        cwd_root=str(work), remote_tools="all",
                    )
                )  # fmt: skip
                async with (
                    cut_proxy(port) as proxy,
                    connect_gateway(proxy.url, token=TOKEN, config=CLIENT) as client,
                ):
                    session = await client.open(params)
                    remote: list[Event] = []
                    cuts = 0
                    async for event in session.events:
                        remote.append(event)
                        if len(remote) in (30, 100, 200):
                            cuts += proxy.cut()
                    connections = client.statistics().connections
                nursery.cancel_scope.cancel()
    assert cuts == 3
    assert connections == 4
    assert isinstance(remote[-1], Result)
    assert len(remote) > 200
    assert [e.seq for e in remote] == list(range(1, len(remote) + 1))
    for a, b in zip(comparable(remote), comparable(local), strict=False):
        assert a == b, json.dumps([a, b])[:3000]
    assert comparable(remote) == comparable(local)
