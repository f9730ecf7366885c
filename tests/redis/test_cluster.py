"""Workers and gateways on a real Redis, in one process (fake CLIs): what reaches a client
through a gateway is what the worker ran, exactly; commands reach the worker and come back."""

from __future__ import annotations

import logging
from collections import Counter

import coredis
import pytest
import trio
from cluster_kit import STEADY, TOKEN, RunningWorker, open_gateway, open_worker

from claude_trio import ExecuteParams
from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import RemoteOpError, SessionLostError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import Job, SessionRecord, entry_events
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.fanout.remote import Principal
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    Error,
    Event,
    Result,
    TextDelta,
    UserInputRequest,
)
from claude_trio.protocol.session.lifecycle import Accepted, Rejected
from claude_trio.testing import FakeCLI, FakeTurn, RedisServer

CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)


async def read_all(session: object) -> list[Event]:
    events = []
    async for event in session.events:  # type: ignore[attr-defined]
        events.append(event)
    return events


async def test_sessions_spread_over_workers_and_stream_exactly(
    redis_server: RedisServer,
) -> None:
    gate = trio.Event()

    async def answer(turn: FakeTurn) -> None:
        await gate.wait()
        await turn.sleep(0.05)
        await turn.text("hello from the cluster")

    fake = FakeCLI(answer)
    url = redis_server.url
    with trio.fail_after(30):
        # No worker dies here: with STEADY, a heartbeat a loaded machine holds back does not
        # let one worker take the other's session over.
        async with (
            open_worker(url, fake, max_live=2, config=STEADY) as one,
            open_worker(url, fake, max_live=2, config=STEADY) as two,
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
        ):
            sessions = [await client.open(ExecuteParams(prompt=f"p{i}")) for i in range(6)]
            # The turns wait until both workers run some: a worker holds at most two, so the
            # other takes its share whatever the machine's load (one worker alone could
            # otherwise run all six one after the other).
            while not (one.worker.running and two.worker.running):  # noqa: ASYNC110 (workers)
                await trio.sleep(0.01)
            gate.set()
            streams = [await read_all(s) for s in sessions]
            # A worker acknowledges a job once its final event is stored, which is also when a
            # client may have read it: let both finish before they are stopped.
            for running in (one, two):
                await running.worker.wait_idle(trio.current_time() + 20)

    for events in streams:
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        final = events[-1]
        assert isinstance(final, Result)
        assert final.text == "hello from the cluster"
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) in (
            "",
            "hello from the cluster",
        )
    ran = Counter({one.worker.id: one.worker.acknowledged, two.worker.id: two.worker.acknowledged})
    assert sum(ran.values()) == 6
    assert all(count >= 1 for count in ran.values())


async def slow_answer(turn: FakeTurn) -> None:
    await turn.sleep(0.4)
    await turn.text(f"answered {turn.messages[-1].text}")


async def test_push_abort_and_continue_reach_the_worker_in_order(
    redis_server: RedisServer,
) -> None:
    fake = FakeCLI(slow_answer)
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            open_worker(url, fake, max_live=2),
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
        ):
            pushed = await client.open(ExecuteParams(prompt="first"))
            events: list[Event] = []
            outcome = None
            async for event in pushed.events:
                events.append(event)
                if outcome is None and event.kind == "turn_started":
                    outcome = await pushed.push("second")
            assert isinstance(outcome, Accepted), outcome
            results = [e for e in events if isinstance(e, Result)]
            # The push became the next turn of the same execution, on the worker's CLI.
            assert [r.text for r in results] == ["answered first", "answered second"]
            assert results[-1].final
            late = await pushed.push("too late")
            assert isinstance(late, Rejected)
            assert "ended" in late.reason

            await pushed.continue_("third")
            continued = [e async for e in pushed.events]
            assert continued[0].seq == events[-1].seq + 1
            assert [e.seq for e in continued] == list(
                range(continued[0].seq, continued[0].seq + len(continued))
            )
            assert isinstance(continued[-1], Result)
            assert continued[-1].text == "answered third"

            aborted = await client.open(ExecuteParams(prompt="stop me"))
            async for event in aborted.events:
                if event.kind == "turn_started":
                    await aborted.abort()
                final = event
            assert isinstance(final, Aborted)


