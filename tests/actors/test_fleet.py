"""The fleet over the scripted fake CLI: the cap, replay, resync, slow subscribers, questions.

Everything runs under ``autojump_clock``, so times are exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing
from session_kit import CONFIG, assert_no_leak, check_stream

from claude_trio import (
    Aborted,
    Accepted,
    AnswerAccepted,
    AnswerRejected,
    Error,
    Event,
    ExecuteParams,
    InvalidParamsError,
    Rejected,
    Result,
    TextDelta,
    UserInputRequest,
    UserInputResolved,
    open_cli_pool,
)
from claude_trio.actors.fanout.fleet import (
    FleetSession,
    FleetStatistics,
    ResyncRequired,
    Subscription,
    open_fleet,
)
from claude_trio.errors import LocalProtocolError, SlowSubscriberError, UnknownSessionError
from claude_trio.events import AdapterReady, Outcome
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.fanout import replay as replay_module
from claude_trio.testing import FakeCLI, FakeTurn

PARAMS = ExecuteParams(prompt="hello")


def subscribe(fs: FleetSession, last_seq: int | None = None, max_queue: int = 1000) -> Subscription:
    sub = fs.subscribe_nowait(last_seq, max_queue=max_queue)
    assert isinstance(sub, Subscription), sub
    return sub


async def drain(sub: Subscription) -> list[Event]:
    with sub:
        return [event async for event in sub]


def drain_nowait(sub: Subscription) -> list[Event]:
    out: list[Event] = []
    while True:
        try:
            out.append(sub.receive_nowait())
        except trio.WouldBlock:
            return out


def tools_then_text(tools: int) -> Callable[[FakeTurn], Any]:
    async def script(cli: FakeTurn) -> None:
        await cli.text("abcdefghij", chunk=1)
        await cli.sleep(5)
        for i in range(tools):
            tool = await cli.tool_use("Bash", {"command": f"step {i}"})
            await cli.tool_result(tool, "ok")
        await cli.text("done")

    return script


async def test_the_cap_never_lets_more_than_max_live_clis_run_and_all_sessions_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    peak = 0

    async def script(cli: FakeTurn) -> None:
        nonlocal peak
        alive = [t for t in fake.transports if t.connected and not t.closed]
        peak = max(peak, len(alive))
        await cli.sleep(1.0)
        await cli.text("ok")

    fake = FakeCLI(script)
    start = trio.current_time()
    async with open_fleet(max_live=2, transport_factory=fake, config=CONFIG) as fleet:
        sessions = [
            await fleet.start(ExecuteParams(prompt=f"job {i}")) for i in range(5)
        ]
        await trio.testing.wait_all_tasks_blocked()
        stats = fleet.statistics()
        assert (stats.live, stats.waiting, stats.finished) == (2, 3, 0)
        assert [fs.state for fs in sessions] == ["live", "live", "waiting", "waiting", "waiting"]
        # a session waiting for its slot refuses pushes with a reason, and has no CLI yet
        assert sessions[4].push_nowait("early") == Rejected(
            reason="the session has not started yet: it is waiting for a slot"
        )
        assert len(fake.transports) == 2
        streams = [await drain(subscribe(fs)) for fs in sessions]
        for fs in sessions:
            await fs.wait_ended()
        await trio.testing.wait_all_tasks_blocked()
        stats = fleet.statistics()
        assert (stats.live, stats.waiting, stats.finished) == (0, 0, 5)
        assert stats.governor is not None  # on by default
        assert (stats.governor.starts, stats.governor.running) == (5, 0)
    # 5 one-second sessions, 2 at a time, in start order: 3 rounds
    assert trio.current_time() - start == pytest.approx(3.0)
    assert peak == 2
    assert len(fake.transports) == 5
    for events, fs in zip(streams, sessions, strict=True):
        check_stream(events)
        assert isinstance(events[-1], Result)
        assert events[-1].final
        assert fs.ended
        assert fs.claude_session_id == events[-1].session_id
    # Slots go in start order: round by round (within a round, trio picks who runs first)
    prompts = [t.user_messages[0]["message"]["content"] for t in fake.transports]
    rounds = [set(prompts[0:2]), set(prompts[2:4]), set(prompts[4:])]
    assert rounds == [{"job 0", "job 1"}, {"job 2", "job 3"}, {"job 4"}]
    assert_no_leak(fake)


async def test_slots_are_granted_in_start_order(autojump_clock: trio.testing.MockClock) -> None:
    # trio shuffles the order in which new tasks first run; the fleet's order must not depend on it
    fake = FakeCLI()
    async with open_fleet(max_live=1, transport_factory=fake, config=CONFIG) as fleet:
        sessions = [await fleet.start(ExecuteParams(prompt=f"job {i}")) for i in range(6)]
        for fs in sessions:
            await fs.wait_ended()
    prompts = [t.user_messages[0]["message"]["content"] for t in fake.transports]
    assert prompts == [f"job {i}" for i in range(6)]
    assert_no_leak(fake)


def fleet_session_tasks() -> int:
    """How many tasks of fleet sessions exist in this run (named ``fleet session ...``)."""
    count = 0
    todo = [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        count += task.name.startswith("fleet session")
        todo.extend(t for nursery in task.child_nurseries for t in nursery.child_tasks)
    return count


async def test_a_session_queued_for_a_slot_has_no_task_until_it_gets_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def one_second(cli: FakeTurn) -> None:
        await cli.sleep(1.0)
        await cli.text("ok")

    fake = FakeCLI(one_second)
    # The slots alone (the governor's start spacing would hold the queue before them).
    async with open_fleet(
        max_live=2, transport_factory=fake, config=CONFIG, governor=None
    ) as fleet:
        sessions = [await fleet.start(ExecuteParams(prompt=f"job {i}")) for i in range(6)]
        await trio.testing.wait_all_tasks_blocked()
        assert fleet.statistics() == FleetStatistics(live=2, waiting=4, finished=0)
        assert fleet_session_tasks() == 2  # the four queued ones are only their FleetSession
        await sessions[1].wait_closed()
        await trio.testing.wait_all_tasks_blocked()
        # both first sessions ended at t=1 and handed their slots to the next two in order
        assert [fs.state for fs in sessions] == ["ended"] * 2 + ["live"] * 2 + ["waiting"] * 2
        assert fleet_session_tasks() == 2
        await sessions[5].abort()  # still queued: it ends at once, without a task or a CLI
        assert sessions[5].ended
        (event,) = await drain(subscribe(sessions[5]))
        assert event == Aborted(
            reason="aborted before it started", turn=0, seq=1, phase="starting"
        )
        for fs in sessions[:5]:
            await fs.wait_closed()
    # (two CLIs started in the same instant may spawn in either order: trio shuffles them)
    prompts = sorted(t.user_messages[0]["message"]["content"] for t in fake.transports)
    assert prompts == [f"job {i}" for i in range(5)]  # job 5 never ran
    assert_no_leak(fake)


async def test_resubscribing_after_last_seq_replays_exactly_the_rest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(tools_then_text(2))
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(PARAMS)
        everything = subscribe(fs)
        first = subscribe(fs)
        await trio.sleep(1)  # the deltas are out, the script sleeps
        seen = drain_nowait(first)
        first.close()
        assert len(seen) == 12  # adapter_ready, turn_started + 10 deltas
        last_seq = seen[-1].seq
        await trio.sleep(1)
        rest = subscribe(fs, last_seq)  # reconnect while the session runs
        all_events = await drain(everything)
        resumed = await drain(rest)
        assert seen + resumed == all_events
        check_stream(all_events)
        # after the end: replay from any seq, then the end of the channel
        assert await drain(subscribe(fs, 5)) == all_events[5:]
        assert await drain(subscribe(fs, fs.last_seq)) == []
        assert await drain(subscribe(fs)) == all_events
    assert [e.seq for e in all_events] == list(range(1, len(all_events) + 1))


async def test_a_last_seq_older_than_the_buffer_requires_a_resync(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(tools_then_text(1))
    async with open_fleet(transport_factory=fake, config=CONFIG, replay_buffer=4) as fleet:
        fs = await fleet.start(PARAMS)
        full = await drain(subscribe(fs))
        last = fs.last_seq
        assert last == full[-1].seq
        assert fs.subscribe_nowait(last - 5, max_queue=10) == ResyncRequired(
            session_id=fs.id, oldest_seq=last - 3
        )
        assert fs.subscribe_nowait(0, max_queue=10) == ResyncRequired(
            session_id=fs.id, oldest_seq=last - 3
        )
        # exactly at the edge of the buffer: nothing missing, so no resync
        assert await drain(subscribe(fs, last - 4)) == full[-4:]
        # None: what the buffer holds (a new client)
        assert await drain(subscribe(fs, None)) == full[-4:]
        with pytest.raises(InvalidParamsError, match="last_seq"):
            fs.subscribe_nowait(last + 1, max_queue=10)
        with pytest.raises(InvalidParamsError, match="last_seq"):
            fs.subscribe_nowait(-1, max_queue=10)
        with pytest.raises(InvalidParamsError, match="max_queue"):
            fs.subscribe_nowait(None, max_queue=0)


async def test_a_slow_subscriber_is_coalesced_then_dropped_while_another_gets_everything(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(tools_then_text(3))
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(PARAMS)
        fast = subscribe(fs)
        peeked = subscribe(fs, max_queue=4)
        slow = subscribe(fs, max_queue=4)
        async with trio.open_nursery() as nursery:
            fast_events: list[Event] = []

            async def read_fast() -> None:
                with fast:
                    async for event in fast:
                        fast_events.append(event)

            nursery.start_soon(read_fast)
            await trio.sleep(1)  # all deltas are out; the script sleeps before its tools
            # Full at 4 (adapter_ready, turn_started + 2 deltas), then every further delta
            # merged into the last.
            assert slow.dropped_reason is None
            assert slow.coalesced == 8
            head = drain_nowait(peeked)
            assert [e.kind for e in head] == ["adapter_ready", "turn_started", *["text_delta"] * 2]
            merged = head[-1]
            assert isinstance(merged, TextDelta)
            assert merged.text == "bcdefghij"
            deltas = [e for e in fast_events if isinstance(e, TextDelta)]
            assert [d.text for d in deltas] == list("abcdefghij")
            assert merged.seq == deltas[-1].seq  # the merged delta carries the last seq
            peeked.close()
        # the tools' events cannot merge: the slow one was dropped, queue discarded
        assert slow.dropped_reason is not None
        assert slow.dropped_reason.startswith("slow consumer")
        with pytest.raises(SlowSubscriberError, match="slow consumer") as caught:
            await slow.receive()
        assert caught.value.reason == slow.dropped_reason
        with pytest.raises(SlowSubscriberError):
            slow.receive_nowait()
        # the session and the fast subscriber were unaffected
        check_stream(fast_events)
        assert isinstance(fast_events[-1], Result)
        assert fast_events[-1].final
        assert fast_events == await drain(subscribe(fs))
        # a dropped client comes back with what it saw last and gets an exact replay
        assert await drain(subscribe(fs, merged.seq)) == [
            e for e in fast_events if e.seq > merged.seq
        ]
    assert_no_leak(fake)


QUESTION = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "red", "description": ""}, {"label": "blue", "description": ""}],
    "multiSelect": False,
}


async def test_pending_questions_are_listed_and_shown_again_on_reattach(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []

    async def script(cli: FakeTurn) -> None:
        await cli.text("let me ask")
        replies.append(await cli.ask_permission("AskUserQuestion", {"questions": [QUESTION]}))
        await cli.text("thanks")

    fake = FakeCLI(script)
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(PARAMS)
        watcher = subscribe(fs)
        await trio.testing.wait_all_tasks_blocked()
        (request,) = fs.pending_requests
        assert isinstance(request, UserInputRequest)
        assert request.questions[0].options == ("red", "blue")
        before = drain_nowait(watcher)
        assert before[-1] == request
        # a client that saw everything reattaches: the open question comes again, first
        again = subscribe(fs, fs.last_seq)
        assert drain_nowait(again) == [request]
        # a client whose replay includes the question gets it once, in place
        replayed = subscribe(fs, request.seq - 1)
        assert drain_nowait(replayed) == [request]
        assert drain_nowait(subscribe(fs)) == before
        wrong = await fs.answer(request.request_id, {"Which size?": "L"})
        assert isinstance(wrong, AnswerRejected)
        assert "not one of the questions asked" in wrong.reason
        assert fs.pending_requests == (request,)  # a bad answer loses nothing
        rejected = await fs.answer("nope", "red")
        assert isinstance(rejected, AnswerRejected)
        assert await fs.answer(request.request_id, "blue") == AnswerAccepted(
            request_id=request.request_id
        )
        events = before + await drain(watcher)
        again.close()
        replayed.close()
        assert fs.pending_requests == ()
    check_stream(events)
    (done,) = [e for e in events if isinstance(e, UserInputResolved)]
    assert done.outcome == "answered"
    assert replies[0]["updatedInput"]["answers"] == {"Which color?": "blue"}
    assert_no_leak(fake)


async def sleeper(cli: FakeTurn) -> None:
    await cli.text("working")
    await cli.sleep(1000)
    await cli.text("never")


async def test_abort_ends_a_waiting_session_without_a_cli_and_a_live_one_with_its_cli(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(sleeper)
    async with open_fleet(max_live=1, transport_factory=fake, config=CONFIG) as fleet:
        live = await fleet.start(PARAMS)
        waiting = await fleet.start(PARAMS)
        await trio.testing.wait_all_tasks_blocked()
        assert (live.state, waiting.state) == ("live", "waiting")
        start = trio.current_time()
        await waiting.abort()
        assert trio.current_time() == start
        assert waiting.ended
        (event,) = await drain(subscribe(waiting))
        assert event == Aborted(
            reason="aborted before it started", turn=0, seq=1, phase="starting"
        )
        assert await waiting.push("hello?") == Rejected(reason="the execution has ended")
        assert len(fake.transports) == 1  # it never got a CLI
        await waiting.abort()  # idempotent

        watcher = subscribe(live)
        await live.abort()
        assert live.ended
        events = await drain(watcher)
        check_stream(events)
        aborted = [e for e in events if isinstance(e, Aborted)]
        assert len(aborted) == 1
        assert events[-1] is aborted[0]
        assert fake.transport.interrupts == 1
        await trio.testing.wait_all_tasks_blocked()
        assert fleet.statistics().finished == 2
    assert_no_leak(fake)


async def test_leaving_the_fleet_ends_every_session_and_leaks_no_cli(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(sleeper)
    async with open_fleet(max_live=2, transport_factory=fake, config=CONFIG) as fleet:
        sessions = [await fleet.start(PARAMS) for _ in range(3)]
        subs = [subscribe(fs) for fs in sessions]
        await trio.sleep(5)
    for fs, sub in zip(sessions, subs, strict=True):
        assert fs.ended
        events = await drain(sub)
        check_stream(events)
        assert events[-1] == Aborted(
            reason="the fleet was closed",
            outcome=Outcome.CLOSED,
            phase="starting" if len(events) == 1 else None,  # (it never ran)
            turn=events[-1].turn,
            seq=events[-1].seq,
        )
    # adapter_ready, turn_started, aborted for the two that ran; aborted alone for the one
    # that waited for a slot.
    assert [len(await drain(subscribe(fs))) for fs in sessions] == [4, 4, 1]
    assert len(fake.transports) == 2
    assert_no_leak(fake)
    with pytest.raises(LocalProtocolError, match="the fleet is closed"):
        await fleet.start(PARAMS)


async def test_a_session_that_fails_to_start_ends_with_an_error_and_the_others_go_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def broken(options: Any) -> Any:
        raise RuntimeError("no CLI today")

    fake = FakeCLI()
    async with open_fleet(max_live=1, transport_factory=fake, config=CONFIG) as fleet:
        bad = await fleet.start(PARAMS, transport_factory=broken)
        good = await fleet.start(PARAMS)
        (error,) = await drain(subscribe(bad))
        assert isinstance(error, Error)
        assert error.code == "internal"
        assert error.fatal
        assert "no CLI today" in error.message
        events = await drain(subscribe(good))
        check_stream(events)
        assert isinstance(events[-1], Result)
    assert_no_leak(fake)


async def test_finished_sessions_are_forgotten_past_keep_finished(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI()
    async with open_fleet(transport_factory=fake, config=CONFIG, keep_finished=1) as fleet:
        first = await fleet.start(PARAMS)
        await first.wait_ended()
        await trio.testing.wait_all_tasks_blocked()
        assert fleet.get_nowait(first.id) is first
        second = await fleet.start(PARAMS)
        await second.wait_ended()
        await trio.testing.wait_all_tasks_blocked()
        assert fleet.get_nowait(second.id) is second
        with pytest.raises(KeyError):
            fleet.get_nowait(first.id)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_live": 0}, "max_live"),
        ({"replay_buffer": True}, "replay_buffer"),
        ({"keep_finished": -1}, "keep_finished"),
        ({"on_user_input": "manual"}, "on_user_input"),
        ({"no_such_option": 1}, "session option"),
    ],
)
async def test_bad_fleet_options_are_refused_by_name(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        async with open_fleet(**kwargs):
            pass  # pragma: no cover
    assert caught.value.field == field


async def test_bad_start_arguments_are_refused(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fleet(transport_factory=FakeCLI(), config=CONFIG) as fleet:
        with pytest.raises(InvalidParamsError, match="on_user_input"):
            await fleet.start(PARAMS, on_user_input=None)
        with pytest.raises(InvalidParamsError, match="params"):
            await fleet.start({"prompt": "hi"})  # type: ignore[arg-type]
        assert fleet.statistics().waiting == 0


async def test_a_push_reaches_the_running_session_and_its_subscribers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def first(cli: FakeTurn) -> None:
        await cli.text("a long answer", chunk=2, delay=0.1)

    async def second(cli: FakeTurn) -> None:
        await cli.text("about the push")

    fake = FakeCLI([first, second])
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(PARAMS)
        sub = subscribe(fs)
        with sub:
            events: list[Event] = []
            async for event in sub:
                events.append(event)
                first_delta = isinstance(event, TextDelta) and event.turn == 1
                if first_delta and not [e for e in events[:-1] if isinstance(e, TextDelta)]:
                    outcome = await fs.push("one more thing")
                    assert isinstance(outcome, Accepted)
    check_stream(events)
    results = [e for e in events if isinstance(e, Result)]
    assert [(r.turn, r.final) for r in results] == [(1, False), (2, True)]
    assert results[1].user_message_uuids == (outcome.uuid,)
    assert fake.transport.user_messages[1]["message"]["content"] == "one more thing"


# -- bounded in bytes, linear, fair ------------------------------------------------------------


async def test_the_replay_keeps_events_without_raw_and_within_its_bytes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("x" * 4000, chunk=100)

    fake = FakeCLI(script)
    async with open_fleet(transport_factory=fake, config=CONFIG, replay_bytes=20_000) as fleet:
        fs = await fleet.start(PARAMS)
        live = subscribe(fs)
        events = await drain(live)
        stats = fs.replay_statistics()
        assert stats.bytes <= 20_000
        assert stats.events < len(events)  # the oldest were evicted by bytes, not by count
        kept = await drain(subscribe(fs))
        assert kept == events[-stats.events :]
        assert all(e.raw is None for e in events + kept)
        # A replay from an evicted seq is a resync, from a kept one exact.
        assert isinstance(fs.subscribe_nowait(1, max_queue=10), ResyncRequired)
        assert await drain(subscribe(fs, kept[0].seq - 1)) == kept
    check_stream(events)


async def test_a_stalled_subscriber_merges_in_linear_time_and_is_dropped_at_its_byte_bound(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    joins: list[int] = []
    real = replay_module.merged

    def counting(first: Any, texts: Any, last_seq: int) -> Any:
        texts = list(texts)
        joins.append(len(texts))
        return real(first, texts, last_seq)

    monkeypatch.setattr(replay_module, "merged", counting)

    async def script(cli: FakeTurn) -> None:
        await cli.text("abcd" * 2500, chunk=1)  # 10,000 deltas of one block

    fake = FakeCLI(script)
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(PARAMS)
        reader = subscribe(fs)
        stalled = subscribe(fs, max_queue=5)  # merges: holds 5 items, one a long run
        bounded = fs.subscribe_nowait(None, max_queue=4, max_bytes=200_000)
        assert isinstance(bounded, Subscription)
        events = await drain(reader)
        assert joins == []  # about 10,000 merges and no text copied yet
        assert stalled.coalesced > 9_000
        assert stalled.dropped_reason is None
        assert stalled.queued == 5  # adapter_ready, turn_started, a run, the message, the result
        caught_up = await drain(stalled)
        assert len(joins) == 1  # joined once, when taken
        # The one with a byte bound was dropped as soon as its run passed it.
        assert bounded.dropped_reason is not None
        assert "bytes queued" in bounded.dropped_reason
        assert bounded.queued_bytes == 0
    text = "abcd" * 2500
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
    assert [e.kind for e in caught_up] == ["adapter_ready", "turn_started", "text_delta",
                                           "assistant_message", "result"]  # fmt: skip
    assert caught_up[2].text == text  # type: ignore[union-attr]


async def test_a_lagging_subscriber_gets_one_merged_delta_joined_once(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    joins: list[int] = []
    real = replay_module.merged

    def counting(first: Any, texts: Any, last_seq: int) -> Any:
        texts = list(texts)
        joins.append(len(texts))
        return real(first, texts, last_seq)

    monkeypatch.setattr(replay_module, "merged", counting)
    release = trio.Event()

    async def script(cli: FakeTurn) -> None:
        await cli.text("abcd" * 500, chunk=1)
        await release.wait()

    fake = FakeCLI(script)
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(PARAMS)
        lagging = subscribe(fs, max_queue=4)
        await trio.testing.wait_all_tasks_blocked()
        got = drain_nowait(lagging)
        release.set()
        got += await drain(lagging)
    assert joins == [1999]  # adapter_ready, turn_started, 'a', one run of the rest, joined once
    deltas = [e for e in got if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == "abcd" * 500
    assert len(deltas) == 2


async def test_slots_go_to_waiting_owners_in_turn(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeCLI()
    async with open_fleet(max_live=1, transport_factory=fake, config=CONFIG) as fleet:
        sessions = [
            await fleet.start(ExecuteParams(prompt=f"busy {i}"), owner="busy") for i in range(6)
        ]
        sessions.append(await fleet.start(ExecuteParams(prompt="other 0"), owner="other"))
        stats = fleet.owner_statistics("busy")
        assert (stats.live, stats.waiting, stats.active) == (1, 5, 6)
        assert fleet.owner_statistics("other").waiting == 1
        for fs in sessions:
            await fs.wait_ended()
        assert fleet.owner_statistics("busy").active == 0
    prompts = [t.user_messages[0]["message"]["content"] for t in fake.transports]
    assert prompts == ["busy 0", "busy 1", "other 0", "busy 2", "busy 3", "busy 4", "busy 5"]


async def test_notify_is_called_when_there_is_something_to_receive(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[str] = []
    fake = FakeCLI(tools_then_text(3))
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(PARAMS)
        sub = fs.subscribe_nowait(None, max_queue=2, notify=lambda: calls.append("notified"))
        assert isinstance(sub, Subscription)
        await fs.wait_ended()
    assert calls  # offered, then dropped (a queue of 2 that nobody reads)
    assert sub.dropped_reason is not None
    with pytest.raises(InvalidParamsError, match="notify"):
        fs.subscribe_nowait(None, max_queue=2, notify="call me")  # type: ignore[arg-type]


# -- a pool under a fleet, and the caller's exceptions ------------------------------------------


async def test_a_pool_s_warm_clis_count_against_max_live(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.text("working", delay=1.0)

    fake = FakeCLI(script)
    most_alive = 0

    def alive() -> int:
        return sum(t.process_alive for t in fake.transports)

    template = ExecuteParams(prompt="-")
    async with (
        open_cli_pool(template, size=2, user_input=True, transport_factory=fake) as pool,
        open_fleet(max_live=4, pool=pool, config=CONFIG) as fleet,
    ):
        await trio.sleep(1)  # the pool warms up
        sessions = [await fleet.start(ExecuteParams(prompt=f"p{i}")) for i in range(8)]
        while not all(s.ended for s in sessions):
            most_alive = max(most_alive, alive())
            await trio.sleep(0.1)
    assert most_alive == 4  # two live sessions and two warm CLIs, never more than the cap
    assert pool.statistics().hits >= 2  # sessions did start warm


async def test_a_pool_a_fleet_cannot_use_is_refused_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI()
    template = ExecuteParams(prompt="-")
    async with open_cli_pool(template, size=1, transport_factory=fake) as no_input:
        with pytest.raises(InvalidParamsError, match="user_input=False"):
            async with open_fleet(pool=no_input):
                pass
    async with open_cli_pool(template, size=2, user_input=True, transport_factory=fake) as pool:
        with pytest.raises(InvalidParamsError, match="fewer warm CLIs than max_live=2"):
            async with open_fleet(max_live=2, pool=pool):
                pass
        async with open_fleet(max_live=3, pool=pool) as fleet:
            with pytest.raises(InvalidParamsError, match="the pool's template"):
                await fleet.start(ExecuteParams(prompt="hi", model="opus"))


async def test_the_caller_s_exception_leaves_open_fleet_as_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI()

    async def run() -> None:
        async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
            await fleet.start(ExecuteParams(prompt="hi"))
            raise KeyError("mine")

    with pytest.raises(KeyError) as caught:
        await run()
    assert type(caught.value) is KeyError
    assert_no_leak(fake)


# -- conversations that outlive a CLI: continue_, keep_finished, drain -------------------------


async def echo(cli: FakeTurn) -> None:
    await cli.sleep(1.0)
    await cli.text(f"you said: {cli.prompt}")


async def test_continue_resumes_the_conversation_with_the_same_options_and_seq_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(echo)
    env = {"CLAUDE_CONFIG_DIR": "/srv/cli-config"}
    params = ExecuteParams(prompt="first", cwd="/srv/work")
    async with open_fleet(max_live=1, transport_factory=fake, config=CONFIG, env=env) as fleet:
        fs = await fleet.start(params, label="chat")
        first = await drain(subscribe(fs))
        await fs.wait_closed()
        assert (fs.state, fs.executions, fs.first_seq) == ("ended", 1, 1)
        assert fs.ended_at is not None
        assert fleet.statistics().live == 0  # idle: no CLI, no slot
        assert not fake.transports[0].process_alive
        cli_id = fs.claude_session_id
        assert cli_id == fake.transports[0].session_id

        again = await fleet.continue_(fs.id, "second")
        assert again is fs
        assert (fs.state, fs.executions, fs.first_seq, fs.ended_at) == (
            "waiting", 2, first[-1].seq + 1, None
        )  # fmt: skip
        second = await drain(subscribe(fs, first[-1].seq))
    check_stream(first)
    check_stream(second)
    # One conversation: seq goes on over both executions, turns count per execution.
    assert second[0].seq == first[-1].seq + 1
    assert [e.seq for e in first + second] == list(range(1, len(first) + len(second) + 1))
    assert second[0].turn == 1
    assert "".join(e.text for e in second if isinstance(e, TextDelta)) == "you said: second"
    # The second CLI resumed the first one's conversation, in the same folder and environment.
    resumed = fake.transports[1].options
    assert resumed.resume == cli_id
    assert str(resumed.cwd) == "/srv/work"
    assert resumed.env["CLAUDE_CONFIG_DIR"] == "/srv/cli-config"
    assert fake.transports[0].options.resume is None
    assert fs.params.prompt == "second"
    assert fs.label == "chat"
    # Usage sums every turn of both executions.
    results = [e for e in first + second if isinstance(e, Result)]
    assert fs.usage.output_tokens == sum(r.usage.output_tokens for r in results) > 0
    assert_no_leak(fake)


async def test_continue_sends_its_own_prompt_without_the_first_ones_images_or_fork(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(echo)
    image = ImageInput.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    params = ExecuteParams(
        prompt="look", images=[image], resume_session_id="s-0", fork_session=True
    )
    async with open_fleet(max_live=1, transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(params)
        await drain(subscribe(fs))
        await fs.wait_closed()
        await fleet.continue_(fs.id, "and now?")
        await fs.wait_closed()
    assert (fs.params.prompt, fs.params.images, fs.params.fork_session) == ("and now?", (), False)
    first, second = (t.options for t in fake.transports)
    assert (first.fork_session, second.fork_session) == (True, False)
    assert_no_leak(fake)


async def test_continue_runs_with_the_model_mode_and_images_it_sets_and_keeps_the_first_two(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(echo)
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
    async with open_fleet(max_live=1, transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(ExecuteParams(prompt="first", permission_mode="plan"))
        await fs.wait_closed()
        with pytest.raises(InvalidParamsError, match="permission_mode"):
            await fleet.continue_(fs.id, "x", permission_mode="yolo")  # type: ignore[arg-type]
        with pytest.raises(InvalidParamsError, match="model"):
            await fleet.continue_(fs.id, "x", model="gpt-x")
        with pytest.raises(InvalidParamsError, match="images"):
            await fleet.continue_(fs.id, "x", images=[png])  # type: ignore[list-item]
        assert (fs.executions, len(fake.transports)) == (1, 1)  # nothing ran
        await fleet.continue_(
            fs.id,
            "look",
            model="haiku",
            permission_mode="dontAsk",
            images=[ImageInput.from_bytes(png)],
        )
        second = await drain(subscribe(fs))
        await fs.wait_closed()
        await fleet.continue_(fs.id, "and now?")
        await fs.wait_closed()
    (ready,) = [e for e in second if isinstance(e, AdapterReady) and e.prompt == "look"]
    assert (ready.prompt, ready.permission_mode, ready.images) == ("look", "dontAsk", 1)
    haiku = ExecuteParams(prompt="x", model="haiku").resolved_model
    assert ready.model == haiku
    first, looked, third = (t.options for t in fake.transports)
    assert (first.model, first.permission_mode) == (None, "plan")
    assert (looked.model, looked.permission_mode) == (haiku, "dontAsk")
    # the options stay the session's; the images went with their prompt only
    assert (third.model, third.permission_mode) == (haiku, "dontAsk")
    assert (fs.params.prompt, fs.params.images) == ("and now?", ())
    assert_no_leak(fake)


async def test_continue_is_refused_while_running_unknown_or_without_a_conversation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def broken(options: Any) -> Any:
        raise RuntimeError("no CLI today")

    fake = FakeCLI(sleeper)
    async with open_fleet(transport_factory=fake, config=CONFIG) as fleet:
        running = await fleet.start(PARAMS)
        await trio.sleep(1)  # its turn started: the CLI said its session id
        with pytest.raises(LocalProtocolError, match="still running"):
            await fleet.continue_(running.id, "more")
        with pytest.raises(UnknownSessionError, match="never started here") as caught:
            await fleet.continue_("no-such-id", "more")
        assert isinstance(caught.value, KeyError)
        failed = await fleet.start(PARAMS, transport_factory=broken)
        await failed.wait_closed()
        with pytest.raises(LocalProtocolError, match="no conversation to continue"):
            await fleet.continue_(failed.id, "more")
        await running.abort()
        with pytest.raises(InvalidParamsError, match="prompt"):
            await fleet.continue_(running.id, "")
        assert running.executions == 1  # a refused continue changes nothing
    assert_no_leak(fake)


async def test_continue_right_after_the_end_waits_for_the_old_cli_before_taking_a_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(echo)
    async with open_fleet(max_live=1, transport_factory=fake, config=CONFIG) as fleet:
        fs = await fleet.start(PARAMS)
        await fs.wait_ended()  # the final event is in; the CLI is still being closed
        await fleet.continue_(fs.id, "next")
        await fs.wait_ended()
        await fs.wait_closed()
    assert len(fake.transports) == 2
    # never two CLIs of one conversation at once
    assert fake.transports[0].closed
    assert fake.transports[1].options.resume == fake.transports[0].session_id
    assert_no_leak(fake)


async def test_idle_sessions_past_keep_finished_are_forgotten_longest_idle_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(echo)
    async with open_fleet(transport_factory=fake, config=CONFIG, keep_finished=2) as fleet:
        a = await fleet.start(ExecuteParams(prompt="a"))
        b = await fleet.start(ExecuteParams(prompt="b"))
        for fs in (a, b):
            await fs.wait_closed()
        await fleet.continue_(a.id, "a again")  # a is busy again, then idle after b
        await a.wait_closed()
        c = await fleet.start(ExecuteParams(prompt="c"))
        await c.wait_closed()
        # idle order: b (longest), a, c -> b is forgotten
        assert [s.id for s in fleet.sessions()] == [a.id, c.id]
        with pytest.raises(UnknownSessionError):
            fleet.get_nowait(b.id)
        with pytest.raises(UnknownSessionError):
            await fleet.continue_(b.id, "b again")
        assert fleet.get_nowait(a.id) is a
    assert_no_leak(fake)


async def test_drain_lets_running_executions_finish_and_ends_the_waiting_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def three_seconds(cli: FakeTurn) -> None:
        await cli.sleep(3.0)
        await cli.text("finished")

    fake = FakeCLI(three_seconds)
    async with open_fleet(max_live=2, transport_factory=fake, config=CONFIG) as fleet:
        running = [await fleet.start(PARAMS) for _ in range(2)]
        waiting = await fleet.start(PARAMS)
        await trio.sleep(1.0)
        start = trio.current_time()
        await fleet.drain(trio.current_time() + 10.0)
        # returns when the running ones finished by themselves (2 s more), CLIs gone
        assert trio.current_time() - start == pytest.approx(2.0, abs=0.1)
        for fs in running:
            events = await drain(subscribe(fs))
            assert isinstance(events[-1], Result)
            assert events[-1].final
        (event,) = await drain(subscribe(waiting))
        assert event == Aborted(
            reason="the fleet is draining: it never started",
            outcome=Outcome.CLOSED,
            phase="starting",
            turn=0,
            seq=1,
        )
        assert len(fake.transports) == 2
        with pytest.raises(LocalProtocolError, match="draining"):
            await fleet.start(PARAMS)
        with pytest.raises(LocalProtocolError, match="draining"):
            await fleet.continue_(running[0].id, "more")
        assert fleet.statistics().live == 0
    assert_no_leak(fake)


async def test_drain_aborts_what_is_still_running_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeCLI(sleeper)
    async with open_fleet(max_live=2, transport_factory=fake, config=CONFIG) as fleet:
        sessions = [await fleet.start(PARAMS) for _ in range(2)]
        watchers = [subscribe(fs) for fs in sessions]
        await trio.sleep(1.0)
        start = trio.current_time()
        await fleet.drain(start + 5.0)
        assert fleet.statistics().live == 0
        # the deadline, then the abort (the fake confirms the interrupt at once)
        assert trio.current_time() - start == pytest.approx(5.0, abs=0.5)
        for watcher in watchers:
            events = await drain(watcher)
            check_stream(events)
            assert isinstance(events[-1], Aborted)
        assert sum(t.interrupts for t in fake.transports) == 2
        await fleet.drain(trio.current_time())  # again: nothing left, returns at once
    assert_no_leak(fake)


async def test_drain_refuses_a_deadline_that_is_not_a_time() -> None:
    async with open_fleet(transport_factory=FakeCLI()) as fleet:
        for bad in ("soon", True, float("nan"), -math.inf, 10**400):
            with pytest.raises(InvalidParamsError, match="deadline"):
                await fleet.drain(bad)  # type: ignore[arg-type]
        await fleet.drain(math.inf)  # no deadline: nothing running, returns at once
