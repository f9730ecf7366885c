"""The gateway wire codec: every op and frame round-trips; every malformed input -> its code."""

from __future__ import annotations

import json
from typing import Any

import pytest

from claude_trio.errors import WireError
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.subagents import SubagentDefinition
from claude_trio.protocol.fanout.governor import GovernorFigures
from claude_trio.protocol.fanout.wire import (
    AbortOp,
    AnswerOp,
    AttachOp,
    ContinuedFrame,
    ContinueOp,
    DetachOp,
    ErrorFrame,
    EventFrame,
    Frame,
    GovernorFrame,
    GovernorOp,
    HelloFrame,
    HelloOp,
    ListOp,
    Op,
    OpenedFrame,
    OpenOp,
    PushOp,
    ReplyFrame,
    ResyncRequiredFrame,
    SessionInfo,
    SessionsFrame,
    decode_frame,
    decode_op,
    encode_frame,
    encode_op,
    error_frame,
    params_from_json,
    params_to_json,
)
from claude_trio.protocol.session.events import (
    Error,
    Question,
    Result,
    Retry,
    TextDelta,
    UserInputRequest,
    WarningEvent,
)
from claude_trio.protocol.session.usage import Usage

FULL_PARAMS = ExecuteParams(
    prompt="do it",
    model="sonnet",
    system_prompt="be brief",
    max_turns=3,
    plan_mode=True,
    permission_mode="acceptEdits",
    cwd="/srv/work",
    resume_session_id="abc-123",
    streaming_input=False,
    architecture_config=ArchitectureConfig.from_mapping(
        {"claude_effort": "high", "claude_skills": ["pdf"], "custom_env": {"A": "1"}}
    ),
    user_input_timeout=12.5,
)

OPS: list[Op] = [
    OpenOp(id="1", params=ExecuteParams(prompt="hi")),
    OpenOp(id="2", params=FULL_PARAMS),
    PushOp(id="3", session="s", text="more"),
    AnswerOp(id="4", session="s", request="r1", answer={"Which?": ["a", "b"]}),
    AnswerOp(id="5", session="s", request="r1", answer=None),
    AbortOp(id="6", session="s"),
    AttachOp(id="7", session="s", last_seq=41),
    AttachOp(id="8", session="s", last_seq=None),
    DetachOp(id="9", session="s"),
    HelloOp(id="10"),
    ListOp(id="11"),
    ListOp(id="11", cursor="1700000000.5 s-1", limit=1000),
    OpenOp(id="12", params=ExecuteParams(prompt="hi"), label="item 7"),
    ContinueOp(id="13", session="s", prompt="and now the tests"),
    ContinueOp(
        id="15",
        session="s",
        prompt="and look",
        model="haiku",
        permission_mode="plan",
        images=(ImageInput.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16),),
    ),
    PushOp(
        id="14",
        session="s",
        text="look",
        images=(ImageInput.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16),),
    ),
    GovernorOp(id="16"),
    GovernorOp(id="17", follow=False),
]


@pytest.mark.parametrize(
    ("images", "message"),
    [
        ("nope", "images: expected a list"),
        ([{"data": "!!"}], "images[0].data: not base64"),
        ([{"data": "aGVsbG8="}], "images[0]: "),
    ],
)
def test_a_push_with_a_bad_image_is_refused_by_name(images: object, message: str) -> None:
    text = json.dumps({"op": "push", "id": "p", "session": "s", "text": "t", "images": images})
    with pytest.raises(WireError) as caught:
        decode_op(text)
    assert message in caught.value.message
    assert caught.value.id == "p"


@pytest.mark.parametrize("op", OPS, ids=lambda op: f"{op.op}-{op.id}")
def test_every_op_round_trips(op: Op) -> None:
    text = encode_op(op)
    assert json.loads(text)["op"] == op.op
    assert decode_op(text, allow_cwd=True, allow_env=True) == op


def test_params_round_trip_and_defaults_are_left_out() -> None:
    assert params_to_json(ExecuteParams(prompt="hi")) == {"prompt": "hi"}
    wire = params_to_json(FULL_PARAMS)
    assert wire["architecture_config"] == {
        "claude_effort": "high",
        "claude_skills": ["pdf"],
        "custom_env": {"A": "1"},
    }
    assert params_from_json(wire, allow_cwd=True, allow_env=True) == FULL_PARAMS