async def test_a_continue_carries_its_own_prompt_without_the_first_ones_images(
    redis_server: RedisServer,
) -> None:
    fake = FakeCLI(slow_answer)
    image = ImageInput.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            open_worker(url, fake),
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
        ):
            session = await client.open(ExecuteParams(prompt="look", images=[image]))
            [e async for e in session.events]
            await session.continue_("and now?")
            continued = [e async for e in session.events]
        async with coredis.Redis.from_url(url, decode_responses=True) as redis:
            entries = await redis.xrange(RedisKeys().jobs)
    assert isinstance(continued[-1], Result)
    assert continued[-1].text == "answered and now?"
    jobs = [Job.from_fields(entry.field_values) for entry in entries]
    assert [(job.kind, job.params["prompt"]) for job in jobs] == [
        ("open", "look"),
        ("continue", "and now?"),
    ]
    assert len(jobs[0].params["images"]) == 1
    assert (jobs[1].params["images"], jobs[1].params["fork_session"]) == ([], False)


async def test_a_continues_model_mode_and_images_reach_the_worker_and_the_first_two_stay(
    redis_server: RedisServer,
) -> None:
    fake = FakeCLI(slow_answer)
    image = ImageInput.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            open_worker(url, fake),
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
        ):
            session = await client.open(ExecuteParams(prompt="first"))
            [e async for e in session.events]
            await session.continue_("look", model="haiku", permission_mode="plan", images=[image])
            looked = [e async for e in session.events]
            await session.continue_("and now?")
            [e async for e in session.events]
        async with coredis.Redis.from_url(url, decode_responses=True) as redis:
            entries = await redis.xrange(RedisKeys().jobs)
    (ready,) = [e for e in looked if isinstance(e, AdapterReady)]
    haiku = ExecuteParams(prompt="x", model="haiku").resolved_model
    assert (ready.prompt, ready.model, ready.images) == ("look", haiku, 1)
    assert ready.permission_mode == "plan"
    jobs = [Job.from_fields(entry.field_values) for entry in entries]
    assert [job.params["prompt"] for job in jobs] == ["first", "look", "and now?"]
    assert "model" not in jobs[0].params
    assert (jobs[1].params["model"], jobs[1].params["permission_mode"]) == ("haiku", "plan")
    assert len(jobs[1].params["images"]) == 1
    # the model and mode are the session's from then on; the images went with their prompt
    assert (jobs[2].params["model"], jobs[2].params["permission_mode"]) == ("haiku", "plan")
    assert jobs[2].params["images"] == []
    assert [t.options.model for t in fake.transports] == [None, haiku, haiku]


async def test_a_client_reconnects_to_another_gateway_and_gets_an_exact_replay(
    redis_server: RedisServer,
) -> None:
    async def chatty(turn: FakeTurn) -> None:
        for i in range(20):
            await turn.text(f"part {i} ")

    fake = FakeCLI(chatty)
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            open_worker(url, fake),
            open_gateway(url) as (_one, port_one),
            open_gateway(url) as (_two, port_two),
        ):
            async with connect_gateway(
                f"ws://127.0.0.1:{port_one}/", token=TOKEN, config=CLIENT
            ) as client:
                session = await client.open(ExecuteParams(prompt="talk"))
                first_part = []
                async for event in session.events:
                    first_part.append(event)
                    if len(first_part) == 5:
                        break
                sid = session.id
            async with connect_gateway(
                f"ws://127.0.0.1:{port_two}/", token=TOKEN, config=CLIENT
            ) as client:
                again = await client.attach(sid, last_seq=5)
                rest = [e async for e in again.events]
                again.close()
                whole = [e async for e in (await client.attach(sid, last_seq=0)).events]
    assert [e.seq for e in first_part + rest] == list(range(1, len(whole) + 1))
    assert first_part + rest == whole
    assert isinstance(whole[-1], Result)


