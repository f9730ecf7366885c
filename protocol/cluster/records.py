"""What workers and gateways write to Redis and read back (pure, no trio, no I/O).

A cluster is one Redis, workers that run sessions (``claude-trio worker``) and stateless
gateways (``claude-trio serve --redis``). Rules:

1. **Jobs.** An execution to run (a new session, or the next execution of an ended one) is a
   :class:`Job` appended to the jobs stream, read by the workers' consumer group: each entry
   is delivered to exactly one worker, which acknowledges it only once the execution's final
   event is in the session's event stream.
2. **Events.** Every event of a session goes to the session's own stream, in entries of one
   or more consecutive events whose id is ``<seq>-0`` with the seq of the entry's last event
   (:func:`entry_texts` reads one; a worker stores a batch of ready events as few entries of
   at most ``ENTRY_CHARS``, one event per entry when they come one at a time). Redis refuses
   an id not above the last one, so publishing an event again (after a reconnect, or by a
   worker that took the session over) is a no-op, and a reader can start exactly after any
   seq: ``XRANGE key <seq + 1>-0 +`` begins with the entry that holds the next event, whose
   events up to ``seq`` the reader skips. The stream is trimmed like the replay buffer, by
   seq (``MINID ~``: the last ``stream_max`` events are kept); a reader whose next seq was
   trimmed needs a resync. The session record keeps the last and the oldest seq the stream
   holds (``stored``, ``oldest``: the store script writes them with the events), so a gateway
   learns the oldest without reading the stream.
3. **The session record** (a hash) says who owns the session (principal, peer), its state
   (``waiting`` -> ``live`` -> ``ended``), the worker running it, its seqs and its usage (every
   turn of every execution so far: written with the event that changed it, in the same
   script, so a record's ``usage`` is always that of the events up to its ``last_seq``);
   gateways read it for every op, so they keep no session state of their own.
4. **Commands.** push / answer / abort reach the worker named in the record through that
   worker's command stream, in order; each carries a reply key, where the worker puts one
   :class:`Outcome` (a list the gateway pops with a deadline). No outcome in time is an
   explicit ``Rejected`` naming the worker, never a silent wait.

Rules 5-6 (a worker that dies) and 7 (a worker that is only slow: fencing) are further down.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from claude_trio.protocol.cluster.move import CONTINUE_PROMPT, ResumePoint
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.errors import InvalidParamsError, RemoteProtocolError
from claude_trio.protocol.fanout.codec import (
    attrs_from_json,
    dumps,
    event_from_json,
    event_text,
    flat_kind,
    to_json_safe,
)
from claude_trio.protocol.fanout.replay import Entry
from claude_trio.protocol.fanout.wire_checks import is_traceparent
from claude_trio.protocol.session.events import (
    Event,
    Result,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    is_final,
)
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage

__all__ = [
    "ENTRY_CHARS",
    "MOVED_REASON",
    "AcceptedPush",
    "Command",
    "Fenced",
    "Job",
    "MovePlan",
    "Outcome",
    "SessionRecord",
    "WorkerStatus",
    "cluster_summary",
    "decode_event",
    "decode_event_text",
    "decode_usage",
    "encode_event",
    "encode_usage",
    "entry_events",
    "entry_first_seq",
    "entry_runs",
    "entry_texts",
    "event_id",
    "is_current",
    "is_final",
    "last_stored",
    "plan_move",
    "seq_of_id",
    "stored_entry",
    "stored_events",
    "stored_text",
]

SessionState = Literal["waiting", "live", "ended"]
JobKind = Literal["open", "continue"]
CommandKind = Literal["push", "answer", "abort", "set_model", "set_permission_mode"]
COMMAND_KINDS = ("push", "answer", "abort", "set_model", "set_permission_mode")


def event_id(seq: int) -> str:
    """The event stream entry id of the event with this seq (rule 2)."""
    return f"{seq}-0"


def seq_of_id(entry_id: str) -> int:
    """The seq of an event stream entry id; ``RemoteProtocolError`` for anything else."""
    ms, _, n = entry_id.partition("-")
    if not ms.isdigit() or n != "0":
        raise RemoteProtocolError(f"not an event entry id: {entry_id!r}")
    return int(ms)


ENTRY_CHARS = 16 * 1024
"""The characters of text a stream entry of several events holds at most (an event longer
than this has an entry of its own): a reader that wants one of its events reads them all."""


def encode_event(event: Event) -> dict[str, str]:
    """The fields of an event's stream entry of its own."""
    return {"e": event_text(event)}


