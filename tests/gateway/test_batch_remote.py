"""``run_batch`` through ``connect_gateway``: the same results as on a local fleet, a server
at its per-client limit (the start is tried again), a cut connection, and cancellation that
aborts the server's sessions (real sockets on 127.0.0.1, FakeCLI sessions)."""

from __future__ import annotations

import pytest
import trio
from gateway_kit import TOKEN, gateway
from proxy_kit import cut_proxy

from claude_trio import ExecuteParams
from claude_trio import batch as batch_module
from claude_trio.batch import BatchItem, BatchResult, RetryPolicy, run_batch
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.protocol.fanout.governor import GovernorFigures
from claude_trio.protocol.fanout.remote import GatewayLimits
from claude_trio.testing import FakeCLI, FakeTurn

FAST = ClientConfig(backoff_base=0.01, backoff_max=0.05, close_timeout=1.0)
QUICK_RETRY = RetryPolicy(retries=30, base=0.01, cap=0.05)


def items(n: int) -> list[BatchItem]:
    return [BatchItem(key=f"k{i}", params=ExecuteParams(prompt=f"job {i}")) for i in range(n)]


async def answer(turn: FakeTurn) -> None:
    for word in ("the ", "answer ", "to ", turn.prompt):
        await turn.text(word)
        await turn.sleep(0.005)
    await turn.result(cost_usd=0.25)


async def test_a_remote_batch_gives_every_result_once_even_at_the_server_s_limits() -> None:
    # 12 items, 6 at a time, against a server that lets a client have 3 sessions at once:
    # the refused starts are tried again until each item ran, exactly once to its end.
    limits = GatewayLimits(max_sessions_per_client=3, max_waiting_per_client=1)
    fake = FakeCLI(answer)
    results: list[BatchResult] = []

    async def on_result(result: BatchResult) -> None:
        results.append(result)

    with trio.fail_after(30):
        async with (
            # No governor: this is about the server's per-client limits, and the governor's
            # slow start would keep sessions open longer than the batch's quick retries wait.
            gateway(
                fake, limits=limits, allowed_origins=None, fleet_options={"governor": None}
            ) as (fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=FAST) as gw,
        ):
            report = await run_batch(
                items(12), gw, max_live=6, retry=QUICK_RETRY, on_result=on_result
            )
            listed = await gw.list()
    assert sorted(r.key for r in results) == sorted(f"k{i}" for i in range(12))
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert {r.text for r in results} == {f"the answer to job {i}" for i in range(12)}
    assert report.progress.cost_usd == pytest.approx(12 * 0.25)
    # one server session per item: refused starts never started one
    assert len(fake.transports) == 12
    assert sorted(s.label or "" for s in listed) == sorted(f"k{i}" for i in range(12))
    assert any(r.attempts > 1 for r in results)  # the limit was met
    assert fleet.statistics().finished == 12


async def test_a_remote_batch_survives_a_cut_connection() -> None:
    fake = FakeCLI(answer)
    cut_once = False

    with trio.fail_after(30):
        async with (
            gateway(fake, allowed_origins=None) as (_, port),
            cut_proxy(port) as proxy,
            connect_gateway(proxy.url, token=TOKEN, config=FAST) as gw,
        ):

            async def on_result(result: BatchResult) -> None:
                nonlocal cut_once
                if not cut_once:
                    cut_once = True
                    proxy.cut()

            report = await run_batch(items(6), gw, max_live=3, on_result=on_result)
    assert sorted(r.key for r in report.results) == [f"k{i}" for i in range(6)]
    assert all(r.ok for r in report.results)
    assert gw.statistics().connections >= 2


async def test_cancelling_a_remote_batch_aborts_its_sessions_on_the_server() -> None:
    started = trio.Event()

    async def forever(turn: FakeTurn) -> None:
        await turn.text("working")
        started.set()
        await turn.sleep(1000)

    fake = FakeCLI(forever)
    with trio.fail_after(30):
        async with (
            gateway(fake, allowed_origins=None) as (fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=FAST) as gw,
        ):
            async with trio.open_nursery() as nursery:

                async def batch() -> None:
                    await run_batch(items(2), gw, max_live=2)

                nursery.start_soon(batch)
                await started.wait()
                nursery.cancel_scope.cancel()
            sessions = fleet.sessions()
            assert len(sessions) >= 1
            for session in sessions:
                await session.wait_ended()
    assert sum(t.interrupts for t in fake.transports) == len(sessions)


async def test_a_remote_batch_shows_the_server_s_governor_pause_as_it_is_pushed() -> None:
    """``claude-trio batch --remote``'s display follows the server's governor (the gateway
    pushes its figures as they change): the pause a session's 429 causes is shown."""

    async def rate_limited(turn: FakeTurn) -> None:
        await turn.sleep(0.2)
        await turn.api_retry(1, max_retries=3, retry_delay_ms=1500, error_status=429)
        await turn.sleep(1.5)
        await turn.result(cost_usd=0.01)

    class Display:
        def __init__(self) -> None:
            self.shown: list[GovernorFigures] = []

        def governor(self, figures: GovernorFigures) -> None:
            self.shown.append(figures)

    display = Display()
    with trio.fail_after(20):
        async with (
            gateway(FakeCLI(rate_limited), allowed_origins=None) as (fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=FAST) as gw,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(batch_module._watch_governor, gw, display)
            report = await run_batch(items(1), gw, max_live=1, retry=QUICK_RETRY)
            # the figures after the batch, as the server has them, pushed at its next read
            while not display.shown or display.shown[-1] != fleet.statistics().governor:  # noqa: ASYNC110
                await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
    assert report.progress.done == 1
    paused = [f for f in display.shown if f.paused]
    assert paused
    assert paused[0].rejections == 1
    # Pushed as they change, not asked every half second: no figures twice in a row (the
    # pause alone lasts three reads).
    assert all(a != b for a, b in zip(display.shown, display.shown[1:], strict=False))
