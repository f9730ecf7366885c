"""A Redis cluster is a session host: the conformance suite on ``RedisFleet`` (the workers run
FakeCLI sessions) and on a gateway client in front of a cluster's gateway, on a real
``redis-server``; and a session's usage and listing figures are the same on every host."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any

import attrs
import coredis
import pytest
import trio
from cluster_kit import TOKEN, open_gateway, open_worker

from claude_trio.actors.cluster import inbox as inbox_module
from claude_trio.actors.cluster.fleet import RedisFleet, open_redis_fleet
from claude_trio.actors.extensions.broker import AnswerAccepted
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.actors.fanout.gateway import serve_gateway
from claude_trio.actors.fanout.hosts import SessionHost
from claude_trio.client import ClientConfig, GatewayClient, connect_gateway
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.fanout.inbox import InboxArrived, InboxResolved, InboxSnapshot
from claude_trio.protocol.fanout.wire import SessionInfo
from claude_trio.protocol.session.lifecycle import Accepted
from claude_trio.protocol.session.usage import ZERO_USAGE
from claude_trio.redis_url import open_redis
from claude_trio.testing import (
    FakeCLI,
    FakeTurn,
    RedisClusterNodes,
    RedisServer,
    conformance_cli,
    run_host_conformance,
)

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)


async def test_a_redis_fleet_keeps_every_host_contract(redis_server: RedisServer) -> None:
    url = redis_server.url
    with trio.fail_after(300):
        async with open_worker(url, conformance_cli(), max_live=4):

            @asynccontextmanager
            async def cluster() -> AsyncIterator[RedisFleet]:
                async with (
                    coredis.Redis.from_url(url, decode_responses=True) as redis,
                    open_redis_fleet(redis, command_timeout=5.0, block=0.2) as fleet,
                ):
                    yield fleet

            await run_host_conformance(cluster)


async def test_a_client_of_a_cluster_keeps_every_host_contract(
    redis_server: RedisServer,
) -> None:
    url = redis_server.url
    with trio.fail_after(300):
        async with (
            open_worker(url, conformance_cli(), max_live=4),
            open_gateway(url) as (_, port),
        ):

            @asynccontextmanager
            async def client() -> AsyncIterator[GatewayClient]:
                url = f"ws://127.0.0.1:{port}/"
                async with connect_gateway(url, token=TOKEN, config=CLIENT) as gw:
                    yield gw

            await run_host_conformance(client)


def _figures(info: SessionInfo) -> dict[str, Any]:
    """What ``list`` says of a session that does not depend on where, when, or for whom
    (a gateway's principal) it ran."""
    figures = attrs.asdict(info, recurse=False)
    for varying in ("session", "owner", "created_at", "ended_at"):
        del figures[varying]
    return figures


HostMaker = Callable[[], AbstractAsyncContextManager[SessionHost]]


def _hosts(url: str, fake: FakeCLI) -> dict[str, HostMaker]:
    """The four ways to host sessions run by ``fake``: in this process, through a gateway,
    on a Redis cluster, through a cluster's gateway."""

    @asynccontextmanager
    async def local() -> AsyncIterator[SessionHost]:
        async with open_fleet(transport_factory=fake) as fleet:
            yield fleet

    @asynccontextmanager
    async def through_gateway() -> AsyncIterator[SessionHost]:
        async with (
            open_fleet(transport_factory=fake) as fleet,
            trio.open_nursery() as nursery,
        ):
            port = await nursery.start(
                partial(serve_gateway, fleet, token=TOKEN, allowed_origins=None)
            )
            async with connect_gateway(
                f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT
            ) as gw:
                yield gw
            nursery.cancel_scope.cancel()

    @asynccontextmanager
    async def redis_fleet() -> AsyncIterator[SessionHost]:
        async with (
            open_worker(url, fake),
            open_redis(url) as redis,
            open_redis_fleet(redis, block=0.2) as fleet,
        ):
            yield fleet

    @asynccontextmanager
    async def cluster_client() -> AsyncIterator[SessionHost]:
        async with (
            open_worker(url, fake),
            open_gateway(url) as (_, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as gw,
        ):
            yield gw

    return {
        "local": local,
        "gateway": through_gateway,
        "redis": redis_fleet,
        "cluster client": cluster_client,
    }


async def test_usage_and_listing_figures_are_the_same_on_every_host(
    redis_server: RedisServer,
) -> None:
    """One conversation (two executions; the second holds its turn until a push comes) run on
    a local fleet, a client of a gateway over one, a Redis fleet and a client of a cluster's
    gateway: the handle's usage and every figure of its listing are the same."""
    await _same_figures_on_every_host(redis_server.url)


async def test_usage_and_listing_figures_are_the_same_on_a_redis_cluster(
    redis_cluster: RedisClusterNodes,
) -> None:
    """As above, the cluster's Redis being a three-master Redis Cluster: the usage ``list``
    shows is the sum of the events' usage, as on a local fleet."""
    await _same_figures_on_every_host(redis_cluster.url)


async def _same_figures_on_every_host(url: str) -> None:

    async def run(host: SessionHost) -> tuple[Any, dict[str, Any]]:
        handle = await host.open(ExecuteParams(prompt="say:one"), label="same")
        first = await handle.result()
        handle = await host.continue_(handle.id, "hold")
        async with handle.subscribe(first.events[-1].seq) as events:  # the second execution
            async for event in events:
                if event.kind == "turn_started":
                    assert isinstance(await handle.push("two"), Accepted)
        await handle.result()
        (info,) = [i for i in await host.list() if i.session == handle.id]
        return handle.usage, _figures(info)

    hosts = _hosts(url, conformance_cli())
    seen = {}
    with trio.fail_after(120):
        await trio.lowlevel.checkpoint()
        for name, make in hosts.items():
            async with make() as host:
                seen[name] = await run(host)
    usage, figures = seen["local"]
    assert usage != ZERO_USAGE
    assert figures["usage"] == usage
    assert (figures["executions"], figures["state"], figures["label"]) == (2, "ended", "same")
    for name, got in seen.items():
        assert got == (usage, figures), name


async def test_a_push_carries_its_images_on_every_host(redis_server: RedisServer) -> None:
    image = ImageInput.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    images_seen: list[int] = []

    async def hold(turn: FakeTurn) -> None:
        while not (pushed := await turn.fold_pending()):
            await turn.sleep(0.02)
        content = pushed[0].content
        blocks = content if isinstance(content, list) else []
        images_seen.append(sum(block.get("type") == "image" for block in blocks))
        await turn.text(f"saw {pushed[0].text}")

    hosts = _hosts(redis_server.url, FakeCLI(hold))
    with trio.fail_after(120):
        await trio.lowlevel.checkpoint()
        for name, make in hosts.items():
            async with make() as host:
                handle = await host.open(ExecuteParams(prompt="hold"))
                async with handle.subscribe() as events:
                    async for event in events:
                        if event.kind == "turn_started":
                            pushed = await handle.push("look", images=[image])
                            assert isinstance(pushed, Accepted), name
                assert (await handle.result()).text == "saw look", name
    assert images_seen == [1] * len(hosts)


async def test_the_cluster_inbox_decodes_only_what_can_ask_answer_or_end(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inbox reads every live session's stream; it tells a delta from a question by the
    stored text's kind and decodes only what can change the inbox."""
    decoded: list[str] = []
    decode = inbox_module.decode_event_text

    def counted(text: str) -> Any:
        event = decode(text)
        decoded.append(event.kind)
        return event

    monkeypatch.setattr(inbox_module, "decode_event_text", counted)

    async def chatty_asker(turn: FakeTurn) -> None:
        for i in range(20):
            await turn.text(f"part {i} ")
        reply = await turn.ask_permission("Bash", {"command": "ls"}, tool_use_id="toolu_1")
        await turn.text(str(reply["behavior"]))

    url = redis_server.url
    with trio.fail_after(60):
        async with (
            open_worker(url, FakeCLI(chatty_asker)),
            open_redis(url) as redis,
            open_redis_fleet(redis, block=0.2) as fleet,
            fleet.inbox() as inbox,
        ):
            assert await inbox.receive() == InboxSnapshot(items=())
            session = await fleet.open(ExecuteParams(prompt="ls", permission_mode="default"))
            arrived = await inbox.receive()
            assert isinstance(arrived, InboxArrived)
            assert (arrived.item.session, arrived.item.input) == (session.id, {"command": "ls"})
            answered = await inbox.answer(session.id, arrived.item.request_id, "allow")
            assert answered == AnswerAccepted(request_id=arrived.item.request_id)
            assert await inbox.receive() == InboxResolved(
                session=session.id, request_id=arrived.item.request_id, outcome="answered"
            )
            assert (await session.result()).text.endswith("allow")
    assert "user_input_request" in decoded
    assert "user_input_resolved" in decoded
    assert "text_delta" not in decoded
