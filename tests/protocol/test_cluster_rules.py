"""The cluster's pure rules (``protocol/cluster.py``): the codecs, and a Hypothesis model of a
session under push / CLI turns / abort / worker death / gateway switch, checking that every
execution has exactly one final event, no accepted push is lost, and none is answered twice."""

from __future__ import annotations

import itertools

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from claude_trio.protocol.cluster import (
    AcceptedPush,
    Command,
    Job,
    Outcome,
    SessionRecord,
    decode_event,
    encode_event,
    event_id,
    plan_move,
    seq_of_id,
)
from claude_trio.protocol.errors import RemoteProtocolError
from claude_trio.protocol.events import Aborted, Event, Result, TextDelta, WarningEvent
from claude_trio.protocol.usage import ZERO_USAGE


def result(text: str, uuids: tuple[str, ...] = (), *, final: bool) -> Result:
    return Result(
        subtype="success",
        is_error=False,
        session_id="cli-session",
        usage=ZERO_USAGE,
        execution_usage=ZERO_USAGE,
        session_usage=ZERO_USAGE,
        text=text,
        user_message_uuids=uuids,
        final=final,
    )


def test_codecs_round_trip() -> None:
    job = Job(kind="continue", session="s", params={"prompt": "p"}, after_seq=7, execution=2)
    assert Job.from_fields(job.to_fields()) == job
    command = Command(kind="answer", session="s", reply="r", request="q", answer={"a": [1]})
    assert Command.from_fields(command.to_fields()) == command
    outcome = Outcome(ok=False, reason="why")
    assert Outcome.decode(outcome.encode()) == outcome
    record = SessionRecord(
        session="s", principal=None, host="h", label="", state="live", ended_at=None
    )
    assert SessionRecord.from_fields(record.to_fields()) == record
    event = TextDelta(text="hi", seq=3, turn=1)
    assert decode_event(encode_event(event)) == event
    assert seq_of_id(event_id(42)) == 42


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "nope"}, "unknown kind"),
        ({"kind": "open", "session": "s", "params": "[]", "after_seq": "0", "execution": "1"},
         "JSON object"),
        ({"kind": "open", "session": "s", "params": "{}", "after_seq": "x", "execution": "1"},
         "invalid literal"),
    ],
)  # fmt: skip
def test_a_bad_job_is_a_clear_error(fields: dict[str, str], message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message):
        Job.from_fields(fields)


def test_not_an_event_entry_id() -> None:
    with pytest.raises(RemoteProtocolError, match="not an event entry id"):
        seq_of_id("12-1")


# -- the model --------------------------------------------------------------------------------


