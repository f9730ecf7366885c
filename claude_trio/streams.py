"""Helpers for code that consumes an event stream: collect, filter, wait, observe, tee, split.

Each takes any stream of events: ``session.events``, a fleet :class:`~.actors.fleet.Subscription`,
or any async iterable of events (what a gateway client decoded, a list replayed by a test)::

    async with open_session(params) as session:
        transcript = await collect(observe(session.events, console_observer()))
    print(transcript.text, transcript.usage)

What each is for, and the TypeScript library's helper it stands for:

========================================  ===========================================
TypeScript library                        claude-trio
========================================  ===========================================
``collectEvents(stream)``                 ``await collect(events)`` (``.events``)
``extractText(stream)``                   ``(await collect(events)).text``
``filterByType(stream, "text_delta")``    ``filter_events(events, "text_delta")``
``takeUntilResult(stream)``               ``await wait_for(events, "result")``
``splitBySubagent(stream)``               ``async with open_subagent_split(events)``
``observeStream(stream, [observer])``     ``observe(events, observer)``
``createConsoleObserver()``               ``console_observer()``
(none)                                    ``async with open_tee(events, 2)``
========================================  ===========================================

The rules they share, the ones trio code expects:

* **No async generators.** Views (``filter_events``, ``observe``) are receive channels over
  the source with no task and no buffer; ``open_tee`` and ``open_subagent_split`` hand out
  receive channels from ``async with`` blocks, whose task ends with the block.
* **They never close the source.** Whoever opened it closes it (``open_session`` closes its
  own stream); a helper only reads from it, and what it did not read is still there.
* **Bounded.** ``open_subagent_split`` passes events on with no buffer (a reader that does not
  read holds the split up: backpressure); ``open_tee`` applies the fleet's slow-subscriber
  policy (``protocol/fanout/replay.py``): a consumer that falls too far behind has its deltas
  merged, then is dropped with :class:`~.actors.fleet.SlowSubscriberError`, and nobody else
  waits for it. ``collect`` holds the events of one execution, which is what it returns.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar, overload

import attrs
import trio
from rich.console import Console

from claude_trio.actors.channel import BaseReceiveChannel, SourceView, check_source
from claude_trio.actors.fanout.fleet import DEFAULT_SUBSCRIBER_BYTES
from claude_trio.actors.session.boundary import open_block_nursery
from claude_trio.cli.render import Renderer
from claude_trio.protocol.checks import check_int
from claude_trio.protocol.errors import (
    InvalidParamsError,
    SlowSubscriberError,
    StreamEndedError,
)
from claude_trio.protocol.fanout.replay import Entry, SubscriberQueue
from claude_trio.protocol.session.events import (
    EVENT_KINDS,
    EVENT_TYPES,
    Event,
    EventBase,
    SubagentCompleted,
    SubagentStarted,
)
from claude_trio.protocol.session.transcript import Transcript, ends_execution

__all__ = [
    "DEFAULT_TEE_QUEUE",
    "ConsoleObserver",
    "EventFilter",
    "ObservedStream",
    "SubagentSplit",
    "SubagentStream",
    "TeeOutput",
    "collect",
    "console_observer",
    "filter_events",
    "observe",
    "open_subagent_split",
    "open_tee",
    "wait_for",
]

E = TypeVar("E", bound=EventBase)
EventSource = AsyncIterable[Event]
"""Anything that yields events: a receive channel (``session.events``, a subscription) or any
async iterable."""
Kind = str | type[EventBase]
Observer = Callable[[Event], object]
"""Called with each event, synchronously, in the reader's task (see :func:`observe`)."""

DEFAULT_TEE_QUEUE = 1000
"""Events a tee consumer may lag behind by default before its deltas are merged."""


# ---------------------------------------------------------------------------------------------
# Matching events
# ---------------------------------------------------------------------------------------------


def _kind_classes(kinds: Sequence[Kind]) -> tuple[type[EventBase], ...]:
    """The event classes ``kinds`` names; an unknown name or class is refused by name."""
    classes: list[type[EventBase]] = []
    for kind in kinds:
        if isinstance(kind, str):
            cls = EVENT_KINDS.get(kind)
            if cls is None:
                raise InvalidParamsError("kind", kind, "one of " + ", ".join(sorted(EVENT_KINDS)))
            classes.append(cls)
        elif isinstance(kind, type) and issubclass(kind, EventBase) and kind in EVENT_TYPES:
            classes.append(kind)
        else:
            raise InvalidParamsError(
                "kind", kind, "an event kind name (e.g. 'text_delta') or an event class"
            )
    return tuple(classes)


