"""Playing a cassette back against what a test does (pure, no trio).

:class:`Player` is the replayed CLI's state machine: fed the test's writes (and the end of its
input) with the time, and asked what the CLI does next. ``claude_trio.testing.replay`` runs it
behind the SDK's transport interface. Rules:

1. **Writes are matched in order, lane by lane.** Each writer of the session keeps its own
   order, and writers race each other (an answer to a question and an interrupt can be
   written in either order): so a write is matched against the next recorded write of its
   *lane* (:func:`lane`): user messages; the SDK's control requests; the answer to each of
   the CLI's control requests, by its id. Ids the SDK and the session choose at random
   (``request_id`` of a control request, ``uuid`` of a user message: :data:`ID_KEYS`) are
   bound, not compared: the recorded id stands for the live one from then on, everywhere in
   what is read back. Anything else that differs is a :class:`Mismatch` naming the first
   difference.
2. **A recorded read is played once every write recorded before it was matched** (the CLI
   could not have written it sooner), and, with recorded timing, not before its time: as long
   after the previous read as it came in the recording, and as long after the last write it
   followed. A write that comes sooner than it did in the recording counts from when it was
   due, so a test at least as quick as the recorded session replays it at exactly the
   recorded times; one that comes later delays what follows it. A read taken late (the
   reader was held up) counts from when it was due too. With ``timing="asap"`` only the
   first condition holds.
3. **A write that does not come** within ``patience`` seconds of when it was due (its
   recorded delay after the records before it) is a :class:`Mismatch`; so is a write the
   cassette has no write of its lane left for.
4. **The end.** A live ``end_input`` satisfies the recorded one (reads recorded after it wait
   for it); without one recorded it is allowed and changes nothing. The recorded ``exit``
   (or ``error``) ends the output when its turn comes.

What the test writes is scrubbed (``protocol/cassettes/scrub.py``) before it is compared: the
cassette was scrubbed when it was written.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from claude_trio.protocol.cassettes.format import WRITE_KINDS, Cassette, Record, RecordKind
from claude_trio.protocol.cassettes.scrub import Scrubber

__all__ = [
    "ID_KEYS",
    "Emit",
    "Finish",
    "Mismatch",
    "Player",
    "Step",
    "Wait",
    "compare",
    "diff_text",
    "label",
    "lane",
    "substitute",
]

ID_KEYS = frozenset({"request_id", "uuid"})
"""Keys whose values the SDK or the session choose at random: bound, not compared (rule 1)."""

_WRITES = WRITE_KINDS


def label(kind: str, value: Any) -> str:
    """A short name for a written line: ``user message 'hi'``, ``control_request interrupt``."""
    if kind == "write_text" or not isinstance(value, Mapping):
        return f"line {str(value)[:60]!r}"
    frame_type = value.get("type")
    if frame_type == "user":
        message = value.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        text = content if isinstance(content, str) else json.dumps(content)[:60]
        return f"user message {_short(text)}"
    if frame_type == "control_request":
        request = value.get("request")
        subtype = request.get("subtype") if isinstance(request, Mapping) else None
        return f"control_request {subtype}"
    if frame_type == "control_response":
        response = value.get("response")
        request_id = response.get("request_id") if isinstance(response, Mapping) else None
        return f"control_response to {request_id}"
    return f"{frame_type} frame"


def lane(kind: str, value: Any) -> tuple[str, ...]:
    """Which writer a written line comes from (rule 1): user messages (the session's input
    channel), the SDK's control requests, and each answer to a control request of the CLI,
    by that request's id. Lines of one lane keep their order; lanes race each other."""
    if kind != "write" or not isinstance(value, Mapping):
        return ("text",)
    frame_type = str(value.get("type"))
    if frame_type == "control_response":
        response = value.get("response")
        request_id = response.get("request_id") if isinstance(response, Mapping) else None
        return (frame_type, str(request_id))
    return (frame_type,)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _first_difference(
    recorded: Any,
    written: Any,
    path: str,
    bindings: Mapping[str, str],
    new: dict[str, str],
    key: object = None,
) -> str | None:
    """Where ``written`` first differs from ``recorded`` (ids bound into ``new``), or None."""
    where = path or "the top"
    if key in ID_KEYS and isinstance(recorded, str) and isinstance(written, str):
        if recorded == written or _bind(recorded, written, bindings, new):
            return None
        bound = bindings.get(recorded, new.get(recorded))
        return (
            f"at {where}: the id {recorded!r} of the cassette stands for {bound!r} in this run, "
            f"the test wrote {written!r}"
        )
    if isinstance(recorded, Mapping) and isinstance(written, Mapping):
        for name in [*recorded, *(k for k in written if k not in recorded)]:
            inner = f"{path}.{name}" if path else str(name)
            if name not in written:
                return f"at {inner}: the cassette has {_short(recorded[name])}, the test wrote none"
            if name not in recorded:
                return f"at {inner}: the test wrote {_short(written[name])}, the cassette has none"
            found = _first_difference(recorded[name], written[name], inner, bindings, new, name)
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(written, list):
        for index, (a, b) in enumerate(zip(recorded, written, strict=False)):
            found = _first_difference(a, b, f"{path}[{index}]", bindings, new)
            if found is not None:
                return found
        if len(recorded) != len(written):
            return (
                f"at {where}: the cassette has {len(recorded)} items, the test wrote {len(written)}"
            )
        return None
    if recorded == written and type(recorded) is type(written):
        return None
    if isinstance(recorded, str) and bindings.get(recorded, new.get(recorded)) == written:
        return None  # a bound id, somewhere an id is not expected
    return f"at {where}: the cassette has {_short(recorded)}, the test wrote {_short(written)}"