USAGE = Usage(input_tokens=3, output_tokens=4)
FRAMES: list[Frame] = [
    OpenedFrame(id="1", session="s"),
    EventFrame(session="s", event=TextDelta(text="hé", message_id="m", index=0, turn=1, seq=2)),
    EventFrame(
        session="s",
        event=UserInputRequest(
            request_id="r",
            source="model-tool",
            questions=(Question(question="Q?", options=("a", "b")),),
            seq=3,
        ),
    ),
    EventFrame(
        session="s",
        event=Result(
            subtype="success",
            is_error=False,
            session_id="cli",
            usage=USAGE,
            execution_usage=USAGE,
            session_usage=USAGE,
            final=True,
            seq=9,
            turn=1,
        ),
    ),
    ReplyFrame(id="2", ok=True),
    ReplyFrame(id="3", ok=False, reason="the execution has ended"),
    ResyncRequiredFrame(id="4", session="s", oldest_seq=17),
    ErrorFrame(id=None, code="malformed_json", message="not valid JSON"),
    ErrorFrame(id="5", code="unknown_session", message="no session 'x'"),
    HelloFrame(
        id="6",
        server="claude-trio 0.1.0",
        protocol=1,
        principal="alice",
        admin=False,
        ops=("hello", "open"),
        capabilities={"mid_turn_push": True, "thinking_modes": ["adaptive"]},
        limits={"max_sessions": 256, "ping_timeout": 20.0},
        policy={"remote_tools": "read-only", "allow_cwd": False},
    ),
    HelloFrame(
        id="6g",
        server="claude-trio 0.1.0",
        protocol=1,
        principal="alice",
        admin=False,
        ops=("hello",),
        capabilities={},
        limits={"max_live": 8},
        policy={},
        governor=GovernorFigures(
            limit=3,
            max_live=8,
            running=3,
            waiting=5,
            paused=True,
            resumes_at=1700000003.25,
            starts=12,
            refusals=1,
            rejections=4,
            spent_usd=0.5,
            budget_usd=1.0,
            overshoot_usd=0.0,
            last_notice="paused: rate limit (API retry after 429), resumes 12:03:10",
        ),
    ),
    EventFrame(
        session="s",
        event=WarningEvent(
            message="rate limit status 'rejected'",
            code="rate_limit",
            rate_limit_status="rejected",
            resets_at=1700000060.0,
            rate_limit_type="five_hour",
            seq=4,
        ),
    ),
    EventFrame(
        session="s",
        event=Retry(attempt=2, max_retries=10, delay_ms=1500.0, error_status=529, seq=5),
    ),
    EventFrame(
        session="s",
        event=Error(
            message="budget_exhausted: not started, the fleet spent $1.0000 of $1.0000",
            code="budget_exhausted",
            detail='{"scope": "fleet"}',
            phase="init",
            seq=1,
        ),
    ),
    ContinuedFrame(id="7", session="s", first_seq=12),
    SessionsFrame(
        id="8",
        sessions=(
            SessionInfo(
                session="s",
                label="item 1",
                owner="alice",
                state="ended",
                executions=2,
                first_seq=12,
                last_seq=20,
                usage=USAGE,
                created_at=1700000000.5,
                ended_at=1700000010.0,
            ),
            SessionInfo(
                session="t",
                label=None,
                owner=None,
                state="live",
                executions=1,
                first_seq=1,
                last_seq=3,
                usage=Usage(),
                created_at=1700000001.0,
                ended_at=None,
            ),
        ),
    ),
    SessionsFrame(id="9", sessions=(), next_cursor="1700000000.5 s-1"),
    SessionsFrame(id="9", sessions=()),
    GovernorFrame(id="10", governor=None),
    GovernorFrame(
        id=None,
        governor=GovernorFigures(
            limit=2,
            max_live=8,
            running=2,
            waiting=5,
            paused=True,
            resumes_at=1700000012.25,
            starts=9,
            refusals=1,
            rejections=3,
            spent_usd=0.42,
            budget_usd=5.0,
            overshoot_usd=0.0,
            last_notice="paused: rate limit (429), resumes 12:03:10",
            asking=1,
            cluster_running=4,
        ),
    ),
]


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f.type)
def test_every_frame_round_trips(frame: Frame) -> None:
    text = encode_frame(frame)
    assert json.loads(text)["type"] == frame.type
    assert decode_frame(text) == frame


def test_event_frames_use_the_event_codec_and_compact_utf8_json() -> None:
    text = encode_frame(FRAMES[1])
    assert text == (
        '{"type":"event","session":"s","event":{"kind":"text_delta","turn":1,"seq":2,'
        '"is_subagent":false,"subagent_task_id":null,"text":"hé","message_id":"m","index":0}}'
    )


