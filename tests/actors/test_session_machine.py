"""Generated interleavings of CLI scripts and user actions over a real SDK client.

Hypothesis draws what the CLI does (text, tools, background subagents, questions, crashes) and
what the user does at which virtual time (push, answer, abort, leave the block, stall the
consumer); each example runs in a fresh
``trio.run`` on ``MockClock(autojump_threshold=0)`` (see ``machine_kit``), and the session's
invariants are checked on what happened. Delays come from a small set of values so that ties -
two things at the same virtual time, the interesting races - are common. Trio's scheduler is
deterministic under Hypothesis (trio registers its scheduling RNG with Hypothesis), so a failing
example replays exactly. "Clock advance" is every user step's ``after`` (a ``trio.sleep`` on the
consumer side) and ``WaitFor(kind)`` ties a step to what the CLI just did.

CI runs 200 derandomized examples (~10 s). To hunt for more, run with a random seed and more
examples: ``MACHINE_EXAMPLES=3000 pytest tests/actors/test_session_machine.py``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from machine_kit import (
    Abort,
    Answer,
    Ask,
    Background,
    Crash,
    Example,
    Handler,
    Leave,
    Push,
    Stall,
    Text,
    Tool,
    Turn,
    UserStep,
    WaitFor,
    check_trace,
    run_example,
)

DELAYS = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])
# The user acts quickly (relative to the CLI's delays) so that actions land inside turns.
USER_DELAYS = st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 4.0])

# Weighted by repetition. A crash ends everything, so a turn ends with one only sometimes.
text_step = st.builds(Text, chunks=st.integers(1, 4), delay=DELAYS)
tool_step = st.builds(Tool, duration=DELAYS)
ask_step = st.builds(Ask)
cli_steps = st.one_of(
    text_step,
    text_step,
    tool_step,
    tool_step,
    st.builds(Background, duration=DELAYS),
    ask_step,
    ask_step,
)
crash = st.builds(Crash, code=st.sampled_from([0, 1, 3, 137]))
maybe_crash = st.one_of(st.just(()), st.just(()), st.just(()), crash.map(lambda c: (c,)))
turns = st.builds(
    Turn,
    steps=st.tuples(st.lists(cli_steps, min_size=1, max_size=4), maybe_crash).map(
        lambda parts: (*parts[0], *parts[1])
    ),
)
single_steps: st.SearchStrategy[UserStep] = st.one_of(
    st.builds(Push, after=USER_DELAYS),
    st.builds(Push, after=USER_DELAYS),
    st.builds(Answer, after=USER_DELAYS, valid=st.booleans()),
    st.builds(Abort, after=USER_DELAYS),
    st.builds(Leave, after=USER_DELAYS),
    st.builds(Stall, after=USER_DELAYS, seconds=st.sampled_from([0.5, 2.0, 10.0])),
    st.builds(
        WaitFor,
        kind=st.sampled_from(
            ["result", "tool_use", "user_input_request", "subagent_started", "text_delta"]
        ),
        after=st.sampled_from([0.0, 0.0, 0.5, 2.0, 4.0]),
    ),
)
# A question answered some time after it was asked: the delays straddle the deadlines (2, 4 s).
answer_flow = st.tuples(
    st.builds(WaitFor, kind=st.just("user_input_request"), after=st.sampled_from([0, 1, 2, 4])),
    st.builds(Answer, after=st.just(0.0), valid=st.booleans()),
)
user_steps = st.lists(
    st.one_of(single_steps.map(lambda step: (step,)), answer_flow), min_size=1, max_size=6
).map(lambda chunks: tuple(step for chunk in chunks for step in chunk))
input_modes = st.one_of(
    st.sampled_from(["manual", "manual", "none"]),
    st.builds(
        Handler,
        delay=st.sampled_from([0.0, 1.0, 2.0, 4.0]),
        reply=st.sampled_from(["answer", "none", "raise"]),
    ),
)
examples = st.builds(
    Example,
    turns=st.lists(turns, min_size=1, max_size=3).map(tuple),
    user=user_steps,
    input_mode=input_modes,
    user_input_timeout=st.sampled_from([2.0, 4.0]),
)


@settings(
    max_examples=int(os.environ.get("MACHINE_EXAMPLES", "200")),
    deadline=None,
    derandomize=not os.environ.get("MACHINE_EXAMPLES"),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(examples)
# Regression (found by this test): with an on_user_input handler, session.answer() was accepted
# and then silently dropped (the handler's reply won). Now the first of the two answers wins.
@example(
    Example(
        turns=(Turn(steps=(Ask(),)),),
        user=(Push(after=0.5), Answer(after=0.0, valid=True)),
        input_mode=Handler(delay=1.0, reply="none"),
        user_input_timeout=2.0,
    )
)
# Regression (found by this test): the handler gave up (None) at t=1 and session.answer() came
# in the same instant, while the broker was still unwinding its answer race: "accepted", then
# dropped (the request expired). An accepted answer now always wins.
@example(
    Example(
        turns=(Turn(steps=(Ask(),)),),
        user=(WaitFor(kind="user_input_request", after=1.0), Answer(after=0.0, valid=True)),
        input_mode=Handler(delay=1.0, reply="none"),
        user_input_timeout=2.0,
    )
)
# Regression (found by this test): an abort while the driver was being woken with new frames
# (here: the background task's notification and follow-up turn) made the driver map them after
# the terminal event and raise ClosedResourceError out of open_session.
@example(
    Example(
        turns=(Turn(steps=(Background(duration=0.0),)),),
        user=(WaitFor(kind="result", after=0.0), Abort(after=0.0)),
        input_mode="manual",
        user_input_timeout=2.0,
    )
)
# An abort racing a queued push while a background task finishes (the push is reported lost at
# abort time; the fake CLI, which missed the interrupt, runs it anyway).
@example(
    Example(
        turns=(Turn(steps=(Background(duration=0.0),)),),
        user=(WaitFor(kind="subagent_started", after=0.0), Push(after=0.0), Abort(after=0.0)),
        input_mode="manual",
        user_input_timeout=2.0,
    )
)
def test_generated_interleavings_keep_the_session_invariants(ex: Example) -> None:
    trace = run_example(ex)
    check_trace(ex, trace)
    # Coverage of the interesting paths, in --hypothesis-show-statistics.
    last = trace.events[-1]
    event(f"ended with {last.kind} {getattr(last, 'code', '')}")
    event(f"turns: {sum(e.kind == 'turn_started' for e in trace.events)}")
    accepted = sum(p.outcome.__class__.__name__ == "Accepted" for p in trace.pushes)
    event(f"pushes accepted: {accepted} of {len(trace.pushes)}")
    for e in trace.events:
        if e.kind == "user_input_resolved":
            event(f"user input {e.outcome}")
        if e.kind == "warning":
            event(f"warning {e.code}")