def _bind(recorded: str, written: str, bindings: Mapping[str, str], new: dict[str, str]) -> bool:
    """Bind a recorded id to the live one, unless either is bound to another already."""
    known = bindings.get(recorded, new.get(recorded))
    if known is not None:
        return known == written
    if written in bindings.values() or written in new.values():
        return False
    new[recorded] = written
    return True


def compare(
    recorded: Record, kind: str, written: Any, bindings: Mapping[str, str]
) -> tuple[str | None, dict[str, str]]:
    """``(None, new bindings)`` when ``written`` is the recorded write modulo ids, else
    ``(first difference, {})``."""
    if recorded.kind != kind:
        return (
            f"the cassette has {label(recorded.kind, recorded.value)}, the test wrote "
            f"{label(kind, written)}",
            {},
        )
    new: dict[str, str] = {}
    found = _first_difference(recorded.value, written, "", bindings, new)
    return (found, {}) if found is not None else (None, new)


def diff_text(recorded: Any, written: Any) -> str:
    """A unified diff of the two values as indented JSON (at most 40 lines)."""

    def lines(value: Any) -> list[str]:
        return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False).splitlines()

    diff = list(
        difflib.unified_diff(lines(recorded), lines(written), "cassette", "test", lineterm="", n=2)
    )
    if len(diff) > 40:
        diff = [*diff[:40], f"... ({len(diff) - 40} more lines)"]
    return "\n".join(diff)


def substitute(value: Any, bindings: Mapping[str, str]) -> Any:
    """A copy of ``value`` with every string that is a bound recorded id replaced by its live
    one (what is read back refers to the live ids)."""
    if not bindings:
        return value
    if isinstance(value, str):
        return bindings.get(value, value)
    if isinstance(value, Mapping):
        return {k: substitute(v, bindings) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, bindings) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# The player
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Mismatch:
    """What the test did that the cassette did not record (or did not do that it did)."""

    message: str

    def __str__(self) -> str:
        return self.message


@attrs.frozen(kw_only=True)
class Emit:
    """Play ``record`` now (a read or a stderr line); reads have their ids substituted."""

    record: Record
    value: Any


@attrs.frozen(kw_only=True)
class Wait:
    """Nothing to play before ``until`` (trio clock; ``None``: until the test does something)."""

    until: float | None


@attrs.frozen(kw_only=True)
class Finish:
    """The CLI's output ends: ``record`` is the recorded ``exit`` or ``error`` (``None``: the
    cassette just ends)."""

    record: Record | None


Step: TypeAlias = Emit | Wait | Finish | Mismatch