def decode_event(fields: Mapping[Any, Any]) -> Event:
    """The event of the fields of a stream entry of one event; ``RemoteProtocolError`` when it
    holds none (or several: :func:`entry_events` reads any entry)."""
    if "s" in fields:
        raise RemoteProtocolError("the stream entry holds several events: read it whole")
    return decode_event_text(stored_text(fields))


def stored_text(fields: Mapping[Any, Any]) -> str:
    """The JSON text in a stream entry's fields (``event_to_json``, as the wire carries it;
    an entry of several events holds theirs joined by newlines); ``RemoteProtocolError``
    when it holds none."""
    text = fields.get("e")
    if not isinstance(text, str):
        raise RemoteProtocolError("not an event entry: it has no event text")
    return text


def entry_texts(identifier: str, fields: Mapping[Any, Any]) -> list[tuple[int, str]]:
    """The seq and JSON text of each event of a stream entry (rule 2), oldest first:
    ``fields`` hold ``e`` (the texts joined by newlines: a compact JSON text has none) and,
    for an entry of several events, ``s`` (the first one's seq; the id is the last one's).
    ``RemoteProtocolError`` when the entry is not of that shape."""
    last = seq_of_id(str(identifier))
    text = stored_text(fields)
    if "s" not in fields:
        return [(last, text)]
    first = entry_first_seq(identifier, fields)
    texts = text.split("\n")
    if first > last or len(texts) != last - first + 1:
        raise RemoteProtocolError(
            f"event entry {identifier}: {len(texts)} event texts for seqs {first} to {last}"
        )
    return list(zip(range(first, last + 1), texts, strict=True))


def entry_first_seq(identifier: str, fields: Mapping[Any, Any]) -> int:
    """The seq of the first event of a stream entry (rule 2), without reading its texts."""
    first = fields.get("s")
    if first is None:
        return seq_of_id(str(identifier))
    if not isinstance(first, str) or not first.isdigit():
        raise RemoteProtocolError(f"event entry {identifier}: bad first seq {first!r}")
    return int(first)


def last_stored(newest: Sequence[Any]) -> tuple[int, str] | None:
    """The seq and text of the stream's last event, from ``XREVRANGE <key> + - COUNT 1``'s
    reply (its entries have ``identifier`` and ``field_values``); None: the stream is empty."""
    if not newest:
        return None
    return entry_texts(newest[0].identifier, newest[0].field_values)[-1]


def entry_events(identifier: str, fields: Mapping[Any, Any]) -> list[Event]:
    """The events of a stream entry (:func:`entry_texts`), decoded."""
    return [decode_event_text(text) for _, text in entry_texts(identifier, fields)]


def stored_events(entries: Iterable[Any]) -> list[Event]:
    """The events of stream entries as ``XRANGE`` gives them (each with ``identifier`` and
    ``field_values``), in order."""
    return [
        event for entry in entries for event in entry_events(entry.identifier, entry.field_values)
    ]


def entry_runs(seqs: Sequence[int], sizes: Sequence[int]) -> list[int]:
    """How many of a batch's events (their seqs and text sizes, in order) each stream entry
    holds: consecutive seqs, at most ``ENTRY_CHARS`` of text per entry unless one event is
    longer alone."""
    runs: list[int] = []
    count = size = 0
    for i, (seq, length) in enumerate(zip(seqs, sizes, strict=True)):
        if count and (seq != seqs[i - 1] + 1 or size + 1 + length > ENTRY_CHARS):
            runs.append(count)
            count = size = 0
        size += length + (1 if count else 0)
        count += 1
    if count:
        runs.append(count)
    return runs


