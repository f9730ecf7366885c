"""Usage in the unified convention and its arithmetic (protocol/session/usage.py)."""

from __future__ import annotations

import attrs
import pytest
from claude_agent_sdk import ResultMessage
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.actors.session.sdk_private import parse_message
from claude_trio.protocol.session.usage import (
    ZERO_USAGE,
    Usage,
    add_usage,
    normalize_usage,
    sum_usage,
    usage_difference,
)

ANTHROPIC_USAGE = {
    "input_tokens": 10,
    "cache_read_input_tokens": 300,
    "cache_creation_input_tokens": 50,
    "output_tokens": 40,
}


def test_input_tokens_is_fresh_plus_cache_read_plus_cache_creation() -> None:
    usage = normalize_usage(ANTHROPIC_USAGE)
    assert usage.input_tokens == 10 + 300 + 50


def test_cache_fields_are_kept_as_subsets_of_input() -> None:
    usage = normalize_usage(ANTHROPIC_USAGE)
    assert usage.cache_read_input_tokens == 300
    assert usage.cache_creation_input_tokens == 50
    assert usage.cache_read_input_tokens + usage.cache_creation_input_tokens <= usage.input_tokens


def test_context_size_is_input_plus_output() -> None:
    assert normalize_usage(ANTHROPIC_USAGE).context_size == 360 + 40


def test_fresh_input_is_recovered_by_subtracting_the_cache_subsets() -> None:
    assert normalize_usage(ANTHROPIC_USAGE).fresh_input_tokens == 10


def test_output_tokens_and_cost_are_carried() -> None:
    usage = normalize_usage(ANTHROPIC_USAGE, cost_usd=0.25)
    assert usage.output_tokens == 40
    assert usage.cost_usd == 0.25


@pytest.mark.parametrize("raw", [None, {}])
def test_missing_usage_is_zero(raw: dict[str, int] | None) -> None:
    assert normalize_usage(raw) == ZERO_USAGE
    assert normalize_usage(raw, cost_usd=1.5) == Usage(cost_usd=1.5)


def test_missing_fields_are_zero() -> None:
    usage = normalize_usage({"output_tokens": 7})
    assert usage == Usage(output_tokens=7)
    usage = normalize_usage({"input_tokens": 5})
    assert usage == Usage(input_tokens=5)
    assert usage.fresh_input_tokens == 5


@pytest.mark.parametrize("junk", [None, "12", True, [1], {"a": 1}])
def test_non_numeric_fields_are_zero(junk: object) -> None:
    usage = normalize_usage(
        {"input_tokens": junk, "cache_read_input_tokens": 4, "output_tokens": junk}
    )
    assert usage == Usage(input_tokens=4, cache_read_input_tokens=4)


def test_unknown_fields_are_ignored() -> None:
    raw = {
        **ANTHROPIC_USAGE,
        "server_tool_use": {"web_search_requests": 2},
        "service_tier": "standard",
    }
    assert normalize_usage(raw) == normalize_usage(ANTHROPIC_USAGE)


def test_usage_of_a_real_result_message_normalizes() -> None:
    frame = {
        "type": "result",
        "subtype": "success",
        "duration_ms": 1200,
        "duration_api_ms": 1000,
        "is_error": False,
        "num_turns": 1,
        "session_id": "s-1",
        "total_cost_usd": 0.0123,
        "usage": ANTHROPIC_USAGE,
        "result": "done",
    }
    message = parse_message(frame)
    assert isinstance(message, ResultMessage)
    usage = normalize_usage(message.usage, cost_usd=message.total_cost_usd or 0.0)
    assert usage == Usage(
        input_tokens=360,
        output_tokens=40,
        cache_read_input_tokens=300,
        cache_creation_input_tokens=50,
        cost_usd=0.0123,
    )


def test_usage_is_frozen_and_keyword_only() -> None:
    with pytest.raises(TypeError):
        Usage(1, 2)  # type: ignore[call-arg]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ZERO_USAGE.input_tokens = 1  # type: ignore[misc]


def test_add_usage_adds_every_field() -> None:
    a = Usage(
        input_tokens=100,
        output_tokens=10,
        cache_read_input_tokens=60,
        cache_creation_input_tokens=20,
        cost_usd=0.5,
    )
    b = Usage(
        input_tokens=7,
        output_tokens=3,
        cache_read_input_tokens=1,
        cache_creation_input_tokens=2,
        cost_usd=0.25,
    )
    assert add_usage(a, b) == Usage(
        input_tokens=107,
        output_tokens=13,
        cache_read_input_tokens=61,
        cache_creation_input_tokens=22,
        cost_usd=0.75,
    )


