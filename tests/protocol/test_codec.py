"""The event JSON codec: exact round trips for every kind, clear errors, a total encoder."""

from __future__ import annotations

import enum
import json
import math
import subprocess
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union
from unittest import mock

import attrs
import pytest
from claude_agent_sdk.types import ServerToolUseBlock
from hypothesis import given, settings
from hypothesis import strategies as st

from claude_trio.protocol.cluster.records import (
    decode_event,
    decode_event_text,
    encode_event,
    stored_text,
)
from claude_trio.protocol.errors import RemoteProtocolError
from claude_trio.protocol.fanout import codec
from claude_trio.protocol.fanout.codec import (
    dumps,
    event_from_json,
    event_text,
    event_to_json,
    text_kind,
    to_json_safe,
)
from claude_trio.protocol.fanout.wire import EventFrame, encode_frame, event_frame_text
from claude_trio.protocol.session.events import (
    EVENT_TYPES,
    AssistantMessage,
    Error,
    NormalizedMessage,
    Passthrough,
    Question,
    Result,
    TextContent,
    TextDelta,
    ThinkingDelta,
    TodoItem,
    TodoListUpdated,
    ToolResult,
    ToolUse,
    UnknownContent,
    UserInputRequest,
)
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.usage import Usage

# ---------------------------------------------------------------------------------------------
# Strategies derived from the events' own annotations, so a new field or kind is covered too.
# ---------------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def strategy_for(annotation: Any) -> st.SearchStrategy[Any]:
    if annotation is Any:
        return json_values
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Union or origin is types.UnionType:
        return st.one_of([st.none() if a is type(None) else strategy_for(a) for a in args])
    if origin is Literal:
        return st.sampled_from(args)
    if origin is tuple:
        return st.lists(strategy_for(args[0]), max_size=3).map(tuple)
    if origin is Mapping:
        return st.dictionaries(st.text(max_size=5), strategy_for(args[1]), max_size=3)
    if attrs.has(annotation):
        return builds_all_fields(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from(list(annotation))
    scalars: dict[Any, st.SearchStrategy[Any]] = {
        int: st.integers(),
        float: st.floats(allow_nan=False, allow_infinity=False),
        str: st.text(max_size=10),
        bool: st.booleans(),
    }
    return scalars[annotation]


def builds_all_fields(cls: type) -> st.SearchStrategy[Any]:
    """``st.builds`` that also varies the fields with defaults (``builds`` alone leaves them)."""
    hints = typing.get_type_hints(cls)
    return st.builds(
        cls,
        **{f.name: strategy_for(hints[f.name]) for f in attrs.fields(cls) if f.name != "raw"},
    )


any_event = st.one_of([builds_all_fields(cls) for cls in EVENT_TYPES])


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda cls: cls.kind)
@settings(max_examples=40)
@given(data=st.data())
def test_every_kind_round_trips_through_json_text(cls: type, data: st.DataObject) -> None:
    event = data.draw(builds_all_fields(cls))
    encoded = event_to_json(event)
    assert encoded["kind"] == cls.kind  # type: ignore[attr-defined]
    assert "raw" not in encoded
    # Strict JSON (no NaN): what goes over the websocket.
    wire = json.dumps(encoded, allow_nan=False)
    assert event_from_json(json.loads(wire)) == event


@given(any_event)
def test_round_trip_is_exact_and_stable(event: Any) -> None:
    decoded = event_from_json(event_to_json(event))
    assert decoded == event
    assert type(decoded) is type(event)
    assert event_to_json(decoded) == event_to_json(event)


