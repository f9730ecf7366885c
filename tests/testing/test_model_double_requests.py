"""No request kills the model double: every method, path and malformed request gets an HTTP
error answer, and the double goes on serving (raw sockets, no CLI)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from claude_trio.offline import ModelDouble, ModelRequest, Reply, open_offline_model
from claude_trio.testing.model_double import open_model_double, turns


def post(path: str, body: bytes, *, method: str = "POST") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


MESSAGE = json.dumps(
    {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
).encode()


async def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` on a new connection; the answer's status, headers and body (read until
    the double closes the connection: every request here asks it to)."""
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(request)
            received = bytearray()
            while chunk := await stream.receive_some(65536):
                received += chunk
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), {k.lower(): v for k, v in headers.items()}, body


def closing(request: bytes) -> bytes:
    """``request`` with ``connection: close``, so the answer ends with the connection."""
    return request.replace(b"host: 127.0.0.1\r\n", b"host: 127.0.0.1\r\nconnection: close\r\n", 1)


def error_type(body: bytes) -> Any:
    return json.loads(body)["error"]["type"]


async def assert_still_answers(port: int) -> None:
    status, _, body = await exchange(port, closing(post("/v1/messages", MESSAGE)))
    assert status == 200
    assert json.loads(body)["type"] == "message"


@pytest.mark.parametrize(
    ("request_bytes", "status", "kind"),
    [
        (post("/v1/messages", b"", method="HEAD"), 405, None),
        (post("/", b"", method="HEAD"), 404, None),
        (post("/v1/messages", b"", method="GET"), 405, "invalid_request_error"),
        (post("/v1/messages/count_tokens", b"", method="PUT"), 405, "invalid_request_error"),
        (post("/v1/models", b""), 404, "not_found_error"),
        (post("/v1/messages", b"{not json"), 400, "invalid_request_error"),
        (post("/v1/messages", b"[1, 2]"), 400, "invalid_request_error"),
        (post("/v1/messages/count_tokens", b'"text"'), 400, "invalid_request_error"),
    ],
    ids=[
        "head-messages", "head-unknown-path", "get-messages", "put-count-tokens",
        "unknown-path", "bad-json", "json-array", "json-string",
    ],
)  # fmt: skip
async def test_each_odd_request_gets_an_http_error_and_the_double_serves_on(
    request_bytes: bytes, status: int, kind: str | None
) -> None:
    async with open_model_double(turns(Reply.text("fine"))) as double:
        assert double.port is not None
        got, headers, body = await exchange(double.port, closing(request_bytes))
        assert got == status
        if kind is None:  # HEAD: the headers of the answer, no body
            assert body == b""
            assert int(headers["content-length"]) > 0
        else:
            assert error_type(body) == kind
        if status == 405:
            assert headers["allow"] == "POST"
        await assert_still_answers(double.port)
    assert double.message_requests[-1].last_user_text == "hi"


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x01\x02 not http at all\r\n\r\n",
        b"GET / HTTP/1.1\r\nbad header line\r\n\r\n",
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: nope\r\n\r\n",
        b"GET /\xff\xfe HTTP/1.1\r\nhost: x\r\n\r\n",
    ],
    ids=["not-http", "bad-header", "bad-length", "not-utf8-path"],
)
async def test_bytes_that_are_not_http_get_a_400_and_the_connection_closed(garbage: bytes) -> None:
    async with open_model_double(turns(Reply.text("fine"))) as double:
        assert double.port is not None
        status, _, body = await exchange(double.port, garbage)
        assert status in (400, 404)
        assert error_type(body) in ("invalid_request_error", "not_found_error")
        await assert_still_answers(double.port)


async def test_a_client_that_hangs_up_mid_request_costs_nothing() -> None:
    async with open_model_double(turns(Reply.text("fine"))) as double:
        assert double.port is not None
        stream = await trio.open_tcp_stream("127.0.0.1", double.port)
        await stream.send_all(post("/v1/messages", MESSAGE)[:-5])
        await stream.aclose()
        await assert_still_answers(double.port)


async def test_a_responder_that_raises_gets_a_500_and_fails_the_test_at_check() -> None:
    calls: list[ModelRequest] = []

    def responder(request: ModelRequest) -> Reply:
        calls.append(request)
        if len(calls) == 1:
            raise KeyError("no such turn")
        return Reply.text("fine")

    double = ModelDouble(responder)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(double.serve)
        status, _, body = await exchange(port, closing(post("/v1/messages", MESSAGE)))
        assert status == 500
        assert "KeyError" in json.loads(body)["error"]["message"]
        await assert_still_answers(port)
        nursery.cancel_scope.cancel()
    with pytest.raises(KeyError, match="no such turn"):
        double.check()


async def test_a_head_request_leaves_the_offline_model_serving() -> None:
    async with open_offline_model() as offline:
        port = offline.double.port
        assert port is not None
        status, _, body = await exchange(port, closing(post("/", b"", method="HEAD")))
        assert (status, body) == (404, b"")
        await assert_still_answers(port)