def decode_event_text(text: str) -> Event:
    """The event of a stored event's JSON text (:func:`stored_text`)."""
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise RemoteProtocolError(f"not an event entry: {exc}") from None
    return event_from_json(obj)


_UNDECODED_KINDS = frozenset({TextDelta.kind, ThinkingDelta.kind})


def stored_entry(seq: int, text: str) -> Entry:
    """The buffer entry of the stored event ``text`` (seq ``seq``). A delta whose text has the
    codec's shape (``codec.flat_kind``) is kept as text: a gateway frames it as it is, and its
    event is decoded only if something reads it (a Python subscriber, a merge for a client
    that lags); any other event is decoded now (``RemoteProtocolError`` if it is none)."""
    if flat_kind(text) in _UNDECODED_KINDS:
        return Entry.undecoded(seq, text, decode_event_text)
    return Entry.of(decode_event_text(text), text)


def _field(fields: Mapping[str, str], name: str, where: str) -> str:
    try:
        return fields[name]
    except KeyError:
        raise RemoteProtocolError(f"{where}: missing field {name!r}") from None


@attrs.frozen(kw_only=True)
class Job:
    """An execution to run: ``params`` as the wire encodes them; ``after_seq`` is the seq the
    session's stream is at before it (its events are numbered from ``after_seq + 1``);
    ``traceparent`` (W3C) is the trace context of whoever asked for it, the parent of the
    worker's spans ("" for none)."""

    kind: JobKind
    session: str
    params: dict[str, Any]
    after_seq: int = 0
    execution: int = 1
    traceparent: str = ""

    def to_fields(self) -> dict[str, str]:
        fields = {
            "kind": self.kind,
            "session": self.session,
            "params": dumps(self.params),
            "after_seq": str(self.after_seq),
            "execution": str(self.execution),
        }
        if self.traceparent:
            fields["traceparent"] = self.traceparent
        return fields

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> Job:
        kind = _field(fields, "kind", "job")
        if kind not in ("open", "continue"):
            raise RemoteProtocolError(f"job: unknown kind {kind!r}")
        try:
            params = json.loads(_field(fields, "params", "job"))
            after_seq = int(_field(fields, "after_seq", "job"))
            execution = int(_field(fields, "execution", "job"))
        except ValueError as exc:
            raise RemoteProtocolError(f"job: {exc}") from None
        if not isinstance(params, dict):
            raise RemoteProtocolError("job: params must be a JSON object")
        return cls(
            kind=kind,  # type: ignore[arg-type]
            session=_field(fields, "session", "job"),
            params=params,
            after_seq=after_seq,
            execution=execution,
            # A malformed one (an older or foreign writer) is dropped: the job still runs.
            traceparent=parent if is_traceparent(parent := fields.get("traceparent", "")) else "",
        )


@attrs.frozen(kw_only=True)
class Command:
    """An op for the worker that runs ``session``; its :class:`Outcome` goes to ``reply``.
    A push carries its ``text`` and ``images`` (as base64 in the entry); a live control
    (``set_model``, ``set_permission_mode``) its value in ``answer``."""

    kind: CommandKind
    session: str
    reply: str
    text: str = ""
    images: tuple[ImageInput, ...] = ()
    request: str = ""
    answer: Any = None

    def to_fields(self) -> dict[str, str]:
        fields = {
            "kind": self.kind,
            "session": self.session,
            "reply": self.reply,
            "text": self.text,
            "request": self.request,
            "answer": dumps(to_json_safe(self.answer)),
        }
        if self.images:
            fields["images"] = dumps(
                [base64.b64encode(image.data).decode("ascii") for image in self.images]
            )
        return fields

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> Command:
        kind = _field(fields, "kind", "command")
        if kind not in COMMAND_KINDS:
            raise RemoteProtocolError(f"command: unknown kind {kind!r}")
        try:
            answer = json.loads(fields.get("answer", "null"))
        except ValueError as exc:
            raise RemoteProtocolError(f"command: answer: {exc}") from None
        return cls(
            kind=kind,  # type: ignore[arg-type]
            session=_field(fields, "session", "command"),
            reply=_field(fields, "reply", "command"),
            text=fields.get("text", ""),
            images=_decode_images(fields.get("images")),
            request=fields.get("request", ""),
            answer=answer,
        )