def test_zero_usage_is_the_identity_of_add() -> None:
    a = normalize_usage(ANTHROPIC_USAGE, cost_usd=0.5)
    assert add_usage(a, ZERO_USAGE) == a
    assert add_usage(ZERO_USAGE, a) == a


def test_sum_usage_of_nothing_is_zero() -> None:
    assert sum_usage([]) == ZERO_USAGE


def test_sum_usage_sums_a_resumed_sessions_executions() -> None:
    turns = [normalize_usage({"input_tokens": n, "output_tokens": 2 * n}) for n in (1, 2, 3)]
    assert sum_usage(turns) == Usage(input_tokens=6, output_tokens=12)
    assert sum_usage(iter(turns)) == sum_usage(turns)


def test_usage_difference_of_cumulative_snapshots_is_the_per_turn_delta() -> None:
    earlier = Usage(
        input_tokens=100,
        output_tokens=10,
        cache_read_input_tokens=50,
        cache_creation_input_tokens=20,
        cost_usd=0.5,
    )
    later = Usage(
        input_tokens=180,
        output_tokens=25,
        cache_read_input_tokens=90,
        cache_creation_input_tokens=20,
        cost_usd=0.75,
    )
    assert usage_difference(later, earlier) == Usage(
        input_tokens=80,
        output_tokens=15,
        cache_read_input_tokens=40,
        cache_creation_input_tokens=0,
        cost_usd=0.25,
    )


def test_usage_difference_from_zero_is_the_snapshot() -> None:
    later = normalize_usage(ANTHROPIC_USAGE, cost_usd=0.1)
    assert usage_difference(later, ZERO_USAGE) == later


@pytest.mark.parametrize(
    "earlier",
    [
        Usage(input_tokens=500, output_tokens=1, cost_usd=0.01),  # input went down
        Usage(input_tokens=1, output_tokens=500, cost_usd=0.01),  # output went down
        Usage(input_tokens=1, output_tokens=1, cost_usd=9.0),  # cost went down
    ],
)
def test_usage_difference_after_an_epoch_restart_is_the_later_snapshot(earlier: Usage) -> None:
    # A new CLI process (e.g. after a resume) restarts the cumulative counters.
    later = Usage(input_tokens=40, output_tokens=30, cache_read_input_tokens=5, cost_usd=0.02)
    assert usage_difference(later, earlier) == later


def test_usage_difference_clamps_cache_fields_at_zero() -> None:
    earlier = Usage(input_tokens=10, cache_read_input_tokens=8, cache_creation_input_tokens=2)
    later = Usage(input_tokens=20, cache_read_input_tokens=3, cache_creation_input_tokens=1)
    diff = usage_difference(later, earlier)
    assert diff.cache_read_input_tokens == 0
    assert diff.cache_creation_input_tokens == 0
    assert diff.input_tokens == 10


counts = st.integers(min_value=0, max_value=10**9)


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    fresh, read, creation, output = draw(counts), draw(counts), draw(counts), draw(counts)
    cost = draw(st.floats(min_value=0, max_value=1000, allow_nan=False))
    return normalize_usage(
        {
            "input_tokens": fresh,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": creation,
            "output_tokens": output,
        },
        cost_usd=cost,
    )


@given(usages(), usages())
def test_added_snapshots_difference_back_to_the_increment(a: Usage, b: Usage) -> None:
    total = add_usage(a, b)
    diff = usage_difference(total, a)
    assert diff.input_tokens == b.input_tokens
    assert diff.output_tokens == b.output_tokens
    assert diff.cache_read_input_tokens == b.cache_read_input_tokens
    assert diff.cache_creation_input_tokens == b.cache_creation_input_tokens
    assert diff.cost_usd == pytest.approx(b.cost_usd, abs=1e-9)


@given(st.lists(usages(), max_size=6))
def test_sums_keep_the_subset_rule_and_the_context_formula(items: list[Usage]) -> None:
    total = sum_usage(items)
    assert total.cache_read_input_tokens + total.cache_creation_input_tokens <= total.input_tokens
    assert total.fresh_input_tokens == sum(u.fresh_input_tokens for u in items)
    assert total.context_size == total.input_tokens + total.output_tokens
    assert total.input_tokens == sum(u.input_tokens for u in items)
