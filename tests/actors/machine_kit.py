"""Generated interleavings of a session over the scripted fake CLI: the model and the checker.

An :class:`Example` is two scripts drawn independently:

* what the CLI does, turn by turn (:class:`Turn` of :data:`CliStep`): stream text, run a tool
  for a while (the fold point for pushes), start a background subagent (``task_started`` ...
  ``task_notification`` + a follow-up turn through ``FakeTurn.wake``), ask the user
  (``AskUserQuestion`` through ``can_use_tool``), or crash (``cli.exit(code, stderr=...)``);
* what the user does (:data:`UserStep`), each after a drawn virtual delay: push, answer (in
  ``"manual"`` mode; or an ``on_user_input`` handler that answers after a delay), abort, leave
  the ``async with`` block mid-execution, or stall the consumer (it stops reading for a while,
  so backpressure holds the SDK's reader).

:func:`run_example` runs one example in a fresh ``trio.run`` under
``MockClock(autojump_threshold=0)`` and returns a :class:`Trace`; :func:`check_trace` asserts the
session's invariants on it. Both are plain functions so a regression found by Hypothesis can be
replayed as a named test.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias

import attrs
import trio
import trio.testing
from session_kit import assert_no_leak, check_stream, collect, fake_session

from claude_trio import (
    Aborted,
    Accepted,
    AnswerAccepted,
    AnswerRejected,
    Error,
    Event,
    ExecuteParams,
    Rejected,
    Result,
    UserInputRequest,
    UserInputResolved,
)
from claude_trio.events import WarningEvent
from claude_trio.testing import FakeCLI, FakeTurn
from claude_trio.testing.fake_cli import RequestCancelledError, SDKControlError

QUESTION = "Pick one?"
ASK_INPUT = {
    "questions": [
        {
            "question": QUESTION,
            "header": "Pick",
            "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}],
            "multiSelect": False,
        }
    ]
}
#: A run that has not finished after this much VIRTUAL time is stuck (every scripted delay is a
#: few seconds; our deadlines are at most close_grace = 11 s).
HANG_SECONDS = 10_000.0


# -- the CLI's script ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Text:
    chunks: int
    delay: float


@attrs.frozen(kw_only=True)
class Tool:
    duration: float


@attrs.frozen(kw_only=True)
class Background:
    duration: float


@attrs.frozen(kw_only=True)
class Ask:
    pass


@attrs.frozen(kw_only=True)
class Crash:
    code: int


CliStep: TypeAlias = Text | Tool | Background | Ask | Crash


@attrs.frozen(kw_only=True)
class Turn:
    steps: tuple[CliStep, ...]


# -- the user's script --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Push:
    after: float


@attrs.frozen(kw_only=True)
class Answer:
    after: float
    valid: bool


@attrs.frozen(kw_only=True)
class Abort:
    after: float


@attrs.frozen(kw_only=True)
class WaitFor:
    """Wait until the consumer sees the next event of ``kind`` (or the end), then ``after``."""

    kind: Literal["result", "tool_use", "user_input_request", "subagent_started", "text_delta"]
    after: float


@attrs.frozen(kw_only=True)
class Leave:
    """Leave the ``async with`` block (what a ``break`` or an exception does)."""

    after: float


@attrs.frozen(kw_only=True)
class Stall:
    """The consumer reads nothing for ``seconds`` from its next event on."""

    after: float
    seconds: float


UserStep: TypeAlias = Push | Answer | Abort | WaitFor | Leave | Stall


@attrs.frozen(kw_only=True)
class Handler:
    """An ``on_user_input`` handler: after ``delay`` it answers, returns None, or raises."""

    delay: float
    reply: Literal["answer", "none", "raise"]


InputMode: TypeAlias = Literal["manual", "none"] | Handler


@attrs.frozen(kw_only=True)
class Example:
    turns: tuple[Turn, ...]
    user: tuple[UserStep, ...]
    input_mode: InputMode
    user_input_timeout: float


# -- what a run leaves behind -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PushRecord:
    text: str
    outcome: Accepted | Rejected
    ended_before: bool
    elapsed: float  # virtual time the call took: 0, the outcome is decided at once


@attrs.frozen(kw_only=True)
class AnswerRecord:
    request_id: str
    valid: bool
    outcome: AnswerAccepted | AnswerRejected
    at: float


@attrs.define
class Trace:
    events: list[Event] = attrs.Factory(list)
    pushes: list[PushRecord] = attrs.Factory(list)
    answers: list[AnswerRecord] = attrs.Factory(list)
    #: abort() was called while the execution had not ended yet.
    aborted_live: bool = False
    #: virtual time the consumer saw each request (by id) and resolution ("resolved:" + id)
    seen_at: dict[str, float] = attrs.Factory(dict)
    #: the script reached a Crash step (with this code) before anything else ended the run.
    crashed: int | None = None
    fake: FakeCLI | None = None
    #: virtual times a tool finished its work (its side effect)
    tool_done: list[float] = attrs.Factory(list)
    #: virtual time of the first stop: abort() returned, or the block was left
    stopped_at: float | None = None
    #: virtual time each abort() call took
    abort_took: list[float] = attrs.Factory(list)
    #: the block was left while the execution had not ended yet, at this virtual time
    left_live_at: float | None = None
    #: virtual time the async with block was left
    exited_at: float | None = None


# -- running one example -------------------------------------------------------------------------


def _responder(example: Example, trace: Trace) -> Callable[[FakeTurn], Awaitable[None]]:
    tasks = iter(range(1, 1_000))

    async def follow_up(turn: FakeTurn) -> None:
        await turn.text("the background task finished")

    async def run_step(turn: FakeTurn, step: CliStep) -> None:
        await trio.lowlevel.checkpoint()
        match step:
            case Text(chunks=chunks, delay=delay):
                await turn.text("x" * chunks, chunk=1, delay=delay)
            case Tool(duration=duration):
                tool = await turn.tool_use("Bash", {"command": "make"})
                await turn.sleep(duration)
                trace.tool_done.append(trio.current_time())
                await turn.tool_result(tool, "built")
            case Background(duration=duration):
                task_id = f"task-{next(tasks)}"
                tool = await turn.tool_use("Agent", {"prompt": "dig", "run_in_background": True})
                await turn.task_started(task_id, tool_use_id=tool, description="dig")
                await turn.tool_result(tool, "started in the background")

                async def job() -> None:
                    await trio.sleep(duration)
                    await turn.task_notification(task_id, status="completed", summary="found")
                    turn.wake(follow_up)

                turn.background(job)
            case Ask():
                try:
                    reply = await turn.ask_permission("AskUserQuestion", ASK_INPUT)
                except (SDKControlError, RequestCancelledError):
                    reply = {}
                await turn.text(f"the user said {reply.get('updatedInput', {}).get('answers')}")
            case Crash(code=code):
                if trace.crashed is None:
                    trace.crashed = code
                await turn.exit(code, stderr=[f"fatal: scripted crash {code}"])

    async def respond(turn: FakeTurn) -> None:
        await trio.lowlevel.checkpoint()
        index = turn.number - 1
        if index >= len(example.turns):
            await turn.text("ok")
            return
        for step in example.turns[index].steps:
            await run_step(turn, step)

    return respond


def _on_user_input(mode: InputMode) -> Any:
    match mode:
        case "manual":
            return "manual"
        case "none":
            return None
        case Handler(delay=delay, reply=reply):

            async def handler(request: UserInputRequest) -> Any:
                await trio.sleep(delay)
                match reply:
                    case "answer":
                        return "A"
                    case "none":
                        return None
                    case "raise":
                        raise ValueError("the handler gave up")

            return handler


async def _run(example: Example, trace: Trace) -> None:
    fake = FakeCLI(_responder(example, trace))
    trace.fake = fake
    params = ExecuteParams(prompt="go", user_input_timeout=example.user_input_timeout)
    requests: list[str] = []
    resolved: set[str] = set()
    seen: dict[str, int] = {}
    changed = trio.Event()
    stall_until = 0.0

    async def on_event(event: Event) -> None:
        nonlocal changed
        if trio.current_time() < stall_until:
            await trio.sleep_until(stall_until)  # the consumer fell behind
        seen[event.kind] = seen.get(event.kind, 0) + 1
        changed.set()
        changed = trio.Event()
        if isinstance(event, UserInputRequest):
            requests.append(event.request_id)
            trace.seen_at[event.request_id] = trio.current_time()
        elif isinstance(event, UserInputResolved):
            resolved.add(event.request_id)
            trace.seen_at[f"resolved:{event.request_id}"] = trio.current_time()

    leave = trio.CancelScope()
    with leave:
        async with fake_session(
            fake, params=params, on_user_input=_on_user_input(example.input_mode)
        ) as session:

            async def user() -> None:
                nonlocal stall_until
                await trio.lowlevel.checkpoint()
                for i, step in enumerate(example.user):
                    if isinstance(step, WaitFor):
                        target = seen.get(step.kind, 0) + 1
                        while seen.get(step.kind, 0) < target and not session.ended:
                            await changed.wait()
                    await trio.sleep(step.after)
                    match step:
                        case WaitFor():
                            pass
                        case Push():
                            ended = session.ended
                            before = trio.current_time()
                            outcome = await session.push(f"push-{i}")
                            trace.pushes.append(
                                PushRecord(
                                    text=f"push-{i}",
                                    outcome=outcome,
                                    ended_before=ended,
                                    elapsed=trio.current_time() - before,
                                )
                            )
                        case Answer(valid=valid):
                            open_ = [r for r in requests if r not in resolved]
                            request_id = open_[-1] if open_ else "ask-999"
                            answer: Any = "A" if valid else {"Not a question": "A"}
                            at = trio.current_time()
                            reply = await session.answer(request_id, answer)
                            record = AnswerRecord(
                                request_id=request_id, valid=valid, outcome=reply, at=at
                            )
                            trace.answers.append(record)
                        case Abort():
                            if not session.ended:
                                trace.aborted_live = True
                            before = trio.current_time()
                            await session.abort()
                            trace.abort_took.append(trio.current_time() - before)
                            if trace.stopped_at is None:
                                trace.stopped_at = trio.current_time()
                            assert session.ended, "abort() returned before the execution ended"
                        case Leave():
                            if not session.ended:
                                trace.left_live_at = trio.current_time()
                            if trace.stopped_at is None:
                                trace.stopped_at = trio.current_time()
                            leave.cancel()
                            return
                        case Stall(seconds=seconds):
                            stall_until = trio.current_time() + seconds

            async with trio.open_nursery() as nursery:
                nursery.start_soon(user)
                await collect(session, lambda e: _record(trace, e, on_event))
                changed.set()  # wake a WaitFor: the stream has ended
    trace.exited_at = trio.current_time()
    # What was queued up to the end can still be read after the block.
    trace.events.extend([event async for event in session.events])


async def _record(trace: Trace, event: Event, on_event: Callable[[Event], Awaitable[None]]) -> None:
    trace.events.append(event)
    await on_event(event)


def run_example(example: Example) -> Trace:
    """Run ``example`` in a fresh ``trio.run`` on a MockClock; a hang is an AssertionError."""
    trace = Trace()

    async def main() -> None:
        try:
            with trio.fail_after(HANG_SECONDS):
                await _run(example, trace)
        except trio.TooSlowError:
            kinds = [e.kind for e in trace.events]
            raise AssertionError(
                f"the run hung ({HANG_SECONDS:g} virtual s); events so far: {kinds}"
            ) from None

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return trace


# -- the invariants ------------------------------------------------------------------------------


def check_trace(example: Example, trace: Trace) -> None:
    events = trace.events
    fake = trace.fake
    assert fake is not None
    check_stream(events)
    assert_no_leak(fake)

    # Pushes: one outcome at once; Accepted -> delivered or reported; Rejected -> never sent.
    sent: dict[str, str] = {}  # text -> uuid, as the CLI received them
    for transport in fake.transports:
        for frame in transport.user_messages:
            sent[frame["message"]["content"]] = frame["uuid"]
    echoed = {
        f.get("uuid")
        for t in fake.transports
        for f in t.emitted_frames()
        if f.get("type") == "user" and f.get("isReplay")
    }
    listed = {u for e in events if isinstance(e, Result) for u in e.user_message_uuids}
    lost_warnings = [
        e for e in events if isinstance(e, WarningEvent) and e.code == "push_undelivered"
    ]
    for push in trace.pushes:
        assert push.elapsed == 0, f"{push.text}: push() took {push.elapsed} s of virtual time"
        match push.outcome:
            case Accepted(uuid=uuid):
                assert not push.ended_before, f"{push.text} accepted after the execution ended"
                delivered = sent.get(push.text) == uuid and (uuid in listed or uuid in echoed)
                reported = [w for w in lost_warnings if uuid in w.message]
                assert delivered or reported, f"{push.text} ({uuid}) was accepted and lost"
                assert len(reported) <= 1, f"{push.text} reported lost {len(reported)} times"
                if reported and "aborted" not in reported[0].message:
                    # a dead CLI lists nothing afterwards. (After an abort, a CLI that ran the
                    # queued push anyway may still list it: the warning is given at abort time.)
                    assert uuid not in listed, f"{push.text} reported lost but a result lists it"
            case Rejected(reason=reason):
                assert reason, "a rejection without a reason"
                assert push.text not in sent, f"rejected {push.text} reached the CLI"
    accepted = {p.outcome.uuid for p in trace.pushes if isinstance(p.outcome, Accepted)}
    if "go" in sent:
        accepted.add(sent["go"])  # the first prompt is accounted for like a push
    for warning in lost_warnings:
        assert any(u in warning.message for u in accepted), f"lost what? {warning.message}"

    # Stop means stop: abort() returns at once (the fake CLI confirms at once), no tool
    # finishes its work after the first stop, and leaving the block waits for nothing.
    assert all(took == 0 for took in trace.abort_took), f"abort() took {trace.abort_took}"
    if trace.stopped_at is not None:
        late = [t for t in trace.tool_done if t > trace.stopped_at]
        assert not late, f"tools finished at {late}, after the stop at {trace.stopped_at}"
    if trace.left_live_at is not None:
        assert trace.exited_at == trace.left_live_at, (
            f"left at {trace.left_live_at}, out of the block at {trace.exited_at}"
        )

    # The execution's end: its kind follows from what ended it.
    last = events[-1]
    aborted = [e for e in events if isinstance(e, Aborted)]
    if trace.aborted_live or trace.left_live_at is not None:
        assert isinstance(last, Aborted), f"the run was stopped, but it ended with {last}"
        assert len(aborted) == 1, f"{len(aborted)} aborted events"
    else:
        assert not aborted, "an aborted event without abort()"
        if trace.crashed is not None and not (isinstance(last, Result) and last.final):
            assert isinstance(last, Error)
            assert last.code == "cli_exited"
            if trace.crashed:  # exit 0 is "closed its output", with the same stderr tail
                assert f"exited with code {trace.crashed}" in last.message
            assert f"scripted crash {trace.crashed}" in last.message
        elif trace.crashed is None:
            assert isinstance(last, Result), f"no abort, no crash, but the run ended with {last}"
    if isinstance(last, Result):
        assert last.final
        # rule 3 of lifecycle.py: nothing pending at the end.
        for push in trace.pushes:
            if isinstance(push.outcome, Accepted):
                assert push.outcome.uuid in listed | echoed

    # User input: one resolution per request, consistent with the answers given.
    requests = [e for e in events if isinstance(e, UserInputRequest)]
    resolutions = [e for e in events if isinstance(e, UserInputResolved)]
    request_ids = [r.request_id for r in requests]
    assert len(set(request_ids)) == len(request_ids), f"duplicate requests: {request_ids}"
    by_id: dict[str, UserInputResolved] = {}
    for resolution in resolutions:
        assert resolution.request_id in request_ids, f"resolved unknown {resolution.request_id}"
        assert resolution.request_id not in by_id, f"{resolution.request_id} resolved twice"
        by_id[resolution.request_id] = resolution
    assert set(by_id) == set(request_ids), f"unresolved requests: {set(request_ids) - set(by_id)}"
    if example.input_mode == "none":
        assert not requests, "a user_input_request although user input is not intercepted"
    # A stalled consumer sees events late: the times it saw them are not when they happened.
    stalled = any(isinstance(step, Stall) for step in example.user)
    for request in requests:
        if stalled:
            continue
        # the deadline is stamped when the request is raised, user_input_timeout later
        assert request.deadline == trace.seen_at[request.request_id] + example.user_input_timeout
        resolution = by_id[request.request_id]
        if resolution.outcome == "expired" and example.input_mode == "manual":
            at = trace.seen_at[f"resolved:{request.request_id}"]
            assert at == request.deadline, f"expired at {at}, deadline {request.deadline}"
    accepted_answers: set[str] = set()
    for record in trace.answers:
        match record.outcome:
            case AnswerAccepted(request_id=rid):
                assert record.valid, f"an invalid answer to {rid} was accepted"
                assert rid not in accepted_answers, f"two answers to {rid} accepted"
                accepted_answers.add(rid)
                outcome = by_id[rid].outcome
                assert outcome in ("answered", "cancelled"), (
                    f"{rid}: the answer was accepted at {record.at} but the request was {outcome}"
                )
                if outcome == "answered":
                    assert by_id[rid].answer == {QUESTION: "A"}
                    assert stalled or trace.seen_at[f"resolved:{rid}"] == record.at
            case AnswerRejected(reason=reason):
                assert reason
    if example.input_mode == "manual":
        for rid, resolution in by_id.items():
            if resolution.outcome == "answered":
                assert rid in accepted_answers, f"{rid} answered, but no answer() was accepted"
            assert resolution.outcome in ("answered", "expired", "cancelled"), resolution
    if isinstance(example.input_mode, Handler):
        expected = {"answer": "answered", "none": "expired", "raise": "failed"}[
            example.input_mode.reply
        ]
        for rid, resolution in by_id.items():
            allowed = {expected, "cancelled"}
            if example.input_mode.delay >= example.user_input_timeout:
                allowed = {"expired", "cancelled"}
            if rid in accepted_answers:  # session.answer() beat the handler
                allowed.add("answered")
            assert resolution.outcome in allowed, f"{rid}: {resolution.outcome} not in {allowed}"

    # Usage: the running totals never decrease along the results.
    results = [e for e in events if isinstance(e, Result)]
    for before, after in itertools.pairwise(results):
        for total in ("execution_usage", "session_usage"):
            a, b = getattr(before, total), getattr(after, total)
            for field in ("input_tokens", "output_tokens", "cost_usd"):
                assert getattr(b, field) >= getattr(a, field), f"{total}.{field} decreased"