def _matcher(
    kinds: Sequence[Kind], where: Callable[[Any], object] | None
) -> Callable[[Event], bool]:
    classes = _kind_classes(kinds)
    if where is not None and not callable(where):
        raise InvalidParamsError("where", where, "None or a function taking an event")
    if not classes and where is None:
        raise InvalidParamsError("kinds", kinds, "at least one kind, or where=")

    def matches(event: Event) -> bool:
        if classes and not isinstance(event, classes):
            return False
        return where is None or bool(where(event))

    return matches


def _describe(kinds: Sequence[Kind], where: object) -> str:
    names = [k if isinstance(k, str) else getattr(k, "kind", k.__name__) for k in kinds]
    what = " or ".join(str(n) for n in names) or "matching"
    return what + (" event matching where=" if where is not None and names else " event")


# ---------------------------------------------------------------------------------------------
# Views: receive channels over a source, with no task and no buffer
# ---------------------------------------------------------------------------------------------


class EventFilter(SourceView[E]):
    """The events of a source that match (:func:`filter_events`); the others are read and
    passed over.

    Channels: a view, no task and no buffer: each ``receive()`` reads the source until an event
    matches. Closing it leaves the source open.
    Cancellation: cancelling ``receive()`` loses nothing that matched.
    Error handling: the source's errors come out of ``receive()`` as they are; ``where``'s
    too.
    """

    def __init__(self, events: EventSource, matches: Callable[[Event], bool]) -> None:
        super().__init__(events)
        self._matches = matches

    def _admit(self, item: Any) -> E | None:
        return item if self._matches(item) else None


# One class gives a typed view; the overlap with the general form (a class is also a Kind) is
# what overloads are for: mypy takes the first that matches.
@overload
def filter_events(  # type: ignore[overload-overlap]
    events: EventSource, kind: type[E], /, *, where: Callable[[E], object] | None = None
) -> EventFilter[E]: ...


@overload
def filter_events(
    events: EventSource, *kinds: Kind, where: Callable[[Event], object] | None = None
) -> EventFilter[Event]: ...


def filter_events(
    events: EventSource, *kinds: Kind, where: Callable[[Any], object] | None = None
) -> EventFilter[Any]:
    """The events of ``events`` of the given kinds (names like ``"tool_use"`` or classes like
    ``ToolUse``) and, with ``where``, for which ``where(event)`` is true::

        async for use in filter_events(session.events, ToolUse, where=lambda u: u.name == "Bash"):
            print(use.input["command"])

    A receive channel over ``events`` (see :class:`EventFilter`): events that do not match are
    read and dropped. An unknown kind is an ``InvalidParamsError`` naming the known ones.
    """
    return EventFilter(events, _matcher(kinds, where))


@overload
async def wait_for(  # type: ignore[overload-overlap]
    events: EventSource, kind: type[E], /, *, where: Callable[[E], object] | None = None
) -> E: ...


@overload
async def wait_for(
    events: EventSource, *kinds: Kind, where: Callable[[Event], object] | None = None
) -> Event: ...


async def wait_for(
    events: EventSource, *kinds: Kind, where: Callable[[Any], object] | None = None
) -> Any:
    """Read ``events`` until one of the given kinds (and ``where``) arrives, and return it::

        request = await wait_for(session.events, UserInputRequest)
        await session.answer(request.request_id, {...})

    The events before it are read and dropped; the ones after it are still in ``events``.
    Raises :class:`StreamEndedError` (naming the last event) when the stream ends first. To
    bound the wait, put it under ``trio.fail_after``.
    """
    matches = _matcher(kinds, where)
    check_source(events)
    await trio.lowlevel.checkpoint()
    last: Event | None = None
    async for event in events:
        if matches(event):
            return event
        last = event
    seen = "no event" if last is None else f"its last event was {last.kind} at seq {last.seq}"
    raise StreamEndedError(f"the stream ended without a {_describe(kinds, where)} ({seen})")


