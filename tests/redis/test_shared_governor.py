"""The governor shared by a cluster's nodes, on a real redis-server: two states on one Redis
act as two nodes (each its own ``RedisGovernorState``), and each Lua decision holds across
them: a shared pause, one decrease for simultaneous rejections, one count of running
executions (a lapsed lease freed, a person's wait giving it back), one budget; while Redis is
down new starts wait and costs are kept, and they are applied once it is back."""

from __future__ import annotations

import itertools
import random
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import attrs
import coredis
import trio
from cluster_kit import TOKEN as GATEWAY_TOKEN
from cluster_kit import open_gateway

from claude_trio.actors.cluster.governor import (
    RedisGovernorState,
    SharedGovernorConfig,
    shared_figures,
)
from claude_trio.client import connect_gateway
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.fanout.governor import (
    Decision,
    GovernorConfig,
    Refuse,
    RetryNotice,
    SharedStateOutage,
    Start,
    Wait,
)
from claude_trio.redis_url import open_redis
from claude_trio.testing import RedisClusterNodes, open_redis_server

CONFIG = GovernorConfig(
    max_live=2, initial_limit=2, starts_per_second=1000.0, start_burst=10, resume_jitter=0.5
)


def node(
    redis: Any, name: str, config: GovernorConfig = CONFIG, **shared: Any
) -> RedisGovernorState[str]:
    return RedisGovernorState(
        redis,
        SharedGovernorConfig(node=name, **shared),
        config,
        now=trio.current_time(),
        random=random.Random(name).random,
    )


def started(decisions: list[Decision[str]]) -> list[str]:
    return [d.key for d in decisions if isinstance(d, Start)]


async def state(redis: Any) -> dict[str, str]:
    return dict(await redis.hgetall(RedisKeys().governor("state")))


async def test_a_rejection_seen_by_one_node_pauses_the_other(redis_server: Any) -> None:
    async with open_redis(redis_server.url) as redis:
        a, b = node(redis, "a"), node(redis, "b")
        await a.sync_once()
        await b.sync_once()
        a.observe(
            RetryNotice(error_status=429, delay_ms=30_000), now=trio.current_time(), wall_now=0
        )
        await a.sync_once()
        b.submit("b1")
        notices = await b.sync_once()
        now = trio.current_time()
        # B adopted the pause (30 s from the report, plus its own jitter under 0.5 s).
        assert b.local.paused_until is not None
        assert now + 29 < b.local.paused_until < now + 30.5
        assert [n.cause for n in notices if type(n).__name__ == "Paused"] == [
            "rate limit, shared by the cluster"
        ]
        decisions = b.poll(now)
        assert started(decisions) == []
        assert isinstance(decisions[-1], Wait)
        assert decisions[-1].reason == "paused"
        # A's and B's resumes differ by their jitter: each drew its own.
        assert a.local.paused_until != b.local.paused_until


async def test_two_simultaneous_rejections_lower_the_limit_once(redis_server: Any) -> None:
    config = GovernorConfig(max_live=4, initial_limit=4, decrease_interval=60.0)
    async with open_redis(redis_server.url) as redis:
        a, b = node(redis, "a", config), node(redis, "b", config)
        for n in (a, b):
            n.observe(
                RetryNotice(error_status=529, delay_ms=10), now=trio.current_time(), wall_now=0
            )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.sync_once)
            nursery.start_soon(b.sync_once)
        figures = await state(redis)
        assert figures["limit"] == "2"  # 4 * 0.5 once, not 1
        assert figures["rejections"] == "2"
        await a.sync_once()
        assert a.statistics().limit == b.statistics().limit == 2


async def test_two_nodes_turns_of_one_round_raise_the_shared_limit_once(
    redis_server: Any,
) -> None:
    # Slow start: each node's turn was admitted under a shared limit of two; both succeed at
    # once, which shows two at once, so the limit grows to three, not four.
    config = GovernorConfig(max_live=4, initial_limit=2, starts_per_second=1000.0)
    async with open_redis(redis_server.url) as redis:
        a, b = node(redis, "a", config), node(redis, "b", config)
        for n, key in ((a, "a1"), (b, "b1")):
            n.submit(key)
            await n.sync_once()
            assert started(n.poll(trio.current_time())) == [key]
        for n, key in ((a, "a1"), (b, "b1")):
            n.turn_ended(key, now=trio.current_time(), cost_usd=0.0)
            n.execution_ended(key)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.sync_once)
            nursery.start_soon(b.sync_once)
        assert (await state(redis))["limit"] == "3"
        # A turn admitted under three raises it to four.
        a.submit("a2")
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == ["a2"]
        a.turn_ended("a2", now=trio.current_time(), cost_usd=0.0)
        await a.sync_once()
        assert (await state(redis))["limit"] == "4"


