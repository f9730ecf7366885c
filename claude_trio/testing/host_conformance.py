"""The behaviour contracts every session host keeps, as one suite you run against yours.

A session host (``claude_trio.actors.fanout.hosts.SessionHost``: a local ``Fleet``, a Redis
cluster's ``RedisFleet``, a ``GatewayClient``, or one you write) promises the same things
whichever it is. This suite checks them, the way ``claude_agent_sdk.testing``'s
``run_session_store_conformance`` checks a session store::

    from claude_trio import open_fleet
    from claude_trio.testing import conformance_cli, run_host_conformance

    async def test_my_fleet_is_a_session_host() -> None:
        await run_host_conformance(lambda: open_fleet(transport_factory=conformance_cli()))

``make_host`` is called once per contract, so each contract gets a host of its own; it returns
a host, an awaitable of one, or an async context manager of one (entered for the contract and
left after it: ``open_fleet(...)``, a client of your gateway, ...). The first contract a host
breaks raises :class:`HostConformanceError`, naming it and what broke; a contract that does
not finish within :data:`CONTRACT_DEADLINE` seconds (trio's clock) is broken too.

**The sessions must run the conformance script.** The suite needs sessions that do known
things, so the host's sessions must run on the CLI that :func:`conformance_cli` returns (a
``FakeCLI``: pass it as the ``transport_factory`` of the fleet that runs the sessions, in
this process, behind your gateway or in your cluster's workers). It reads what to do from the
prompt, so it can run any number of sessions, in any order, on any worker:

* ``say:<text>``: answers ``<text>``, one turn, with the fake's usage and cost;
* ``hold``: holds the turn until a pushed message arrives, then answers ``got <text>`` (an
  abort stops it at once);
* ``ask``: asks one question (``AskUserQuestion``: "Which color?", red or blue), then answers
  ``answered <the answer>``.

The contracts (:data:`CONTRACTS`), in the order they run:

1. ``open``: ``open`` returns a handle with an id; ``subscribe()`` yields its events, seq
   strictly increasing from 1, ending with exactly one final ``result``; the stream keeps the
   event contract (``check_contract``); its ``adapter_ready`` carries the prompt.
2. ``result``: ``result()`` is the execution's ``Transcript`` (its text, its final event), the
   same when asked again after the end.
3. ``get``: ``get(id)`` is a handle of the same session; an id the host never issued raises
   ``UnknownSessionError`` (from ``get`` and from ``continue_``).
4. ``list``: each session listed once, oldest first, with its label (or none), state
   ``ended``, one execution, its first and last seq, created and ended times, and its usage:
   not zero, the sum of what its events reported, and equal to ``handle.usage``.
5. ``replay``: ``subscribe(last_seq)`` on an ended session yields exactly the events after
   ``last_seq`` (from 0, the middle and the end; from the end, nothing), then ends.
6. ``push``: a push to a running execution is ``Accepted`` with a uuid, shows as a
   ``user_message`` event with that uuid and reaches the CLI; once the execution ended a push
   is ``Rejected`` with a reason.
7. ``abort``: aborting a running execution gives exactly one ``aborted`` event, its final one;
   aborting again, or after the end, changes nothing; ``list`` shows it ended.
8. ``continue``: ``continue_`` of a running session is refused (a ``ClaudeTrioError``); of an
   ended one it runs the next execution of the same session, its seqs following on, its
   ``adapter_ready`` carrying the new prompt, its ``result()`` that execution's; ``list``
   counts two executions and the usage of both. A continue with ``model=`` and
   ``permission_mode=`` runs with them (its ``adapter_ready`` shows them); its
   ``idempotency_key`` sent again with another model is refused (a ``ClaudeTrioError``).
9. ``answer``: a question shows as a ``user_input_request``; an answer to an unknown request
   is ``AnswerRejected``, the right one ``AnswerAccepted`` and reaches the CLI, a second one
   is ``AnswerRejected``.
10. ``idempotency``: ``open`` sent again with its ``idempotency_key`` returns the session the
    first one started (the same id, the same events) and starts no other (``list`` shows one);
    the key with other params is refused (a ``ClaudeTrioError``).
11. ``inbox``: ``inbox()`` opens with a snapshot; two sessions asking at once show as two
    items (their session, label, source, request id); one answered through
    ``inbox.answer`` is ``AnswerAccepted``, reaches the CLI and leaves with an ``answered``
    resolution (a second answer is ``AnswerRejected``); the other, aborted, leaves with
    ``cancelled`` or ``ended``; a new ``inbox()`` shows neither.
"""