@attrs.define
class Model:
    """One execution as the cluster runs it. ``stored`` is the session's stream; the CLI
    consumes what is ``pending`` (the prompt first) and its result lists the uuids of the
    pushes it consumed; a worker can die after the CLI consumed messages but before their
    result was stored."""

    prompt: str = "prompt"
    stored: list[Event] = attrs.field(factory=list)
    accepted: list[AcceptedPush] = attrs.field(factory=list)  # this worker's record (Redis)
    every_accepted: list[str] = attrs.field(factory=list)  # every push a caller got Accepted
    pending: list[tuple[str | None, str]] = attrs.field(factory=list)  # (uuid, text)
    in_flight: list[tuple[str | None, str]] = attrs.field(factory=list)
    ended: bool = False
    ids: itertools.count[int] = attrs.field(factory=itertools.count)

    def __attrs_post_init__(self) -> None:
        self.pending.append((None, self.prompt))

    def store(self, event: Event) -> None:
        self.stored.append(attrs.evolve(event, seq=len(self.stored) + 1))

    def push(self, text: str) -> None:
        if self.ended:
            return  # Rejected: the execution has ended
        uuid = f"u{next(self.ids)}"
        self.accepted.append(AcceptedPush(uuid=uuid, text=text))
        self.every_accepted.append(text)
        self.pending.append((uuid, text))

    def cli_takes(self, n: int) -> None:
        """The CLI takes up to ``n`` pending messages into its turn (not yet answered)."""
        taken, self.pending = self.pending[:n], self.pending[n:]
        self.in_flight += taken

    def cli_answers(self, final: bool) -> None:
        if self.ended or not self.in_flight:
            return
        uuids = tuple(u for u, _ in self.in_flight if u is not None)
        texts = " | ".join(t for _, t in self.in_flight)
        self.in_flight = []
        last = final and not self.pending
        self.store(result(texts, uuids, final=last))
        self.ended = last

    def abort(self) -> None:
        if not self.ended:
            self.store(Aborted(reason="aborted"))
            self.ended = True
            self.pending, self.in_flight = [], []

    def worker_dies(self) -> None:
        """Everything not stored is gone; another worker plans the move from the stream."""
        if self.ended:
            return
        plan = plan_move(self.prompt, self.accepted, self.stored)
        assert not plan.finished
        self.store(WarningEvent(code="session_moved", message="moved"))
        self.in_flight = []
        self.accepted = []
        self.pending = []
        if plan.prompt is None:
            self.store(Aborted(reason="nothing left"))
            self.ended = True
            return
        first = plan.prompt
        if first == self.prompt and not any(isinstance(e, Result) for e in self.stored):
            self.pending.append((None, first))
        else:
            self.pending.append(self._again(first))
        for text in plan.again:
            self.pending.append(self._again(text))

    def _again(self, text: str) -> tuple[str, str]:
        uuid = f"u{next(self.ids)}"
        self.accepted.append(AcceptedPush(uuid=uuid, text=text))
        return uuid, text

    def finish(self) -> None:
        while not self.ended:
            self.cli_takes(len(self.pending) or 1)
            if not self.in_flight:
                self.store(result("", final=True))
                self.ended = True
                return
            self.cli_answers(final=True)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.integers(0, 99)),
        st.tuples(st.just("take"), st.integers(1, 3)),
        st.tuples(st.just("answer"), st.booleans()),
        st.tuples(st.just("die"), st.just(0)),
        st.tuples(st.just("abort"), st.just(0)),
        st.tuples(st.just("switch"), st.integers(0, 50)),
    ),
    max_size=30,
)


@settings(max_examples=1000, deadline=None)
@given(operations)
# The worker dies after a result listing the push was stored: it must not be answered again.
@example([("push", 1), ("take", 2), ("answer", False), ("die", 0)])
# It dies with the push taken in, unanswered: it must be answered after the move.
@example([("push", 1), ("take", 2), ("die", 0)])
def test_model_one_final_event_no_push_lost_or_answered_twice(
    ops: list[tuple[str, int]],
) -> None:
    model = Model()
    aborted = False
    views: list[int] = []  # where a client switched gateway (the seq it had seen)
    for op, arg in ops:
        match op:
            case "push":
                model.push(f"push-{arg}-{len(model.every_accepted)}")
            case "take":
                model.cli_takes(arg)
            case "answer":
                model.cli_answers(arg)
            case "die":
                model.worker_dies()
            case "abort":
                aborted = aborted or not model.ended
                model.abort()
            case "switch":
                views.append(min(arg, len(model.stored)))
    model.finish()
    stream = model.stored

    # A client that switches gateway at any seq gets the rest exactly (entry id = seq).
    for seen in views:
        assert stream[:seen] + [e for e in stream if e.seq > seen] == stream
    assert [e.seq for e in stream] == list(range(1, len(stream) + 1))
    finals = [e for e in stream if isinstance(e, Aborted) or (isinstance(e, Result) and e.final)]
    assert len(finals) == 1
    assert finals[0] is stream[-1]
    answered = [
        text
        for e in stream
        if isinstance(e, Result) and e.text
        for text in e.text.split(" | ")
        if text.startswith("push-")
    ]
    assert len(answered) == len(set(answered)), "a push was answered twice"
    if not any(isinstance(e, Aborted) for e in stream):
        assert set(answered) == set(model.every_accepted), "an accepted push was lost"
