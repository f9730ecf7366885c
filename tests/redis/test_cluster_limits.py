"""What a cluster keeps in Redis rather than per gateway, on a real three-master Redis
Cluster (and one ``redis-server``): a client's sessions and all of the cluster's (the
per-client limits and ``max_sessions`` hold across every gateway of the cluster), and a
session's pending questions (re-shown to a client of any gateway)."""

from __future__ import annotations

import pytest
import trio
from cluster_kit import TOKEN, open_gateway, open_worker

from claude_trio import ExecuteParams
from claude_trio.actors.cluster import follower as follower_module
from claude_trio.actors.cluster.fleet import open_redis_fleet
from claude_trio.actors.extensions.broker import AnswerAccepted
from claude_trio.actors.fanout.owners import GatewayOwner
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import RemoteOpError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.fanout.remote import GatewayLimits
from claude_trio.protocol.session.events import Result, UserInputRequest
from claude_trio.redis_url import open_redis
from claude_trio.testing import (
    FakeCLI,
    FakeTurn,
    RedisClusterNodes,
    RedisServer,
    conformance_cli,
)

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)
KEYS = RedisKeys()


class Held:
    """A FakeCLI script whose turns wait until released."""

    def __init__(self) -> None:
        self.release = trio.Event()

    async def __call__(self, turn: FakeTurn) -> None:
        await self.release.wait()
        await turn.text("done")


async def test_a_clients_sessions_are_counted_on_every_gateway(
    redis_cluster: RedisClusterNodes,
) -> None:
    script = Held()
    url = redis_cluster.url
    alice = GatewayOwner("alice", "10.0.0.1")
    bob = GatewayOwner("bob", "10.0.0.2")
    with trio.fail_after(60):
        async with (
            open_redis(url) as redis,
            open_worker(url, FakeCLI(script), max_live=1),
            open_redis_fleet(redis, block=0.2) as one,
            open_redis_fleet(redis, block=0.2) as two,
        ):
            first = await one.open(ExecuteParams(prompt="a"), owner=alice)
            second = await one.open(ExecuteParams(prompt="b"), owner=alice)
            await one.open(ExecuteParams(prompt="c"), owner=bob)
            seen_by_two = (await two.load(alice)).owner
            script.release.set()
            await first.result()
            await second.result()
            after = (await two.load(alice)).owner
            left = await redis.smembers(KEYS.owned("alice", "10.0.0.1"))
    # The other gateway never saw alice's sessions, yet counts both (one live, one waiting
    # for the worker's only slot).
    assert seen_by_two.active == 2
    assert seen_by_two.live + seen_by_two.waiting == 2
    assert after.active == 0
    assert left == set()  # the ended ones left the set as they were counted


async def test_the_per_client_limit_holds_across_gateways(
    redis_cluster: RedisClusterNodes,
) -> None:
    script = Held()
    url = redis_cluster.url
    limits = GatewayLimits(max_sessions_per_client=2)
    with trio.fail_after(60):
        async with (
            open_worker(url, FakeCLI(script), max_live=4),
            open_gateway(url, limits=limits) as (_, port_one),
            open_gateway(url, limits=limits) as (_, port_two),
            connect_gateway(f"ws://127.0.0.1:{port_one}/", token=TOKEN, config=CLIENT) as one,
            connect_gateway(f"ws://127.0.0.1:{port_two}/", token=TOKEN, config=CLIENT) as two,
        ):
            await one.open(ExecuteParams(prompt="a"))
            await one.open(ExecuteParams(prompt="b"))
            with pytest.raises(RemoteOpError) as refused:
                await two.open(ExecuteParams(prompt="c"))
            script.release.set()
    assert refused.value.code == "limit_reached"
    assert "already has 2 sessions not ended" in str(refused.value)


async def test_the_server_wide_session_limit_holds_across_gateways(redis_url: str) -> None:
    """``max_sessions`` counts the cluster's sessions not ended, on every gateway: two opened
    through one gateway fill it for the other, which never saw them; once they end, it opens
    again, and the ended ones left the count's set."""
    script = Held()
    url = redis_url
    limits = GatewayLimits(max_sessions=2)
    with trio.fail_after(60):
        async with (
            open_redis(url) as redis,
            open_worker(url, FakeCLI(script), max_live=1),
            open_gateway(url, limits=limits) as (_, port_one),
            open_gateway(url, limits=limits) as (_, port_two),
            connect_gateway(f"ws://127.0.0.1:{port_one}/", token=TOKEN, config=CLIENT) as one,
            connect_gateway(f"ws://127.0.0.1:{port_two}/", token=TOKEN, config=CLIENT) as two,
        ):
            first = await one.open(ExecuteParams(prompt="a"))  # live on the worker's slot
            second = await one.open(ExecuteParams(prompt="b"))  # waiting for it
            with pytest.raises(RemoteOpError) as refused:
                await two.open(ExecuteParams(prompt="c"))
            script.release.set()
            await first.result()
            await second.result()
            third = await two.open(ExecuteParams(prompt="d"))
            counted = await redis.smembers(KEYS.active)
            await third.result()
    assert refused.value.code == "limit_reached"
    assert str(refused.value).endswith("the server runs its limit of 2 sessions; try later")
    assert counted == {third.id}


async def test_a_pending_question_is_shown_again_to_a_client_that_attaches_past_it(
    redis_cluster: RedisClusterNodes,
) -> None:
    url = redis_cluster.url
    with trio.fail_after(60):
        async with (
            open_redis(url) as redis,
            open_worker(url, conformance_cli()),
            open_redis_fleet(redis, block=0.2) as one,
            open_redis_fleet(redis, block=0.2) as two,
        ):
            session = await one.open(ExecuteParams(prompt="ask"))
            async with session.subscribe() as events:
                async for event in events:
                    if isinstance(event, UserInputRequest):
                        asked = event
                        break
            # Another gateway's client that saw everything up to the question attaches.
            again = await two.get(session.id)
            async with again.subscribe(asked.seq) as events:
                first = await events.receive()
                answered = await again.answer(asked.request_id, {"Which color?": "red"})
                rest = [event async for event in events]
            # Attaching past the answered question shows it no more.
            async with again.subscribe(asked.seq) as events:
                after_answer = [event async for event in events]
    assert first == asked
    assert answered == AnswerAccepted(request_id=asked.request_id)
    assert isinstance(rest[-1], Result)
    assert rest[-1].text == "answered red"
    assert not any(isinstance(event, UserInputRequest) for event in after_answer)
    assert after_answer == rest


async def test_a_gateway_that_follows_the_session_re_shows_its_question_from_memory(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = redis_server.url
    with trio.fail_after(60):
        async with (
            open_redis(url) as redis,
            open_worker(url, conformance_cli()),
            open_redis_fleet(redis, block=0.2) as gateway,
        ):
            session = await gateway.open(ExecuteParams(prompt="ask"))
            async with session.subscribe() as events:  # this gateway follows the session
                async for event in events:
                    if isinstance(event, UserInputRequest):
                        asked = event
                        break

                async def no_stream_read(*args: object, **kwargs: object) -> list[object]:
                    raise AssertionError("the stream was read: the follower holds the execution")

                monkeypatch.setattr(follower_module, "pending_questions", no_stream_read)
                again = await gateway.get(session.id)
                async with again.subscribe(asked.seq) as more:
                    first = await more.receive()
                    await again.answer(asked.request_id, {"Which color?": "red"})
                    rest = [event async for event in more]
    assert first == asked
    assert isinstance(rest[-1], Result)
    assert rest[-1].text == "answered red"