async def test_the_running_count_is_shared_and_a_lapsed_lease_is_freed(redis_server: Any) -> None:
    async with open_redis(redis_server.url) as redis:
        a = node(redis, "a", lease_ttl=1.0)
        b = node(redis, "b", lease_ttl=1.0)
        a.submit("a1")
        a.submit("a2")
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == ["a1", "a2"]
        b.submit("b1")
        await b.sync_once()
        assert b.statistics().cluster_running == 2
        assert started(b.poll(trio.current_time())) == []  # the cluster's limit (2) is held
        # A's execution ends: its lease is dropped, and B's open is admitted.
        a.execution_ended("a1")
        await a.sync_once()
        await b.sync_once()
        assert started(b.poll(trio.current_time())) == ["b1"]
        # B's execution waits for a person: its lease is given back (rule 7) and A starts.
        a.submit("a3")
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == []
        b.person_asked("b1", "req-1")
        await b.sync_once()
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == ["a3"]
        # Answered, it counts again at once (above the limit for a while).
        b.person_answered("b1", "req-1")
        await b.sync_once()
        assert b.statistics().cluster_running == 3
        # A dies without a word: its leases lapse after lease_ttl, and B's next open goes.
        b.submit("b2")
        b.execution_ended("b1")
        await b.sync_once()
        assert started(b.poll(trio.current_time())) == []
        await trio.sleep(1.2)
        await b.sync_once()
        assert started(b.poll(trio.current_time())) == ["b2"]
        assert b.statistics().cluster_running == 1


async def test_room_made_on_one_node_starts_the_other_nodes_waiting_open_at_once(
    redis_server: Any,
) -> None:
    """A node whose open waits for the cluster's limit asks again when another node makes
    room (the freed stream), not at its next poll: here the poll is 30 s away."""
    await room_made_starts_the_waiting_open(redis_server.url)


async def test_room_made_starts_the_waiting_open_on_a_three_master_cluster(
    redis_cluster: RedisClusterNodes,
) -> None:
    await room_made_starts_the_waiting_open(redis_cluster.url)


async def room_made_starts_the_waiting_open(url: str) -> None:
    async with open_redis(url) as redis:
        one = attrs.evolve(CONFIG, initial_limit=1)
        a = node(redis, "a", one, poll_interval=30.0, lease_ttl=90.0)
        b = node(redis, "b", one, poll_interval=30.0, lease_ttl=90.0)
        a.submit("a1")
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == ["a1"]
        b.submit("b1")
        rounds: list[object] = []
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(b.sync, rounds.append)
                while not rounds:  # noqa: ASYNC110 (B's first round: A holds the limit, 1)
                    await trio.sleep(0.01)
                await trio.sleep(0.2)
                assert "b1" not in b._admitted
                freed = await redis.xlen(RedisKeys().governor("freed"))
                a.execution_ended("a1")
                await a.sync_once()  # drops A's lease: room is made
                assert await redis.xlen(RedisKeys().governor("freed")) == freed + 1
                while "b1" not in b._admitted:  # noqa: ASYNC110 (a flag of another task)
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
        assert started(b.poll(trio.current_time())) == ["b1"]


async def test_a_budget_spent_on_one_node_refuses_on_the_other(redis_server: Any) -> None:
    config = GovernorConfig(max_live=2, budget_usd=0.10, label_budgets_usd={"team": 1.0})
    async with open_redis(redis_server.url) as redis:
        a, b = node(redis, "a", config), node(redis, "b", config)
        a.submit("a1", label="team")
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == ["a1"]
        a.turn_ended("a1", now=trio.current_time(), cost_usd=0.07)
        a.turn_ended("a1", now=trio.current_time(), cost_usd=0.05)
        await a.sync_once()
        spent = await redis.hgetall(RedisKeys().governor("spent"))
        assert float(spent["fleet"]) == 0.12
        assert float(spent["label:team"]) == 0.12
        b.submit("b1")
        await b.sync_once()
        decisions = b.poll(trio.current_time())
        [refused] = [d for d in decisions if isinstance(d, Refuse)]
        assert refused.key == "b1"
        assert refused.figures.scope == "fleet"
        assert refused.figures.spent_usd == 0.12
        assert started(decisions) == []
        # Checked before a CLI starts, too.
        assert b.check_budget() is not None
        assert b.statistics().overshoot_usd == 0.12 - 0.10