from __future__ import annotations

import inspect
import uuid
import uuid as uuid_module
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeAlias

import attrs
import trio

from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout.hosts import SessionHandle, SessionHost
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import ClaudeTrioError, UnknownSessionError
from claude_trio.protocol.fanout.inbox import (
    InboxChange,
    InboxResolved,
    InboxSnapshot,
)
from claude_trio.protocol.fanout.wire import SessionInfo
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    Event,
    Result,
    TurnStarted,
    UserInputRequest,
    UserMessage,
)
from claude_trio.protocol.session.lifecycle import Accepted, Rejected
from claude_trio.protocol.session.transcript import Transcript, ends_execution
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage, add_usage
from claude_trio.testing.contract import check_contract
from claude_trio.testing.fake_cli import FakeCLI, FakeTurn

__all__ = [
    "CONTRACTS",
    "CONTRACT_DEADLINE",
    "HostConformanceError",
    "HostFactory",
    "conformance_cli",
    "run_host_conformance",
]

HostFactory: TypeAlias = Callable[
    [], SessionHost | Awaitable[SessionHost] | AbstractAsyncContextManager[SessionHost]
]
"""What :func:`run_host_conformance` takes: it makes a host, an awaitable of one, or an async
context manager of one."""

CONTRACT_DEADLINE = 60.0
"""Seconds (trio's clock) a contract may take, host setup included."""

QUESTION = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "red", "description": ""}, {"label": "blue", "description": ""}],
    "multiSelect": False,
}
#: How often a held turn looks for a pushed message (seconds, trio's clock).
HOLD_POLL = 0.02


class HostConformanceError(ClaudeTrioError, AssertionError):
    """A host broke a contract: ``contract`` is its name (one of :data:`CONTRACTS`),
    ``number`` its place, and the message says what broke."""

    def __init__(self, number: int, contract: str, problem: str) -> None:
        self.number = number
        self.contract = contract
        self.problem = problem
        super().__init__(f"host contract {number} ({contract}) is broken: {problem}")


class _Broken(Exception):
    """What broke, raised inside a contract (the runner names the contract)."""


def _expect(condition: object, problem: str) -> None:
    if not condition:
        raise _Broken(problem)


# -- the script the host's sessions run ------------------------------------------------------


async def _conformance_turn(turn: FakeTurn) -> None:
    prompt = turn.prompt
    if prompt.startswith("say:"):
        await turn.text(prompt.removeprefix("say:"))
    elif prompt == "hold":
        while not (pushed := await turn.fold_pending()):
            await turn.sleep(HOLD_POLL)
        await turn.text("got " + " | ".join(message.text for message in pushed))
    elif prompt == "ask":
        reply = await turn.ask_permission("AskUserQuestion", {"questions": [QUESTION]})
        answers = reply.get("updatedInput", {}).get("answers", {})
        await turn.text(f"answered {answers.get('Which color?')}")
    else:
        await turn.text(f"the conformance script has no prompt {prompt!r}")


def conformance_cli() -> FakeCLI:
    """The fake CLI the host's sessions must run (see the module docstring)."""
    return FakeCLI(_conformance_turn)


# -- helpers -----------------------------------------------------------------------------------


@asynccontextmanager
async def _fresh(make_host: HostFactory) -> AsyncIterator[SessionHost]:
    made = make_host()
    if isinstance(made, AbstractAsyncContextManager) or hasattr(made, "__aenter__"):
        async with made as host:  # type: ignore[union-attr]
            yield host
        return
    if inspect.isawaitable(made):
        yield await made
        return
    await trio.lowlevel.checkpoint()
    yield made


def _say(text: str) -> ExecuteParams:
    return ExecuteParams(prompt=f"say:{text}")


async def _events(handle: SessionHandle, last_seq: int | None = None) -> list[Event]:
    async with handle.subscribe(last_seq) as channel:
        return [event async for event in channel]


def _plain(events: Sequence[Event]) -> list[Event]:
    """Events as compared across deliveries (``raw`` is local to one process)."""
    return [attrs.evolve(event, raw=None) for event in events]


