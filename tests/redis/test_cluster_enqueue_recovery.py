"""An ``open`` or ``continue`` with an idempotency key on a real three-master Redis Cluster,
where its claim, its record and the jobs stream are in different hash slots: a request that
stops between the steps (its gateway dies) is finished by its retry, and an item runs exactly
once whichever step it stopped after (``protocol/cluster/scripts.py``, the recovery rule)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from cluster_kit import open_worker

from claude_trio import ExecuteParams
from claude_trio.actors.cluster.enqueue import IdempotentEnqueue
from claude_trio.actors.cluster.fleet import open_redis_fleet
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.session.events import Result
from claude_trio.redis_url import open_redis
from claude_trio.testing import FakeCLI, FakeTurn, RedisClusterNodes

KEYS = RedisKeys()


class GatewayDied(Exception):
    """What a gateway process dying between two steps looks like to the test."""


class Counted:
    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def __call__(self, turn: FakeTurn) -> None:
        self.prompts.append(turn.prompt)
        await turn.text(f"ran {turn.prompt}")


def die_at(monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """Make the next enqueue stop right before ``step`` (once)."""
    original = getattr(IdempotentEnqueue, step)
    calls = 0

    async def dying(self: IdempotentEnqueue, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise GatewayDied(step)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(IdempotentEnqueue, step, dying)


@pytest.mark.parametrize("step", ["claim_only", "append_pending"])
async def test_an_open_stopped_between_steps_is_finished_by_its_retry_and_runs_once(
    redis_cluster: RedisClusterNodes, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    script = Counted()
    url = redis_cluster.url
    params = ExecuteParams(prompt="go")
    if step == "claim_only":
        # Stop after the claim, before the record is written.
        original = IdempotentEnqueue._write_pending
        calls = 0

        async def dying(self: IdempotentEnqueue, *args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise GatewayDied("after the claim")
            return await original(self, *args, **kwargs)

        monkeypatch.setattr(IdempotentEnqueue, "_write_pending", dying)
    else:
        die_at(monkeypatch, step)  # the record is written, the job not appended
    with trio.fail_after(60):
        async with (
            open_redis(url) as redis,
            open_worker(url, FakeCLI(script)) as worker,
            open_redis_fleet(redis, block=0.2) as first,
            open_redis_fleet(redis, block=0.2) as second,
        ):
            with pytest.raises(GatewayDied):
                await first.open(params, label="item", idempotency_key="item-1")
            retried = await second.open(params, label="item", idempotency_key="item-1")
            transcript = await retried.result()
            again = await second.open(params, label="item", idempotency_key="item-1")
            jobs = await redis.xlen(KEYS.jobs)
            pending = await redis.hget(KEYS.session(retried.id), "pending_job")
            listed = [info.session for info in await second.list()]
    assert isinstance(transcript.events[-1], Result)
    assert again.id == retried.id
    assert listed == [retried.id]
    assert script.prompts == ["go"]
    assert jobs == 1
    assert pending is None
    assert worker.worker.statistics().acknowledged == 1


async def test_a_job_appended_twice_runs_once(
    redis_cluster: RedisClusterNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway dies after appending the job and before clearing ``pending_job``: its
    retry appends the job again, and the workers run one of the two copies."""
    script = Counted()
    url = redis_cluster.url
    params = ExecuteParams(prompt="go")
    original = IdempotentEnqueue._appended
    calls = 0

    async def dying(self: IdempotentEnqueue, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise GatewayDied("after the append")
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(IdempotentEnqueue, "_appended", dying)
    with trio.fail_after(60):
        async with (
            open_redis(url) as redis,
            open_worker(url, FakeCLI(script), max_live=2) as worker,
            open_redis_fleet(redis, block=0.2) as fleet,
        ):
            with pytest.raises(GatewayDied):
                await fleet.open(params, idempotency_key="item-1")
            retried = await fleet.open(params, idempotency_key="item-1")
            await retried.result()
            jobs = await redis.xlen(KEYS.jobs)
            # Both copies are acknowledged (the second one without running).
            while worker.worker.statistics().acknowledged < 2:  # noqa: ASYNC110 (another task)
                await trio.sleep(0.05)
            pending = await redis.xpending(KEYS.jobs, KEYS.workers_group)
    assert jobs == 2
    assert script.prompts == ["go"]
    assert pending.pending == 0


async def test_a_continue_stopped_after_its_claim_is_finished_by_its_retry(
    redis_cluster: RedisClusterNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = Counted()
    url = redis_cluster.url
    with trio.fail_after(60):
        async with (
            open_redis(url) as redis,
            open_worker(url, FakeCLI(script)),
            open_redis_fleet(redis, block=0.2) as fleet,
        ):
            session = await fleet.open(ExecuteParams(prompt="one"))
            await session.result()
            original = IdempotentEnqueue._write_pending
            calls = 0

            async def dying(self: IdempotentEnqueue, *args: Any, **kwargs: Any) -> Any:
                nonlocal calls
                calls += 1
                if calls == 1:
                    raise GatewayDied("after the claim")
                return await original(self, *args, **kwargs)

            monkeypatch.setattr(IdempotentEnqueue, "_write_pending", dying)
            with pytest.raises(GatewayDied):
                await fleet.continue_(session.id, "two", idempotency_key="c-1")
            retried = await fleet.continue_(session.id, "two", idempotency_key="c-1")
            await retried.result()
            after = await fleet.continue_(session.id, "two", idempotency_key="c-1")
            final = await fleet.get(session.id)
            jobs = await redis.xlen(KEYS.jobs)
    assert after.id == session.id
    assert script.prompts == ["one", "two"]
    assert final.executions == 2
    assert jobs == 2