def test_nested_values_are_plain_json_with_type_tags_and_context_size() -> None:
    event = AssistantMessage(
        turn=2,
        seq=7,
        message=NormalizedMessage(
            role="assistant",
            content=(TextContent(text="hi"), UnknownContent(block={"x": 1})),
            message_id="msg_1",
        ),
        raw=object(),
    )
    assert event_to_json(event) == {
        "kind": "assistant_message",
        "turn": 2,
        "seq": 7,
        "is_subagent": False,
        "subagent_task_id": None,
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "hi"}, {"type": "unknown", "block": {"x": 1}}],
            "message_id": "msg_1",
            "model": None,
            "stop_reason": None,
            "error": None,
        },
    }
    usage = Usage(input_tokens=120, output_tokens=30, cache_read_input_tokens=100, cost_usd=0.25)
    result = Result(
        subtype="success",
        is_error=False,
        session_id="s1",
        usage=usage,
        execution_usage=usage,
        session_usage=usage,
        todo_list_snapshot=(TodoItem(id="0", content="write", status="completed"),),
    )
    encoded = event_to_json(result)
    assert encoded["usage"] == {
        "input_tokens": 120,
        "output_tokens": 30,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 0,
        "cost_usd": 0.25,
        "context_size": 150,
    }
    assert encoded["todo_list_snapshot"] == [
        {"id": "0", "content": "write", "status": "completed", "active_form": None}
    ]
    request = UserInputRequest(
        request_id="r1",
        source="model-tool",
        questions=(Question(question="Which?", options=("a", "b"), multi_select=True),),
    )
    assert event_to_json(request)["questions"] == [
        {"question": "Which?", "header": None, "options": ["a", "b"], "multi_select": True}
    ]


def test_raw_is_not_sent_and_decodes_to_none() -> None:
    event = TextDelta(text="x", raw={"secret": "frame"})
    decoded = event_from_json(event_to_json(event))
    assert decoded.raw is None
    assert decoded == event


# ---------------------------------------------------------------------------------------------
# The encoder never fails
# ---------------------------------------------------------------------------------------------


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


def test_non_json_values_in_any_fields_still_encode() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    event = ToolUse(
        tool_use_id="t1",
        name="Weird",
        input={
            "obj": Opaque(),
            "nan": math.nan,
            "inf": -math.inf,
            "set": {3},
            "bytes": b"\x00",
            "tuple": (1, (2, 3)),
            "int_keys": {1: "one", None: "none"},
            "cycle": cyclic,
            "sdk_block": ServerToolUseBlock(id="s1", name="web_search", input={"q": Opaque()}),
        },
    )
    encoded = event_to_json(event)
    json.dumps(encoded, allow_nan=False)  # strict JSON: would raise on NaN or an object
    assert encoded["input"] == {
        "obj": "<Opaque>",
        "nan": "nan",
        "inf": "-inf",
        "set": "{3}",
        "bytes": "b'\\x00'",
        "tuple": [1, [2, 3]],
        "int_keys": {"1": "one", "None": "none"},
        "cycle": [1, "<cycle>"],
        "sdk_block": {"id": "s1", "name": "web_search", "input": {"q": "<Opaque>"}},
    }
    # What was encoded decodes (to the JSON-safe stand-ins).
    decoded = event_from_json(encoded)
    assert isinstance(decoded, ToolUse)
    assert decoded.input["obj"] == "<Opaque>"


def test_sdk_objects_in_passthrough_and_results_encode_as_dicts() -> None:
    block = ServerToolUseBlock(id="s1", name="web_search", input={"query": "trio"})
    encoded = event_to_json(Passthrough(frame_type="server_tool_use", data=block))
    assert encoded["data"] == {"id": "s1", "name": "web_search", "input": {"query": "trio"}}
    result = event_to_json(ToolResult(tool_use_id="t", content=[block, Opaque()]))
    assert result["content"] == [
        {"id": "s1", "name": "web_search", "input": {"query": "trio"}},
        "<Opaque>",
    ]


# ---------------------------------------------------------------------------------------------
# Decoding errors name the problem
# ---------------------------------------------------------------------------------------------


