"""The model table: alias resolution and the adaptive-only thinking rules
(protocol/config/models.py)."""

from __future__ import annotations

import pytest

from claude_trio.errors import UnknownModelError
from claude_trio.protocol.config.models import (
    ADAPTIVE_THINKING_ONLY,
    MODEL_ALIASES,
    REJECTS_DISABLED_THINKING,
    effective_thinking,
    is_adaptive_only,
    rejects_disabled_thinking,
    resolve_model,
)
from claude_trio.protocol.errors import InvalidParamsError


@pytest.mark.parametrize(
    ("alias", "full_id"),
    [
        ("opus-4.6", "claude-opus-4-6"),
        ("opus-4.7", "claude-opus-4-7"),
        ("opus-4.8", "claude-opus-4-8"),
        ("sonnet-4.6", "claude-sonnet-4-6"),
        ("sonnet-4.5", "claude-sonnet-4-5"),
        ("haiku-4.5", "claude-haiku-4-5"),
        ("fable-5", "claude-fable-5"),
    ],
)
def test_known_alias_resolves_to_full_id(alias: str, full_id: str) -> None:
    assert resolve_model(alias) == full_id


def test_alias_table_is_exactly_the_documented_aliases() -> None:
    assert set(MODEL_ALIASES) == {
        "opus-4.6",
        "opus-4.7",
        "opus-4.8",
        "sonnet-4.6",
        "sonnet-4.5",
        "haiku-4.5",
        "fable-5",
    }


@pytest.mark.parametrize(
    "full_id", ["claude-opus-4-6", "claude-sonnet-4-5-20250929", "claude-mythos-5", "claude-x[1m]"]
)
def test_full_id_passes_through_unchanged(full_id: str) -> None:
    assert resolve_model(full_id) == full_id


@pytest.mark.parametrize("family", ["opus", "sonnet", "haiku"])
def test_cli_family_alias_passes_through_unchanged(family: str) -> None:
    assert resolve_model(family) == family


@pytest.mark.parametrize("bad", ["gpt-4o", "opus-4", "Opus-4.6", "", "claude-", " opus-4.6"])
def test_unknown_alias_raises_unknown_model_error_listing_known_aliases(bad: str) -> None:
    with pytest.raises(UnknownModelError) as info:
        resolve_model(bad)
    message = str(info.value)
    assert repr(bad) in message
    for alias in [*MODEL_ALIASES, "opus", "sonnet", "haiku"]:
        assert alias in message
    assert "claude-" in message


def test_unknown_model_error_is_an_invalid_params_error_naming_the_field() -> None:
    with pytest.raises(InvalidParamsError) as info:
        resolve_model("nope")
    assert info.value.field == "model"
    assert info.value.value == "nope"


def test_adaptive_thinking_only_set_is_exactly_the_typescript_librarys_members() -> None:
    assert (
        frozenset({"claude-fable-5", "claude-opus-4-6", "claude-opus-4-7", "claude-opus-4-8"})
        == ADAPTIVE_THINKING_ONLY
    )


def test_rejects_disabled_thinking_is_fable_5_only() -> None:
    assert frozenset({"claude-fable-5"}) == REJECTS_DISABLED_THINKING
    assert rejects_disabled_thinking("claude-fable-5")
    assert rejects_disabled_thinking("claude-fable-5-20260609")
    assert not rejects_disabled_thinking("claude-opus-4-7")
    assert not rejects_disabled_thinking(None)


@pytest.mark.parametrize("model_id", sorted(ADAPTIVE_THINKING_ONLY))
def test_every_adaptive_only_id_is_adaptive_only(model_id: str) -> None:
    assert is_adaptive_only(model_id)


@pytest.mark.parametrize(
    "model_id", ["claude-opus-4-6-20260101", "claude-fable-5-20260609", "claude-opus-4-7[1m]"]
)
def test_dated_and_suffixed_variants_of_adaptive_only_ids_are_members(model_id: str) -> None:
    assert is_adaptive_only(model_id)


