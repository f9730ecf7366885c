"""Resuming a session over the real bundled CLI, and the resume-immutable check.

A resume needs the first result's ``session_id``, the same ``cwd`` and the same
``CLAUDE_CONFIG_DIR`` (the hermetic env keeps it under the test's tmp_path). The check for
settings that must not change is pure: a caller runs ``find_resume_violations`` on the params the
session was created with and the ones it is about to resume with, and does not open the session
when it reports anything - so no CLI starts and no request reaches the model.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from helpers import (
    assert_no_child_processes,
    dump,
    kinds,
    of_type,
    params,
    run_session,
    sonnet_cost,
)

from claude_trio.protocol.config.params import ArchitectureConfig
from claude_trio.protocol.config.resume import ResumeViolation, find_resume_violations
from claude_trio.protocol.session.events import Result, TurnStarted
from claude_trio.testing.model_double import ModelDouble, Reply, ReplyUsage, turns

pytestmark = pytest.mark.e2e


async def test_resume_sends_the_earlier_history_and_reports_only_the_new_calls_usage(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    second_usage = ReplyUsage(input_tokens=40, output_tokens=4)
    model_double.responder = turns(
        Reply.text("noted: 42"),
        Reply.text("it was 42", usage=second_usage),
    )
    first_params = params(tmp_path, "remember the number 42")

    first_events = await run_session(first_params, hermetic)

    [first] = of_type(first_events, Result)
    assert first.session_id is not None
    second_params = attrs.evolve(
        first_params, prompt="which number was it?", resume_session_id=first.session_id
    )
    assert find_resume_violations(first_params, second_params) == []

    second_events = await run_session(second_params, hermetic)

    assert kinds(second_events) == [
        "adapter_ready",
        "turn_started",
        "assistant_message",
        "result",
    ], dump(
        second_events
    )
    _, resumed_request = model_double.message_requests
    assert resumed_request.user_texts[-2:] == ["remember the number 42", "which number was it?"]
    assert "noted: 42" in json.dumps(
        [m for m in resumed_request.messages if m.get("role") == "assistant"]
    )
    [turn_started] = of_type(second_events, TurnStarted)
    [second] = of_type(second_events, Result)
    assert turn_started.session_id == second.session_id == first.session_id
    assert (second.final, second.is_error, second.text) == (True, False, "it was 42")
    # The resumed CLI restores the conversation's cost into its cumulative counter: its
    # result's total_cost_usd includes the first turn. The turn's cost is the new call's alone,
    # and the new session's totals hold only this execution.
    assert second.usage.input_tokens == second_usage.input_tokens
    assert second.raw.total_cost_usd == pytest.approx(
        first.usage.cost_usd + sonnet_cost(second_usage), rel=1e-9
    )
    assert second.usage.cost_usd == pytest.approx(sonnet_cost(second_usage), rel=1e-9)
    assert second.session_usage == second.usage


async def test_resume_with_a_changed_model_or_thinking_is_refused_before_any_cli_starts(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(Reply.text("noted"))
    first_params = params(tmp_path, "remember this")
    first_events = await run_session(first_params, hermetic)
    [first] = of_type(first_events, Result)
    requests_before = len(model_double.requests)

    changed = attrs.evolve(
        first_params,
        prompt="go on",
        resume_session_id=first.session_id,
        model="opus-4.6",
        architecture_config=ArchitectureConfig(claude_thinking="enabled", claude_effort="high"),
    )
    violations = find_resume_violations(first_params, changed)

    # The caller's decision point: with violations, it starts a new session instead of opening
    # this one. Nothing was started for the refused resume.
    assert [(v.field, v.old, v.new) for v in violations] == [
        ("model", "claude-sonnet-4-5", "claude-opus-4-6"),
        ("claude_thinking", None, "adaptive"),  # enabled is adaptive on an adaptive-only model
        ("claude_thinking_display", None, "summarized"),
        ("claude_effort", None, "high"),
    ]
    assert all(isinstance(v, ResumeViolation) for v in violations)
    assert "start a new session" in violations[0].message
    assert len(model_double.requests) == requests_before
    assert_no_child_processes()


async def test_identical_turns_over_three_resumes_cost_the_same(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    usage = ReplyUsage(input_tokens=10, output_tokens=5)
    model_double.responder = turns(*(Reply.text("ok", usage=usage) for _ in range(3)))
    execute = params(tmp_path, "one")
    costs = []
    for prompt in ("one", "two", "three"):
        execute = attrs.evolve(execute, prompt=prompt)
        [result] = of_type(await run_session(execute, hermetic), Result)
        costs.append(result.usage.cost_usd)
        execute = attrs.evolve(execute, resume_session_id=result.session_id)
    assert costs == pytest.approx([sonnet_cost(usage)] * 3, rel=1e-9)
