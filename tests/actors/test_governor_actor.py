"""The governor actor under ``autojump_clock``: the shared pause, the staggered resume, the
budget stop and ``on_budget="abort"``, at exact virtual times (the jitter fixed)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from claude_trio.actors.fanout.governor import Governor
from claude_trio.protocol.fanout.governor import (
    BudgetFigures,
    GovernorConfig,
    GovernorRules,
    SharedStateOutage,
)
from claude_trio.protocol.session.events import Retry, TextDelta, WarningEvent

WALL = 1_800_000_000.0  # the wall clock at trio's time 0


class Recorder:
    """The fleet's side: what the governor decided, and when (virtual time)."""

    def __init__(self) -> None:
        self.started: list[tuple[float, str]] = []
        self.refused: list[tuple[float, str, BudgetFigures]] = []
        self.aborted: list[tuple[float, str, BudgetFigures]] = []

    def start(self, key: str) -> None:
        self.started.append((trio.current_time(), key))

    def refuse(self, key: str, figures: BudgetFigures) -> None:
        self.refused.append((trio.current_time(), key, figures))

    def abort(self, key: str, figures: BudgetFigures) -> None:
        self.aborted.append((trio.current_time(), key, figures))


@asynccontextmanager
async def open_governor(
    recorder: Recorder, jitter_draw: float = 0.5, **config: Any
) -> AsyncIterator[Governor[str]]:
    settings = {"max_live": 4, "starts_per_second": 2.0, "start_burst": 1} | config
    rules: GovernorRules[str] = GovernorRules(
        GovernorConfig(**settings), now=trio.current_time(), random=lambda: jitter_draw
    )
    governor = Governor(
        rules,
        start=recorder.start,
        refuse=recorder.refuse,
        abort=recorder.abort,
        wall_clock=lambda: WALL + trio.current_time(),
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(governor.run)
        yield governor
        nursery.cancel_scope.cancel()


async def test_starts_are_spaced_by_the_token_bucket(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    async with open_governor(recorder) as governor:
        for key in "abcd":
            governor.submit(key)
        assert governor.position("d") == 3
        await trio.sleep(10)
        assert governor.position("d") is None
    # one token (burst 1) at t=0, then one every 0.5 s (2 a second)
    assert recorder.started == [(0.0, "a"), (0.5, "b"), (1.0, "c"), (1.5, "d")]


async def test_a_429_pauses_every_start_and_the_resume_is_staggered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    async with open_governor(
        recorder, max_live=8, resume_jitter=1.0, jitter_draw=0.25, decrease_factor=0.5
    ) as governor:
        governor.submit("a")
        await trio.sleep(1)  # a runs from t=0
        # a's CLI is told to retry after 3 s: the fleet pauses until 1 + 3 + 1.0 * 0.25
        governor.signal(
            Retry(attempt=1, max_retries=10, delay_ms=3000, error_status=429, error="rate_limit")
        )
        governor.signal(TextDelta(text="irrelevant"))  # not a signal: nothing happens
        figures = governor.figures()
        assert figures.paused
        assert figures.resumes_at == pytest.approx(WALL + 4.25)
        assert figures.limit == 4  # 8 halved on the rejection
        notices = governor.notices()
        assert [n.kind for n in notices] == ["paused", "limit_changed"]
        assert notices[0].resumes_at == pytest.approx(WALL + 4.25)
        assert "paused: rate limit (API retry after 429), resumes" in notices[0].message
        for key in "bcde":
            governor.submit(key)
        await trio.sleep(10)
        assert governor.figures().waiting == 1  # the limit (4) holds e while a-d run
        governor.execution_ended("a")
        await trio.sleep(10)
    starts = recorder.started
    assert starts[0] == (0.0, "a")
    # resumed at 4.25 with the bucket empty: b one token later (4.75), then one every 0.5 s;
    # e when a ends (t=11)
    assert starts[1:] == [(4.75, "b"), (5.25, "c"), (5.75, "d"), (11.0, "e")]
    kinds = [n.kind for n in governor.notices()]
    assert kinds == ["paused", "limit_changed", "resumed"]


async def test_a_rejected_rate_limit_warning_pauses_until_its_reset(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    async with open_governor(recorder, resume_jitter=0.0) as governor:
        # the fields a warning decoded from the wire keeps: the reset is 7 s from now
        governor.signal(
            WarningEvent(
                message="rate limit status 'rejected'",
                code="rate_limit",
                rate_limit_status="rejected",
                resets_at=WALL + 7.0,
                rate_limit_type="five_hour",
            )
        )
        governor.submit("a")
        await trio.sleep(20)
    assert recorder.started == [(7.5, "a")]  # the reset, then one token later


async def test_the_budget_stops_new_starts_and_running_ones_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    async with open_governor(recorder, budget_usd=1.0) as governor:
        governor.submit("a")
        governor.submit("b")
        await trio.sleep(1)
        assert [k for _, k in recorder.started] == ["a", "b"]
        governor.submit("c")
        governor.turn_ended("a", 0.75, None, None)
        governor.turn_ended("b", 0.5, None, None)  # 1.25 spent: over by b's running turn
        await trio.sleep(1)
        figures = governor.figures()
        assert (figures.spent_usd, figures.overshoot_usd, figures.refusals) == (1.25, 0.25, 1)
    assert [k for _, k in recorder.started] == ["a", "b"]
    ((when, key, refused),) = recorder.refused
    assert (when, key) == (1.0, "c")
    assert refused == BudgetFigures(
        scope="fleet", name=None, budget_usd=1.0, spent_usd=1.25, running=2
    )
    assert recorder.aborted == []  # on_budget="finish"
    (reached,) = [n for n in governor.notices() if n.kind == "budget_reached"]
    # reached on b's turn, with b still running: what the overshoot is bounded by
    assert reached.budget == BudgetFigures(
        scope="fleet", name=None, budget_usd=1.0, spent_usd=1.25, running=2
    )


async def test_on_budget_abort_aborts_the_running_executions_of_the_scope(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    async with open_governor(
        recorder, label_budgets_usd={"team": 0.5}, on_budget="abort"
    ) as governor:
        governor.submit("a", label="team")
        governor.submit("b", label="team")
        governor.submit("x", label="other")
        await trio.sleep(2)
        governor.turn_ended("a", 0.5, None, None)
        await trio.testing.wait_all_tasks_blocked()
    assert sorted(k for _, k, _ in recorder.aborted) == ["a", "b"]  # not x: another label
    assert {when for when, _, _ in recorder.aborted} == {2.0}
    assert recorder.aborted[0][2].scope == "label"


async def test_a_shared_state_outage_is_noted_when_it_starts_and_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What a cluster's shared governor state tells (``SharedStateOutage``) becomes a notice
    people see: kept with the others and logged, a warning while new starts wait."""
    recorder = Recorder()
    with caplog.at_level(logging.INFO, logger="claude_trio"):
        async with open_governor(recorder) as governor:
            governor._noted([SharedStateOutage(unavailable=True, cause="redis: refused")])
            governor._noted([SharedStateOutage(unavailable=False)])
            notices = governor.notices()
    assert [(n.kind, n.message) for n in notices] == [
        ("shared_state_unavailable", "shared state unavailable, new starts wait: redis: refused"),
        ("shared_state_back", "shared state back, starts resume"),
    ]
    logged = [r.levelname for r in caplog.records if "shared state" in r.getMessage()]
    assert logged == ["WARNING", "INFO"]


async def test_the_figures_of_one_pause_are_equal_however_often_they_are_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The wall clock moves a little against the host's between two reads, as real clocks
    # do: the pause's end is read in wall-clock time once, so a gateway that pushes the
    # figures when they change does not push them again for nothing.
    drift = iter(range(1, 10**6))
    rules: GovernorRules[str] = GovernorRules(
        GovernorConfig(max_live=4, resume_jitter=0.0), now=trio.current_time(), random=lambda: 0.5
    )
    recorder = Recorder()
    governor = Governor(
        rules,
        start=recorder.start,
        refuse=recorder.refuse,
        abort=recorder.abort,
        wall_clock=lambda: WALL + trio.current_time() + next(drift) * 1e-6,
    )
    retry = Retry(attempt=1, max_retries=10, delay_ms=5000, error_status=429)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(governor.run)
        governor.signal(retry)
        first = governor.figures()
        await trio.sleep(1)
        assert first.paused
        assert governor.figures() == first
        governor.signal(attrs.evolve(retry, delay_ms=9000))  # a later reset extends it
        extended = governor.figures()
        assert extended.resumes_at is not None
        assert first.resumes_at is not None
        assert extended.resumes_at == pytest.approx(first.resumes_at + 5.0, abs=0.01)
        assert governor.figures() == extended
        nursery.cancel_scope.cancel()