async def collect(events: EventSource) -> Transcript:
    """Read one execution's events to its end and sort them into a :class:`Transcript`: the
    answer, the assistant messages, tool calls with their results, subagents with their own
    transcripts, todos, questions and answers, usage and the event that ended it.

    Reads until the stream ends or the execution's final event (a final ``result``,
    ``aborted``, a fatal ``error``) arrives, whichever is first. Everything read is held until
    then (it is what the transcript holds). See ``protocol/session/transcript.py`` for the rules.
    """
    check_source(events)
    await trio.lowlevel.checkpoint()
    got: list[Event] = []
    async for event in events:
        got.append(event)
        if ends_execution(event):
            break
    return Transcript.of(got)


# ---------------------------------------------------------------------------------------------
# Observers
# ---------------------------------------------------------------------------------------------


class ObservedStream(SourceView[Event]):
    """The source's events, each shown to the observers first (:func:`observe`).

    Channels: a view, no task and no buffer. At the end of the source each observer that has
    a ``close()`` method is closed once (a console observer ends its last line).
    Cancellation: cancelling ``receive()`` loses nothing.
    Error handling: an observer that raises makes ``receive()`` raise it (the event it was
    given is then not returned); nothing is swallowed.
    """

    def __init__(self, events: EventSource, observers: Sequence[Observer]) -> None:
        super().__init__(events)
        self._observers = tuple(observers)
        self._observers_closed = False

    def _admit(self, item: Any) -> Event:
        for observer in self._observers:
            observer(item)
        return item  # type: ignore[no-any-return]

    def _source_ended(self) -> None:
        self._close_observers()

    def _close_observers(self) -> None:
        if self._observers_closed:
            return
        self._observers_closed = True
        for observer in self._observers:
            close = getattr(observer, "close", None)
            if callable(close):
                close()

    def _discard(self) -> None:
        # close(): stop reading through this view and close the observers (the source stays
        # open).
        super()._discard()
        self._close_observers()


def observe(events: EventSource, *observers: Observer) -> ObservedStream:
    """``events``, each shown to every observer as it is received (the TypeScript library's
    ``observeStream``)::

        async for event in observe(session.events, console_observer(), log.append):
            ...

    An observer is any function taking an event (its result is ignored), called in the
    reader's task before the event is returned: keep it quick, it holds the reader. One
    with a ``close()`` method is closed at the end of the stream or when the view is closed.
    """
    for observer in observers:
        if not callable(observer):
            raise InvalidParamsError("observer", observer, "a function taking an event")
    return ObservedStream(events, observers)


class ConsoleObserver:
    """Shows events on a console the way ``claude-trio run`` does (:class:`~claude_trio.cli.render.
    Renderer`): the answer streamed, thinking dimmed, one line per tool call and result,
    subagents indented, the todo list, questions, and a usage line per turn.

    Any stream of events: a session's, a fleet subscription's (merged deltas render as one),
    a gateway client's decoded frames. Call it with each event; ``close()`` ends an open line.
    """

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer

    def __call__(self, event: Event) -> None:
        self.renderer.feed(event)

    def close(self) -> None:
        self.renderer.close()


def console_observer(
    console: Console | None = None, *, show_thinking: bool = True, spinner: bool = False
) -> ConsoleObserver:
    """A :class:`ConsoleObserver` on ``console`` (default: a new ``rich`` console on stdout;
    plain text when it is not a terminal). ``spinner=True`` shows a spinner on a terminal
    while the next event is awaited (close the observer, or read the stream to its end, to
    stop it)."""
    if console is not None and not isinstance(console, Console):
        raise InvalidParamsError("console", console, "None or a rich.console.Console")
    renderer = Renderer(console or Console(), show_thinking=show_thinking, spinner=spinner)
    return ConsoleObserver(renderer)


# ---------------------------------------------------------------------------------------------
# open_tee: several bounded consumers of one stream
# ---------------------------------------------------------------------------------------------