def _valid_todo() -> dict[str, Any]:
    return event_to_json(
        TodoListUpdated(
            items=(TodoItem(id="0", content="a", status="pending"),),
            tool_use_id="t",
            tool_name="TodoWrite",
        )
    )


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], "an event must be a JSON object, got array"),
        ({"text": "x"}, "unknown event kind None"),
        ({"kind": "text_deltas", "text": "x"}, "unknown event kind 'text_deltas'"),
        ({"kind": 3}, "unknown event kind 3"),
        ({"kind": "text_delta"}, "text_delta.text: missing required field"),
        ({"kind": "text_delta", "text": 5}, "text_delta.text: expected str, got number 5"),
        ({"kind": "text_delta", "text": "x", "turn": "1"}, "text_delta.turn: expected int"),
        ({"kind": "text_delta", "text": "x", "seq": True}, "text_delta.seq: expected int"),
        ({"kind": "text_delta", "text": "x", "turn": 1.5}, "text_delta.turn: expected int"),
        ({"kind": "text_delta", "text": "x", "is_subagent": 1}, "is_subagent: expected bool"),
        (
            {"kind": "error", "message": "m", "code": "oops"},
            "error.code: 'oops' is not one of 'api_error'",
        ),
        (
            {"kind": "user_input_request", "request_id": "r", "source": "model-tool",
             "questions": {"question": "q"}},
            "user_input_request.questions: expected a list, got object",
        ),
        (
            {"kind": "user_input_request", "request_id": "r", "source": "model-tool",
             "questions": [{"question": "q", "options": ["a", 2]}]},
            "user_input_request.questions[0].options[1]: expected str",
        ),
        (
            {"kind": "tool_use", "tool_use_id": "t", "name": "n", "input": ["a"]},
            "tool_use.input: expected a JSON object, got array",
        ),
        (
            {"kind": "assistant_message",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "a"},
                                                          {"type": "image"}]}},
            "assistant_message.message.content[1]: unknown block type 'image'",
        ),
        (
            {"kind": "assistant_message",
             "message": {"role": "assistant", "content": [{"text": "a"}]}},
            "assistant_message.message.content[0]: unknown block type None",
        ),
        (
            {"kind": "assistant_message", "message": {"role": "system", "content": []}},
            "assistant_message.message.role: 'system' is not one of 'assistant', 'user'",
        ),
        (
            {"kind": "assistant_message", "message": "hello"},
            "assistant_message.message: expected a JSON object, got string",
        ),
        ({**_valid_todo(), "items": [{"id": "0", "status": "done"}]},
         "todo_list_updated.items[0].content: missing required field"),
        (
            {"kind": "aborted", "usage": {"input_tokens": "many"}},
            "aborted.usage.input_tokens: expected int, got string 'many'",
        ),
        (
            {"kind": "retry", "delay_ms": "soon"},
            "retry.delay_ms: expected float, got string 'soon'",
        ),
    ],
)
def test_bad_input_raises_remote_protocol_error_naming_the_problem(
    obj: Any, message: str
) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        event_from_json(obj)
    assert message in str(info.value)


def test_unknown_kind_error_lists_the_known_kinds() -> None:
    known = "known kinds: aborted, adapter_ready, assistant_message"
    with pytest.raises(RemoteProtocolError, match=known):
        event_from_json({"kind": "nope"})


def test_unknown_keys_are_ignored_and_defaults_may_be_omitted() -> None:
    decoded = event_from_json({"kind": "error", "message": "boom", "code": "api_error", "new": 1})
    assert decoded == Error(message="boom", code="api_error")
    # A whole-number float field decodes from a JSON integer.
    usage = event_from_json(
        {"kind": "aborted", "usage": {"cost_usd": 2, "context_size": 999}}
    ).usage  # type: ignore[union-attr]
    assert usage == Usage(cost_usd=2.0)
    assert isinstance(usage.cost_usd, float)


