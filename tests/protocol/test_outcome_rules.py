"""The outcome rules (``protocol/session/outcomes.py``) and their way over the wire.

What a final result's fields and a fatal error's code mean; that only the event ending an
execution carries an outcome; that the gateway's frames and the cluster's Redis entries carry
it and ``ToolUseSummary`` exactly, and that a peer of another version is read sensibly.
"""

from __future__ import annotations

import json

import attrs
import pytest

from claude_trio.events import Aborted, AbortPhase, Error, Outcome, Result, ToolUseSummary
from claude_trio.protocol.cluster.records import decode_event, encode_event
from claude_trio.protocol.errors import RemoteProtocolError
from claude_trio.protocol.fanout.codec import event_from_json, event_to_json
from claude_trio.protocol.fanout.wire import EventFrame, decode_frame, encode_frame
from claude_trio.protocol.session.outcomes import ABORT_PHASES, error_outcome, result_outcome
from claude_trio.protocol.session.usage import ZERO_USAGE

# -- the rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "outcome"),
    [
        ({"subtype": "success", "is_error": False, "terminal_reason": "completed"}, "completed"),
        ({"subtype": "success", "is_error": False}, "completed"),  # an older CLI: no reason
        ({"subtype": "error_max_turns", "is_error": True}, "max_turns"),
        ({"subtype": "error_max_budget_usd", "is_error": True}, "budget_exceeded"),
        (
            {"subtype": "error_max_structured_output_retries", "is_error": True},
            "output_retries_exceeded",
        ),
        ({"subtype": "success", "is_error": True, "api_error_status": 529}, "api_error"),
        ({"subtype": "success", "is_error": True, "terminal_reason": "api_error"}, "api_error"),
        (
            {"subtype": "success", "is_error": True, "terminal_reason": "prompt_too_long"},
            "api_error",
        ),
        (
            {
                "subtype": "error_during_execution",
                "is_error": True,
                "terminal_reason": "aborted_tools",
            },
            "tool_aborted",
        ),
        (
            {"subtype": "success", "is_error": False, "terminal_reason": "hook_stopped"},
            "hook_stopped",
        ),
        ({"subtype": "success", "is_error": True, "terminal_reason": "completed"}, "failed"),
        ({"subtype": "error_during_execution", "is_error": True}, "failed"),
        ({"subtype": "some_future_error", "is_error": True}, "failed"),
    ],
)
def test_a_final_results_outcome_follows_from_its_fields(
    fields: dict[str, object], outcome: str
) -> None:
    assert result_outcome(**fields) is Outcome(outcome)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("config", Outcome.NOT_STARTED),
        ("cli_not_found", Outcome.NOT_STARTED),
        ("cli_exited", Outcome.CLI_EXITED),
        ("transport", Outcome.CLI_EXITED),
        ("cli_timeout", Outcome.CLI_TIMEOUT),
        ("internal", Outcome.INTERNAL),
        ("callback", Outcome.INTERNAL),
        ("api_error", Outcome.API_ERROR),
        ("a_code_of_a_newer_version", Outcome.FAILED),
    ],
)
def test_a_fatal_errors_outcome_follows_from_its_code(code: str, outcome: Outcome) -> None:
    assert error_outcome(code) is outcome


def result(**fields: object) -> Result:
    base: dict[str, object] = {
        "subtype": "success",
        "is_error": False,
        "session_id": "s",
        "usage": ZERO_USAGE,
        "execution_usage": ZERO_USAGE,
        "session_usage": ZERO_USAGE,
    }
    return Result(**(base | fields))  # type: ignore[arg-type]


def test_only_the_event_that_ends_the_execution_has_an_outcome() -> None:
    assert result().outcome is None
    assert result(final=True).outcome is Outcome.COMPLETED
    max_turns = attrs.evolve(result(subtype="error_max_turns", is_error=True), final=True)
    assert max_turns.outcome is Outcome.MAX_TURNS
    # One given is kept (a newer peer may know better); a non-final result never has one.
    assert result(final=True, outcome=Outcome.FAILED).outcome is Outcome.FAILED
    assert result(final=False, outcome=Outcome.FAILED).outcome is None
    fatal = Error(message="gone", code="cli_exited")
    assert fatal.outcome is Outcome.CLI_EXITED
    # The mapper turns a fatal error into a note before an abort's event: no outcome then.
    assert attrs.evolve(fatal, fatal=False).outcome is None
    assert Error(message="x", code="callback", fatal=False).outcome is None
    assert Error(message="x", code="config", outcome=Outcome.INTERNAL).outcome is Outcome.INTERNAL
    assert Aborted().outcome is Outcome.ABORTED
    assert Aborted().phase is None