def test_frames_from_a_newer_server_with_extra_keys_still_decode() -> None:
    text = '{"type":"reply","id":"1","ok":true,"reason":null,"added_later":1}'
    assert decode_frame(text) == ReplyFrame(id="1", ok=True)
    text = '{"type":"continued","id":"1","session":"s","first_seq":4,"added_later":1}'
    assert decode_frame(text) == ContinuedFrame(id="1", session="s", first_seq=4)


def test_a_session_list_carries_usage_like_events_do() -> None:
    (text,) = [encode_frame(f) for f in FRAMES if isinstance(f, SessionsFrame) and f.sessions]
    listed = json.loads(text)["sessions"][0]
    assert listed["usage"] == {
        "input_tokens": 3,
        "output_tokens": 4,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cost_usd": 0.0,
        "context_size": 7,
    }
    assert (listed["state"], listed["first_seq"], listed["ended_at"]) == ("ended", 12, 1700000010.0)


def decode_error(text: str, **kwargs: Any) -> WireError:
    with pytest.raises(WireError) as caught:
        decode_op(text, **kwargs)
    return caught.value


@pytest.mark.parametrize(
    ("text", "code", "op_id", "names"),
    [
        ("{not json", "malformed_json", None, "not valid JSON"),
        ('{"op": "abort", "id": "1", "session": NaN}', "malformed_json", None, "NaN"),
        ("[" * 100_000, "malformed_json", None, "JSON"),
        ("[1, 2]", "invalid_message", None, "array"),
        ('"open"', "invalid_message", None, "string"),
        ('{"id": "1"}', "missing_field", "1", "'op'"),
        ('{"op": "launch", "id": "1"}', "unknown_op", "1", "'launch'"),
        ('{"op": 3, "id": "1"}', "unknown_op", "1", "op=3"),
        ('{"op": "abort", "session": "s"}', "missing_field", None, "'id'"),
        ('{"op": "abort", "id": "", "session": "s"}', "invalid_field", "", "id=''"),
        ('{"op": "abort", "id": 7, "session": "s"}', "invalid_field", None, "id=7"),
        ('{"op": "abort", "id": "1"}', "missing_field", "1", "'session'"),
        ('{"op": "abort", "id": "1", "session": 5}', "invalid_field", "1", "session=5"),
        ('{"op": "push", "id": "1", "session": "s", "text": "  "}', "invalid_field", "1", "text"),
        ('{"op": "push", "id": "1", "session": "s"}', "missing_field", "1", "'text'"),
        ('{"op": "answer", "id": "1", "session": "s", "request": "r"}', "missing_field", "1",
         "'answer'"),
        ('{"op": "attach", "id": "1", "session": "s", "last_seq": -1}', "invalid_field", "1",
         "last_seq=-1"),
        ('{"op": "attach", "id": "1", "session": "s", "last_seq": true}', "invalid_field", "1",
         "last_seq=True"),
        ('{"op": "attach", "id": "1", "session": "s", "last_sq": 3}', "unknown_field", "1",
         "'last_sq'"),
        ('{"op": "open", "id": "1"}', "missing_field", "1", "'params'"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x"}, "label": 3}', "invalid_field",
         "1", "label=3"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x"}, "label": "' + "l" * 300 + '"}',
         "invalid_field", "1", "longer than 256"),
        ('{"op": "continue", "id": "1", "session": "s"}', "missing_field", "1", "'prompt'"),
        ('{"op": "continue", "id": "1", "session": "s", "prompt": " "}', "invalid_field", "1",
         "prompt"),
        ('{"op": "continue", "id": "1", "prompt": "go"}', "missing_field", "1", "'session'"),
        ('{"op": "list", "id": "1", "all": true}', "unknown_field", "1", "'all'"),
        ('{"op": "list", "id": "1", "limit": 1001}', "invalid_field", "1", "limit=1001"),
        ('{"op": "list", "id": "1", "limit": true}', "invalid_field", "1", "limit=True"),
        ('{"op": "list", "id": "1", "cursor": "later"}', "invalid_field", "1",
         "send the next_cursor"),
        ('{"op": "hello", "id": "1", "version": 2}', "unknown_field", "1", "'version'"),
        ('{"op": "governor", "id": "1", "follow": "yes"}', "invalid_field", "1",
         "follow='yes': expected true or false"),
        ('{"op": "governor", "id": "1", "watch": true}', "unknown_field", "1", "'watch'"),
        ('{"op": "open", "id": "1", "params": "go"}', "invalid_field", "1", "params"),
        ('{"op": "open", "id": "1", "params": {}}', "missing_field", "1", "params.prompt"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", "colour": 1}}', "unknown_field",
         "1", "params.colour"),
        ('{"op": "open", "id": "1", "params": {"prompt": ""}}', "invalid_params", "1",
         "params.prompt"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", "model": "gpt-9"}}',
         "invalid_params", "1", "params.model"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", "max_turns": 0}}',
         "invalid_params", "1", "params.max_turns"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", "architecture_config": []}}',
         "invalid_field", "1", "params.architecture_config"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", '
         '"architecture_config": {"claude_effort": "huge"}}}', "invalid_params", "1",
         "params.architecture_config.claude_effort"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", "cwd": "/etc"}}',
         "forbidden_field", "1", "params.cwd"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", "mcp_servers": {}}}',
         "forbidden_field", "1", "params.mcp_servers"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", "inline_skills": []}}',
         "forbidden_field", "1", "params.inline_skills cannot be set by a remote client"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", "tool_timeout": 5}}',
         "forbidden_field", "1", "params.tool_timeout cannot be set by a remote client"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", '
         '"architecture_config": {"custom_env": {"NODE_OPTIONS": "-r evil"}}}}',
         "forbidden_field", "1", "custom_env"),
        ('{"op": "open", "id": "1", "params": {"prompt": "x", '
         '"architecture_config": {"ollama_baseUrl": "http://x"}}}', "forbidden_field", "1",
         "ollama_baseUrl"),
    ],
)  # fmt: skip
def test_malformed_ops_raise_their_code_with_the_id_and_the_field(
    text: str, code: str, op_id: str | None, names: str
) -> None:
    error = decode_error(text)
    assert error.code == code
    assert error.id == op_id
    assert names in error.message
    frame = error_frame(error)
    assert frame == ErrorFrame(id=op_id, code=code, message=error.message)
    assert decode_frame(encode_frame(frame)) == frame


