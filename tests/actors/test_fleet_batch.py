"""``run_batch`` on a fleet of scripted fake CLIs, under ``autojump_clock``: the cap, retries
with their exact waits, the budget, results as they finish, and cancellation."""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing
from session_kit import CONFIG, assert_no_leak

from claude_trio import ExecuteParams, InvalidParamsError
from claude_trio.actors.fanout.fleet import Fleet, FleetSession, open_fleet
from claude_trio.batch import (
    BatchItem,
    BatchProgress,
    BatchResult,
    RetryPolicy,
    attempt_key,
    run_batch,
)
from claude_trio.errors import ConnectionLostError
from claude_trio.testing import FakeCLI, FakeTurn

NO_JITTER = RetryPolicy(retries=3, base=2.0, cap=60.0, jitter=False)


def items(n: int, prefix: str = "job") -> list[BatchItem]:
    return [BatchItem(key=f"k{i}", params=ExecuteParams(prompt=f"{prefix} {i}")) for i in range(n)]


async def one_second(turn: FakeTurn) -> None:
    await turn.sleep(1.0)
    await turn.text(f"done: {turn.prompt}")
    await turn.result(cost_usd=0.5)


async def test_at_most_max_live_items_run_and_every_result_is_handed_over_as_it_finishes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(one_second)
    handed: list[tuple[float, str]] = []
    peak = 0

    def progress(p: BatchProgress) -> None:
        nonlocal peak
        peak = max(peak, p.running)

    async def on_result(result: BatchResult) -> None:
        handed.append((trio.current_time(), result.key))

    start = trio.current_time()
    async with open_fleet(max_live=8, transport_factory=fake, config=CONFIG) as fleet:
        report = await run_batch(
            items(5), fleet, max_live=2, on_result=on_result, on_progress=progress
        )
    assert peak == 2
    assert len(fake.transports) == 5
    # 5 one-second items, 2 at a time: done at 1, 1, 2, 2, 3
    assert [round(t - start) for t, _ in handed] == [1, 1, 2, 2, 3]
    assert sorted(k for _, k in handed) == [f"k{i}" for i in range(5)]
    assert [r.key for r in report.results] == [k for _, k in handed]
    assert all(r.ok and r.attempts == 1 and r.cost_usd == 0.5 for r in report.results)
    assert {r.text for r in report.results} == {f"done: job {i}" for i in range(5)}
    assert report.progress.done == 5
    assert report.progress.cost_usd == 2.5
    assert report.not_started == ()
    assert_no_leak(fake)


async def test_an_overloaded_attempt_is_retried_after_the_longer_of_backoff_and_retry_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tries: dict[str, int] = {}

    async def flaky(turn: FakeTurn) -> None:
        n = tries[turn.prompt] = tries.get(turn.prompt, 0) + 1
        if turn.prompt == "busy" and n == 1:
            # the CLI retried once by itself, told to wait 7 s (retry-after), then gave up
            await turn.api_retry(1, max_retries=1, retry_delay_ms=7000, error_status=529)
            await turn.api_error(529, "Overloaded", error="server_error")
        elif turn.prompt == "limited" and n <= 2:
            await turn.api_error(429, "rate limited", error="rate_limit")
        else:
            await turn.text("fine")

    fake = FakeCLI(flaky)
    batch = [
        BatchItem(key="busy", params=ExecuteParams(prompt="busy")),
        BatchItem(key="limited", params=ExecuteParams(prompt="limited")),
    ]
    finished: dict[str, float] = {}

    async def on_result(result: BatchResult) -> None:
        finished[result.key] = trio.current_time()

    start = trio.current_time()
    # The batch's own retries (the fleet's governor would also pause starts on the 529).
    async with open_fleet(transport_factory=fake, config=CONFIG, governor=None) as fleet:
        report = await run_batch(batch, fleet, retry=NO_JITTER, on_result=on_result)
    by_key = {r.key: r for r in report.results}
    assert (by_key["busy"].ok, by_key["busy"].attempts) == (True, 2)
    assert (by_key["limited"].ok, by_key["limited"].attempts) == (True, 3)
    # busy waited retry-after (7 s > the 2 s backoff); limited waited 2 s then 4 s
    assert finished["busy"] - start == pytest.approx(7.0, abs=0.01)
    assert finished["limited"] - start == pytest.approx(6.0, abs=0.01)
    assert tries == {"busy": 2, "limited": 3}


async def test_other_failures_are_not_retried_and_retries_run_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def failing(turn: FakeTurn) -> None:
        if turn.prompt == "bad":
            await turn.api_error(400, "prompt is too long", error="invalid_request")
        else:
            await turn.api_error(529, "Overloaded")

    fake = FakeCLI(failing)
    batch = [
        BatchItem(key="bad", params=ExecuteParams(prompt="bad")),
        BatchItem(key="always", params=ExecuteParams(prompt="always busy")),
    ]
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        report = await run_batch(batch, fleet, retry=RetryPolicy(retries=2, jitter=False))
    by_key = {r.key: r for r in report.results}
    assert (by_key["bad"].ok, by_key["bad"].attempts) == (False, 1)
    assert "HTTP 400" in (by_key["bad"].error or "")
    assert (by_key["always"].ok, by_key["always"].attempts) == (False, 3)
    assert "HTTP 529" in (by_key["always"].error or "")
    assert report.progress.failed == 2
    assert len(fake.transports) == 4