def test_the_outcome_values_are_their_wire_names() -> None:
    assert [o.value for o in Outcome] == [
        "completed",
        "max_turns",
        "budget_exceeded",
        "output_retries_exceeded",
        "api_error",
        "tool_aborted",
        "hook_stopped",
        "failed",
        "aborted",
        "closed",
        "run_timeout",
        "idle_timeout",
        "cli_exited",
        "cli_timeout",
        "not_started",
        "internal",
    ]
    assert f"{Outcome.RUN_TIMEOUT}" == "run_timeout"  # a StrEnum: a string where one is expected
    assert ABORT_PHASES == ("starting", "streaming", "tools", "between_turns")


# -- over the wire ---------------------------------------------------------------------------------

ENDS: list[Aborted | Error | Result | ToolUseSummary] = [
    Aborted(reason="run_timeout: the execution ran for 5 s", outcome=Outcome.RUN_TIMEOUT,
            phase="tools", turn=2, seq=9),
    Aborted(reason="aborted_streaming", outcome=Outcome.ABORTED, phase="streaming", seq=3),
    Error(message="refused", code="config", phase="init", seq=1),
    result(final=True, subtype="error_max_budget_usd", is_error=True, seq=4),
    ToolUseSummary(summary="Read 2 files", preceding_tool_use_ids=("t1", "t2"),
                   summary_id="u-1", seq=5, is_subagent=True, subagent_task_id="task-1"),
]  # fmt: skip


@pytest.mark.parametrize("event", ENDS, ids=lambda e: e.kind)
def test_the_gateways_frames_carry_outcomes_and_summaries_exactly(
    event: Aborted | Error | Result | ToolUseSummary,
) -> None:
    text = encode_frame(EventFrame(session="sess-1", event=event))
    sent = json.loads(text)["event"]
    if not isinstance(event, ToolUseSummary):
        assert sent["outcome"] == event.outcome.value  # type: ignore[union-attr]
    decoded = decode_frame(text)
    assert decoded == EventFrame(session="sess-1", event=event)
    assert isinstance(decoded, EventFrame)
    assert type(decoded.event) is type(event)


@pytest.mark.parametrize("event", ENDS, ids=lambda e: e.kind)
def test_the_clusters_redis_entries_carry_outcomes_and_summaries_exactly(
    event: Aborted | Error | Result | ToolUseSummary,
) -> None:
    assert decode_event(encode_event(event)) == event


def test_a_summary_is_never_decoded_as_a_tool_use() -> None:
    sent = event_to_json(ENDS[-1])
    assert sent["kind"] == "tool_use_summary"
    assert isinstance(event_from_json(sent), ToolUseSummary)


def test_an_outcome_a_newer_peer_added_reads_as_the_events_own_default() -> None:
    aborted = event_to_json(ENDS[0]) | {"outcome": "an_outcome_of_a_newer_version"}
    assert event_from_json(aborted).outcome is Outcome.ABORTED  # type: ignore[union-attr]
    error = event_to_json(ENDS[2]) | {"outcome": "an_outcome_of_a_newer_version"}
    assert event_from_json(error).outcome is Outcome.NOT_STARTED  # type: ignore[union-attr]
    final = event_to_json(ENDS[3]) | {"outcome": "an_outcome_of_a_newer_version"}
    assert event_from_json(final).outcome is Outcome.BUDGET_EXCEEDED  # type: ignore[union-attr]


def test_an_older_peers_events_get_their_outcome_when_read() -> None:
    for event in ENDS[:4]:
        assert isinstance(event, Aborted | Error | Result)
        older = {k: v for k, v in event_to_json(event).items() if k not in ("outcome", "phase")}
        decoded = event_from_json(older)
        assert isinstance(decoded, Aborted | Error | Result)
        # An aborted event's cause cannot be derived: an older peer's reads as ABORTED.
        assert decoded.outcome is (Outcome.ABORTED if isinstance(event, Aborted) else event.outcome)


def test_a_wrong_type_of_outcome_or_phase_is_refused_naming_the_field() -> None:
    with pytest.raises(RemoteProtocolError, match=r"aborted\.outcome"):
        event_from_json(event_to_json(ENDS[0]) | {"outcome": 3})
    with pytest.raises(RemoteProtocolError, match=r"aborted\.phase"):
        event_from_json(event_to_json(ENDS[0]) | {"phase": "lunch"})


def test_every_phase_round_trips() -> None:
    phases: tuple[AbortPhase, ...] = ABORT_PHASES
    for phase in phases:
        event = Aborted(phase=phase, outcome=Outcome.CLOSED)
        assert event_from_json(json.loads(json.dumps(event_to_json(event)))) == event