def test_codec_does_not_import_trio() -> None:
    # Import the folder as a plain top-level package: claude_trio/__init__ may import trio.
    repo_root = Path(__file__).resolve().parents[2]
    code = (
        "import sys; import protocol.fanout.codec; "
        "assert 'trio' not in sys.modules, sorted(m for m in sys.modules if 'trio' in m)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=repo_root)


@settings(max_examples=300)
@given(any_event)
def test_a_stored_entry_says_its_kind_without_being_decoded(event: Any) -> None:
    # The encoder's output is JSON-safe already: the stored text is written without a
    # second pass over it.
    assert to_json_safe(event_to_json(event)) == event_to_json(event)
    assert text_kind(stored_text(encode_event(event))) == event.kind
    assert text_kind('{"seq":1,"kind":"result"}') is None  # not written by us


@settings(max_examples=300)
@given(any_event, st.text(min_size=1, max_size=12))
def test_a_stored_event_is_framed_as_encoding_it_would_frame_it(event: Any, sid: str) -> None:
    # A cluster's gateway frames an event from the text its stream holds, without encoding
    # it again: the client must get the same JSON as from the event itself.
    fields = encode_event(event)
    framed = event_frame_text(sid, stored_text(fields))
    assert json.loads(framed) == json.loads(encode_frame(EventFrame(session=sid, event=event)))
    assert decode_event(fields) == event_from_json(event_to_json(event))
    with pytest.raises(RemoteProtocolError, match="no event text"):
        stored_text({"x": "1"})


# Strings as the CLI may send them: any code point, lone surrogates included, and JSON's
# specials (quotes, backslashes, control characters).
wild_text = st.text(
    alphabet=st.one_of(
        st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010, categories=["Cs", "Co", "Cn"]),
        st.sampled_from('"\\\n\t\x00\x1f/\u2028é漢😀'),
        st.characters(),
    ),
    max_size=12,
)


def wild(cls: type, *, huge: bool = True) -> st.SearchStrategy[Any]:
    """``cls`` with every string field drawn from ``wild_text`` (and ints of any size)."""
    hints = typing.get_type_hints(cls)

    def field(annotation: Any) -> st.SearchStrategy[Any]:
        if annotation is str:
            return wild_text
        if annotation == str | None:
            return st.none() | wild_text
        if annotation is int and huge:
            return st.integers() | st.integers(min_value=2**9990, max_value=2**10010)
        return strategy_for(annotation)

    return st.builds(
        cls, **{f.name: field(hints[f.name]) for f in attrs.fields(cls) if f.name != "raw"}
    )


@settings(max_examples=400)
@given(any_event | st.one_of([wild(cls) for cls in EVENT_TYPES]))
def test_an_events_text_is_the_general_encoders_text(event: Any) -> None:
    # ``event_text`` writes the flat events (deltas, ...) without building a dict first: it
    # must give the very same text, surrogates, huge ints and specials included.
    assert event_text(event) == dumps(event_to_json(event))
    event_text(event).encode("utf-8")  # always valid UTF-8
    assert "\n" not in event_text(event)  # a worker stores a batch's texts newline-joined


def test_an_events_text_follows_the_general_rules_for_what_is_not_plain() -> None:
    outcome = Outcome.COMPLETED  # a StrEnum: written as its value, as the encoder does
    delta = TextDelta(text=outcome, seq=2**10001)  # type: ignore[arg-type]
    assert event_text(delta) == dumps(event_to_json(delta))
    assert json.loads(event_text(delta))["seq"] == "<int of 10002 bits>"
    assert json.loads(event_text(delta))["text"] == "completed"
    lone = TextDelta(text="a\ud800b")
    assert "\\ud800" in event_text(lone)
    assert event_from_json(json.loads(event_text(lone))) == lone


@settings(max_examples=400)
@given(st.one_of([wild(cls, huge=False) for cls in EVENT_TYPES]))
def test_an_event_with_any_strings_decodes_to_itself(event: Any) -> None:
    # Fields whose values are taken as they are (strings, ints, bools, None) skip the checks.
    assert event_from_json(json.loads(event_text(event))) == event