def test_allowed_cwd_and_env_pass_when_the_gateway_allows_them() -> None:
    text = (
        '{"op": "open", "id": "1", "params": {"prompt": "x", "cwd": "/srv", '
        '"architecture_config": {"custom_env": {"A": "b"}}}}'
    )
    assert decode_error(text, allow_env=True).code == "forbidden_field"  # cwd still refused
    assert decode_error(text, allow_cwd=True).code == "forbidden_field"  # env still refused
    op = decode_op(text, allow_cwd=True, allow_env=True)
    assert isinstance(op, OpenOp)
    assert op.params.cwd == "/srv"
    assert dict(op.params.architecture_config.custom_env) == {"A": "b"}
    # mcp_servers never travels, whatever is allowed
    mcp = '{"op": "open", "id": "1", "params": {"prompt": "x", "mcp_servers": {}}}'
    assert decode_error(mcp, allow_cwd=True, allow_env=True).code == "forbidden_field"


def test_a_non_text_message_is_invalid() -> None:
    error = decode_error(b'{"op": "abort"}')  # type: ignore[arg-type]
    assert error.code == "invalid_message"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('{"type": "opened", "id": "1"}', "missing_field"),
        ('{"type": "reply", "id": "1", "ok": 1}', "invalid_field"),
        ('{"type": "resync_required", "id": "1", "session": "s", "oldest_seq": true}',
         "invalid_field"),
        ('{"type": "event", "session": "s", "event": {"kind": "nope"}}', "invalid_field"),
        ('{"type": "event", "session": "s"}', "missing_field"),
        ('{"type": "party"}', "invalid_message"),
        ('{"type": "continued", "id": "1", "session": "s"}', "invalid_field"),
        ('{"type": "governor", "id": null, "governor": {"limit": "two"}}', "invalid_field"),
        ('{"type": "governor", "id": 3, "governor": null}', "invalid_field"),
        ('{"type": "continued", "id": "1", "session": "s", "first_seq": "3"}', "invalid_field"),
        ('{"type": "sessions", "id": "1", "sessions": [{"session": "s"}]}', "invalid_field"),
        ('{"type": "hello", "id": "1", "server": "x", "protocol": 1, "principal": "p", '
         '"admin": "yes", "ops": [], "capabilities": {}, "limits": {}, "policy": {}}',
         "invalid_field"),
    ],
)  # fmt: skip
def test_malformed_frames_are_refused(text: str, code: str) -> None:
    with pytest.raises(WireError) as caught:
        decode_frame(text)
    assert caught.value.code == code


def test_open_carries_the_session_surface_and_round_trips() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    params = ExecuteParams(
        prompt="look",
        images=[ImageInput.from_bytes(png)],
        run_timeout=60,
        idle_timeout=20,
        max_budget_usd=0.25,
        fallback_model="sonnet",
        subagents={"reviewer": SubagentDefinition(description="d", prompt="p", tools=["Read"])},
        output_schema=schema,
        allowed_tools=["Read"],
        disallowed_tools=["WebFetch"],
    )
    text = encode_op(OpenOp(id="1", params=params))
    decoded = decode_op(text)
    assert isinstance(decoded, OpenOp)
    assert decoded.params == params