def _usage_of(events: Sequence[Event]) -> Usage:
    total = ZERO_USAGE
    for event in events:
        if isinstance(event, Result | Aborted) and event.usage is not None:
            total = add_usage(total, event.usage)
    return total


def _check_prompt(events: Sequence[Event], prompt: str, *, what: str) -> None:
    shown = [event.prompt for event in events if isinstance(event, AdapterReady)]
    _expect(shown == [prompt], f"{what}: adapter_ready shows the prompts {shown}, not {prompt!r}")


def _check_execution(events: list[Event], *, first_seq: int, what: str) -> None:
    _expect(events, f"{what}: subscribe() yielded no event")
    seqs = [event.seq for event in events]
    _expect(
        seqs == list(range(first_seq, first_seq + len(events))),
        f"{what}: the seqs are not {first_seq}, {first_seq + 1}, ... in order: {seqs}",
    )
    finals = [event for event in events if ends_execution(event)]
    _expect(
        len(finals) == 1 and finals[0] is events[-1],
        f"{what}: not exactly one final event, at the end: {[e.kind for e in finals]}",
    )
    try:
        check_contract(events)
    except AssertionError as exc:
        raise _Broken(f"{what}: the stream breaks the event contract: {exc}") from None


async def _info(host: SessionHost, session_id: str) -> SessionInfo:
    listed = [info for info in await host.list() if info.session == session_id]
    _expect(len(listed) == 1, f"list() shows session {session_id} {len(listed)} times, not once")
    return listed[0]


async def _wait_for(channel: trio.abc.ReceiveChannel[Event], kind: type[Event]) -> Event:
    async for event in channel:
        if isinstance(event, kind):
            return event
        _expect(not ends_execution(event), f"the execution ended before a {kind.kind} event")
    raise _Broken(f"the events ended before a {kind.kind} event")


# -- the contracts -----------------------------------------------------------------------------


async def _open(host: SessionHost) -> None:
    handle = await host.open(_say("hello"))
    _expect(isinstance(handle, SessionHandle), f"open() returned {handle!r}, not a handle")
    _expect(isinstance(handle.id, str) and handle.id, f"the handle's id is {handle.id!r}")
    events = await _events(handle)
    _check_execution(events, first_seq=1, what="a new session")
    _check_prompt(events, "say:hello", what="a new session")
    final = events[-1]
    _expect(
        isinstance(final, Result) and not final.is_error and final.text == "hello",
        f"the final event is {final!r}, not the result 'hello' the script says",
    )


async def _result(host: SessionHost) -> None:
    handle = await host.open(_say("the answer"))
    transcript = await handle.result()
    _expect(isinstance(transcript, Transcript), f"result() returned {transcript!r}")
    _expect(
        transcript.text == "the answer",
        f"result().text is {transcript.text!r}, not 'the answer'",
    )
    _expect(
        isinstance(transcript.terminal, Result), f"result().terminal is {transcript.terminal!r}"
    )
    _expect(transcript.events and transcript.events[0].seq == 1, "result() misses events")
    again = await handle.result()
    _expect(
        again.text == transcript.text and again.terminal == transcript.terminal,
        "result() after the end is not the same transcript",
    )


async def _get(host: SessionHost) -> None:
    handle = await host.open(_say("found"))
    await handle.result()
    found = await host.get(handle.id)
    _expect(found.id == handle.id, f"get({handle.id!r}) returned session {found.id!r}")
    _expect((await found.result()).text == "found", "get()'s handle has another result")
    unknown = f"no-such-session-{uuid_module.uuid4()}"
    try:
        await host.get(unknown)
    except UnknownSessionError:
        pass
    else:
        raise _Broken("get() of an unknown id did not raise UnknownSessionError")
    try:
        await host.continue_(unknown, "say:x")
    except UnknownSessionError:
        pass
    else:
        raise _Broken("continue_() of an unknown id did not raise UnknownSessionError")


