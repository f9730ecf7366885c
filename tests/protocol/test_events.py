"""The event vocabulary: a closed, frozen, keyword-only set with the TypeScript library's names."""

from __future__ import annotations

import typing

import attrs
import pytest

from claude_trio.protocol.session import events as ev
from claude_trio.protocol.session.usage import Usage

TS_KINDS = {
    "text_delta",
    "thinking",
    "assistant_message",
    "tool_use",
    "tool_result",
    "subagent_started",
    "subagent_progress",
    "flush",
    "user_input_request",
    "todo_list_updated",
    "user_message",
    "result",
    "error",
}


def test_every_kind_the_typescript_library_names_exists() -> None:
    assert set(ev.EVENT_KINDS) >= TS_KINDS


def test_the_union_and_the_kind_table_list_the_same_classes() -> None:
    assert set(typing.get_args(ev.Event)) == set(ev.EVENT_TYPES)
    assert len(ev.EVENT_KINDS) == len(ev.EVENT_TYPES)  # kinds are unique


@pytest.mark.parametrize("cls", ev.EVENT_TYPES, ids=lambda c: c.kind)
def test_every_event_is_frozen_keyword_only_and_carries_the_common_fields(cls: type) -> None:
    fields = {f.name: f for f in attrs.fields(cls)}
    for name in ("turn", "seq", "is_subagent", "subagent_task_id", "raw"):
        assert name in fields, f"{cls.__name__} lacks {name}"
    assert all(f.kw_only for f in fields.values())
    assert not fields["raw"].eq  # the SDK frame never makes two events unequal
    params = attrs.fields_dict(cls)
    required = {n for n, f in params.items() if f.default is attrs.NOTHING}
    with pytest.raises(TypeError):
        cls(*[None] * max(1, len(required)))  # positional arguments are refused


def test_events_cannot_be_changed_after_construction() -> None:
    delta = ev.TextDelta(text="hi")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        delta.text = "other"  # type: ignore[misc]


def test_terminal_events_are_results_aborts_and_fatal_errors_only() -> None:
    usage = Usage()
    result = ev.Result(
        subtype="success",
        is_error=False,
        session_id="s",
        usage=usage,
        execution_usage=usage,
        session_usage=usage,
    )
    assert ev.is_terminal(result)
    assert ev.is_terminal(ev.Aborted())
    assert ev.is_terminal(ev.Error(message="x", code="cli_exited"))
    assert not ev.is_terminal(ev.Error(message="x", code="callback", fatal=False))
    assert not ev.is_terminal(ev.TextDelta(text="x"))
    assert not ev.is_terminal(ev.WarningEvent(message="x"))


def test_copy_event_gives_what_attrs_evolve_gives() -> None:
    usage = Usage(input_tokens=3, output_tokens=5, cost_usd=0.25)
    result = ev.Result(
        subtype="success",
        is_error=False,
        session_id="s",
        usage=usage,
        execution_usage=usage,
        session_usage=usage,
        text="done",
        seq=4,
        raw={"type": "result"},
    )
    delta = ev.TextDelta(text="hi", message_id="m", seq=2, raw={"type": "stream_event"})
    for event, changes in (
        (result, {"final": True}),  # __attrs_post_init__ runs: the outcome is derived
        (result, {"raw": None}),
        (delta, {"seq": 9, "raw": None}),
        (delta, {}),
    ):
        copied = ev.copy_event(event, **changes)
        assert copied == attrs.evolve(event, **changes)
        assert copied is not event
        assert type(copied) is type(event)
    assert ev.copy_event(result, final=True).outcome is not None
    with pytest.raises(TypeError):
        ev.copy_event(delta, no_such_field=1)