async def test_a_report_sent_twice_is_counted_once(redis_server: Any) -> None:
    async with open_redis(redis_server.url) as redis:
        a = node(redis, "a")
        a.submit("a1")
        await a.sync_once()
        a.poll(trio.current_time())
        a.turn_ended("a1", now=trio.current_time(), cost_usd=0.25)
        report = a._turns[0]
        await a.sync_once()
        a._turns.append(report)  # as when the reply of the first send was lost
        await a.sync_once()
        spent = await redis.hget(RedisKeys().governor("spent"), "fleet")
        assert float(spent or 0) == 0.25


async def test_while_redis_is_down_starts_wait_and_costs_are_kept(tmp_path: Path) -> None:
    async with open_redis_server(tmp_path / "redis") as server:
        async with open_redis(server.url) as redis:
            a = node(redis, "a", call_timeout=0.5, retry_max=0.2)
            wakes = itertools.count()
            outages: list[SharedStateOutage] = []

            def notify(notices: Any) -> None:
                next(wakes)
                outages.extend(n for n in notices if isinstance(n, SharedStateOutage))

            a.submit("a1")
            await a.sync_once()
            assert started(a.poll(trio.current_time())) == ["a1"]
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(a.sync, notify)
                    await server.stop()
                    a.submit("a2")
                    a.turn_ended("a1", now=trio.current_time(), cost_usd=0.03)
                    while not a.degraded:  # noqa: ASYNC110 (a flag of another task)
                        await trio.sleep(0.02)
                    assert a.statistics().degraded
                    await trio.sleep(0.5)
                    # Degraded: the new open waits, the running one goes on.
                    assert started(a.poll(trio.current_time())) == []
                    assert a.statistics().spent_usd == 0.03  # kept, not lost
                    a.execution_ended("a1")
                    await server.start()
                    while a.degraded:  # noqa: ASYNC110 (a flag of another task)
                        await trio.sleep(0.02)
                    while "a2" not in a._admitted:  # noqa: ASYNC110
                        await trio.sleep(0.02)
                    assert started(a.poll(trio.current_time())) == ["a2"]
                    nursery.cancel_scope.cancel()
            assert a.outages == 1
            # Told once when it went, once when it came back.
            assert [o.unavailable for o in outages] == [True, False]
            assert "redis" in outages[0].cause
        async with coredis.Redis.from_url(server.url, decode_responses=True) as plain:
            spent = await plain.hget(RedisKeys().governor("spent"), "fleet")
            assert float(spent or 0) == 0.03


async def test_the_shared_governor_on_a_three_master_cluster(
    redis_cluster: RedisClusterNodes,
) -> None:
    async with open_redis(redis_cluster.url) as redis:
        a, b = node(redis, "a"), node(redis, "b")
        a.submit("a1")
        a.submit("a2")
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == ["a1", "a2"]
        b.submit("b1")
        await b.sync_once()
        assert started(b.poll(trio.current_time())) == []
        a.turn_ended("a1", now=trio.current_time(), cost_usd=0.01)
        a.execution_ended("a1")
        a.observe(
            RetryNotice(error_status=429, delay_ms=20_000), now=trio.current_time(), wall_now=0
        )
        await a.sync_once()
        await b.sync_once()
        assert b.local.paused_until is not None
        assert b.statistics().spent_usd == 0.01
        assert b.statistics().limit == 1


async def test_a_gateway_reads_the_shared_figures(redis_server: Any) -> None:
    async with open_redis(redis_server.url) as redis:
        assert await shared_figures(redis) is None  # no worker shares a governor yet
        a, b = node(redis, "a"), node(redis, "b")
        a.submit("a1")
        await a.sync_once()
        a.poll(trio.current_time())
        a.turn_ended("a1", now=trio.current_time(), cost_usd=0.02)
        b.observe(
            RetryNotice(error_status=429, delay_ms=60_000), now=trio.current_time(), wall_now=0
        )
        await a.sync_once()
        await b.sync_once()
        figures = await shared_figures(redis)
        assert figures is not None
        assert (figures.max_live, figures.running, figures.cluster_running) == (4, 1, 1)
        assert (figures.starts, figures.rejections, figures.spent_usd) == (1, 1, 0.02)
        assert figures.limit == 1  # 2 halved by the rejection
        assert figures.paused
        assert figures.resumes_at is not None


