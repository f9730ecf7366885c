"""The governor's rules: the adaptive limit, the shared pause, spaced starts, budgets, fairness."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pytest
from claude_agent_sdk import types as sdk
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.governor import (
    PROBE_BACKOFF_MAX,
    Abort,
    BudgetFigures,
    BudgetReached,
    GovernorConfig,
    GovernorRules,
    Idle,
    LimitChanged,
    Paused,
    RateLimitNotice,
    Refuse,
    Resumed,
    RetryNotice,
    Start,
    Wait,
    signal_of,
)
from claude_trio.protocol.session.events import Passthrough, Retry, WarningEvent

WALL = 1_800_000_000.0  # the wall clock at now=0 in these tests


def rules(*, jitter: float = 0.0, seed: int = 1, **config: Any) -> GovernorRules[str]:
    settings_ = {
        "max_live": 8,
        "resume_jitter": jitter,
        "starts_per_second": 1000.0,
        "start_burst": 100,
        **config,
    }
    return GovernorRules(GovernorConfig(**settings_), now=0.0, random=random.Random(seed).random)


def started(decisions: list[Any]) -> list[str]:
    return [d.key for d in decisions if isinstance(d, Start)]


def run_turn(gov: GovernorRules[str], key: str, now: float, cost: float = 0.0, **kw: Any) -> Any:
    return gov.turn_ended(key, now=now, cost_usd=cost, **kw)


# ---------------------------------------------------------------------------------------------
# Rule 1: the adaptive concurrency limit


def test_a_rejection_halves_the_limit_once_and_successes_raise_it_one_at_a_time() -> None:
    gov = rules(max_live=8, increase_after=3, decrease_interval=1.0, decrease_factor=0.5)
    for i in range(8):
        gov.submit(f"s{i}")
    assert started(gov.poll(0.0)) == [f"s{i}" for i in range(8)]

    notices = run_turn(gov, "s0", 1.0, api_error_status=429)
    assert LimitChanged(old=8, new=4, cause="rejected") in notices
    # The same push-back seen by the other sessions in the same second lowers it once.
    assert not [
        n for n in run_turn(gov, "s1", 1.5, api_error_status=529) if isinstance(n, LimitChanged)
    ]
    assert gov.limit == 4
    # A second later, with no more running than the limit, it is a new push-back.
    for key in ("s0", "s1", "s6", "s7"):
        gov.execution_ended(key)
    run_turn(gov, "s2", 2.0, api_error_status=529)
    assert gov.limit == 2

    assert run_turn(gov, "s3", 3.0) == []
    assert run_turn(gov, "s4", 3.0) == []
    assert run_turn(gov, "s5", 3.0) == [LimitChanged(old=2, new=3, cause="succeeded")]


def test_slow_start_grows_the_limit_by_half_a_round_until_the_first_rejection() -> None:
    gov = rules(
        max_live=16, initial_limit=2, increase_after=5, decrease_interval=0.0, decrease_factor=0.5
    )
    for i in range(16):
        gov.submit(f"s{i}")
    assert started(gov.poll(0.0)) == ["s0", "s1"]
    assert run_turn(gov, "s0", 1.0) == [LimitChanged(old=2, new=3, cause="succeeded")]
    # s1 started under two, as s0 did: together they show two at once, not four.
    assert run_turn(gov, "s1", 1.0) == []
    gov.execution_ended("s0")
    gov.execution_ended("s1")
    assert started(gov.poll(1.0)) == ["s2", "s3", "s4"]
    # A round of three turns started under three raises it to 3 + 3 // 2 = 4 at most.
    assert run_turn(gov, "s2", 2.0) == [LimitChanged(old=3, new=4, cause="succeeded")]
    assert run_turn(gov, "s3", 2.0) == []
    assert run_turn(gov, "s4", 2.0) == []
    for key in ("s2", "s3", "s4"):
        gov.execution_ended(key)
    assert started(gov.poll(2.0)) == ["s5", "s6", "s7", "s8"]
    # Under four: up to six.
    changes = [n for k in ("s5", "s6", "s7", "s8") for n in run_turn(gov, k, 3.0)]
    assert changes == [
        LimitChanged(old=4, new=5, cause="succeeded"),
        LimitChanged(old=5, new=6, cause="succeeded"),
    ]
    for key in ("s5", "s6", "s7", "s8"):
        gov.execution_ended(key)
    assert started(gov.poll(3.0)) == ["s9", "s10", "s11", "s12", "s13", "s14"]
    run_turn(gov, "s9", 4.0, api_error_status=429)  # 6 -> 3: slow start is over
    assert gov.limit == 3
    # Now raises are additive and count only turns started under the current limit (s10-s14
    # started under six, which is higher); the rejection ended a probe (slow start's last
    # raise), so the next raise takes twice increase_after (10) successes.
    for t, key in enumerate(("s10", "s11", "s12", "s13", "s14")):
        assert run_turn(gov, key, 5.0 + t) == []
    for key in ("s9", "s10", "s11", "s12", "s13", "s14"):
        gov.execution_ended(key)
    # (after a pause the start waits for one token of the bucket: 1 ms)
    assert started(gov.poll(12.0) + gov.poll(12.01)) == ["s15"]
    for t in range(4):  # five more (s15 started under three): ten
        assert run_turn(gov, "s15", 13.0 + t) == []
    assert run_turn(gov, "s15", 17.0) == [LimitChanged(old=3, new=4, cause="succeeded")]


def test_a_success_from_under_an_older_lower_limit_does_not_count_towards_a_raise() -> None:
    gov = rules(max_live=8, initial_limit=4, increase_after=2, decrease_factor=0.5)
    for key in "abcd":
        gov.submit(key)
    assert started(gov.poll(0.0)) == list("abcd")
    run_turn(gov, "a", 1.0, api_error_status=429)  # 4 -> 2: additive from now on
    assert gov.limit == 2
    for key in "abcd":
        gov.execution_ended(key)
    for key in "efgh":
        gov.submit(key)
    # (after a pause the start waits for one token of the bucket: 1 ms)
    assert started(gov.poll(10.0) + gov.poll(10.01)) == ["e", "f"]  # under two
    assert run_turn(gov, "e", 11.0) == []
    gov.execution_ended("e")
    assert started(gov.poll(11.0)) == ["g"]  # under two
    assert run_turn(gov, "g", 12.0) == [LimitChanged(old=2, new=3, cause="succeeded")]
    gov.execution_ended("g")
    # f started under two: its success says nothing about three.
    assert run_turn(gov, "f", 12.5) == []
    gov.execution_ended("f")
    assert started(gov.poll(13.0)) == ["h"]  # under three
    assert run_turn(gov, "h", 14.0) == []
    assert run_turn(gov, "h", 15.0) == [LimitChanged(old=3, new=4, cause="succeeded")]


def test_retries_of_the_executions_over_a_lowered_limit_do_not_lower_it_again() -> None:
    gov = rules(max_live=8, decrease_factor=0.5, decrease_interval=1.0)
    for key in "abcd":
        gov.submit(key)
    assert started(gov.poll(0.0)) == list("abcd")
    gov.observe(RetryNotice(error_status=429, delay_ms=1000), now=0.0, wall_now=WALL)
    assert gov.limit == 4  # 8 -> 4, and four run: not over it
    gov.observe(RetryNotice(error_status=429, delay_ms=1000), now=2.0, wall_now=WALL)
    assert gov.limit == 2  # a new push-back with four running at a limit of four
    # Four still run over the limit of two: their retries are the push-back it answered.
    for t in (3.0, 4.5, 6.0):
        gov.observe(RetryNotice(error_status=429, delay_ms=1000), now=t, wall_now=WALL)
        assert gov.limit == 2
    gov.execution_ended("a")
    gov.execution_ended("b")
    gov.observe(RetryNotice(error_status=429, delay_ms=1000), now=8.0, wall_now=WALL)
    assert gov.limit == 1  # two run at a limit of two: this one counts


def test_failed_probes_make_the_next_raise_wait_longer_until_a_raise_holds() -> None:
    gov = rules(max_live=8, initial_limit=2, increase_after=2, decrease_factor=0.7)
    key = iter(range(1000))
    now = 0.0

    def succeed(n: int) -> list[Any]:
        nonlocal now
        notices: list[Any] = []
        for _ in range(n):
            k = str(next(key))
            gov.submit(k)
            # (after a pause the start waits for one token of the bucket: 1 ms)
            assert started(gov.poll(now) + gov.poll(now + 0.01)) == [k]
            notices += run_turn(gov, k, now)
            gov.execution_ended(k)
            now += 1.0
        return [n for n in notices if isinstance(n, LimitChanged)]

    def reject() -> None:
        nonlocal now
        gov.observe(RetryNotice(error_status=429, delay_ms=0), now=now, wall_now=WALL)
        now += 1.0

    assert succeed(1) == [LimitChanged(old=2, new=3, cause="succeeded")]  # slow start
    reject()  # 3 -> 2: a failed probe, so the next raise waits for 4 successes, not 2
    assert gov.limit == 2
    assert succeed(3) == []
    assert succeed(1) == [LimitChanged(old=2, new=3, cause="succeeded")]
    reject()  # failed again: 8 successes now
    assert succeed(7) == []
    assert succeed(1) == [LimitChanged(old=2, new=3, cause="succeeded")]
    # This raise holds: the next one (after 8 more) brings the wait back to increase_after.
    assert succeed(8) == [LimitChanged(old=3, new=4, cause="succeeded")]
    assert succeed(2) == [LimitChanged(old=4, new=5, cause="succeeded")]


def test_the_wait_for_a_raise_after_failed_probes_is_capped() -> None:
    gov = rules(max_live=8, initial_limit=2, increase_after=1, decrease_factor=0.5)
    now = 0.0
    gov.submit("a")
    gov.poll(now)
    waits = []
    for _ in range(6):
        gov.observe(RetryNotice(error_status=429, delay_ms=0), now=now, wall_now=WALL)
        successes = 0
        while True:
            now += 1.0
            successes += 1
            if any(isinstance(n, LimitChanged) for n in run_turn(gov, "a", now)):
                break
        waits.append(successes)
    # The first rejection follows no raise (increase_after, 1); then each probe fails (the
    # next rejection follows its raise): 2, 4, 8, then the cap.
    assert waits == [1, 2, 4, 8, PROBE_BACKOFF_MAX, PROBE_BACKOFF_MAX]


def test_a_lowered_limit_holds_back_starts_until_fewer_run() -> None:
    gov = rules(max_live=4, default_retry_after=0.0, decrease_factor=0.5)
    for key in "abcdef":
        gov.submit(key)
    assert started(gov.poll(0.0)) == list("abcd")
    run_turn(gov, "a", 0.0, api_error_status=429)  # limit 4 -> 2, a pause of 0 s
    gov.execution_ended("a")
    gov.execution_ended("b")
    decisions = gov.poll(0.0)
    assert decisions == [Resumed(at=0.0), Wait(until=None, reason="concurrency")]
    gov.execution_ended("c")
    assert started(gov.poll(1.0)) == ["e"]
    assert gov.limit == 2
    assert len(gov.running) == 2


def test_the_limit_never_drops_below_one() -> None:
    gov = rules(max_live=2, decrease_interval=0.0)
    gov.submit("a")
    gov.poll(0.0)
    for t in range(5):
        run_turn(gov, "a", float(t), api_error_status=529)
    assert gov.limit == 1


# ---------------------------------------------------------------------------------------------
# Rule 7: a turn waiting for a person gives its place back


def test_an_execution_waiting_for_a_person_does_not_count_against_the_limit() -> None:
    gov = rules(max_live=4, initial_limit=2)
    for key in "abcd":
        gov.submit(key)
    assert started(gov.poll(0.0)) == ["a", "b"]
    gov.person_asked("a", "r1")
    gov.person_asked("a", "r2")  # two requests at once: it waits until both are resolved
    assert (gov.counted, gov.asking) == (1, frozenset({"a"}))
    assert started(gov.poll(0.0)) == ["c"]
    gov.person_answered("a", "r1")
    assert gov.counted == 2  # still waiting for r2
    gov.person_answered("a", "r2")
    # answered, it counts again at once: three counted over a limit of two, so d waits
    assert gov.counted == 3
    assert gov.poll(0.0)[-1] == Wait(until=None, reason="concurrency")
    gov.execution_ended("b")
    assert gov.poll(0.0)[-1] == Wait(until=None, reason="concurrency")
    gov.execution_ended("c")
    assert started(gov.poll(0.0)) == ["d"]
    assert gov.statistics().asking == 0


def test_only_running_executions_are_asked_for_and_an_end_forgets_the_requests() -> None:
    gov = rules(max_live=1)
    gov.submit("a")
    gov.submit("b")
    gov.person_asked("b", "r1")  # waiting for its start: not running, nothing to give back
    assert gov.asking == frozenset()
    assert started(gov.poll(0.0)) == ["a"]
    gov.person_asked("a", "r1")
    assert started(gov.poll(0.0)) == ["b"]
    gov.execution_ended("a")  # ended with r1 pending (aborted, say)
    assert gov.asking == frozenset()
    gov.person_answered("a", "r1")  # a late resolution of an ended execution changes nothing
    assert gov.counted == 1


# ---------------------------------------------------------------------------------------------
# Rules 2 and 3: the pause, its jitter, the staggered resume


def test_a_rejected_rate_limit_event_pauses_every_start_until_its_reset_plus_jitter() -> None:
    gov = rules(jitter=2.0, seed=7, starts_per_second=2.0, start_burst=4)
    jitter = 2.0 * random.Random(7).random()
    notice = RateLimitNotice(status="rejected", resets_at=WALL + 30, rate_limit_type="five_hour")

    notices = gov.observe(notice, now=10.0, wall_now=WALL + 10)

    assert notices == [
        Paused(until=30.0 + jitter, cause="rate limit rejected (five_hour)"),
        LimitChanged(old=8, new=5, cause="rejected"),  # 8 x 0.7, rounded down
    ]
    for key in "abc":
        gov.submit(key)
    assert gov.poll(29.0) == [Wait(until=30.0 + jitter, reason="paused")]
    resume = 30.0 + jitter
    # The pause ends with an empty bucket: one start a token (0.5 s) apart, not all at once.
    assert gov.poll(resume) == [Resumed(at=resume), Wait(until=resume + 0.5, reason="spacing")]
    assert gov.poll(resume + 0.5) == [Start(key="a"), Wait(until=resume + 1.0, reason="spacing")]
    assert started(gov.poll(resume + 1.0)) == ["b"]
    assert gov.poll(resume + 1.5) == [Start(key="c"), Idle()]


def test_allowed_and_warning_statuses_do_not_pause() -> None:
    gov = rules()
    for status in ("allowed", "allowed_warning"):
        assert gov.observe(RateLimitNotice(status=status), now=0.0, wall_now=WALL) == []
    assert gov.paused_until is None
    assert gov.limit == 8


def test_a_pause_is_capped_at_max_pause_and_a_later_rejection_only_extends_it() -> None:
    gov = rules(max_pause=60.0)
    far = RateLimitNotice(status="rejected", resets_at=WALL + 5 * 3600)
    gov.observe(far, now=0.0, wall_now=WALL)
    assert gov.paused_until == 60.0
    # A shorter retry delay does not shorten it (nor lower the limit again within a second).
    assert gov.observe(RetryNotice(error_status=429, delay_ms=500), now=0.5, wall_now=WALL) == []
    assert gov.paused_until == 60.0
    # A reset already past pauses for no time at all.
    gov2 = rules()
    gov2.observe(RateLimitNotice(status="rejected", resets_at=WALL - 9), now=5.0, wall_now=WALL)
    assert gov2.paused_until == 5.0


def test_api_retries_pause_for_their_delay_only_on_429_529_or_overloaded() -> None:
    gov = rules()
    for retry in (RetryNotice(error_status=500, delay_ms=800), RetryNotice(error="ECONNRESET")):
        assert gov.observe(retry, now=0.0, wall_now=WALL) == []
    assert gov.paused_until is None
    notices = gov.observe(RetryNotice(error_status=529, delay_ms=1500), now=2.0, wall_now=WALL)
    assert notices == [
        Paused(until=3.5, cause="API retry after 529"),
        LimitChanged(old=8, new=5, cause="rejected"),
    ]
    gov.observe(RetryNotice(error="Overloaded", delay_ms=4000), now=2.0, wall_now=WALL)
    assert gov.paused_until == 6.0
    gov.observe(RetryNotice(error="rate_limit", delay_ms=5000), now=2.0, wall_now=WALL)
    assert gov.paused_until == 7.0
    assert gov.statistics().rejections == 3


def test_starts_are_spaced_by_the_token_bucket() -> None:
    gov = rules(starts_per_second=4.0, start_burst=2)
    for key in "abcd":
        gov.submit(key)
    assert gov.poll(0.0) == [Start(key="a"), Start(key="b"), Wait(until=0.25, reason="spacing")]
    assert gov.poll(0.25) == [Start(key="c"), Wait(until=0.5, reason="spacing")]
    assert gov.poll(0.5) == [Start(key="d"), Idle()]


# ---------------------------------------------------------------------------------------------
# Rule 4: budgets


def test_the_fleet_budget_refuses_new_starts_with_the_figures_and_reports_the_overshoot() -> None:
    gov = rules(budget_usd=1.0)
    for key in "abc":
        gov.submit(key)
    assert started(gov.poll(0.0)) == ["a", "b", "c"]
    gov.submit("d")
    gov.submit("e")
    gov.cancel("d")
    gov.execution_ended("c")
    assert run_turn(gov, "a", 1.0, cost=0.6) == []
    [reached] = run_turn(gov, "b", 1.0, cost=0.6)
    figures = BudgetFigures(scope="fleet", name=None, budget_usd=1.0, spent_usd=1.2, running=2)
    assert reached == BudgetReached(figures=figures)
    assert figures.overshoot_usd == pytest.approx(0.2)
    # "e" was waiting (it had a start coming): refused, never started.
    assert gov.poll(1.0) == [Refuse(key="e", reason="budget_exhausted", figures=figures), Idle()]
    gov.submit("f")
    [refused, _] = gov.poll(1.0)
    assert isinstance(refused, Refuse)
    # Running executions finish (on_budget="finish"), their cost is counted, it is reported once.
    assert run_turn(gov, "a", 2.0, cost=0.1) == []
    stats = gov.statistics()
    assert (stats.spent_usd, stats.budget_usd, stats.refusals) == (pytest.approx(1.3), 1.0, 2)
    assert stats.overshoot_usd == pytest.approx(0.3)


def test_on_budget_abort_aborts_the_running_executions_of_the_spent_scope_once() -> None:
    gov = rules(label_budgets_usd={"nightly": 0.5}, on_budget="abort")
    gov.submit("n1", label="nightly")
    gov.submit("n2", label="nightly")
    gov.submit("other", label="daily")
    assert started(gov.poll(0.0)) == ["n1", "n2", "other"]
    run_turn(gov, "n1", 1.0, cost=0.5)
    figures = BudgetFigures(scope="label", name="nightly", budget_usd=0.5, spent_usd=0.5, running=2)
    assert gov.poll(1.0) == [
        Abort(key="n1", reason="budget_exhausted", figures=figures),
        Abort(key="n2", reason="budget_exhausted", figures=figures),
        Idle(),
    ]
    assert gov.poll(1.1) == [Idle()]  # asked once


def test_a_principal_budget_refuses_only_that_principal() -> None:
    gov = rules(principal_budgets_usd={"alice": 0.2})
    gov.submit("a1", owner="alice", principal="alice")
    gov.poll(0.0)
    run_turn(gov, "a1", 0.0, cost=0.25)
    gov.submit("a2", owner="alice", principal="alice")
    gov.submit("b1", owner="bob", principal="bob")
    [refuse, start, idle] = gov.poll(0.0)
    assert isinstance(refuse, Refuse)
    assert refuse.key == "a2"
    assert (refuse.figures.scope, refuse.figures.name, refuse.figures.spent_usd) == (
        "principal",
        "alice",
        0.25,
    )
    assert (start, idle) == (Start(key="b1"), Idle())
    assert gov.spent_usd("principal", "alice") == 0.25


def test_a_zero_budget_starts_nothing() -> None:
    gov = rules(budget_usd=0.0)
    gov.submit("a")
    [refuse, _] = gov.poll(0.0)
    assert isinstance(refuse, Refuse)
    assert refuse.figures.spent_usd == 0.0


# ---------------------------------------------------------------------------------------------
# Rule 5: fair starts


def test_owners_take_turns_higher_priority_first_and_positions_are_visible() -> None:
    gov = rules(max_live=1)
    gov.submit("x")
    gov.poll(0.0)
    for key in ("a1", "a2", "a3"):
        gov.submit(key, owner="a")
    gov.submit("b1", owner="b")
    gov.submit("b2", owner="b")
    gov.submit("urgent", owner="c", priority=5)
    assert [gov.position(k) for k in ("urgent", "a1", "b1", "a2", "b2", "a3")] == list(range(6))
    assert gov.position("x") is None  # running, not waiting
    assert gov.cancel("a2")
    assert not gov.cancel("a2")
    order = []
    current = "x"
    for t in range(1, 10):
        gov.execution_ended(current)
        keys = started(gov.poll(float(t)))
        if not keys:
            break
        [current] = keys
        order.append(current)
    assert order == ["urgent", "a1", "b1", "a3", "b2"]


def test_bad_inputs_name_the_problem() -> None:
    with pytest.raises(InvalidParamsError, match="initial_limit"):
        GovernorConfig(max_live=2, initial_limit=3)
    with pytest.raises(InvalidParamsError, match="decrease_factor"):
        GovernorConfig(max_live=2, decrease_factor=1.0)
    with pytest.raises(InvalidParamsError, match=r"label_budgets_usd\['x'\]"):
        GovernorConfig(max_live=2, label_budgets_usd={"x": -1})
    with pytest.raises(InvalidParamsError, match="on_budget"):
        GovernorConfig(max_live=2, on_budget="stop")  # type: ignore[arg-type]
    gov = rules()
    gov.submit("a")
    with pytest.raises(ValueError, match="already submitted"):
        gov.submit("a")
    with pytest.raises(KeyError, match="start it first"):
        gov.turn_ended("a", now=0.0, cost_usd=0.1)
    gov.poll(0.0)
    with pytest.raises(InvalidParamsError, match="cost_usd"):
        gov.turn_ended("a", now=0.0, cost_usd=float("nan"))


# ---------------------------------------------------------------------------------------------
# What the rules read from our events


def test_signals_come_from_the_fields_our_events_carry() -> None:
    retry = Retry(attempt=1, max_retries=10, delay_ms=1200.0, error_status=429, error="rate_limit")
    assert signal_of(retry) == RetryNotice(error_status=429, delay_ms=1200.0, error="rate_limit")
    info = sdk.RateLimitInfo(
        status="rejected", resets_at=1_800_000_100, rate_limit_type="five_hour"
    )
    frame = sdk.RateLimitEvent(rate_limit_info=info, uuid="u", session_id="s")
    warning = WarningEvent(code="rate_limit", message="rate limit status 'rejected'", raw=frame)
    assert signal_of(warning) == RateLimitNotice(
        status="rejected", resets_at=1_800_000_100, rate_limit_type="five_hour"
    )
    allowed = Passthrough(
        frame_type="rate_limit_event", data={"status": "allowed", "resetsAt": 1_800_000_200}
    )
    assert signal_of(allowed) == RateLimitNotice(status="allowed", resets_at=1_800_000_200.0)
    # A warning without the CLI's frame (decoded from the wire) and other warnings: nothing.
    assert signal_of(WarningEvent(code="rate_limit", message="...")) is None
    assert signal_of(WarningEvent(code="stream_restarted", message="...")) is None


# ---------------------------------------------------------------------------------------------
# Properties


@settings(max_examples=200, deadline=None)
@given(
    owners=st.lists(st.sampled_from("abcd"), min_size=1, max_size=30),
    priorities=st.lists(st.integers(0, 2), min_size=30, max_size=30),
)
def test_a_higher_priority_never_waits_behind_a_lower_one(
    owners: list[str], priorities: list[int]
) -> None:
    gov = rules(max_live=1)
    gov.submit("hold")
    gov.poll(0.0)
    for i, owner in enumerate(owners):
        gov.submit(f"{owner}{i}", owner=owner, priority=priorities[i])
    order = []
    current = "hold"
    for t in range(len(owners)):
        gov.execution_ended(current)
        [current] = started(gov.poll(float(t)))
        order.append(current)
    got = [priorities[int(k[1:])] for k in order]
    assert got == sorted(got, reverse=True)
    for level in set(got):  # within a priority, each owner's opens keep their order
        for owner in set(owners):
            mine = [int(k[1:]) for k in order if k[0] == owner and priorities[int(k[1:])] == level]
            assert mine == sorted(mine)


class GovernorMachine(RuleBasedStateMachine):
    """Any interleaving of opens, cancels, turns, ends, rate limits and time."""

    MAX_LIVE = 4
    BUDGET = 1.0
    MAX_PAUSE = 30.0
    JITTER = 2.0

    def __init__(self) -> None:
        super().__init__()
        self.gov: GovernorRules[str] = GovernorRules(
            GovernorConfig(
                max_live=self.MAX_LIVE,
                increase_after=2,
                starts_per_second=2.0,
                start_burst=2,
                max_pause=self.MAX_PAUSE,
                resume_jitter=self.JITTER,
                budget_usd=self.BUDGET,
            ),
            now=0.0,
            random=random.Random(0).random,
        )
        self.now = 0.0
        self.n = 0
        self.last_rejection: float | None = None
        self.reached_with: frozenset[str] | None = None  # running when the budget was reached
        self.cost_after_reach = 0.0
        self.spent_before_reach = 0.0
        self.waiting_keys: dict[str, str] = {}  # waiting key -> owner
        self.passed_by: Counter[str] = Counter()  # owner -> other owners' starts while it waited
        self.limit = self.MAX_LIVE  # the limit as the LimitChanged notices told it

    def changes(self, notices: list[Any]) -> None:
        """Follow the limit through its notices: +1 (never past max_live) after successes,
        halved and rounded down (never below one) on a rejection."""
        for notice in notices:
            if not isinstance(notice, LimitChanged):
                continue
            assert notice.old == self.limit
            if notice.cause == "succeeded":
                assert notice.new == notice.old + 1 <= self.MAX_LIVE
            else:
                assert notice.cause == "rejected"
                factor = self.gov.config.decrease_factor
                assert notice.new == max(1, math.floor(notice.old * factor)) < notice.old
            self.limit = notice.new

    def poll(self) -> None:
        decisions = self.gov.poll(self.now)
        assert isinstance(decisions[-1], Wait | Idle)
        assert not any(isinstance(d, Wait | Idle) for d in decisions[:-1])
        keys = started(decisions)
        if keys:
            # Counted: the running executions not waiting for a person (rule 7).
            assert self.gov.counted <= self.gov.limit <= self.MAX_LIVE
            assert self.gov.counted == len(self.gov.running - self.gov.asking)
            assert self.gov.paused_until is None
            assert self.reached_with is None, "a start after the budget was reached"
        for d in decisions:
            if isinstance(d, Start):
                owner = self.waiting_keys.pop(d.key)
                self.passed_by[owner] = 0
                for other in set(self.waiting_keys.values()) - {owner}:
                    self.passed_by[other] += 1
            elif isinstance(d, Refuse):
                self.waiting_keys.pop(d.key)
                assert self.reached_with is not None
        for owner in set(self.waiting_keys.values()):
            # Rule 5: while waiting an owner is passed by each other owner at most once (3).
            assert self.passed_by[owner] <= 3
        for owner in list(self.passed_by):
            if owner not in self.waiting_keys.values():
                self.passed_by[owner] = 0
        if isinstance(decisions[-1], Wait) and decisions[-1].until is not None:
            assert decisions[-1].until > self.now

    @rule(owner=st.sampled_from("abcd"))
    def submit(self, owner: str) -> None:
        self.n += 1
        key = f"{owner}{self.n}"
        self.gov.submit(key, owner=owner)
        self.waiting_keys[key] = owner
        self.poll()

    @precondition(lambda self: bool(self.waiting_keys))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.waiting_keys)))
        assert self.gov.cancel(key)
        del self.waiting_keys[key]
        self.poll()

    @precondition(lambda self: bool(self.gov.running))
    @rule(
        data=st.data(),
        cost=st.floats(0, 0.3),
        status=st.sampled_from([None, None, None, 429, 529, 500]),
    )
    def turn(self, data: st.DataObject, cost: float, status: int | None) -> None:
        key = data.draw(st.sampled_from(sorted(self.gov.running)))
        before = self.gov.spent_usd()
        notices = self.gov.turn_ended(key, now=self.now, cost_usd=cost, api_error_status=status)
        self.changes(notices)
        if self.reached_with is not None:
            assert key in self.reached_with
            self.cost_after_reach += cost
        elif before + cost >= self.BUDGET:
            assert any(isinstance(n, BudgetReached) for n in notices)
            self.reached_with = self.gov.running
            self.spent_before_reach = before
            self.cost_after_reach = cost
        if status in (429, 529):
            self.last_rejection = self.now
        self.poll()

    @precondition(lambda self: bool(self.gov.running))
    @rule(data=st.data())
    def end(self, data: st.DataObject) -> None:
        self.gov.execution_ended(data.draw(st.sampled_from(sorted(self.gov.running))))
        self.poll()

    @precondition(lambda self: bool(self.gov.running))
    @rule(data=st.data(), request=st.sampled_from(["r1", "r2"]))
    def person_asked(self, data: st.DataObject, request: str) -> None:
        self.gov.person_asked(data.draw(st.sampled_from(sorted(self.gov.running))), request)
        assert self.gov.asking <= self.gov.running
        self.poll()

    @precondition(lambda self: bool(self.gov.asking))
    @rule(data=st.data(), request=st.sampled_from(["r1", "r2"]))
    def person_answered(self, data: st.DataObject, request: str) -> None:
        self.gov.person_answered(data.draw(st.sampled_from(sorted(self.gov.asking))), request)
        self.poll()

    @rule(
        status=st.sampled_from(["allowed", "allowed_warning", "rejected"]),
        resets_in=st.one_of(st.none(), st.floats(-100, 10 * 3600)),
    )
    def rate_limit_event(self, status: str, resets_in: float | None) -> None:
        resets_at = None if resets_in is None else WALL + self.now + resets_in
        notice = RateLimitNotice(status=status, resets_at=resets_at)
        self.changes(self.gov.observe(notice, now=self.now, wall_now=WALL + self.now))
        if status == "rejected":
            self.last_rejection = self.now
        self.poll()

    @rule(status=st.sampled_from([429, 529, 500, None]), delay_ms=st.floats(0, 10**7))
    def api_retry(self, status: int | None, delay_ms: float) -> None:
        notice = RetryNotice(error_status=status, delay_ms=delay_ms)
        self.changes(self.gov.observe(notice, now=self.now, wall_now=WALL + self.now))
        if status in (429, 529):
            self.last_rejection = self.now
        self.poll()

    @rule(dt=st.floats(0.01, 60))
    def advance(self, dt: float) -> None:
        self.now += dt
        self.poll()

    @invariant()
    def limit_is_what_its_notices_said(self) -> None:
        # Every change of the limit is told, by the rule that made it (see changes()).
        assert self.gov.limit == self.limit

    @invariant()
    def a_pause_always_ends(self) -> None:
        until = self.gov.paused_until
        if until is not None:
            assert self.last_rejection is not None
            assert until <= self.last_rejection + self.MAX_PAUSE + self.JITTER
            # ... and once its time comes, the next poll ends it.

    @invariant()
    def budget_overshoot_is_bounded_by_the_turns_running_when_reached(self) -> None:
        spent = self.gov.spent_usd()
        if self.reached_with is None:
            assert spent < self.BUDGET
        else:
            assert spent == pytest.approx(self.spent_before_reach + self.cost_after_reach)
            assert self.gov.statistics().overshoot_usd == pytest.approx(max(0, spent - 1.0))

    def teardown(self) -> None:
        until = self.gov.paused_until
        if until is not None:
            decisions = self.gov.poll(until)
            assert decisions[0] == Resumed(at=until)
            assert self.gov.paused_until is None


GovernorMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=50, deadline=None
)
test_governor_machine = GovernorMachine.TestCase
