"""The Messages API double on its own, over a real TCP socket with an h11 client."""

from __future__ import annotations

import json
from typing import Any

import attrs
import h11
import pytest
import trio

from claude_trio.errors import ModelDoubleRunaway
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.testing.model_double import (
    HttpError,
    ModelDouble,
    ModelRequest,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    ReplyUsage,
    Rule,
    Script,
    StreamError,
    is_main_agent,
    open_model_double,
    prompt_too_long,
    turns,
)

pytestmark = pytest.mark.e2e


@attrs.frozen(kw_only=True)
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def sse(self) -> list[tuple[str, dict[str, Any]]]:
        """(event name, data) pairs; asserts the framing is exactly ``event:``/``data:``/blank."""
        events = []
        text = self.body.decode()
        assert text.endswith("\n\n")
        for frame in text[:-2].split("\n\n"):
            event_line, data_line = frame.split("\n")
            assert event_line.startswith("event: ")
            assert data_line.startswith("data: ")
            data = json.loads(data_line.removeprefix("data: "))
            events.append((event_line.removeprefix("event: "), data))
        return events


class Client:
    """A keep-alive HTTP/1.1 client on one connection (h11, like the double)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)

    async def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, **headers: str
    ) -> HttpReply:
        data = json.dumps(body).encode() if body is not None else b""
        all_headers = [
            ("host", "127.0.0.1"),
            ("content-type", "application/json"),
            ("content-length", str(len(data))),
            *((k.replace("_", "-"), v) for k, v in headers.items()),
        ]
        await self.stream.send_all(
            self.conn.send(h11.Request(method=method, target=path, headers=all_headers))
        )
        await self.stream.send_all(self.conn.send(h11.Data(data=data)))
        await self.stream.send_all(self.conn.send(h11.EndOfMessage()))
        response = await self._next()
        assert isinstance(response, h11.Response)
        received = bytearray()
        while True:
            event = await self._next()
            if isinstance(event, h11.EndOfMessage):
                break
            assert isinstance(event, h11.Data)
            received += event.data
        self.conn.start_next_cycle()
        return HttpReply(
            status=response.status_code,
            headers={k.decode(): v.decode() for k, v in response.headers},
            body=bytes(received),
        )

    async def _next(self) -> Any:
        await trio.lowlevel.checkpoint()
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.conn.receive_data(await self.stream.receive_some(65536))


def streamed_text(reply: HttpReply) -> str:
    return "".join(
        data["delta"]["text"]
        for name, data in reply.sse()
        if name == "content_block_delta" and data["delta"]["type"] == "text_delta"
    )


def messages_body(text: str = "hello", *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "stream": stream,
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        **extra,
    }


async def connect(double: ModelDouble) -> Client:
    assert double.port is not None
    return Client(await trio.open_tcp_stream("127.0.0.1", double.port))


async def test_stream_sse_events_in_api_order_with_deltas_and_usage() -> None:
    reply = Reply(
        blocks=(
            ReplyThinking(thinking="let me think", signature="sig-1"),
            ReplyText(text="Hello world"),
            ReplyToolUse(id="toolu_1", name="Bash", input={"command": "echo hi"}),
        ),
        usage=ReplyUsage(
            input_tokens=11,
            output_tokens=22,
            cache_read_input_tokens=33,
            cache_creation_input_tokens=44,
        ),
        chunk_size=5,
    )
    async with open_model_double(turns(reply)) as double:
        client = await connect(double)
        got = await client.request("POST", "/v1/messages?beta=true", messages_body())
    assert got.status == 200
    assert got.headers["content-type"] == "text/event-stream"
    assert got.headers["transfer-encoding"] == "chunked"
    events = got.sse()
    names = [name for name, _ in events]
    assert all(name == data["type"] for name, data in events)
    assert names == [
        "message_start",
        "content_block_start", *["content_block_delta"] * 4, "content_block_stop",
        "content_block_start", *["content_block_delta"] * 3, "content_block_stop",
        "content_block_start", *["content_block_delta"] * 5,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]  # fmt: skip
    start = events[0][1]["message"]
    assert start["model"] == "claude-sonnet-4-5"
    assert start["id"].startswith("msg_")
    assert start["usage"] == {
        "input_tokens": 11,
        "cache_creation_input_tokens": 44,
        "cache_read_input_tokens": 33,
        "output_tokens": 1,
    }
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    assert "".join(d["thinking"] for d in deltas if d["type"] == "thinking_delta") == "let me think"
    assert [d["signature"] for d in deltas if d["type"] == "signature_delta"] == ["sig-1"]
    assert "".join(d["text"] for d in deltas if d["type"] == "text_delta") == "Hello world"
    partial = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert json.loads(partial) == {"command": "echo hi"}
    assert events[12][1]["content_block"] == {
        "type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}
    }  # fmt: skip
    assert [d["index"] for n, d in events if n == "content_block_stop"] == [0, 1, 2]
    message_delta = events[-2][1]
    assert message_delta["delta"]["stop_reason"] == "tool_use"
    assert message_delta["usage"]["output_tokens"] == 22
    assert message_delta["usage"]["cache_read_input_tokens"] == 33


async def test_non_stream_request_gets_one_json_message() -> None:
    reply = Reply.text("plain", usage=ReplyUsage(input_tokens=3, output_tokens=4))
    async with open_model_double(turns(reply)) as double:
        client = await connect(double)
        got = await client.request("POST", "/v1/messages", messages_body(stream=False))
    assert got.status == 200
    message = got.json()
    assert message["content"] == [{"type": "text", "text": "plain"}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"]["input_tokens"] == 3
    assert message["usage"]["output_tokens"] == 4


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(401, "authentication_error"), (429, "rate_limit_error"), (500, "api_error"),
     (529, "overloaded_error")],
)  # fmt: skip
async def test_http_errors_carry_status_json_body_and_headers(status: int, error_type: str) -> None:
    error = HttpError(status=status, message="nope", headers={"retry-after": "7"})
    async with open_model_double(turns(error)) as double:
        client = await connect(double)
        got = await client.request("POST", "/v1/messages?beta=true", messages_body())
    assert got.status == status
    assert got.headers["retry-after"] == "7"
    assert got.headers["request-id"].startswith("req_")
    assert got.json() == {"type": "error", "error": {"type": error_type, "message": "nope"}}


async def test_prompt_too_long_is_the_400_the_cli_recognises() -> None:
    async with open_model_double(turns(prompt_too_long(250_000, 200_000))) as double:
        client = await connect(double)
        got = await client.request("POST", "/v1/messages?beta=true", messages_body())
    assert got.status == 400
    assert got.json()["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 250000 tokens > 200000 maximum",
    }


async def test_stream_error_sends_some_events_then_an_sse_error_event() -> None:
    broken = StreamError(reply=Reply.text("abcdefgh", chunk_size=2), after_events=3)
    async with open_model_double(turns(broken)) as double:
        client = await connect(double)
        got = await client.request("POST", "/v1/messages?beta=true", messages_body())
    assert got.status == 200
    assert [name for name, _ in got.sse()] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "error",
    ]
    assert got.sse()[-1][1] == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


async def test_keep_alive_serves_many_requests_on_one_connection_and_records_them() -> None:
    script = turns(Reply.text("one"), HttpError(status=500), Reply.text("three"))
    async with open_model_double(script) as double:
        client = await connect(double)
        first = await client.request(
            "POST", "/v1/messages?beta=true", messages_body("a"), x_api_key="k1"
        )
        second = await client.request("POST", "/v1/messages?beta=true", messages_body("b"))
        third = await client.request("POST", "/v1/messages?beta=true", messages_body("c"))
    assert [first.status, second.status, third.status] == [200, 500, 200]
    assert [r.last_user_text for r in double.requests] == ["a", "b", "c"]
    assert [r.index for r in double.requests] == [0, 1, 2]
    recorded = double.requests[0]
    assert recorded.method == "POST"
    assert recorded.path == "/v1/messages?beta=true"
    assert recorded.route == "/v1/messages"
    assert recorded.header("X-Api-Key") == "k1"
    assert recorded.body["model"] == "claude-sonnet-4-5"
    assert recorded.stream


async def test_count_tokens_and_unknown_routes_are_answered_and_recorded() -> None:
    async with open_model_double(Script([])) as double:
        client = await connect(double)
        counted = await client.request(
            "POST", "/v1/messages/count_tokens?beta=true", messages_body()
        )
        missing = await client.request("GET", "/v1/models")
    assert counted.status == 200
    assert counted.json()["input_tokens"] > 0
    assert missing.status == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    assert [r.route for r in double.requests] == ["/v1/messages/count_tokens", "/v1/models"]
    assert double.message_requests == []
    assert double.unscripted == []  # neither reaches the responder


async def test_runaway_guard_answers_500_past_the_script_and_fails_the_test() -> None:
    script = turns(Reply.text("scripted"))
    double = ModelDouble(script, max_unscripted=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(double.serve)
        client = await connect(double)
        scripted = await client.request("POST", "/v1/messages", messages_body("s"))
        spare = await client.request("POST", "/v1/messages", messages_body("u1"))
        assert len(double.unscripted) == 1
        double.check()  # one spare unscripted request is allowed
        runaway = await client.request("POST", "/v1/messages", messages_body("u2"))
        assert double.runaway
        nursery.cancel_scope.cancel()
    with pytest.raises(ModelDoubleRunaway, match="2 requests beyond the script") as raised:
        double.check()
    assert "'u1'" in str(raised.value)
    assert "'u2'" in str(raised.value)
    assert streamed_text(scripted) == "scripted"
    assert streamed_text(spare) == "(model double: unscripted request)"
    assert runaway.status == 500
    assert "runaway" in runaway.json()["error"]["message"]
    assert [r.last_user_text for r in double.unscripted] == ["u1", "u2"]


async def test_summary_label_requests_are_answered_without_counting_as_unscripted() -> None:
    body = messages_body("Tools completed: ...")
    body["system"] = [
        {"type": "text", "text": "billing"},
        {"type": "text", "text": "Write a short summary label describing what these tool calls "
         "accomplished. It appears as a single-line row"},
    ]  # fmt: skip
    async with open_model_double(Script([]), max_unscripted=0) as double:
        client = await connect(double)
        got = await client.request("POST", "/v1/messages", body)
    assert streamed_text(got) == "Ran tools"
    assert double.requests[0].is_tool_use_summary
    assert not is_main_agent(double.requests[0])
    assert double.unscripted == []


async def test_event_delay_paces_the_stream_on_the_trio_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reply = Reply.text("abcd", chunk_size=1, event_delay=0.5)
    async with open_model_double(turns(reply)) as double:
        client = await connect(double)
        start = trio.current_time()
        got = await client.request("POST", "/v1/messages", messages_body())
        elapsed = trio.current_time() - start
    # message_start goes out at once; the other 8 events wait 0.5 s each.
    assert len(got.sse()) == 9
    assert elapsed == pytest.approx(4.0)


async def test_gate_holds_the_stream_after_message_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = trio.Event()
    async with open_model_double(turns(Reply.text("held", gate=gate))) as double:
        assert double.port is not None
        stream = await trio.open_tcp_stream("127.0.0.1", double.port)
        conn = h11.Connection(h11.CLIENT)
        data = json.dumps(messages_body()).encode()
        headers = [("host", "x"), ("content-length", str(len(data)))]
        request = h11.Request(method="POST", target="/v1/messages", headers=headers)
        await stream.send_all(conn.send(request))
        await stream.send_all(conn.send(h11.Data(data=data)) + conn.send(h11.EndOfMessage()))
        received = b""
        while b"message_start" not in received:
            received += await stream.receive_some(65536)
        with trio.move_on_after(5):  # virtual time: jumps once everything waits
            received += await stream.receive_some(65536)
        assert b"content_block_start" not in received  # held
        gate.set()
        while b"message_stop" not in received:
            received += await stream.receive_some(65536)
        await stream.aclose()


def request_with(messages: list[dict[str, Any]], system: Any = "") -> ModelRequest:
    return ModelRequest(
        index=0,
        method="POST",
        path="/v1/messages?beta=true",
        headers=(),
        body={"model": "m", "messages": messages, "system": system},
    )


def test_request_helpers_skip_system_entries_reminders_and_tool_results() -> None:
    request = request_with(
        [
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\nenv\n</system-reminder>"},
                {"type": "text", "text": "run it"},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1",
                 "content": "hi\n\n<system-reminder>\ntokens left\n</system-reminder>"},
            ]},
            {"role": "system", "content": "a system entry after the user turn"},
        ],
        system=[{"type": "text", "text": "x-anthropic-billing-header: cc_is_subagent=true;"}],
    )  # fmt: skip
    assert request.last_user_text == "run it"
    assert request.user_texts == ["run it"]
    assert set(request.tool_uses) == {"t1", "t2"}
    assert set(request.tool_results) == {"t1"}
    assert request.tool_result_text("t1") == "hi"
    assert request.tool_result_text("t2") is None
    assert request.pending_tool_use_ids == {"t2"}
    assert request.is_subagent
    assert not is_main_agent(request)
    assert not request_with([], system="plain").is_subagent


def test_script_rules_match_in_order_and_count_their_uses() -> None:
    hello = Reply.text("hello")
    script = Script(
        [
            Rule(reply=HttpError(status=529), when=lambda r: r.last_user_text == "busy", times=2),
            Rule(reply=lambda r: Reply.text(f"echo {r.last_user_text}"), times=None),
            Rule(reply=hello),
        ]
    )
    busy = request_with([{"role": "user", "content": "busy"}])
    other = request_with([{"role": "user", "content": "other"}])
    assert script(busy) == HttpError(status=529)
    assert script(busy) == HttpError(status=529)
    assert script(busy) == Reply.text("echo busy")  # the 529 rule is used up
    assert script(other) == Reply.text("echo other")
    assert not script.exhausted  # the unlimited rule shadows the last one, which never ran
    once = turns(hello)
    assert once(other) == hello
    assert once(other) is None
    assert once.exhausted


def test_bad_parameters_name_the_field() -> None:
    with pytest.raises(InvalidParamsError, match="status"):
        HttpError(status=200)
    with pytest.raises(InvalidParamsError, match="chunk_size"):
        Reply.text("x", chunk_size=0)
    with pytest.raises(InvalidParamsError, match="times"):
        Rule(reply=Reply(), times=0)
    with pytest.raises(InvalidParamsError, match="after_events"):
        StreamError(after_events=-1)