def test_a_provider_is_environment_for_a_remote_client() -> None:
    op = '{"op": "open", "id": "1", "params": {"prompt": "hi", "provider": "ollama"}}'
    with pytest.raises(WireError, match=r"params\.provider cannot be set") as refused:
        decode_op(op)
    assert refused.value.code == "forbidden_field"
    assert decode_op(op, allow_env=True).params.provider == "ollama"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("images", "match"),
    [
        ('"x"', r"params\.images: expected a list"),
        ('[{"data": "!!!"}]', r"params\.images\[0\]\.data: not base64"),
        ('[{"data": "JVBERi0x"}]', r"params\.images\[0\]: a PNG, JPEG, GIF or WebP"),
        ("[7]", r"params\.images\[0\]: expected"),
    ],
)
def test_bad_images_over_the_wire_name_the_field(images: str, match: str) -> None:
    with pytest.raises(WireError, match=match):
        decode_op(f'{{"op": "open", "id": "1", "params": {{"prompt": "hi", "images": {images}}}}}')


@pytest.mark.parametrize("model", [[], {}, 7, ["sonnet"]])
def test_a_subagent_model_of_the_wrong_type_is_refused_by_name(model: Any) -> None:
    subagents = {"a": {"description": "d", "prompt": "p", "model": model}}
    text = json.dumps({"op": "open", "id": "o", "params": {"prompt": "x", "subagents": subagents}})
    error = decode_error(text)
    assert (error.code, error.id) == ("invalid_params", "o")
    assert "params.subagents['a'].model" in error.message


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_open_and_continue_carry_the_callers_traceparent() -> None:
    op = OpenOp(id="1", params=ExecuteParams(prompt="p"), traceparent=TRACEPARENT)
    assert json.loads(encode_op(op))["traceparent"] == TRACEPARENT
    assert decode_op(encode_op(op)) == op
    again = ContinueOp(id="2", session="s", prompt="p", traceparent=TRACEPARENT)
    assert decode_op(encode_op(again)) == again
    assert "traceparent" not in json.loads(encode_op(OpenOp(id="3", params=op.params)))


@pytest.mark.parametrize(
    "value",
    [
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
        "00-" + "0" * 32 + "-b7ad6b7169203331-01",  # the invalid trace id
        "00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01",  # the invalid span id
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # a version we do not read
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        7,
        "x" * 300,
    ],
)
def test_a_malformed_traceparent_is_refused_by_name(value: object) -> None:
    obj = {"op": "continue", "id": "9", "session": "s", "prompt": "p", "traceparent": value}
    with pytest.raises(WireError) as caught:
        decode_op(json.dumps(obj))
    assert caught.value.code == "invalid_field"
    assert caught.value.id == "9"
    assert "not a W3C traceparent" in str(caught.value)


def test_a_plain_continue_is_sent_as_before_its_options_existed() -> None:
    sent = json.loads(encode_op(ContinueOp(id="c", session="s", prompt="p")))
    assert sent == {"op": "continue", "id": "c", "session": "s", "prompt": "p"}
    chosen = ContinueOp(id="c", session="s", prompt="p", model="opus", permission_mode="plan")
    assert json.loads(encode_op(chosen)) == {**sent, "model": "opus", "permission_mode": "plan"}
    null = json.dumps({**sent, "model": None, "permission_mode": None})
    assert decode_op(null) == ContinueOp(id="c", session="s", prompt="p")


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        ({"permission_mode": "yolo"}, "invalid_field", "permission_mode='yolo'"),
        ({"model": 7}, "invalid_field", "model"),
        ({"model": "a\u0000b"}, "invalid_params", "model"),
        ({"images": "nope"}, "invalid_field", "images: expected a list"),
        ({"images": [{"data": "aGVsbG8="}]}, "invalid_params", "images[0]: "),
        ({"effort": "high"}, "unknown_field", "effort"),
    ],
)
def test_a_continue_with_a_bad_option_is_refused_by_name(
    extra: dict[str, Any], code: str, message: str
) -> None:
    text = json.dumps({"op": "continue", "id": "c", "session": "s", "prompt": "p", **extra})
    with pytest.raises(WireError) as caught:
        decode_op(text)
    assert caught.value.code == code
    assert message in caught.value.message
    assert caught.value.id == "c"