class TeeOutput(BaseReceiveChannel[Event]):
    """One consumer's copy of the stream (:func:`open_tee`).

    Channels: the consumer owns it; ``close()`` (or ``with out:``) stops its copy, and the
    others go on. The tee's task only offers events to it (never waits).
    Cancellation: ``receive()`` is a plain checkpoint; cancelling it loses nothing.
    Error handling: a consumer that fell too far behind is dropped: every ``receive()`` then
    raises :class:`~.actors.fleet.SlowSubscriberError`. When the source failed, ``receive()``
    raises ``trio.BrokenResourceError`` (from the source's exception) after the events read
    before it; after the source's end (or the end of the ``open_tee`` block),
    ``trio.EndOfChannel``.
    """

    _closed_message = "this tee output was closed"

    def __init__(self, *, max_queue: int, max_bytes: int) -> None:
        super().__init__()
        self._queue = SubscriberQueue(max_events=max_queue, max_bytes=max_bytes)
        self._ended = False
        self._failure: BaseException | None = None
        #: Why this consumer was dropped (``None`` while it is not).
        self.dropped_reason: str | None = None

    @property
    def gone(self) -> bool:
        """Closed by its consumer, or dropped: the tee offers it nothing more."""
        return self._closed or self.dropped_reason is not None

    @property
    def coalesced(self) -> int:
        """How many deltas were merged into an earlier one to make room."""
        return self._queue.coalesced

    @property
    def queued(self) -> int:
        return len(self._queue)

    def _offer(self, entry: Entry) -> None:
        if self.gone:
            return
        if not self._queue.offer(entry):
            self.dropped_reason = self._queue.dropped_reason
        self._wake()

    def _end(self, failure: BaseException | None = None) -> None:
        self._ended = True
        self._failure = failure
        self._wake()

    def _take(self) -> Event:
        if self.dropped_reason is not None:
            raise SlowSubscriberError(self.dropped_reason)
        entry = self._queue.take()
        if entry is not None:
            return entry.event
        if self._ended:
            if self._failure is not None:
                raise trio.BrokenResourceError(
                    f"the stream this tee copies failed: {self._failure!r}"
                ) from self._failure
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def _discard(self) -> None:
        # close(): stop this copy and discard what it holds.
        self._queue.clear()

    def _queued(self) -> int:
        return len(self._queue)


async def _run_tee(events: EventSource, outputs: tuple[TeeOutput, ...]) -> None:
    """Copy ``events`` to every output until the source ends or no output is left."""
    await trio.lowlevel.checkpoint()
    failure: BaseException | None = None
    try:
        async for event in events:
            entry = Entry.of(event)
            for output in outputs:
                output._offer(entry)
            if all(output.gone for output in outputs):
                return
    except Exception as exc:  # the consumers are told, in order, after what came before it
        failure = exc
    for output in outputs:
        output._end(failure)


@asynccontextmanager
async def open_tee(
    events: EventSource,
    consumers: int,
    *,
    max_queue: int = DEFAULT_TEE_QUEUE,
    max_bytes: int = DEFAULT_SUBSCRIBER_BYTES,
) -> AsyncIterator[tuple[TeeOutput, ...]]:
    """Several consumers of one stream, each with a copy of every event::

        async with open_tee(session.events, 2) as (ui, log):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(show, ui)
                nursery.start_soon(store, log)

    A task reads ``events`` as they come and offers each to every consumer without waiting:
    no consumer slows the source or another consumer. Each copy holds at most ``max_queue``
    events and ``max_bytes`` counted bytes (the fleet's slow-subscriber policy,
    ``protocol/fanout/replay.py``): when it is full, adjacent deltas of one message are merged (the
    merged delta has the later seq); when that does not make room, the consumer is dropped
    (:class:`TeeOutput`). Consumers get the events without ``raw``, as fleet subscribers do.

    The task stops at the end of the source (each copy then ends after what it holds), when
    every copy was closed or dropped, or when the block is left: nothing outlives it.
    """
    check_source(events)
    check_int("consumers", consumers, 1)
    check_int("max_queue", max_queue, 1)
    check_int("max_bytes", max_bytes, 1)
    outputs = tuple(TeeOutput(max_queue=max_queue, max_bytes=max_bytes) for _ in range(consumers))
    async with open_block_nursery() as nursery:
        nursery.start_soon(_run_tee, events, outputs)
        try:
            yield outputs
        finally:
            for output in outputs:
                if not output._ended:
                    output._end()


# ---------------------------------------------------------------------------------------------
# open_subagent_split: one channel per agent
# ---------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class SubagentStream:
    """One subagent's events (:func:`open_subagent_split`).

    ``task_id`` is ``None`` for subagent events that arrived before their task was known.
    ``started`` is its ``subagent_started`` (``None`` when the stream did not show it);
    ``completed`` is set when its ``subagent_completed`` arrives, just before ``events``
    ends. ``parent_task_id`` is the subagent that started it (``None``: the main agent).
    """

    task_id: str | None
    started: SubagentStarted | None
    parent_task_id: str | None
    events: trio.MemoryReceiveChannel[Event]
    completed: SubagentCompleted | None = None


