"""Resume-immutable settings as data, and find_resume_violations (protocol/config/resume.py)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.resume import (
    RESUME_IMMUTABLE,
    ResumeConstraints,
    ResumeViolation,
    check_continuable,
    find_resume_violations,
    get_session_resume_constraints,
)
from claude_trio.protocol.errors import LocalProtocolError


def params(model: str | None = None, **config: Any) -> ExecuteParams:
    return ExecuteParams(
        prompt="go on",
        model=model,
        architecture_config=ArchitectureConfig.from_mapping(config),
    )


def test_resume_immutable_is_model_thinking_budget_effort_display_provider() -> None:
    assert (
        frozenset(
            {
                "model",
                "claude_thinking",
                "claude_thinking_budget",
                "claude_effort",
                "claude_thinking_display",
                "provider",
            }
        )
        == RESUME_IMMUTABLE
    )


def test_constraints_describe_the_immutable_set_and_why() -> None:
    constraints = get_session_resume_constraints()
    assert isinstance(constraints, ResumeConstraints)
    assert constraints.immutable == RESUME_IMMUTABLE
    assert "thinking blocks" in constraints.reason
    assert "400" in constraints.reason
    assert "new session" in constraints.remedy
    joined = " ".join(constraints.requirements)
    assert "cwd" in joined
    assert "CLAUDE_CONFIG_DIR" in joined
    assert "max_turns" in joined


def test_identical_params_have_no_violations() -> None:
    p = params(
        "sonnet-4.5", claude_thinking="enabled", claude_thinking_budget=2000, claude_effort="low"
    )
    assert find_resume_violations(p, p) == []


def test_alias_and_full_id_of_the_same_model_is_not_a_violation() -> None:
    assert find_resume_violations(params("opus-4.6"), params("claude-opus-4-6")) == []


def test_changing_the_model_is_a_violation_with_resolved_ids() -> None:
    assert find_resume_violations(params("opus-4.6"), params("opus-4.7")) == [
        ResumeViolation(field="model", old="claude-opus-4-6", new="claude-opus-4-7")
    ]


def test_cli_default_model_to_explicit_model_is_a_violation() -> None:
    violations = find_resume_violations(params(None), params("sonnet-4.6"))
    assert violations == [ResumeViolation(field="model", old=None, new="claude-sonnet-4-6")]


def test_enabled_to_adaptive_on_an_adaptive_only_model_is_not_a_violation() -> None:
    before = params("opus-4.6", claude_thinking="enabled", claude_thinking_budget=4000)
    after = params("opus-4.6", claude_thinking="adaptive")
    assert find_resume_violations(before, after) == []


def test_budget_change_on_an_adaptive_only_model_is_not_a_violation() -> None:
    before = params("fable-5", claude_thinking="enabled", claude_thinking_budget=4000)
    after = params("fable-5", claude_thinking="enabled", claude_thinking_budget=9000)
    assert find_resume_violations(before, after) == []


def test_enabled_to_adaptive_on_a_budget_model_is_a_violation() -> None:
    before = params("sonnet-4.5", claude_thinking="enabled", claude_thinking_budget=4000)
    after = params("sonnet-4.5", claude_thinking="adaptive")
    assert find_resume_violations(before, after) == [
        ResumeViolation(field="claude_thinking", old="enabled", new="adaptive"),
        ResumeViolation(field="claude_thinking_budget", old=4000, new=None),
    ]


def test_budget_change_on_a_budget_model_is_a_violation() -> None:
    before = params("sonnet-4.5", claude_thinking="enabled", claude_thinking_budget=4000)
    after = params("sonnet-4.5", claude_thinking="enabled", claude_thinking_budget=8000)
    assert find_resume_violations(before, after) == [
        ResumeViolation(field="claude_thinking_budget", old=4000, new=8000)
    ]


def test_budget_ignored_for_adaptive_thinking_is_not_a_violation() -> None:
    before = params("sonnet-4.6", claude_thinking="adaptive", claude_thinking_budget=4000)
    after = params("sonnet-4.6", claude_thinking="adaptive")
    assert find_resume_violations(before, after) == []


def test_turning_thinking_on_is_a_violation() -> None:
    violations = find_resume_violations(
        params("sonnet-4.6"), params("sonnet-4.6", claude_thinking="adaptive")
    )
    assert violations == [ResumeViolation(field="claude_thinking", old=None, new="adaptive")]


def test_explicit_summarized_display_equal_to_the_default_is_not_a_violation() -> None:
    before = params("opus-4.7", claude_thinking="adaptive")
    after = params("opus-4.7", claude_thinking="adaptive", claude_thinking_display="summarized")
    assert find_resume_violations(before, after) == []


def test_display_change_is_a_violation() -> None:
    before = params("opus-4.7", claude_thinking="adaptive")
    after = params("opus-4.7", claude_thinking="adaptive", claude_thinking_display="omitted")
    assert find_resume_violations(before, after) == [
        ResumeViolation(field="claude_thinking_display", old="summarized", new="omitted")
    ]


def test_effort_change_is_a_violation() -> None:
    before = params("opus-4.8", claude_effort="low")
    after = params("opus-4.8", claude_effort="high")
    assert find_resume_violations(before, after) == [
        ResumeViolation(field="claude_effort", old="low", new="high")
    ]


def test_settings_outside_the_immutable_set_may_change() -> None:
    before = params("opus-4.8", claude_usePreset=True, custom_env={"A": "1"}, claude_skills=["pdf"])
    after = ExecuteParams(
        prompt="something else",
        model="opus-4.8",
        system_prompt="new system prompt",
        max_turns=50,
        plan_mode=True,
        resume_session_id="session-1",
        architecture_config=ArchitectureConfig(claude_disable_skill_shell_execution=True),
    )
    assert find_resume_violations(before, after) == []


def test_every_violation_field_is_in_the_immutable_set_and_order_is_stable() -> None:
    before = params(
        "sonnet-4.5", claude_thinking="enabled", claude_thinking_budget=1000, claude_effort="low"
    )
    after = params(
        "sonnet-4.6",
        claude_thinking="adaptive",
        claude_thinking_display="omitted",
        claude_effort="max",
    )
    fields = [v.field for v in find_resume_violations(before, after)]
    assert fields == [
        "model",
        "claude_thinking",
        "claude_thinking_budget",
        "claude_thinking_display",
        "claude_effort",
    ]
    assert set(fields) == RESUME_IMMUTABLE - {"provider"}


@pytest.mark.parametrize("field", ["model", "claude_effort"])
def test_violation_message_names_field_values_and_remedy(field: str) -> None:
    message = ResumeViolation(field=field, old="a", new="b").message
    assert field in message
    assert "'a' -> 'b'" in message
    assert "new session" in message


def test_the_provider_cannot_change_on_resume() -> None:
    first = ExecuteParams(prompt="hi", provider="ollama", model="qwen3-coder")
    again = attrs.evolve(first, prompt="more", provider="openrouter")
    [violation] = find_resume_violations(first, again)
    assert (violation.field, violation.old, violation.new) == ("provider", "ollama", "openrouter")
    assert "provider" in get_session_resume_constraints().immutable
    assert find_resume_violations(first, attrs.evolve(first, prompt="more")) == []


def test_a_session_is_continued_only_once_ended_and_with_a_conversation() -> None:
    # Every host (the fleet, the cluster) asks this one rule.
    assert check_continuable("s1", state="ended", ended=True, claude_session_id="c1") == "c1"
    with pytest.raises(LocalProtocolError, match="'s1' is still running \\(live\\): push to it"):
        check_continuable("s1", state="live", ended=False, claude_session_id="c1")
    with pytest.raises(LocalProtocolError, match="no conversation to continue"):
        check_continuable("s1", state="ended", ended=True, claude_session_id=None)
