"""The pending questions rule (``protocol/fanout/pending.py``), which a local fleet keeps as its
session publishes and a cluster's gateway folds from what it read."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from claude_trio.protocol.fanout.pending import PendingQuestions, still_pending
from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Event,
    TextDelta,
    UserInputRequest,
    UserInputResolved,
)


def asked(request_id: str, seq: int) -> UserInputRequest:
    return UserInputRequest(request_id=request_id, source="model-tool", seq=seq)


def resolved(request_id: str, seq: int) -> UserInputResolved:
    return UserInputResolved(request_id=request_id, outcome="answered", seq=seq)


def test_a_question_is_pending_until_answered_or_the_execution_ends() -> None:
    pending: PendingQuestions[Event] = PendingQuestions()
    events: list[Event] = [asked("a", 1), TextDelta(text="x", seq=2), asked("b", 3)]
    for event in events:
        pending.feed(event, event)
    assert pending.items() == [events[0], events[2]]
    assert pending.asked_through(2) == [events[0]]  # "b" is in a replay from seq 2 anyway
    pending.feed(resolved("a", 4), resolved("a", 4))
    assert pending.items() == [events[2]]
    pending.feed(Error(message="retrying", code="api_error", fatal=False, seq=5), events[0])
    assert pending.items() == [events[2]]  # not the end of the execution
    pending.feed(Aborted(seq=6), events[0])
    assert pending.items() == []


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.sampled_from(["ask", "resolve", "delta", "abort"]), st.sampled_from("abc")),
        max_size=20,
    ),
    st.integers(min_value=0, max_value=21),
)
def test_the_fold_and_the_running_record_agree_with_a_plain_reading(
    steps: list[tuple[str, str]], through: int
) -> None:
    events: list[Event] = []
    for seq, (step, rid) in enumerate(steps, start=1):
        match step:
            case "ask":
                events.append(asked(rid, seq))
            case "resolve":
                events.append(resolved(rid, seq))
            case "delta":
                events.append(TextDelta(text=rid, seq=seq))
            case _:
                events.append(Aborted(seq=seq))
    # A plain reading: asked at or before ``through``, and after it no answer and no end.
    expected = []
    for i, event in enumerate(events):
        if not isinstance(event, UserInputRequest) or event.seq > through:
            continue
        later = events[i + 1 :]
        if any(isinstance(e, Aborted) for e in later):
            continue
        if any(isinstance(e, UserInputResolved | UserInputRequest) and e.request_id
               == event.request_id for e in later):  # fmt: skip
            continue  # answered, or asked again (the newer one counts)
        expected.append(event)
    assert still_pending(events, lambda e: e, through=through) == expected