@attrs.frozen(kw_only=True)
class SubagentSplit:
    """The channels of :func:`open_subagent_split`: ``main`` (the main agent's events) and
    ``subagents`` (a :class:`SubagentStream` for each subagent, as it starts)."""

    main: trio.MemoryReceiveChannel[Event]
    subagents: trio.MemoryReceiveChannel[SubagentStream]


class _Splitter:
    """Routes each event to its agent's channel (see :func:`open_subagent_split`)."""

    def __init__(self) -> None:
        # Buffer 0 everywhere: events pass from the source to a reader with nothing held.
        self.main_send, self.main = trio.open_memory_channel[Event](0)
        self.announce, self.subagents = trio.open_memory_channel[SubagentStream](0)
        self.open: dict[str | None, tuple[SubagentStream, trio.MemorySendChannel[Event]]] = {}
        self.parent: dict[str | None, str | None] = {}

    @staticmethod
    async def _send(channel: trio.MemorySendChannel[Any], item: Any) -> None:
        try:
            await channel.send(item)
        except trio.BrokenResourceError:
            # Its reader closed it: it does not follow these events any more.
            await trio.lowlevel.checkpoint()

    async def _stream_for(
        self, task_id: str | None, started: SubagentStarted | None, parent: str | None
    ) -> trio.MemorySendChannel[Event]:
        if task_id in self.open:
            await trio.lowlevel.checkpoint()
            return self.open[task_id][1]
        send, receive = trio.open_memory_channel[Event](0)
        stream = SubagentStream(
            task_id=task_id, started=started, parent_task_id=parent, events=receive
        )
        self.open[task_id] = (stream, send)
        self.parent[task_id] = parent
        await self._send(self.announce, stream)
        return send

    async def route(self, event: Event) -> None:
        if not event.is_subagent:
            target = self.main_send
        elif event.subagent_task_id in self.open:
            target = self.open[event.subagent_task_id][1]
        elif event.subagent_task_id is not None and event.subagent_task_id in self.parent:
            # An event for a subagent that completed already (the contract says none comes):
            # its parent's channel, rather than nowhere.
            target = self._channel_of(self.parent[event.subagent_task_id])
        else:
            target = await self._stream_for(event.subagent_task_id, None, None)
        await self._send(target, event)
        match event:
            case SubagentStarted() if event.task_id not in self.parent:
                owner = event.subagent_task_id if event.is_subagent else None
                await self._stream_for(event.task_id, event, owner)
            case SubagentCompleted() if event.task_id in self.open:
                stream, send = self.open.pop(event.task_id)
                stream.completed = event
                send.close()
            case _:
                pass

    def _channel_of(self, task_id: str | None) -> trio.MemorySendChannel[Event]:
        if task_id is None or task_id not in self.open:
            return self.main_send
        return self.open[task_id][1]

    def close(self) -> None:
        self.main_send.close()
        self.announce.close()
        for _, send in self.open.values():
            send.close()
        self.open.clear()

    async def run(self, events: EventSource) -> None:
        try:
            async for event in events:
                await self.route(event)
        finally:
            self.close()


@asynccontextmanager
async def open_subagent_split(events: EventSource) -> AsyncIterator[SubagentSplit]:
    """The stream split by agent: the main agent's events on ``split.main``, and one channel
    per subagent, announced on ``split.subagents`` as the subagent starts::

        async with open_subagent_split(session.events) as split:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(show_main, split.main)
                async for sub in split.subagents:
                    nursery.start_soon(show_subagent, sub.task_id, sub.events)

    An event goes where its attribution says (``protocol/session/transcript.py``, rule 1): a
    subagent's ``subagent_started`` and ``subagent_completed`` to the agent that started it,
    then its channel is announced (at the start) or ended (at the completion). Nested
    subagents are announced on ``split.subagents`` too, with their ``parent_task_id``.

    Channels: each channel passes events with no buffer, so a reader that does not read holds
    the split (and the source) up; close the channels you do not follow (``split.main.close()``)
    and their events are dropped. Every channel ends at the end of the source.
    Cancellation: leaving the block stops the task reading the source; nothing outlives it.
    Error handling: an error of the source comes out of the ``async with``.
    """
    check_source(events)
    splitter = _Splitter()
    async with open_block_nursery() as nursery:
        nursery.start_soon(splitter.run, events)
        yield SubagentSplit(main=splitter.main, subagents=splitter.subagents)