async def test_a_node_that_closes_gives_its_leases_back(redis_server: Any) -> None:
    async with open_redis(redis_server.url) as redis:
        a = node(redis, "a")
        a.submit("a1")
        a.submit("a2")
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == ["a1", "a2"]
        leases = RedisKeys().governor("leases")
        assert await redis.zcard(leases) == 2
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.sync, lambda _notices: None)
            await trio.sleep(0.1)
            nursery.cancel_scope.cancel()
        assert await redis.zcard(leases) == 0


async def test_two_fleets_on_one_redis_run_at_most_the_shared_limit(redis_server: Any) -> None:
    """Two fleets (as two workers) with their governors shared in Redis: never more turns at
    once across both than the cluster's limit, a 429 on one pauses the other, every session
    completes."""
    from claude_trio import ExecuteParams
    from claude_trio.actors.cluster.governor import shared_governor
    from claude_trio.actors.fanout.fleet import open_fleet
    from claude_trio.protocol.session.events import Result
    from claude_trio.testing import FakeCLI, FakeTurn

    running = 0
    most = 0
    rejected = False

    async def script(turn: FakeTurn) -> None:
        nonlocal running, most, rejected
        running += 1
        most = max(most, running)
        if not rejected:
            rejected = True
            await turn.api_retry(1, max_retries=3, retry_delay_ms=300, error_status=429)
        await turn.sleep(0.2)
        running -= 1
        await turn.text("ok")
        await turn.result(cost_usd=0.01)

    governor = GovernorConfig(max_live=3, initial_limit=2, resume_jitter=0.05)
    async with open_redis(redis_server.url) as redis, AsyncExitStack() as stack:
        fleets = []
        for name in ("w0", "w1"):
            fleets.append(
                await stack.enter_async_context(
                    open_fleet(
                        max_live=3,
                        transport_factory=FakeCLI(script),
                        governor=governor,
                        governor_state=shared_governor(
                            redis, SharedGovernorConfig(node=name, poll_interval=0.05)
                        ),
                    )
                )
            )
        with trio.fail_after(30):
            sessions = [
                await fleets[i % 2].start(ExecuteParams(prompt=f"item {i}")) for i in range(8)
            ]
            results = [await s.result() for s in sessions]
        figures = [f.statistics().governor for f in fleets]
        spent = await redis.hget(RedisKeys().governor("spent"), "fleet")
    assert all(isinstance(t.terminal, Result) and not t.terminal.is_error for t in results)
    assert most <= 2  # the limit began at 2 and the 429 halved it: never more across both
    assert all(f is not None and f.rejections == 1 for f in figures)
    assert sum(f.starts for f in figures if f is not None) == 8
    assert float(spent or 0) == 0.08  # both fleets' turns, one budget counter


async def test_a_client_of_a_cluster_gateway_follows_the_shared_figures(
    redis_server: Any,
) -> None:
    """Through a real gateway over ``RedisFleet``: the figures the nodes share in Redis, pushed
    to a client that follows them as the nodes change them (no worker runs here: two
    governor states act as two nodes)."""
    with trio.fail_after(20):
        async with (
            open_gateway(redis_server.url) as (_, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=GATEWAY_TOKEN) as gw,
            gw.follow_governor() as feed,
            open_redis(redis_server.url) as redis,
        ):
            assert await feed.receive() is None  # no node shares a governor yet
            a, b = node(redis, "a"), node(redis, "b")
            a.submit("a1")
            await a.sync_once()
            a.poll(trio.current_time())
            running = await feed.receive()
            while running is None or running.starts < 1:  # a read between a's two scripts
                running = await feed.receive()
            assert (running.cluster_running, running.starts, running.paused) == (1, 1, False)
            b.observe(
                RetryNotice(error_status=429, delay_ms=60_000), now=trio.current_time(), wall_now=0
            )
            await b.sync_once()
            paused = await feed.receive()
            while paused is None or not paused.paused:
                paused = await feed.receive()
            assert paused == await shared_figures(redis)  # as the nodes left them
            assert (paused.paused, paused.rejections, paused.limit) == (True, 1, 1)
            with trio.move_on_after(1.5):  # three reads of the gateway: nothing changed
                await feed.receive()
                raise AssertionError("the same figures were pushed again")


ONE_EACH = GovernorConfig(
    max_live=2, initial_limit=1, starts_per_second=1000.0, start_burst=10, resume_jitter=0.0
)