async def _list(host: SessionHost) -> None:
    labelled = await host.open(_say("one"), label="first")
    plain = await host.open(_say("two"))
    for handle in (labelled, plain):
        await handle.result()
    listed = [info.session for info in await host.list()]
    _expect(
        labelled.id in listed and plain.id in listed
        and listed.index(labelled.id) < listed.index(plain.id),
        "list() does not show the two sessions, oldest first",
    )  # fmt: skip
    for handle, label in ((labelled, "first"), (plain, None)):
        info = await _info(host, handle.id)
        events = await _events(handle, 0)
        _expect(info.label == label, f"list() says label {info.label!r}, not {label!r}")
        _expect(info.state == "ended", f"list() says state {info.state!r} after the end")
        _expect(info.executions == 1, f"list() says {info.executions} executions, not 1")
        _expect(info.first_seq == 1, f"list() says first_seq {info.first_seq}, not 1")
        _expect(
            info.last_seq == events[-1].seq,
            f"list() says last_seq {info.last_seq}; the last event is {events[-1].seq}",
        )
        _expect(
            info.ended_at is not None and info.created_at <= info.ended_at,
            f"list() says created_at {info.created_at}, ended_at {info.ended_at}",
        )
        _expect(info.usage != ZERO_USAGE, "list() says the session used nothing")
        _expect(
            info.usage == _usage_of(events),
            f"list() says usage {info.usage}; its events report {_usage_of(events)}",
        )
        _expect(
            handle.usage == info.usage,
            f"handle.usage is {handle.usage}; list() says {info.usage}",
        )