def _decode_images(text: str | None) -> tuple[ImageInput, ...]:
    if not text:
        return ()
    try:
        raw = json.loads(text)
        if not isinstance(raw, list):
            raise ValueError("not a list")
        return tuple(
            ImageInput.from_bytes(base64.b64decode(item, validate=True)) for item in raw
        )
    except (ValueError, TypeError, InvalidParamsError) as exc:
        raise RemoteProtocolError(f"command: images: {exc}") from None


@attrs.frozen(kw_only=True)
class Outcome:
    """What a command came to: ``ok`` (with the push's ``uuid``) or not, and why."""

    ok: bool
    reason: str = ""
    uuid: str = ""

    def encode(self) -> str:
        return dumps({"ok": self.ok, "reason": self.reason, "uuid": self.uuid})

    @classmethod
    def decode(cls, text: str) -> Outcome:
        try:
            obj = json.loads(text)
            return cls(ok=bool(obj["ok"]), reason=str(obj["reason"]), uuid=str(obj["uuid"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteProtocolError(f"not a command outcome: {exc!r}") from None


def encode_usage(usage: Usage) -> str:
    """The ``usage`` field of a session record."""
    return dumps(to_json_safe(usage))


def decode_usage(text: str) -> Usage:
    """A record's ``usage`` field; :class:`RemoteProtocolError` for anything else."""
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise RemoteProtocolError(f"session record: usage: {exc}") from None
    return attrs_from_json(obj, Usage, "session record.usage")


def _opt_float(text: str | None) -> float | None:
    return float(text) if text else None


@attrs.frozen(kw_only=True)
class SessionRecord:
    """A session as the cluster knows it (rule 3)."""

    session: str
    principal: str | None
    host: str
    label: str | None
    state: SessionState
    worker: str = ""
    executions: int = 1
    first_seq: int = 1
    last_seq: int = 0
    claude_session_id: str | None = None
    params: dict[str, Any] = attrs.field(factory=dict)
    created_at: float = 0.0
    ended_at: float | None = None
    abort_requested: bool = False
    moves: int = 0
    epoch: int = 0  # the fencing token of the worker that owns it now (rule 7)
    usage: Usage = ZERO_USAGE

    def to_fields(self) -> dict[str, str]:
        return {
            "session": self.session,
            "principal": "" if self.principal is None else self.principal,
            "has_principal": "1" if self.principal is not None else "0",
            "host": self.host,
            "label": "" if self.label is None else self.label,
            "has_label": "1" if self.label is not None else "0",
            "state": self.state,
            "worker": self.worker,
            "executions": str(self.executions),
            "first_seq": str(self.first_seq),
            "last_seq": str(self.last_seq),
            "claude_session_id": self.claude_session_id or "",
            "params": dumps(self.params),
            "created_at": repr(self.created_at),
            "ended_at": "" if self.ended_at is None else repr(self.ended_at),
            "abort_requested": "1" if self.abort_requested else "0",
            "moves": str(self.moves),
            "epoch": str(self.epoch),
            "usage": encode_usage(self.usage),
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> SessionRecord:
        where = "session record"
        state = _field(fields, "state", where)
        if state not in ("waiting", "live", "ended"):
            raise RemoteProtocolError(f"{where}: unknown state {state!r}")
        try:
            return cls(
                session=_field(fields, "session", where),
                principal=fields.get("principal") if fields.get("has_principal") == "1" else None,
                host=fields.get("host", ""),
                label=fields.get("label") if fields.get("has_label") == "1" else None,
                state=state,  # type: ignore[arg-type]
                worker=fields.get("worker", ""),
                executions=int(fields.get("executions", "1")),
                first_seq=int(fields.get("first_seq", "1")),
                last_seq=int(fields.get("last_seq", "0")),
                claude_session_id=fields.get("claude_session_id") or None,
                params=json.loads(fields.get("params", "{}")),
                created_at=float(fields.get("created_at", "0")),
                ended_at=_opt_float(fields.get("ended_at")),
                abort_requested=fields.get("abort_requested") == "1",
                moves=int(fields.get("moves", "0")),
                epoch=int(fields.get("epoch", "0")),
                usage=decode_usage(fields["usage"]) if fields.get("usage") else ZERO_USAGE,
            )
        except ValueError as exc:
            raise RemoteProtocolError(f"{where}: {exc}") from None


# -- a worker that dies -------------------------------------------------------------------------
#
# 5. **Moving a session.** A worker heartbeats and, with each beat, re-claims the jobs it runs
#    (their idle time in the group goes back to 0). A job idle for longer than ``dead_after``
#    belongs to a dead worker: another worker claims it (``XAUTOCLAIM``) and moves the session.
#    What it runs is decided by :func:`plan_move` from what the stream already holds:
#    the execution's prompt runs again unless a result of this execution was stored (the
#    turn in flight is restarted from its prompt: its partial events stay in the stream,
#    before the move event); every accepted push whose uuid no stored result lists is
#    delivered again; the others are never repeated. The new CLI resumes the conversation
#    from the transcript store when it holds it (the execution continued an earlier one, or
#    a turn of it ended); a first turn that never ended starts the conversation again.
#    Except (rules 9-11, ``move.py``): when the session store holds a result of the turn in
#    flight, the turn is not restarted: the conversation is resumed up to its last stored tool
#    result and the CLI is sent ``CONTINUE_PROMPT``, so no finished tool call runs again.
# 6. **The move event** is a ``warning`` with code ``session_moved``, stored right after the
#    last event the dead worker stored; the moved execution's events follow it.


@attrs.frozen(kw_only=True)
class AcceptedPush:
    """A push a worker accepted (kept until its execution ends, for a move)."""

    uuid: str
    text: str

    def encode(self) -> str:
        return dumps({"uuid": self.uuid, "text": self.text})

    @classmethod
    def decode(cls, text: str) -> AcceptedPush:
        try:
            obj = json.loads(text)
            return cls(uuid=str(obj["uuid"]), text=str(obj["text"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteProtocolError(f"not an accepted push: {exc!r}") from None


@attrs.frozen(kw_only=True)
class MovePlan:
    """What a moved execution runs (rule 5): ``prompt`` first (None: nothing is left to run,
    the execution ends with ``aborted``), then ``again`` pushed in order; ``finished`` when
    its final event is already stored (acknowledge, run nothing). ``resume``: the turn in
    flight continues after that tool result (rule 11; ``prompt`` is then ``CONTINUE_PROMPT``)."""

    prompt: str | None
    again: tuple[str, ...]
    finished: bool
    resume: ResumePoint | None = None


def plan_move(
    prompt: str,
    pushes: Sequence[AcceptedPush],
    stored: Sequence[Event],
    *,
    resume: ResumePoint | None = None,
    read: Collection[str] = (),
) -> MovePlan:
    """Rule 5: ``stored`` is what the stream holds of the execution (from its first seq).
    ``resume``: where the session store lets the turn in flight go on (rule 10, None: it
    cannot); ``read``: the uuids of the messages the stored transcript holds up to it."""
    if any(is_final(event) for event in stored):
        return MovePlan(prompt=None, again=(), finished=True)
    results = [event for event in stored if isinstance(event, Result)]
    confirmed = {uuid for result in results for uuid in result.user_message_uuids}
    confirmed |= set(read)
    pending = [push.text for push in pushes if push.uuid not in confirmed]
    if resume is not None:
        ended_at = max((r.seq for r in results), default=0)
        in_flight = any(
            isinstance(e, ToolUse | ToolResult)
            and e.tool_use_id == resume.tool_use_id
            and e.seq > ended_at
            for e in stored
        )
        if in_flight:  # rule 11: the turn goes on after its last stored tool result
            return MovePlan(
                prompt=CONTINUE_PROMPT, again=tuple(pending), finished=False, resume=resume
            )
    if not results:
        return MovePlan(prompt=prompt, again=tuple(pending), finished=False)
    if pending:
        return MovePlan(prompt=pending[0], again=tuple(pending[1:]), finished=False)
    return MovePlan(prompt=None, again=(), finished=False)


# -- a worker that is slow, not dead: fencing ---------------------------------------------------
#
# 7. **Fencing.** A worker that takes a session (its first claim, or a move) increments the
#    record's ``epoch`` and keeps the new value as its *token*. Every write it makes for the
#    session (events, record updates, accepted pushes, the end with the job's acknowledgement)
#    is a script that first checks the record's epoch still equals its token, and writes
#    nothing otherwise. So a worker that paused for longer than ``dead_after`` (its session
#    moved meanwhile) cannot store anything once it resumes: its first write is refused. A
#    refused write means the session belongs to another worker: the paused worker stops its
#    CLI at once (abort), stores nothing more for it, does not acknowledge its job, and
#    answers a command for it with ``MOVED_REASON``: the gateway then sends the command once
#    more, to the worker the record names now. The mover takes its token *before* it reads
#    what the stream holds, so the stream it plans from cannot change under it.


MOVED_REASON = (
    "the session moved to another worker while this one was paused; send it again"
)
"""The reason a fenced worker gives for a command (the gateway then sends it once more, to
the worker the record names now)."""


def is_current(token: int, stored: str | None) -> bool:
    """Rule 7: may the holder of ``token`` write, the record's epoch field being ``stored``
    (None: the record is gone, and nobody may)."""
    return stored is not None and stored == str(token)


@attrs.frozen(kw_only=True)
class Fenced:
    """A write refused by rule 7: ``worker`` held ``token`` for ``session``, which another
    worker has taken since."""

    session: str
    worker: str
    token: int

    @property
    def message(self) -> str:
        return (
            f"worker {self.worker}: session {self.session} was taken over by another worker "
            f"(token {self.token} is stale): its CLI is stopped, nothing more is stored"
        )

    def outcome(self) -> Outcome:
        """What a command for the session gets from the fenced worker."""
        return Outcome(
            ok=False,
            reason="the session moved to another worker while this one was paused; send it again",
        )


# -- what a worker says of itself ---------------------------------------------------------------
#
# 8. **Worker status.** With each heartbeat a worker writes its :class:`WorkerStatus` as the
#    value of its ``alive`` key (which expires after ``dead_after``): whether it is degraded
#    (some Redis operation of it failing) and since when, its outages so far, what it runs. A
#    gateway's ``hello`` carries :func:`cluster_summary` of the live workers' statuses.


@attrs.frozen(kw_only=True)
class WorkerStatus:
    worker: str
    at: float  # epoch seconds of the heartbeat
    running: int
    max_live: int
    degraded_since: float | None = None  # epoch seconds; None: not degraded
    outages: int = 0  # times it went degraded since it started
    fenced: int = 0  # sessions it stopped because another worker took them (rule 7)

    def encode(self) -> str:
        return dumps(attrs.asdict(self))

    @classmethod
    def decode(cls, text: str) -> WorkerStatus:
        try:
            obj = json.loads(text)
            since = obj["degraded_since"]
            return cls(
                worker=str(obj["worker"]),
                at=float(obj["at"]),
                running=int(obj["running"]),
                max_live=int(obj["max_live"]),
                degraded_since=None if since is None else float(since),
                outages=int(obj["outages"]),
                fenced=int(obj["fenced"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteProtocolError(f"not a worker status: {exc!r}") from None


def cluster_summary(statuses: Sequence[WorkerStatus]) -> dict[str, Any]:
    """Rule 8: what a gateway's ``hello`` says of the workers alive now."""
    ordered = sorted(statuses, key=lambda s: s.worker)
    return {
        "workers_alive": len(ordered),
        "running": sum(s.running for s in ordered),
        "slots": sum(s.max_live for s in ordered),
        "degraded": [
            {"worker": s.worker, "since": s.degraded_since}
            for s in ordered
            if s.degraded_since is not None
        ],
        "workers": [attrs.asdict(s) for s in ordered],
        "unavailable": None,  # or why Redis could not be read (the rest is then empty)
    }
