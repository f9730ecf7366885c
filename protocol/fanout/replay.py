"""What a fleet keeps of a session's events, for replay and for each subscriber (pure, no trio).

A fleet session publishes each event once: into its :class:`ReplayBuffer` (what a client that
reconnects gets again) and into the :class:`SubscriberQueue` of every subscriber (what each one
has not read yet). Both are bounded in events *and* in bytes; this module decides what they
keep, merge and drop, and counts the bytes. The fleet (``actors/fanout/fleet.py``) only wires them
to trio.

Rules:

1. **What is kept.** An event enters as a :class:`Entry`: the event without its ``raw`` field
   (:func:`slim`). ``raw`` is the SDK object or CLI frame an event was mapped from (about
   1.2 KB for a two-token text delta, ten times the delta itself); replay and the wire never
   use it (the codec does not send it), so the buffer does not keep it. Every other field is
   kept as is: it is what replay sends. Fleet subscribers therefore get events with
   ``raw=None``; ``open_session``'s own consumer still gets ``raw``.
2. **Counting bytes.** :func:`entry_size` is an estimate of the memory an entry holds, made
   once when it enters: ``ENTRY_OVERHEAD`` for the objects, plus twice the UTF-8 length of
   every string in the event (the event's own copy, and the one wire encoding a serving layer
   may cache in :attr:`Entry.wire`) and ``STRING_OVERHEAD`` per string, plus ``SCALAR_BYTES``
   per other value. The walk of
   free-form values (tool inputs and results, passthrough data) stops at ``MAX_WALK_DEPTH``
   and counts what is deeper as ``DEEP_VALUE_BYTES``. A test checks the estimate against
   ``tracemalloc`` for every kind of event. An entry holding an event as JSON text only
   (:meth:`Entry.undecoded`: a cluster gateway's deltas) counts ``ENTRY_OVERHEAD`` and
   ``STRING_OVERHEAD`` plus twice the text's UTF-8 length (the text, and the frame made
   from it), :func:`text_entry_size`; its event, if a subscriber reads it, is made then.
3. **The replay buffer** holds at most ``max_events`` entries and ``max_bytes`` counted bytes;
   the oldest entries are evicted first, and the newest is always kept (so the final event can
   always be replayed, even if alone it is over ``max_bytes``). ``evicted_through`` is the
   highest seq evicted: a replay from an older seq needs a resync.
4. **A subscriber's queue** holds at most ``max_events`` items and ``max_bytes`` counted bytes.
   An entry that fits is appended (an empty queue takes any one entry, however large: the
   newest event is always deliverable). One that does not is merged into the last item if both are
   deltas of one block (``coalesce.can_merge``); otherwise the part of the queue not compacted
   yet is compacted (runs of mergeable deltas become one item each); if the entry still does
   not fit, the subscriber is dropped: the queue is cleared and ``dropped_reason`` says why.
   Merging frees slots, never bytes: a merged run is counted at the sum of what it merged, so
   ``max_bytes`` caps what a lagging subscriber holds, merges included.
5. **Merging is linear.** A merged run keeps its pieces in a list and joins them once, when
   the subscriber takes it (:meth:`SubscriberQueue.take`); compaction only ever visits the
   items added since the last compaction, so each entry is compacted at most once.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter
from typing import Any

import attrs

from claude_trio.protocol.fanout.coalesce import can_merge, merged
from claude_trio.protocol.session.events import (
    Event,
    TextDelta,
    ThinkingDelta,
    copy_event,
    is_final,
)

ENTRY_OVERHEAD = 560
"""Counted bytes per entry for the objects themselves: the event, the entry, the wire frame's
keys and punctuation (rule 2)."""

SCALAR_BYTES = 32
"""Counted bytes per non-string value (numbers, booleans, None) and per container."""

STRING_OVERHEAD = 56
"""Counted bytes per string beyond twice its UTF-8 length (its object header, its key)."""

MAX_WALK_DEPTH = 32
DEEP_VALUE_BYTES = 4096
"""What a value nested deeper than ``MAX_WALK_DEPTH`` counts for (such values come only from
the CLI; a remote client's values are bounded in depth at the wire edge)."""


def text_bytes(text: str) -> int:
    """The UTF-8 length of ``text`` (lone surrogates count as 3 bytes, as escaped ones would)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def slim(event: Event) -> Event:
    """``event`` without ``raw`` (rule 1); the same object when it has none."""
    if event.raw is None:
        return event
    return copy_event(event, raw=None)


# How each class of value is counted, decided once per class (the walk below then looks the
# class up instead of asking isinstance questions of every value): strings, scalars, objects
# walked by field (attrs: all fields but ``raw``; dataclasses: all), mappings, sequences, and
# anything else (counted by its repr).
_STR, _SCALAR, _OBJECT, _MAPPING, _SEQUENCE, _OTHER = range(6)
# A class's kind and, for objects, one call that reads the fields walked (as a tuple).
_Kind = tuple[int, Callable[[Any], tuple[Any, ...]] | None]
_KINDS: dict[type, _Kind] = {}


def _fields_getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda value: (one(value),)
    return lambda value: ()


def _kind_of(cls: type) -> _Kind:
    known = _KINDS.get(cls)
    if known is not None:
        return known
    kind: _Kind
    if issubclass(cls, str):
        kind = (_STR, None)
    elif cls is type(None) or issubclass(cls, (bool, int, float)):
        kind = (_SCALAR, None)
    elif attrs.has(cls):
        names = tuple(f.name for f in attrs.fields(cls) if f.name != "raw")
        kind = (_OBJECT, _fields_getter(names))
    elif dataclasses.is_dataclass(cls):
        kind = (_OBJECT, _fields_getter(tuple(f.name for f in dataclasses.fields(cls))))
    elif issubclass(cls, Mapping):
        kind = (_MAPPING, None)
    elif issubclass(cls, (list, tuple, set, frozenset)):
        kind = (_SEQUENCE, None)
    else:
        kind = (_OTHER, None)
    if len(_KINDS) < 4096:  # classes are few; never let a stream of new ones grow it
        _KINDS[cls] = kind
    return kind


def _value_bytes(value: Any, depth: int) -> int:
    kind, fields = _kind_of(type(value))
    if kind == _STR:
        return STRING_OVERHEAD + 2 * text_bytes(value)
    if kind == _SCALAR:
        return SCALAR_BYTES
    if depth >= MAX_WALK_DEPTH:
        return DEEP_VALUE_BYTES
    depth += 1
    if fields is not None:  # an object (attrs or dataclass)
        return SCALAR_BYTES + _items_bytes(fields(value), depth)
    if kind == _MAPPING:
        return SCALAR_BYTES + _items_bytes([*value.keys(), *value.values()], depth)
    if kind == _SEQUENCE:
        return SCALAR_BYTES + _items_bytes(value, depth)
    return SCALAR_BYTES + 2 * len(repr(value))  # what the codec sends for it (its repr)


def _items_bytes(items: Iterable[Any], depth: int) -> int:
    """The counted bytes of values one level down (``depth``): the leaves (strings, numbers,
    None), which are most of them, without a call each."""
    total = 0
    scalars = _SCALAR_CLASSES
    for item in items:
        cls = type(item)
        if cls is str:  # text_bytes, inline: most strings are ASCII
            total += STRING_OVERHEAD + 2 * (len(item) if item.isascii() else text_bytes(item))
        elif cls in scalars:
            total += SCALAR_BYTES
        else:  # containers, objects, and subclasses of str or int (enums): by their kind
            total += _value_bytes(item, depth)
    return total


_SCALAR_CLASSES = frozenset({type(None), bool, int, float})


def entry_size(event: Event) -> int:
    """The counted bytes of an entry holding ``event`` (rule 2)."""
    if isinstance(event, TextDelta | ThinkingDelta):  # the common case, without the walk
        return (
            ENTRY_OVERHEAD
            + 2 * text_bytes(event.text)
            + (STRING_OVERHEAD + 2 * len(event.message_id) if event.message_id else 0)
            + (STRING_OVERHEAD + 2 * len(event.subagent_task_id) if event.subagent_task_id else 0)
        )
    return ENTRY_OVERHEAD + _value_bytes(event, 0)


class Entry:
    """One published event as the buffer and the subscriber queues hold it.

    An entry read from a cluster's stream as JSON text may hold the text alone
    (:meth:`undecoded`): its event is decoded the first time :attr:`event` is read, which a
    gateway that frames the text as it is never does for most events."""

    __slots__ = ("_decode", "_event", "_source", "seq", "size", "text", "wire")

    def __init__(
        self, event: Event, size: int, wire: str | bytes | None = None, text: str | None = None
    ) -> None:
        self._event: Event | None = event
        self._decode: Callable[[str], Event] | None = None
        self._source: str | None = None
        self.seq: int = event.seq
        """The event's seq."""
        self.size = size
        """Its counted bytes (rule 2)."""
        self.wire = wire
        """A slot for a serving layer's encoding of the event: the gateway stores its websocket
        frame here, so each event is encoded once per session rather than once per client."""
        self.text = text
        """The event's JSON text (``codec.event_text``) when it was read as text (a cluster's
        stream), so a serving layer can frame it without encoding it again; not counted in
        ``size`` (unless the entry is :meth:`undecoded`), and let go once the serving layer
        has made its frame."""

    @classmethod
    def of(cls, event: Event, text: str | None = None) -> Entry:
        event = slim(event)
        return cls(event, entry_size(event), text=text)

    @classmethod
    def undecoded(cls, seq: int, text: str, decode: Callable[[str], Event]) -> Entry:
        """An entry of the event whose JSON text is ``text`` (seq ``seq``), decoded by
        ``decode`` only when :attr:`event` is first read. Its counted bytes are the text's
        (rule 2). Only for events that no rule of a buffer, a queue or a serving layer needs
        to see before a subscriber reads them: deltas (never final, shown to remote clients as
        they are), whose text was checked to have the codec's shape (``codec.flat_kind``)."""
        entry = cls.__new__(cls)
        entry._event = None
        entry._decode = decode
        entry._source = text
        entry.seq = seq
        entry.size = text_entry_size(text)
        entry.wire = None
        entry.text = text
        return entry

    @property
    def event(self) -> Event:
        """The event, without ``raw`` (rule 1); decoded now if the entry holds its text only."""
        event = self._event
        if event is None:
            assert self._decode is not None
            assert self._source is not None
            event = self._event = self._decode(self._source)
            self._decode = self._source = None
        return event

    @property
    def decoded(self) -> bool:
        """False while the entry holds its event's text only (:meth:`undecoded`)."""
        return self._event is not None


def is_final_entry(entry: Entry) -> bool:
    """Whether ``entry`` holds an execution's final event, without decoding an entry kept as
    text (a delta, never final)."""
    return entry.decoded and is_final(entry.event)


def text_entry_size(text: str) -> int:
    """The counted bytes of an entry holding an event as JSON text only (rule 2)."""
    return ENTRY_OVERHEAD + STRING_OVERHEAD + 2 * text_bytes(text)


class ReplayBuffer:
    """The events a session keeps for replay (rule 3)."""

    def __init__(self, *, max_events: int, max_bytes: int) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._entries: collections.deque[Entry] = collections.deque()
        #: Counted bytes of the entries held.
        self.bytes = 0
        #: The highest seq evicted (0 while nothing was).
        self.evicted_through = 0

    def append(self, event: Event, text: str | None = None) -> Entry:
        """Keep ``event`` (as an :class:`Entry`, which is returned, with its JSON ``text`` when
        it was read as text); evict what no longer fits."""
        return self.push(Entry.of(event, text))

    def push(self, entry: Entry) -> Entry:
        """Keep ``entry`` (made by the caller); evict what no longer fits."""
        self._entries.append(entry)
        self.bytes += entry.size
        entries = self._entries
        while len(entries) > 1 and (len(entries) > self.max_events or self.bytes > self.max_bytes):
            old = entries.popleft()
            self.bytes -= old.size
            self.evicted_through = old.seq
        return entry

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def oldest_seq(self) -> int | None:
        """The seq of the oldest entry held (``None`` when empty)."""
        return self._entries[0].seq if self._entries else None

    def after(self, seq: int) -> list[Entry] | None:
        """The entries with a seq above ``seq``, or ``None`` when some were evicted."""
        if seq < self.evicted_through:
            return None
        return [e for e in self._entries if e.seq > seq]

    def entries(self) -> list[Entry]:
        return list(self._entries)


@attrs.define(eq=False, slots=True)
class _Run:
    """Mergeable deltas queued as one item: their pieces, joined when taken (rule 5)."""

    first: TextDelta | ThinkingDelta
    pieces: list[str]
    last_seq: int
    size: int

    @property
    def event(self) -> Event:
        return self.first


def _joined(item: Entry | _Run) -> Entry:
    """A queued item as the subscriber reads it: a merged run joined into one entry now."""
    if isinstance(item, _Run):
        return Entry(merged(item.first, item.pieces, item.last_seq), item.size)
    return item


def _as_run(item: Entry | _Run) -> _Run:
    if isinstance(item, _Run):
        return item
    event = item.event
    assert isinstance(event, TextDelta | ThinkingDelta)
    return _Run(first=event, pieces=[event.text], last_seq=event.seq, size=item.size)


def _absorb(run: _Run, item: Entry | _Run) -> None:
    if isinstance(item, _Run):
        run.pieces.extend(item.pieces)
        run.last_seq = item.last_seq
        run.size += item.size
    else:
        event = item.event
        assert isinstance(event, TextDelta | ThinkingDelta)
        run.pieces.append(event.text)
        run.last_seq = event.seq
        run.size += item.size


class SubscriberQueue:
    """What one subscriber has not read yet (rule 4). Pure: the fleet wakes the reader."""

    def __init__(self, *, max_events: int, max_bytes: int) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._items: collections.deque[Entry | _Run] = collections.deque()
        # How many items at the front are known to hold no two adjacent mergeable ones.
        self._compacted = 0
        #: Counted bytes held (merged runs at the sum of what they merged).
        self.bytes = 0
        #: How many entries were merged into an earlier one.
        self.coalesced = 0
        #: Why the subscriber was dropped; ``None`` while it is not.
        self.dropped_reason: str | None = None

    def __len__(self) -> int:
        return len(self._items)

    def _fits(self, size: int) -> bool:
        items = len(self._items)
        return not items or (items < self.max_events and self.bytes + size <= self.max_bytes)

    def offer(self, entry: Entry) -> bool:
        """Queue ``entry``, merging or compacting when full; ``False`` once dropped."""
        if self.dropped_reason is not None:
            return False
        items = self._items
        if self._fits(entry.size):
            items.append(entry)
            self.bytes += entry.size
            return True
        if items and can_merge(items[-1].event, entry.event):
            run = _as_run(items[-1])
            _absorb(run, entry)
            items[-1] = run
            self.bytes += entry.size
            self.coalesced += 1
            if self.bytes <= self.max_bytes:
                return True
            return self._drop(by_bytes=True)
        self._compact_tail()
        if self._fits(entry.size):
            items.append(entry)
            self.bytes += entry.size
            return True
        return self._drop(by_bytes=len(items) < self.max_events)

    def _compact_tail(self) -> None:
        items = self._items
        start = self._compacted  # items[start - 1] may still merge with the first new one
        tail = [items.pop() for _ in range(len(items) - start)]
        tail.reverse()
        for item in tail:
            if items and can_merge(items[-1].event, item.event):
                run = _as_run(items[-1])
                _absorb(run, item)
                items[-1] = run
                self.coalesced += 1 if isinstance(item, Entry) else len(item.pieces)
            else:
                items.append(item)
        self._compacted = len(items)

    def _drop(self, *, by_bytes: bool) -> bool:
        if by_bytes:
            limit = f"{self.bytes} bytes queued (limit {self.max_bytes})"
        else:
            limit = f"{len(self._items)} events queued (the limit)"
        self.dropped_reason = f"slow consumer: {limit} and no deltas left to merge"
        self.clear()
        return False

    def take(self) -> Entry | None:
        """The oldest item as an entry (a merged run joined now), or ``None`` when empty."""
        if not self._items:
            return None
        item = self._items.popleft()
        self._compacted = max(self._compacted - 1, 0)
        self.bytes -= item.size
        return _joined(item)

    def take_many(self, limit: int, max_size: int) -> list[Entry]:
        """The oldest items, as :meth:`take` gives them, in order: at most ``limit`` of them,
        and none after their counted sizes reach ``max_size`` (the first is always taken);
        empty when nothing is queued."""
        items = self._items
        out: list[Entry] = []
        size = 0
        while items and len(out) < limit and (size < max_size or not out):
            item = items.popleft()
            size += item.size
            out.append(_joined(item))
        self._compacted = max(self._compacted - len(out), 0)
        self.bytes -= size
        return out

    def clear(self) -> None:
        self._items.clear()
        self._compacted = 0
        self.bytes = 0