async def test_principals_see_only_their_sessions(redis_server: RedisServer) -> None:
    alice, bob = "alice-cluster-token-0123456", "bob-cluster-token-0123456789"
    tokens = {alice: Principal(name="alice"), bob: Principal(name="bob")}
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            open_worker(url, FakeCLI()),
            open_gateway(url, tokens=tokens) as (_fleet, port),
        ):
            async with connect_gateway(
                f"ws://127.0.0.1:{port}/", token=alice, config=CLIENT
            ) as client:
                mine = await client.open(ExecuteParams(prompt="mine"))
                [e async for e in mine.events]
                assert [s.session for s in await client.list()] == [mine.id]
            async with connect_gateway(
                f"ws://127.0.0.1:{port}/", token=bob, config=CLIENT
            ) as client:
                assert await client.list() == ()
                # Exactly what an id that never existed gets: no existence leak.
                with pytest.raises(SessionLostError, match="no longer knows it"):
                    await client.attach(mine.id, last_seq=0)


async def test_live_controls_reach_a_session_through_its_worker(
    redis_server: RedisServer,
) -> None:
    url = redis_server.url
    fake = FakeCLI(slow_answer)
    with trio.fail_after(30):
        async with (
            open_worker(url, fake),
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
        ):
            session = await client.open(ExecuteParams(prompt="x"))
            async for event in session.events:
                if event.kind == "turn_started":
                    break
            await session.set_model("opus")
            await session.set_permission_mode("plan")
            await session.abort()
            with pytest.raises(RemoteOpError) as ended:
                await session.set_model("sonnet")
    (transport,) = fake.transports
    subtypes = [(f["request"]["subtype"], f["request"]) for f in transport.control_requests]
    assert ("set_model", {"subtype": "set_model", "model": "opus"}) in subtypes
    assert ("set_permission_mode", {"subtype": "set_permission_mode", "mode": "plan"}) in subtypes
    assert ended.value.code == "control_refused"
    assert "has ended" in str(ended.value)


async def test_a_push_to_a_worker_that_does_not_answer_is_rejected_in_time(
    redis_server: RedisServer,
) -> None:
    url = redis_server.url
    with trio.fail_after(30):
        async with (
            open_worker(url, FakeCLI(slow_answer)) as worker,
            open_gateway(url, command_timeout=1.0) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
        ):
            session = await client.open(ExecuteParams(prompt="x"))
            async for event in session.events:
                if event.kind == "turn_started":
                    break
            # The worker stops reading its commands (a stalled node).
            worker.scope.cancel()
            started = trio.current_time()
            outcome = await session.push("anyone?")
            waited = trio.current_time() - started
    assert isinstance(outcome, Rejected)
    assert f"worker {worker.worker.id} did not answer within 1 s" in outcome.reason
    assert waited < 5


