"""The cluster's pure rules (``protocol/cluster/records.py``): the codecs, the fencing comparison,
and a Hypothesis model of a session under push / CLI turns / abort / worker death / a worker that
pauses then resumes / gateway switch, checking that every execution has exactly one final
event, no accepted push is lost, none is answered twice, and nothing is stored by a worker
whose token is stale."""

from __future__ import annotations

import itertools

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from claude_trio.protocol.cluster.records import (
    AcceptedPush,
    Command,
    Fenced,
    Job,
    Outcome,
    SessionRecord,
    decode_event,
    encode_event,
    event_id,
    is_current,
    plan_move,
    seq_of_id,
)
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.errors import RemoteProtocolError
from claude_trio.protocol.session.events import Aborted, Event, Result, TextDelta, WarningEvent
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage


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
    assert "traceparent" not in job.to_fields()
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    traced = attrs.evolve(job, traceparent=parent)
    assert Job.from_fields(traced.to_fields()) == traced
    # A malformed one (a foreign writer) is dropped; the job still runs.
    assert Job.from_fields({**traced.to_fields(), "traceparent": "00-bad"}) == job
    command = Command(kind="answer", session="s", reply="r", request="q", answer={"a": [1]})
    assert Command.from_fields(command.to_fields()) == command
    outcome = Outcome(ok=False, reason="why")
    assert Outcome.decode(outcome.encode()) == outcome
    record = SessionRecord(
        session="s", principal=None, host="h", label="", state="live", ended_at=None
    )
    assert SessionRecord.from_fields(record.to_fields()) == record
    image = ImageInput.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    push = Command(kind="push", session="s", reply="r", text="look", images=(image,))
    assert Command.from_fields(push.to_fields()) == push
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


def test_a_record_carries_the_sessions_usage() -> None:
    """Rule 3: the usage the worker wrote with the events, read back as it was written; a
    record written before records carried it reads as no usage."""
    usage = Usage(input_tokens=12, output_tokens=3, cache_read_input_tokens=2, cost_usd=0.25)
    record = SessionRecord(session="s", principal="p", host="", label=None, state="ended",
                           usage=usage)  # fmt: skip
    assert SessionRecord.from_fields(record.to_fields()).usage == usage
    older = {k: v for k, v in record.to_fields().items() if k != "usage"}
    assert SessionRecord.from_fields(older).usage == ZERO_USAGE
    with pytest.raises(RemoteProtocolError, match="usage"):
        SessionRecord.from_fields({**record.to_fields(), "usage": '{"input_tokens": "many"}'})


def test_not_an_event_entry_id() -> None:
    with pytest.raises(RemoteProtocolError, match="not an event entry id"):
        seq_of_id("12-1")


def test_only_the_current_token_may_write() -> None:
    assert is_current(3, "3")
    assert not is_current(2, "3")  # taken over since
    assert not is_current(3, None)  # the record is gone
    assert not is_current(3, "03")  # the scripts compare the decimal strings
    record = SessionRecord(session="s", principal=None, host="", label=None, state="live")
    assert SessionRecord.from_fields({**record.to_fields(), "epoch": "4"}).epoch == 4
    fenced = Fenced(session="s", worker="w1", token=2)
    assert "session s was taken over by another worker" in fenced.message
    assert not fenced.outcome().ok
    assert "moved to another worker" in fenced.outcome().reason


# -- the model --------------------------------------------------------------------------------


@attrs.define
class WorkerState:
    """What one worker holds of the execution: its token, its CLI's input (``pending``, the
    prompt first), what its CLI took into the turn, and the events it has not stored yet."""

    token: int
    pending: list[tuple[str | None, str]] = attrs.field(factory=list)  # (uuid, text)
    in_flight: list[tuple[str | None, str]] = attrs.field(factory=list)
    unstored: list[Event] = attrs.field(factory=list)
    stopped: bool = False