async def holding_the_limit(redis: Any, config: GovernorConfig = ONE_EACH) -> Any:
    """Node "x" running as many executions as the shared limit allows."""
    x = node(redis, "x", config)
    keys = [f"x{i}" for i in range(config.initial_limit or 1)]
    for key in keys:
        x.submit(key)
    await x.sync_once()
    assert started(x.poll(trio.current_time())) == keys
    return x


async def room_for(x: Any, *keys: str) -> None:
    for key in keys:
        x.execution_ended(key)
    await x.sync_once()


async def heads(redis: Any) -> dict[str, str]:
    return dict(await redis.hgetall(RedisKeys().governor("waiting")))


async def the_longest_waiting_open_starts_first(url: str) -> None:
    async with open_redis(url) as redis:
        x = await holding_the_limit(redis)
        a, b = node(redis, "a", ONE_EACH), node(redis, "b", ONE_EACH)
        a.submit("a1")
        await a.sync_once()  # the limit is held: A's head waits
        await trio.sleep(0.05)
        b.submit("b1")
        await b.sync_once()
        assert set(await heads(redis)) == {"a", "b"}
        await room_for(x, "x0")
        # B asks first, but A's open has waited longer: B yields the one place to it.
        await b.sync_once()
        assert started(b.poll(trio.current_time())) == []
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == ["a1"]
        assert set(await heads(redis)) == {"b"}  # A's head started; B's waits on
        await room_for(a, "a1")
        await b.sync_once()
        assert started(b.poll(trio.current_time())) == ["b1"]
        assert await heads(redis) == {}


async def test_a_freed_place_goes_to_the_open_that_waited_longest_on_any_node(
    redis_server: Any,
) -> None:
    await the_longest_waiting_open_starts_first(redis_server.url)


async def test_the_longest_waiting_open_starts_first_on_a_three_master_cluster(
    redis_cluster: RedisClusterNodes,
) -> None:
    await the_longest_waiting_open_starts_first(redis_cluster.url)


async def test_a_higher_priority_on_another_node_starts_before_an_older_open(
    redis_server: Any,
) -> None:
    async with open_redis(redis_server.url) as redis:
        x = await holding_the_limit(redis)
        a, b = node(redis, "a", ONE_EACH), node(redis, "b", ONE_EACH)
        a.submit("a1")
        await a.sync_once()
        await trio.sleep(0.05)
        b.submit("b1", priority=5)
        await b.sync_once()
        await room_for(x, "x0")
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == []  # yields to B's higher priority
        await b.sync_once()
        assert started(b.poll(trio.current_time())) == ["b1"]


async def test_a_node_yields_only_the_places_the_nodes_ahead_of_it_need(
    redis_server: Any,
) -> None:
    two = attrs.evolve(ONE_EACH, initial_limit=2)
    async with open_redis(redis_server.url) as redis:
        x = await holding_the_limit(redis, two)
        a, b = node(redis, "a", two), node(redis, "b", two)
        a.submit("a1")
        await a.sync_once()
        await trio.sleep(0.05)
        b.submit("b1")
        await b.sync_once()
        await room_for(x, "x0", "x1")  # two places, one node (A) ahead of B
        await b.sync_once()
        assert started(b.poll(trio.current_time())) == ["b1"]
        await a.sync_once()
        assert started(a.poll(trio.current_time())) == ["a1"]


async def test_the_head_of_a_dead_node_or_of_a_queue_emptied_holds_nobody_back(
    redis_server: Any,
) -> None:
    async with open_redis(redis_server.url) as redis:
        x = await holding_the_limit(redis)
        dead, gone, b = (node(redis, n, ONE_EACH) for n in ("dead", "gone", "b"))
        for waiting in (dead, gone):
            waiting.submit(f"{waiting.shared.node}1")
            await waiting.sync_once()
        await trio.sleep(0.05)
        b.submit("b1")
        await b.sync_once()
        assert set(await heads(redis)) == {"dead", "gone", "b"}
        # "dead" stops without a word (its registration lapses); "gone"'s open is cancelled.
        await redis.zrem(RedisKeys().governor("nodes"), ["dead"])
        assert gone.cancel("gone1")
        await gone.sync_once()
        assert set(await heads(redis)) == {"dead", "b"}
        await room_for(x, "x0")
        await b.sync_once()
        assert started(b.poll(trio.current_time())) == ["b1"]
        assert await heads(redis) == {}  # the dead node's head was dropped on the way