async def test_the_budget_stops_new_items_and_lets_running_ones_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(one_second)
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        report = await run_batch(items(10), fleet, max_live=2, budget=1.6, spent=0.5)
    # 0.5 spent before; each item costs 0.5: after the first two (1.5 spent, under 1.6) two
    # more start; at 2.5 the budget is reached and nothing else starts.
    assert len(report.results) == 4
    assert report.not_started == tuple(f"k{i}" for i in range(4, 10))
    assert report.progress.spent == 2.5
    assert report.progress.not_started == 6
    assert len(fake.transports) == 4


async def test_cancelling_the_batch_aborts_its_sessions_and_hands_over_only_finished_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(turn: FakeTurn) -> None:
        if turn.prompt == "job 0":
            await turn.text("quick")
            return
        await turn.text("working")
        await turn.sleep(1000)

    fake = FakeCLI(slow)
    handed: list[str] = []

    async def on_result(result: BatchResult) -> None:
        handed.append(result.key)

    # No governor: its default limit (two turns at first) could hold "job 0" behind the two
    # endless ones; this test is about the batch's cancellation.
    async with open_fleet(transport_factory=fake, config=CONFIG, governor=None) as fleet:
        with trio.move_on_after(10):
            await run_batch(items(3), fleet, max_live=3, on_result=on_result)
        # the fleet is still open: the batch's own sessions were aborted by the batch
        assert all(fs.ended for fs in fleet.sessions())
        for fs in fleet.sessions():
            await fs.wait_closed()
        assert fleet.statistics().live == 0
    assert handed == ["k0"]
    assert sum(t.interrupts for t in fake.transports) == 2
    assert_no_leak(fake)


async def test_bad_arguments_are_refused_by_name() -> None:
    async with open_fleet(transport_factory=FakeCLI()) as fleet:
        for kwargs, field in (
            ({"max_live": 0}, "max_live"),
            ({"budget": -1}, "budget"),
        ):
            with pytest.raises(InvalidParamsError) as caught:
                await run_batch(items(1), fleet, **kwargs)  # type: ignore[arg-type]
            assert caught.value.field == field
        with pytest.raises(InvalidParamsError, match="runner"):
            await run_batch(items(1), "fleet")  # type: ignore[arg-type]
        with pytest.raises(InvalidParamsError, match="unique keys"):
            await run_batch(items(1) + items(1), fleet)


async def test_jitter_comes_from_the_rng_given(autojump_clock: trio.testing.MockClock) -> None:
    async def busy_once(turn: FakeTurn) -> None:
        if turn.process.index == 1:
            await turn.api_error(529, "Overloaded")
        else:
            await turn.text("ok")

    waits = []
    for _ in range(2):
        start = trio.current_time()
        async with open_fleet(transport_factory=FakeCLI(busy_once), config=CONFIG) as fleet:
            await run_batch(items(1), fleet, retry=RetryPolicy(base=4.0), rng=random.Random(7))
        waits.append(trio.current_time() - start)
    assert waits[0] == pytest.approx(waits[1])
    assert 2.0 <= waits[0] <= 4.1


class LosesFirstReplies:
    """A host whose first ``open`` of each item starts the session and then loses the reply
    (what a client sees when the connection drops after the server acted)."""

    def __init__(self, fleet: Fleet) -> None:
        self._fleet = fleet
        self.keys: list[str | None] = []
        self.get = fleet.get
        self.list = fleet.list
        self.continue_ = fleet.continue_
        self.inbox = fleet.inbox

    async def open(
        self, params: ExecuteParams, *, label: str | None = None, idempotency_key: str | None = None
    ) -> FleetSession:
        self.keys.append(idempotency_key)
        session = await self._fleet.open(params, label=label, idempotency_key=idempotency_key)
        if self.keys.count(idempotency_key) == 1:
            raise ConnectionLostError("open: the connection dropped before its reply")
        return session


async def test_an_open_whose_reply_was_lost_is_retried_with_its_key_and_runs_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(one_second)
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        host = LosesFirstReplies(fleet)
        report = await run_batch(items(3), host, retry=NO_JITTER, run_id="run-1")
        listed = await fleet.list()
    assert len(fake.transports) == 3  # one CLI per item
    assert len(listed) == 3
    assert all(r.ok and r.attempts == 2 for r in report.results)
    assert sorted(host.keys) == sorted(
        attempt_key("run-1", f"k{i}", 1) for i in range(3) for _ in range(2)
    )


async def test_a_run_again_with_its_run_id_finds_the_sessions_it_opened(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(one_second)
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        first = await run_batch(items(2), fleet, run_id="run-1")
        again = await run_batch(items(2), fleet, run_id="run-1")
        other = await run_batch(items(2), fleet)  # a new run: new keys
    assert len(fake.transports) == 4
    assert sorted(r.text for r in again.results) == sorted(r.text for r in first.results)
    assert all(r.ok for r in other.results)
    with pytest.raises(InvalidParamsError, match="run_id"):
        await run_batch(items(1), fleet, run_id="x" * 129)
