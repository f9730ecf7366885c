"""The wire edge against hostile input: every string that enters can be sent back out, every
value is bounded, and no op can make a reply, an error or an event fail to encode."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claude_trio.errors import WireError
from claude_trio.protocol.config.params import CONFIG_KEYS, ArchitectureConfig, ExecuteParams
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.codec import dumps, event_to_json
from claude_trio.protocol.fanout.wire import (
    MAX_ANSWER_CHARS,
    MAX_ARGUMENT_BYTES,
    MAX_DEPTH,
    MAX_ID_CHARS,
    OP_NAMES,
    PARAMS_FIELDS,
    AnswerOp,
    ErrorFrame,
    EventFrame,
    OpenedFrame,
    OpenOp,
    PushOp,
    ReplyFrame,
    decode_op,
    encode_frame,
    error_frame,
    params_to_json,
)
from claude_trio.protocol.session.events import ToolResult, UserInputResolved, UserMessage


def sendable(text: str) -> None:
    """What a websocket send does with a text message: encode it as UTF-8."""
    text.encode("utf-8")
    json.loads(text)


def refused(obj: Any, **kwargs: Any) -> WireError:
    with pytest.raises(WireError) as caught:
        decode_op(json.dumps(obj), **kwargs)
    sendable(encode_frame(error_frame(caught.value)))
    return caught.value


# -- lone surrogates ---------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_push_is_refused_naming_the_field() -> None:
    error = refused({"op": "push", "id": "p1", "session": "s", "text": "hi \ud800 there"})
    assert error.code == "invalid_field"
    assert error.id == "p1"
    assert error.message.startswith("text: a lone UTF-16 surrogate at character 3")


def test_a_lone_surrogate_deep_in_an_answer_is_refused_with_its_path() -> None:
    answer = {"Which color?": ["red", {"note": "x\udfff"}]}
    error = refused({"op": "answer", "id": "a", "session": "s", "request": "r", "answer": answer})
    assert error.code == "invalid_field"
    assert error.message.startswith("answer['Which color?'][1].note: a lone UTF-16 surrogate")


def test_a_lone_surrogate_in_a_key_or_the_id_is_refused_and_the_error_still_encodes() -> None:
    error = refused({"op": "abort", "id": "\ud800", "session": "s"})
    assert error.id is None  # the id itself cannot be echoed
    error = refused({"op": "abort", "id": "ok", "session": "s", "\udc00": 1})
    assert error.id == "ok"
    assert "(a key)" in error.message


def test_a_surrogate_pair_is_a_character_and_passes() -> None:
    op = decode_op('{"op": "push", "id": "1", "session": "s", "text": "\\ud83d\\ude00"}')
    assert isinstance(op, PushOp)
    assert op.text == "\U0001f600"


# -- depth, size, numbers ----------------------------------------------------------------------


def test_a_deeply_nested_answer_is_refused_at_the_edge() -> None:
    answer: Any = "deep"
    for _ in range(600):  # 1.3 KB of brackets: once enough to break the event encoder
        answer = [answer]
    error = refused({"op": "answer", "id": "a", "session": "s", "request": "r", "answer": answer})
    assert error.code == "invalid_field"
    assert f"nested deeper than {MAX_DEPTH} levels" in error.message


def test_an_answer_at_the_depth_limit_passes() -> None:
    answer: Any = "ok"
    for _ in range(MAX_DEPTH - 2):
        answer = [answer]
    op = decode_op(json.dumps({"op": "answer", "id": "a", "session": "s", "request": "r",
                               "answer": answer}))  # fmt: skip
    assert isinstance(op, AnswerOp)


def test_an_oversize_answer_is_refused() -> None:
    answer = {"q": "x" * (MAX_ANSWER_CHARS + 10)}
    error = refused({"op": "answer", "id": "a", "session": "s", "request": "r", "answer": answer})
    assert error.code == "invalid_field"
    assert f"over {MAX_ANSWER_CHARS}" in error.message


def test_ids_are_bounded_because_replies_echo_them() -> None:
    error = refused({"op": "abort", "id": "x" * (MAX_ID_CHARS + 1), "session": "s"})
    assert error.code == "invalid_field"
    assert error.id is None
    assert f"longer than {MAX_ID_CHARS} characters" in error.message
    assert len(error.message) < 300  # the value is quoted, not copied


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"prompt": "x", "user_input_timeout": 10**400}, "params.user_input_timeout"),
        ({"prompt": "x", "max_turns": 10**400}, "params.max_turns"),
        ({"prompt": "x", "max_turns": 2**31}, "params.max_turns"),
        ({"prompt": "x", "architecture_config": {"claude_skillListingBudgetFraction": 10**401}},
         "params.architecture_config.claude_skillListingBudgetFraction"),
        ({"prompt": "x", "architecture_config": {"claude_thinking_budget": 10**30}},
         "params.architecture_config.claude_thinking_budget"),
    ],
)  # fmt: skip
def test_huge_integers_are_invalid_params_not_overflow_errors(
    params: dict[str, Any], field: str
) -> None:
    error = refused({"op": "open", "id": "o", "params": params})
    assert error.code in ("invalid_params", "invalid_field")
    assert error.message.startswith(field)
    assert len(error.message) <= 1000


def test_huge_numbers_from_python_raise_invalid_params_error() -> None:
    with pytest.raises(InvalidParamsError, match="user_input_timeout"):
        ExecuteParams(prompt="x", user_input_timeout=10**400)
    with pytest.raises(InvalidParamsError, match="claude_skillListingBudgetFraction"):
        ArchitectureConfig(claude_skill_listing_budget_fraction=10**401)
    with pytest.raises(InvalidParamsError, match="max_turns"):
        ExecuteParams(prompt="x", max_turns=10**20)
    assert ExecuteParams(prompt="x", user_input_timeout=10**300).user_input_timeout == 10**300


def test_a_number_too_large_for_a_double_is_refused() -> None:
    with pytest.raises(WireError) as caught:
        decode_op('{"op":"answer","id":"a","session":"s","request":"r","answer":1e999}')
    assert "too large for a double" in caught.value.message


# -- what reaches the CLI's command line -------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"prompt": "x", "system_prompt": "be\x00brief"}, "params.system_prompt"),
        ({"prompt": "x", "model": "son\x00net"}, "params.model"),
        ({"prompt": "x", "architecture_config": {"custom_env": {"A": "1\x002"}}},
         "params.architecture_config.custom_env.A"),
        ({"prompt": "x", "architecture_config": {"claude_skills": ["a\x00"]}},
         "params.architecture_config.claude_skills[0]"),
        ({"prompt": "x", "system_prompt": "s" * MAX_ARGUMENT_BYTES}, "params.system_prompt"),
        ({"prompt": "x", "architecture_config": {"custom_env": {"B": "v" * MAX_ARGUMENT_BYTES}}},
         "params.architecture_config.custom_env['B']"),
    ],
)  # fmt: skip
def test_what_the_cli_cannot_take_is_refused_before_anything_starts(
    params: dict[str, Any], field: str
) -> None:
    error = refused({"op": "open", "id": "o", "params": params}, allow_env=True)
    assert error.code == "invalid_params"
    assert error.message.startswith(field)
    assert "chmod" not in error.message


def test_a_nul_in_the_prompt_is_fine_it_travels_on_stdin() -> None:
    op = decode_op(json.dumps({"op": "open", "id": "o", "params": {"prompt": "a\x00b"}}))
    assert isinstance(op, OpenOp)


# -- the encoder -------------------------------------------------------------------------------


def test_the_encoder_escapes_lone_surrogates_instead_of_failing() -> None:
    event = ToolResult(tool_use_id="t", content="bad \ud800 text", seq=1)
    text = encode_frame(EventFrame(session="s", event=event))
    sendable(text)
    assert json.loads(text)["event"]["content"] == "bad \ud800 text"
    assert "\\ud800" in text
    assert dumps({"a": "é"}) == '{"a":"é"}'  # ordinary text stays as it is


def test_the_encoder_bounds_depth_and_prints_any_int() -> None:
    value: Any = "leaf"
    for _ in range(50_000):
        value = [value]
    event = ToolResult(tool_use_id="t", content={"deep": value, "big": 1 << 20_000}, seq=1)
    encoded = event_to_json(event)
    text = encode_frame(EventFrame(session="s", event=event))
    sendable(text)
    assert encoded["content"]["big"] == "<int of 20001 bits>"
    assert "<nested too deeply>" in text


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_value_whose_repr_raises_still_encodes() -> None:
    text = encode_frame(EventFrame(session="s", event=ToolResult(tool_use_id="t",
                                                                  content=_BadRepr())))  # fmt: skip
    assert json.loads(text)["event"]["content"] == "<_BadRepr>"


# -- fuzz: whatever decode_op accepts or refuses, every frame it leads to encodes ----------------

_nasty_char = st.one_of(
    st.characters(),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.sampled_from(["\x00", "\u2028", "\ufeff", "\U0001f600"]),
)
_text = st.text(_nasty_char, max_size=12)
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([10**400, -(10**400), 2**63, 2**63 - 1]),
    st.floats(allow_nan=False),
    _text,
)
_json = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)),
    max_leaves=12,
)


@st.composite
def _deep(draw: st.DrawFn) -> Any:
    value: Any = draw(_scalar)
    for _ in range(draw(st.integers(0, 40))):
        value = [value] if draw(st.booleans()) else {"k": value}
    return value


_value = st.one_of(_json, _deep())


@st.composite
def _params(draw: st.DrawFn) -> Any:
    keys = draw(st.lists(st.sampled_from([*PARAMS_FIELDS, "mcp_servers", "nope"]), max_size=5))
    params: dict[str, Any] = {key: draw(_value) for key in keys}
    if draw(st.booleans()):
        params["prompt"] = draw(_text)
    if draw(st.booleans()):
        config_keys = draw(st.lists(st.sampled_from(list(CONFIG_KEYS)), max_size=3))
        params["architecture_config"] = {key: draw(_value) for key in config_keys}
    return draw(st.one_of(st.just(params), _value))


@st.composite
def _op(draw: st.DrawFn) -> Any:
    op: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        op["op"] = draw(st.one_of(st.sampled_from(OP_NAMES), _value))
    if draw(st.integers(0, 9)):
        op["id"] = draw(st.one_of(_text, _value))
    for key in draw(
        st.lists(
            st.sampled_from(
                ["session", "text", "request", "answer", "last_seq", "params", "extra"]
            ),
            max_size=4,
        )
    ):
        op[key] = draw(_params()) if key == "params" else draw(_value)
    return draw(st.one_of(st.just(op), _value))


def _frames_for(op: Any) -> list[Any]:
    """The frames the gateway builds from an accepted op (replies, errors, the events it
    causes), with the op's own strings in them."""
    frames: list[Any] = [
        ReplyFrame(id=op.id, ok=True),
        ReplyFrame(id=op.id, ok=False, reason=f"no request {getattr(op, 'request', '')!r}"),
        ErrorFrame(id=op.id, code="unknown_session", message=f"unknown session {op!r}"),
    ]
    match op:
        case OpenOp():
            frames.append(OpenedFrame(id=op.id, session="s"))
            echoed = json.dumps(params_to_json(op.params))
            frames.append(ReplyFrame(id=op.id, ok=True, reason=echoed))
        case PushOp():
            event = UserMessage(text=op.text, uuid="u", timestamp=time.time(), seq=1)
            frames.append(EventFrame(session=op.session, event=event))
        case AnswerOp():
            resolved = UserInputResolved(request_id=op.request, outcome="answered",
                                         answer=op.answer, seq=2)  # fmt: skip
            frames.append(EventFrame(session=op.session, event=resolved))
        case _:
            pass
    return frames


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_op(), st.booleans())
def test_fuzzed_ops_are_accepted_or_refused_and_every_resulting_frame_can_be_sent(
    obj: Any, allow: bool
) -> None:
    text = json.dumps(obj)  # ASCII JSON: lone surrogates travel as \ud800 escapes
    try:
        op = decode_op(text, allow_cwd=allow, allow_env=allow)
    except WireError as exc:
        error = exc
    else:
        for frame in _frames_for(op):
            sendable(encode_frame(frame))
        return
    sendable(encode_frame(error_frame(error)))
    assert len(error.message) <= 1000