@pytest.mark.parametrize(
    "model_id",
    [
        "claude-opus-4-60",
        "claude-opus-4-5",
        "claude-sonnet-4-6",
        "claude-haiku-4-5",
        "opus",
        "claude-opus-4",
        None,
    ],
)
def test_other_models_and_unknown_defaults_are_not_adaptive_only(model_id: str | None) -> None:
    assert not is_adaptive_only(model_id)


def test_enabled_thinking_becomes_adaptive_with_summarized_display_for_opus_4_6() -> None:
    config = effective_thinking("claude-opus-4-6", mode="enabled", budget_tokens=4000, display=None)
    assert config == {"type": "adaptive", "display": "summarized"}


def test_enabled_thinking_keeps_its_budget_on_models_that_allow_it() -> None:
    config = effective_thinking(
        "claude-sonnet-4-5", mode="enabled", budget_tokens=4000, display=None
    )
    assert config == {"type": "enabled", "budget_tokens": 4000}


def test_adaptive_thinking_on_a_non_adaptive_only_model_has_no_default_display() -> None:
    assert effective_thinking(
        "claude-sonnet-4-6", mode="adaptive", budget_tokens=None, display=None
    ) == {"type": "adaptive"}


def test_explicit_display_wins_over_the_summarized_default() -> None:
    config = effective_thinking(
        "claude-opus-4-7", mode="adaptive", budget_tokens=None, display="omitted"
    )
    assert config == {"type": "adaptive", "display": "omitted"}
    config = effective_thinking(
        "claude-sonnet-4-5", mode="enabled", budget_tokens=1024, display="summarized"
    )
    assert config == {"type": "enabled", "budget_tokens": 1024, "display": "summarized"}


@pytest.mark.parametrize("model_id", [None, "claude-sonnet-4-6"])
def test_unset_thinking_is_omitted_never_disabled(model_id: str | None) -> None:
    assert effective_thinking(model_id, mode=None, budget_tokens=None, display=None) is None
    assert effective_thinking(model_id, mode=None, budget_tokens=2048, display=None) is None


@pytest.mark.parametrize("model_id", ["claude-fable-5", "claude-opus-4-7", "claude-opus-4-6"])
def test_unset_thinking_on_adaptive_only_models_is_adaptive_summarized(model_id: str) -> None:
    # The TypeScript library: display 'summarized' automatically for every ADAPTIVE_THINKING_ONLY
    # model, undoing Opus 4.7's and Fable 5's silent 'omitted' default; never 'disabled'.
    expected = {"type": "adaptive", "display": "summarized"}
    assert effective_thinking(model_id, mode=None, budget_tokens=None, display=None) == expected


def test_display_without_mode_on_adaptive_only_model_is_adaptive_with_that_display() -> None:
    config = effective_thinking(
        "claude-fable-5", mode=None, budget_tokens=None, display="summarized"
    )
    assert config == {"type": "adaptive", "display": "summarized"}


def test_display_without_mode_on_other_model_is_invalid() -> None:
    with pytest.raises(InvalidParamsError) as info:
        effective_thinking("claude-sonnet-4-6", mode=None, budget_tokens=None, display="omitted")
    assert info.value.field == "claude_thinking_display"
    assert "claude_thinking" in str(info.value)


def test_enabled_thinking_without_budget_is_invalid_where_the_budget_is_used() -> None:
    with pytest.raises(InvalidParamsError) as info:
        effective_thinking("claude-sonnet-4-5", mode="enabled", budget_tokens=None, display=None)
    assert info.value.field == "claude_thinking_budget"
    # ...but not on an adaptive-only model, where the budget is dropped anyway.
    assert effective_thinking(
        "claude-opus-4-8", mode="enabled", budget_tokens=None, display=None
    ) == {
        "type": "adaptive",
        "display": "summarized",
    }