async def test_a_dead_workers_session_moves_and_finishes_elsewhere(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker running a session dies mid-turn (its tasks and CLIs gone at once): after
    ``dead_after`` another worker claims the job, stores the move event, runs the turn again
    with the push that was accepted and not confirmed; the client sees the first part, the
    move event, then the moved execution to its end; the job is acknowledged once."""

    async def turn(turn: FakeTurn) -> None:
        await turn.sleep(0.6)
        await turn.text(f"answered {turn.messages[-1].text}")

    url = redis_server.url
    caplog.set_level(logging.INFO, logger="claude_trio.cli.worker")
    with trio.fail_after(40):
        async with (
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
            trio.open_nursery() as nursery,
        ):
            doomed_scope = trio.CancelScope()
            doomed: list[RunningWorker] = []
            up = trio.Event()

            async def run_doomed() -> None:
                with doomed_scope:
                    async with open_worker(url, FakeCLI(turn)) as w:
                        doomed.append(w)
                        up.set()
                        await trio.sleep_forever()

            nursery.start_soon(run_doomed)
            await up.wait()
            session = await client.open(ExecuteParams(prompt="first"))
            events: list[Event] = []
            async for event in session.events:
                events.append(event)
                if event.kind == "turn_started":
                    pushed = await session.push("second")
                    assert isinstance(pushed, Accepted)
                    doomed_scope.cancel()  # the worker dies mid-turn
                    break
            async with open_worker(url, FakeCLI(turn)) as heir:
                async for event in session.events:
                    events.append(event)
                # The job is acknowledged after its final event is stored.
                await heir.worker.wait_idle(trio.current_time() + 5)
            nursery.cancel_scope.cancel()

    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    moved = [e for e in events if e.kind == "warning" and e.code == "session_moved"]
    assert len(moved) == 1
    assert f"from worker {doomed[0].worker.id} to worker {heir.worker.id}" in moved[0].message
    after = events[events.index(moved[0]) + 1 :]
    results = [e for e in after if isinstance(e, Result)]
    # The turn in flight ran again from its prompt, and the accepted push was delivered again.
    assert [r.text for r in results][-1] == "answered second"
    assert "answered first" in [r.text for r in results]
    assert results[-1].final
    assert not any(isinstance(e, Result) for e in events[: events.index(moved[0])])
    assert heir.worker.moved_in == 1
    assert heir.worker.acknowledged == 1
    assert heir.worker.acknowledged_twice == 0
    assert doomed[0].worker.acknowledged == 0
    # The heir says so, in one line: which session, from which worker, after which seq.
    takeovers = [r for r in caplog.records if getattr(r, "event", None) == "takeover"]
    assert [r.getMessage() for r in takeovers] == [
        f"worker {heir.worker.id}: took over session {session.id} from worker "
        f"{doomed[0].worker.id} at seq {moved[0].seq - 1}"
    ]


async def test_an_answer_reaches_the_worker_and_a_wrong_one_is_rejected(
    redis_server: RedisServer,
) -> None:
    question = {
        "question": "Which color?",
        "header": "Color",
        "options": [{"label": "red", "description": ""}, {"label": "blue", "description": ""}],
        "multiSelect": False,
    }
    replies: list[dict[str, object]] = []

    async def ask(turn: FakeTurn) -> None:
        replies.append(await turn.ask_permission("AskUserQuestion", {"questions": [question]}))
        await turn.text("thanks")

    url = redis_server.url
    with trio.fail_after(30):
        async with (
            open_worker(url, FakeCLI(ask)),
            open_gateway(url) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CLIENT) as client,
        ):
            session = await client.open(ExecuteParams(prompt="ask me"))
            async for event in session.events:
                if isinstance(event, UserInputRequest):
                    wrong = await session.answer("no-such-request", "red")
                    assert isinstance(wrong, AnswerRejected)
                    right = await session.answer(event.request_id, {"Which color?": "blue"})
                    assert right == AnswerAccepted(request_id=event.request_id)
                final = event
    assert isinstance(final, Result)
    assert final.text == "thanks"
    (reply,) = replies
    assert reply["updatedInput"]["answers"] == {"Which color?": "blue"}  # type: ignore[index]


async def test_a_job_that_cannot_run_ends_its_session_with_an_error(
    redis_server: RedisServer,
) -> None:
    """Parameters that do not decode (a job written by something else than a gateway) end
    the session with a fatal error event, and its job is acknowledged: nobody waits."""
    keys = RedisKeys()
    url = redis_server.url
    record = SessionRecord(session="s-bad", principal=None, host="", label=None, state="waiting")
    with trio.fail_after(20):
        async with (
            coredis.Redis.from_url(url, decode_responses=True) as redis,
            open_worker(url, FakeCLI()) as worker,
        ):
            await redis.hset(keys.session("s-bad"), record.to_fields())
            job = Job(kind="open", session="s-bad", params={"prompt": "x", "max_turns": "many"})
            await redis.xadd(keys.jobs, job.to_fields())
            got = await redis.xread({keys.events("s-bad"): "0-0"}, block=5000)
            for _ in range(250):  # the job is acknowledged right after the event is stored
                pending = await redis.xpending(keys.jobs, keys.workers_group)
                if not pending.pending:
                    break
                await trio.sleep(0.02)
            assert worker.worker.acknowledged == 1
            state = await redis.hget(keys.session("s-bad"), "state")
    assert got is not None
    (entry,) = got[keys.events("s-bad")]
    (event,) = entry_events(entry.identifier, entry.field_values)
    assert isinstance(event, Error)
    assert event.fatal
    assert "max_turns" in event.message
    assert pending.pending == 0
    assert state == "ended"