@attrs.define
class Model:
    """One execution as the cluster runs it. ``stored`` is the session's stream (each entry
    with the token that stored it); the CLI consumes what is ``pending`` and its result lists
    the uuids of the pushes it consumed. A worker can die after its CLI consumed messages but
    before their result was stored; it can also pause (its CLI goes on, nothing of it reaches
    Redis) and be taken over meanwhile, then resume: every write it makes is checked against
    the record's epoch (rule 7)."""

    prompt: str = "prompt"
    epoch: int = 1
    stored: list[tuple[int, Event]] = attrs.field(factory=list)
    accepted: list[AcceptedPush] = attrs.field(factory=list)  # the record's pushes (Redis)
    every_accepted: list[str] = attrs.field(factory=list)  # every push a caller got Accepted
    worker: WorkerState = attrs.field(init=False)  # the owner named in the record
    paused: WorkerState | None = None  # a worker whose process is stopped
    refused: int = 0  # writes refused by the fencing check
    ended: bool = False
    ids: itertools.count[int] = attrs.field(factory=itertools.count)

    def __attrs_post_init__(self) -> None:
        self.worker = WorkerState(token=self.epoch, pending=[(None, self.prompt)])

    @property
    def events(self) -> list[Event]:
        return [event for _, event in self.stored]

    def write(self, by: WorkerState, event: Event) -> bool:
        """A fenced write (the store script): stored only if ``by`` holds the current token."""
        if not is_current(by.token, str(self.epoch)):
            self.refused += 1
            by.stopped = True  # a refused write: the worker stops that session at once
            by.pending, by.in_flight, by.unstored = [], [], []
            return False
        self.stored.append((by.token, attrs.evolve(event, seq=len(self.stored) + 1)))
        return True

    def _emit(self, by: WorkerState, event: Event) -> None:
        if by is self.paused:
            by.unstored.append(event)  # its process is stopped: stored (or not) on resume
        else:
            self.write(by, event)

    def push(self, text: str) -> None:
        owner = self.worker
        if self.ended or owner is self.paused:
            return  # Rejected: ended, or the owner does not answer (the command times out)
        uuid = f"u{next(self.ids)}"
        self.accepted.append(AcceptedPush(uuid=uuid, text=text))
        self.every_accepted.append(text)
        owner.pending.append((uuid, text))

    def cli_takes(self, n: int, which: WorkerState | None = None) -> None:
        """The CLI takes up to ``n`` pending messages into its turn (not yet answered)."""
        w = which or self.worker
        taken, w.pending = w.pending[:n], w.pending[n:]
        w.in_flight += taken

    def cli_answers(self, final: bool, which: WorkerState | None = None) -> None:
        w = which or self.worker
        if w.stopped or not w.in_flight or (self.ended and w is self.worker):
            return
        uuids = tuple(u for u, _ in w.in_flight if u is not None)
        texts = " | ".join(t for _, t in w.in_flight)
        w.in_flight = []
        last = final and not w.pending
        self._emit(w, result(texts, uuids, final=last))
        if last and w is self.worker and w is not self.paused:
            self.ended = True

    def abort(self) -> None:
        w = self.worker
        if not self.ended and w is not self.paused:
            self.write(w, Aborted(reason="aborted"))
            self.ended = True
            w.pending, w.in_flight = [], []

    def pause(self) -> None:
        """The owner's process stops (SIGSTOP): its CLI goes on, nothing reaches Redis."""
        if not self.ended and self.paused is None:
            self.paused = self.worker

    def resume(self) -> None:
        """The paused process goes on: it stores what it held back, if still the owner."""
        w = self.paused
        if w is None:
            return
        self.paused = None
        held, w.unstored = w.unstored, []
        for event in held:
            if not self.write(w, event):
                return
            if w is self.worker and isinstance(event, Result) and event.final:
                self.ended = True

    def take_over(self) -> None:
        """The owner is dead or paused past ``dead_after``: another worker takes a new token
        (before it reads the stream), plans the move from the stream and stores the move."""
        if self.ended:
            return
        self.epoch += 1
        heir = WorkerState(token=self.epoch)
        if self.worker is not self.paused:
            self.worker.stopped = True  # a dead worker: everything not stored is gone
        self.worker = heir
        plan = plan_move(self.prompt, self.accepted, self.events)
        assert not plan.finished
        self.write(heir, WarningEvent(code="session_moved", message="moved"))
        self.accepted = []
        if plan.prompt is None:
            self.write(heir, Aborted(reason="nothing left"))
            self.ended = True
            return
        first = plan.prompt
        if first == self.prompt and not any(isinstance(e, Result) for e in self.events):
            heir.pending.append((None, first))
        else:
            heir.pending.append(self._again(first))
        for text in plan.again:
            heir.pending.append(self._again(text))

    def _again(self, text: str) -> tuple[str, str]:
        uuid = f"u{next(self.ids)}"
        self.accepted.append(AcceptedPush(uuid=uuid, text=text))
        return uuid, text

    def finish(self) -> None:
        self.resume()
        w = self.worker
        while not self.ended:
            self.cli_takes(len(w.pending) or 1)
            if not w.in_flight:
                self.write(w, result("", final=True))
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
        st.tuples(st.just("pause"), st.just(0)),
        st.tuples(st.just("resume"), st.just(0)),
        # The paused worker's CLI goes on while its process is stopped.
        st.tuples(st.just("paused_cli"), st.integers(0, 3)),
    ),
    max_size=30,
)


@settings(max_examples=1000, deadline=None)
@given(operations)
# The worker dies after a result listing the push was stored: it must not be answered again.
@example([("push", 1), ("take", 2), ("answer", False), ("die", 0)])
# It dies with the push taken in, unanswered: it must be answered after the move.
@example([("push", 1), ("take", 2), ("die", 0)])
# It pauses with the push taken in, is taken over, its CLI answers, then it resumes: its
# result (and final event) must not be stored, the heir answers the push once.
@example([("push", 1), ("take", 2), ("pause", 0), ("die", 0), ("paused_cli", 0),
          ("paused_cli", 1), ("resume", 0)])  # fmt: skip
# A pause shorter than dead_after: what it held back is stored on resume.
@example([("take", 1), ("pause", 0), ("paused_cli", 1), ("resume", 0)])
def test_model_one_final_event_no_push_lost_or_answered_twice(
    ops: list[tuple[str, int]],
) -> None:
    model = Model()
    views: list[int] = []  # where a client switched gateway (the seq it had seen)
    for op, arg in ops:
        match op:
            case "push":
                model.push(f"push-{arg}-{len(model.every_accepted)}")
            case "take":
                if model.worker is not model.paused:
                    model.cli_takes(arg)
            case "answer":
                if model.worker is not model.paused:
                    model.cli_answers(arg)
            case "die":
                model.take_over()
            case "abort":
                model.abort()
            case "switch":
                views.append(min(arg, len(model.stored)))
            case "pause":
                model.pause()
            case "resume":
                model.resume()
            case "paused_cli":
                if model.paused is not None:
                    if arg == 0:
                        model.cli_takes(2, model.paused)
                    else:
                        model.cli_answers(arg > 1, model.paused)
    model.finish()
    stream = model.events

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
    # Nothing is stored by a fenced worker: each move event starts its token's entries, and
    # no entry after it carries an older token.
    tokens = [token for token, _ in model.stored]
    assert tokens == sorted(tokens)
    for (token, event), previous in zip(model.stored[1:], tokens, strict=False):
        if token != previous:
            assert isinstance(event, WarningEvent)
            assert event.code == "session_moved"