class Player:
    """Plays a cassette against what a test does (the rules in the module docstring).

    Feed it the test's writes (:meth:`write`, :meth:`end_input`) and ask it what the CLI does
    next (:meth:`step`) with the current time; it never reads a clock itself.
    """

    def __init__(
        self,
        cassette: Cassette,
        *,
        start: float,
        timing: Literal["recorded", "asap"] = "recorded",
        patience: float = 10.0,
        scrubber: Scrubber | None = None,
    ) -> None:
        self.cassette = cassette
        self.timing = timing
        self.patience = patience
        self._scrubber = scrubber or Scrubber()
        self._records = cassette.records
        self._start = start
        self._played: list[float | None] = [None] * len(self._records)  # live time, by index
        self._next_read = 0  # index of the next record the output plays (reads, stderr, end)
        self._matched_writes: set[int] = set()
        self._input_ended = False
        # For each record, the records its time is measured from (rule 2): the nearest output
        # (read, stderr) and the nearest input (write, end_input) before it.
        self._anchors: list[tuple[int | None, int | None]] = []
        last_output: int | None = None
        last_input: int | None = None
        for index, record in enumerate(self._records):
            self._anchors.append((last_output, last_input))
            if record.kind in ("read", "stderr"):
                last_output = index
            elif record.kind in (*_WRITES, "end_input"):
                last_input = index
        self.bindings: dict[str, str] = {}
        self.mismatch: Mismatch | None = None
        #: How many writes the test made.
        self.writes = 0

    # -- the test's side ----------------------------------------------------------------------

    def write(self, line: str, now: float) -> Mismatch | None:
        """The test wrote ``line``; a :class:`Mismatch` when the cassette did not record it."""
        if self.mismatch is not None:
            return self.mismatch
        self.writes += 1
        kind: RecordKind
        try:
            written: Any = self._scrubber.value(json.loads(line))
            kind = "write"
        except ValueError:
            written, kind = self._scrubber.text(line), "write_text"
        wanted = lane(kind, written)
        unmatched = [
            i
            for i, r in enumerate(self._records)
            if r.kind in _WRITES and i not in self._matched_writes
        ]
        same_lane = [
            i for i in unmatched if lane(self._records[i].kind, self._records[i].value) == wanted
        ]
        if not same_lane:
            left = ", ".join(
                label(self._records[i].kind, self._records[i].value) for i in unmatched[:3]
            )
            return self._fail(
                f"write #{self.writes} ({label(kind, written)}): the cassette recorded no such "
                f"write{' here' if unmatched else ''} (the writes it still has: {left or 'none'})"
                "\n" + diff_text(self._records[unmatched[0]].value if unmatched else None, written)
            )
        index = same_lane[0]
        record = self._records[index]
        problem, new = compare(record, kind, written, self.bindings)
        if problem is not None:
            return self._fail(
                f"write #{self.writes} ({label(kind, written)}) is not what the cassette "
                f"recorded (line {record.line}, t={record.t:g}): {problem}\n"
                + diff_text(record.value, written)
            )
        self.bindings.update(new)
        self._matched_writes.add(index)
        self._played[index] = max(now, self._due(index))
        return None

    def end_input(self, now: float) -> None:
        """The test closed the CLI's stdin."""
        if not self._input_ended:
            self._input_ended = True
            for index, record in enumerate(self._records):
                if record.kind == "end_input" and self._played[index] is None:
                    self._played[index] = max(now, self._due(index))
                    break

    def _fail(self, message: str) -> Mismatch:
        self.mismatch = Mismatch(message=f"{self.cassette.source}: {message}")
        return self.mismatch

    # -- the CLI's side -----------------------------------------------------------------------

    def _due(self, index: int) -> float:
        """When record ``index`` is due, from the live times of the records before it."""
        record = self._records[index]
        due = self._start + record.t
        candidates = []
        for anchor in self._anchors[index]:
            if anchor is not None:
                live = self._played[anchor]
                if live is not None:
                    candidates.append(live + (record.t - self._records[anchor].t))
        return max(candidates) if candidates else due

    def step(self, now: float) -> Step:
        """What the CLI does next at time ``now`` (rules 2-4)."""
        if self.mismatch is not None:
            return self.mismatch
        records = self._records
        while self._next_read < len(records) and records[self._next_read].kind in (
            *_WRITES,
            "end_input",
        ):
            index = self._next_read
            record = records[index]
            if record.kind == "end_input":
                if self._played[index] is None:
                    return self._waiting_for(index, now, "to close the CLI's input")
            elif index not in self._matched_writes:
                return self._waiting_for(index, now, f"to write {label(record.kind, record.value)}")
            self._next_read += 1
        if self._next_read >= len(records):
            return Finish(record=None)
        index = self._next_read
        record = records[index]
        played = now
        if self.timing == "recorded":
            due = self._due(index)
            if now < due:
                return Wait(until=due)
            # Counted from when it was due: a reader that asks late (backpressure) gets what
            # was written meanwhile at once, as from a pipe, and the timeline stays the
            # recording's.
            played = due
        self._played[index] = played
        self._next_read += 1
        if record.kind in ("exit", "error"):
            return Finish(record=record)
        value = substitute(record.value, self.bindings) if record.kind == "read" else record.value
        return Emit(record=record, value=value)

    def _waiting_for(self, index: int, now: float, what: str) -> Step:
        record = self._records[index]
        deadline = self._due(index) + self.patience
        if now >= deadline:
            return self._fail(
                f"the cassette waits for the test {what} (line {record.line}, recorded at "
                f"t={record.t:g}), and nothing came for {self.patience:g} s after it was due"
            )
        return Wait(until=deadline)

    @property
    def finished_writes(self) -> bool:
        """Every recorded write was matched."""
        return all(
            i in self._matched_writes for i, r in enumerate(self._records) if r.kind in _WRITES
        )

    def unmatched(self) -> Sequence[Record]:
        """The recorded writes the test has not made (yet)."""
        return [
            r
            for i, r in enumerate(self._records)
            if r.kind in _WRITES and i not in self._matched_writes
        ]