async def _replay(host: SessionHost) -> None:
    handle = await host.open(_say("a longer answer to replay in pieces"))
    await handle.result()
    everything = _plain(await _events(handle, 0))
    last = everything[-1].seq
    for start in (0, last // 2, last - 1, last):
        replayed = _plain(await _events(handle, start))
        expected = [event for event in everything if event.seq > start]
        _expect(
            replayed == expected,
            f"subscribe({start}) yielded seqs {[e.seq for e in replayed]}, not "
            f"{[e.seq for e in expected]}",
        )


async def _push(host: SessionHost) -> None:
    handle = await host.open(ExecuteParams(prompt="hold"))
    async with handle.subscribe() as events:
        await _wait_for(events, TurnStarted)
        pushed = await handle.push("ping")
        _expect(isinstance(pushed, Accepted), f"a push to a running execution: {pushed!r}")
        assert isinstance(pushed, Accepted)
        _expect(pushed.uuid, "an accepted push has no uuid")
        rest = [event async for event in events]
    echoes = [e for e in rest if isinstance(e, UserMessage) and e.uuid == pushed.uuid]
    _expect(len(echoes) == 1, f"{len(echoes)} user_message events carry the push's uuid")
    final = rest[-1] if rest else None
    _expect(
        isinstance(final, Result) and final.text == "got ping",
        f"the push did not reach the CLI: the final event is {final!r}",
    )
    late = await handle.push("too late")
    _expect(
        isinstance(late, Rejected) and late.reason,
        f"a push after the end is {late!r}, not Rejected with a reason",
    )


async def _abort(host: SessionHost) -> None:
    handle = await host.open(ExecuteParams(prompt="hold"))
    async with handle.subscribe() as events:
        await _wait_for(events, TurnStarted)
        await handle.abort()
        rest = [event async for event in events]
    everything = await _events(handle, 0)
    aborted = [event for event in everything if isinstance(event, Aborted)]
    _expect(len(aborted) == 1, f"{len(aborted)} aborted events, not one")
    _expect(everything[-1] is aborted[0], "the aborted event is not the last one")
    _expect(rest and rest[-1] == aborted[0], "the subscription did not end with the abort")
    _check_execution(everything, first_seq=1, what="an aborted session")
    await handle.abort()
    again = await _events(handle, 0)
    _expect(
        [e.seq for e in again] == [e.seq for e in everything],
        "aborting again after the end changed the events",
    )
    info = await _info(host, handle.id)
    _expect(info.state == "ended", f"list() says {info.state!r} after the abort")


async def _continue(host: SessionHost) -> None:
    running = await host.open(ExecuteParams(prompt="hold"))
    async with running.subscribe() as events:
        await _wait_for(events, TurnStarted)
        try:
            await host.continue_(running.id, "say:too soon")
        except ClaudeTrioError:
            pass
        else:
            raise _Broken("continue_() of a running session was not refused")
        finally:
            with trio.CancelScope(shield=True):
                await running.abort()
    handle = await host.open(_say("first"))
    first = await _events(handle)
    continued = await host.continue_(handle.id, "say:second")
    _expect(continued.id == handle.id, f"continue_() returned session {continued.id!r}")
    transcript = await continued.result()
    _expect(transcript.text == "second", f"the next execution's result is {transcript.text!r}")
    second = await _events(continued, first[-1].seq)
    _check_execution(second, first_seq=first[-1].seq + 1, what="the continued execution")
    _check_prompt(second, "say:second", what="the continued execution")
    info = await _info(host, handle.id)
    _expect(info.executions == 2, f"list() says {info.executions} executions, not 2")
    _expect(
        info.first_seq == first[-1].seq + 1,
        f"list() says first_seq {info.first_seq}, not {first[-1].seq + 1}",
    )
    both = _usage_of(first + second)
    _expect(info.usage == both, f"list() says usage {info.usage}; both executions: {both}")
    _expect(continued.usage == both, f"handle.usage is {continued.usage}; both: {both}")
    await _continue_with_options(host, continued, second[-1].seq)


async def _continue_with_options(host: SessionHost, handle: SessionHandle, last_seq: int) -> None:
    """A continue that sets the model and the permission mode runs with them (its
    ``adapter_ready`` shows them); its key sent again with other options is refused."""
    key = f"conformance-{handle.id}"
    third = await host.continue_(
        handle.id, "say:third", model="haiku", permission_mode="plan", idempotency_key=key
    )
    transcript = await third.result()
    _expect(transcript.text == "third", f"the third execution's result is {transcript.text!r}")
    events = await _events(third, last_seq)
    _check_prompt(events, "say:third", what="the execution continued with a model and mode")
    ready = next(event for event in events if isinstance(event, AdapterReady))
    model = ExecuteParams(prompt="x", model="haiku").resolved_model
    _expect(
        (ready.model, ready.permission_mode) == (model, "plan"),
        f"continue_(model='haiku', permission_mode='plan') ran with model {ready.model!r} and "
        f"permission mode {ready.permission_mode!r}",
    )
    try:
        await host.continue_(handle.id, "say:third", model="opus", idempotency_key=key)
    except ClaudeTrioError:
        pass
    else:
        raise _Broken("a continue's idempotency key sent again with another model was accepted")


async def _answer(host: SessionHost) -> None:
    handle = await host.open(ExecuteParams(prompt="ask"))
    async with handle.subscribe() as events:
        request = await _wait_for(events, UserInputRequest)
        assert isinstance(request, UserInputRequest)
        wrong = await handle.answer("no-such-request", {"Which color?": "red"})
        _expect(isinstance(wrong, AnswerRejected), f"an unknown request's answer: {wrong!r}")
        right = await handle.answer(request.request_id, {"Which color?": "blue"})
        _expect(
            right == AnswerAccepted(request_id=request.request_id),
            f"the answer to the pending request: {right!r}",
        )
        again = await handle.answer(request.request_id, {"Which color?": "red"})
        _expect(isinstance(again, AnswerRejected), f"a second answer: {again!r}")
        rest = [event async for event in events]
    final = rest[-1] if rest else None
    _expect(
        isinstance(final, Result) and final.text == "answered blue",
        f"the answer did not reach the CLI: the final event is {final!r}",
    )


async def _idempotency(host: SessionHost) -> None:
    key = f"conformance-{uuid.uuid4()}"
    before = {info.session for info in await host.list()}
    first = await host.open(_say("once"), label="keyed", idempotency_key=key)
    events = await _events(first)
    again = await host.open(_say("once"), label="keyed", idempotency_key=key)
    _expect(again.id == first.id, f"open with the same key started {again.id!r}, not {first.id!r}")
    replayed = await _events(again)
    _expect(_plain(replayed) == _plain(events), "the same key's session shows other events")
    try:
        await host.open(_say("other"), idempotency_key=key)
    except ClaudeTrioError:
        pass
    else:
        raise _Broken("open with a used idempotency key and other params was not refused")
    new = [info.session for info in await host.list() if info.session not in before]
    _expect(new == [first.id], f"list shows {len(new)} new sessions, not 1")


async def _resolution(
    inbox: trio.abc.ReceiveChannel[InboxChange], session: str, request_id: str
) -> str:
    """Read changes until ``request_id`` of ``session`` leaves the list: its resolution's
    outcome (``snapshot`` when a fresh snapshot without it came instead)."""
    async for change in inbox:
        if isinstance(change, InboxResolved):
            if (change.session, change.request_id) == (session, request_id):
                return change.outcome
        elif isinstance(change, InboxSnapshot) and all(
            (i.session, i.request_id) != (session, request_id) for i in change.items
        ):
            return "snapshot"
    raise _Broken(f"the inbox ended before request {request_id} of {session} left it")


async def _inbox(host: SessionHost) -> None:
    async with host.inbox() as inbox:
        first = await inbox.receive()
        _expect(isinstance(first, InboxSnapshot), f"inbox() opened with {first!r}")
        answered = await host.open(ExecuteParams(prompt="ask"), label="inbox answered")
        aborted = await host.open(ExecuteParams(prompt="ask"), label="inbox aborted")
        ours = {answered.id, aborted.id}
        while {item.session for item in inbox.items} & ours != ours:
            await inbox.receive()
        items = {item.session: item for item in inbox.items if item.session in ours}
        for handle, label in ((answered, "inbox answered"), (aborted, "inbox aborted")):
            item = items[handle.id]
            _expect(item.label == label, f"an item's label is {item.label!r}, not {label!r}")
            _expect(item.source == "model-tool", f"a question's source is {item.source!r}")
            _expect(item.request.questions, "an item's request carries no question")
        request_id = items[answered.id].request_id
        right = await inbox.answer(answered.id, request_id, {"Which color?": "blue"})
        _expect(
            right == AnswerAccepted(request_id=request_id),
            f"the answer through the inbox: {right!r}",
        )
        outcome = await _resolution(inbox, answered.id, request_id)
        _expect(outcome in ("answered", "snapshot"), f"an answered request left as {outcome!r}")
        again = await inbox.answer(answered.id, request_id, {"Which color?": "red"})
        _expect(isinstance(again, AnswerRejected), f"a second answer: {again!r}")
        text = (await answered.result()).text
        _expect(text == "answered blue", f"the answer did not reach the CLI: {text!r}")
        await aborted.abort()
        outcome = await _resolution(inbox, aborted.id, items[aborted.id].request_id)
        _expect(
            outcome in ("cancelled", "ended", "snapshot"),
            f"an aborted session's request left as {outcome!r}",
        )
    async with host.inbox() as again_inbox:
        snapshot = await again_inbox.receive()
        _expect(isinstance(snapshot, InboxSnapshot), f"inbox() opened with {snapshot!r}")
        assert isinstance(snapshot, InboxSnapshot)
        left = [item for item in snapshot.items if item.session in ours]
        _expect(not left, f"a new inbox still shows {len(left)} resolved requests")


CONTRACTS: tuple[tuple[str, Callable[[SessionHost], Awaitable[None]]], ...] = (
    ("open", _open),
    ("result", _result),
    ("get", _get),
    ("list", _list),
    ("replay", _replay),
    ("push", _push),
    ("abort", _abort),
    ("continue", _continue),
    ("answer", _answer),
    ("idempotency", _idempotency),
    ("inbox", _inbox),
)
"""The contracts by name, in the order they run (see the module docstring)."""


async def run_host_conformance(make_host: HostFactory) -> None:
    """Check every contract of :data:`CONTRACTS` on a fresh host from ``make_host`` each;
    raise :class:`HostConformanceError` for the first one broken."""
    await trio.lowlevel.checkpoint()
    for number, (name, contract) in enumerate(CONTRACTS, start=1):
        try:
            with trio.fail_after(CONTRACT_DEADLINE):
                async with _fresh(make_host) as host:
                    await contract(host)
        except Exception as exc:  # a cancellation (a BaseException) goes through as itself
            raise HostConformanceError(number, name, _problem(exc)) from exc


def _problem(exc: Exception) -> str:
    """What broke, from what a contract raised (a host's nursery may have wrapped it in an
    exception group)."""
    leaves = list(_leaves(exc))
    for leaf in leaves:
        if isinstance(leaf, _Broken):
            return str(leaf)
    for leaf in leaves:
        if isinstance(leaf, trio.TooSlowError):
            return f"it did not finish within {CONTRACT_DEADLINE:g} s"
    return f"it raised {exc!r}"


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