def test_prepared_plans_leave_nothing_to_read_from_the_annotations_when_serving() -> None:
    # Forget every plan, as in a process that has encoded and decoded nothing yet.
    made = (codec._field_plan, codec._flat_plan, codec._flat_shape, codec._decoder, codec.prepare)
    for made_once in made:
        made_once.cache_clear()
    prepared = codec.prepare()
    assert prepared > len(EVENT_TYPES)  # the nested values' classes too (usage, blocks, ...)

    @settings(max_examples=300)
    @given(st.sampled_from(EVENT_TYPES).flatmap(builds_all_fields))
    def served(event: Any) -> None:
        # A plan made on first use would read the annotations again.
        with mock.patch.object(typing, "get_type_hints", side_effect=AssertionError("plan")):
            text = event_text(event)
            assert event_from_json(json.loads(text)) == event

    served()


FLAT_TYPES = [cls for cls in EVENT_TYPES if codec._flat_plan(cls) is not None]


def test_the_deltas_are_flat() -> None:
    assert {TextDelta, ThinkingDelta} <= set(FLAT_TYPES)


@settings(max_examples=400)
@given(st.one_of([wild(cls) for cls in FLAT_TYPES]))
def test_a_flat_events_text_is_known_by_its_shape_and_decodes_to_it(event: Any) -> None:
    text = event_text(event)
    kind = codec.flat_kind(text)
    if kind is None:  # only when the general rules wrote it: an int past 10,000 bits
        assert any(type(v) is int and v.bit_length() > 10_000 for v in attrs.astuple(event))
    else:
        assert kind == event.kind
        assert decode_event_text(text) == event


_JSONISH = st.text(
    alphabet='{}[]",:\\/0123456789-+.eEnultrfasbu \x00\x1f\x7f\u00e9\ud800', max_size=4
)


@settings(max_examples=1500)
@given(st.one_of([wild(cls, huge=False) for cls in FLAT_TYPES]), st.data())
def test_a_text_taken_by_its_shape_is_one_the_decoder_reads(event: Any, data: Any) -> None:
    # Change a flat event's text anywhere: whatever ``flat_kind`` still takes must decode.
    text = event_text(event)
    start = data.draw(st.integers(0, len(text)))
    stop = data.draw(st.integers(start, min(len(text), start + 3)))
    changed = text[:start] + data.draw(_JSONISH) + text[stop:]
    kind = codec.flat_kind(changed)
    if kind is not None:
        assert decode_event_text(changed).kind == kind  # never raises


@pytest.mark.parametrize(
    "text",
    [
        '{"kind":"text_delta","turn":1,"seq":2,"is_subagent":false,"subagent_task_id":null,'
        '"text":"a","message_id":null,"index":null,"extra":1}',  # a field it does not write
        '{"kind":"text_delta","turn":1,"seq":2,"is_subagent":false,"subagent_task_id":null,'
        '"text":"a","message_id":null}',  # one missing
        '{"kind":"text_delta","turn":1,"seq":"2","is_subagent":false,"subagent_task_id":null,'
        '"text":"a","message_id":null,"index":null}',  # of another type
        '{"kind":"text_delta","seq":2,"turn":1,"is_subagent":false,"subagent_task_id":null,'
        '"text":"a","message_id":null,"index":null}',  # in another order
        '{"kind":"text_delta","turn":1,"seq":2,"is_subagent":false,"subagent_task_id":null,'
        '"text":"a\x01","message_id":null,"index":null}',  # a raw control character
        '{"kind":"text_delta","turn":1,"seq":2,"is_subagent":false,"subagent_task_id":null,'
        '"text":"a","message_id":null,"index":null} ',  # anything after it
        '{"kind":"tool_use","tool_use_id":"t"}',  # a kind that is not flat
        '{"kind":"no_such_kind"}',
        "[1]",
    ],
)
def test_a_text_of_another_shape_is_not_taken_for_a_flat_event(text: str) -> None:
    assert codec.flat_kind(text) is None
