"""The web console's pages on the gateway's own port (real sockets): what a plain GET gets,
its security headers, what is never served, the websocket on the same port beside it, and the
console's own origin admitted by the Origin check (and no other)."""

from __future__ import annotations

import pytest
import trio
from gateway_kit import ORIGIN, TOKEN, client, gateway, tcp_from
from trio_websocket import ConnectionRejected, open_websocket_url

from claude_trio.protocol.fanout.console import (
    CONTENT_SECURITY_POLICY,
    console_origins,
    is_page_request,
    parse_head,
)
from claude_trio.protocol.fanout.wire import SessionsFrame
from claude_trio.testing import FakeCLI


async def http(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP exchange: status, headers (lower-cased names), body."""
    stream = await tcp_from(port)
    async with stream:
        await stream.send_all(request)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    return int(lines[0].split(" ")[1]), headers, body


def get(path: str, method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


async def test_the_console_pages_come_with_a_strict_policy() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI(), console=True) as (_, port):
            status, headers, body = await http(port, get("/"))
            assert status == 200
            assert headers["content-type"] == "text/html; charset=utf-8"
            assert b'<script type="module" src="/app.js">' in body
            assert b"<script>" not in body  # no inline script: the policy would refuse it
            assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert "script-src 'self'" in CONTENT_SECURITY_POLICY
            assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
            assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
            assert headers["x-frame-options"] == "DENY"
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["cache-control"] == "no-store"
            status, headers, body = await http(port, get("/app.js?v=1"))
            assert status == 200
            assert headers["content-type"] == "text/javascript; charset=utf-8"
            assert b"textContent" in body
            assert headers["x-frame-options"] == "DENY"
            status, headers, body = await http(port, get("/", "HEAD"))
            assert (status, body) == (200, b"")
            assert int(headers["content-length"]) > 100


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (get("/../pyproject.toml"), 404),
        (get("/console/app.js"), 404),
        (get("/%2e%2e/pyproject.toml"), 404),
        (get("/", "POST"), 405),
    ],
)
async def test_nothing_but_the_console_files_is_served(request_bytes: bytes, status: int) -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI(), console=True) as (_, port):
            got, headers, _ = await http(port, request_bytes)
            assert got == status
            assert headers["x-frame-options"] == "DENY"


async def test_without_the_console_a_page_request_is_refused_as_before() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI()) as (_, port):
            status, _, body = await http(port, get("/"))
            assert status == 400
            assert b"<script" not in body


async def test_the_websocket_shares_the_port_and_admits_the_console_origin_only() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI(), console=True) as (_, port):
            for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", ORIGIN):
                headers = [(b"origin", origin.encode())]
                async with client(port, path=f"/?token={TOKEN}", extra_headers=headers) as c:
                    await c.send("list", id="l")
                    assert await c.receive() == SessionsFrame(id="l", sessions=())
            for origin in ("http://evil.example", f"http://127.0.0.1:{port + 1}"):
                headers = [(b"origin", origin.encode())]
                with pytest.raises(ConnectionRejected) as refused:
                    async with open_websocket_url(
                        f"ws://127.0.0.1:{port}/?token={TOKEN}", extra_headers=headers
                    ):
                        pass
                assert refused.value.status_code == 403


async def test_a_slow_request_head_still_times_out_as_a_handshake() -> None:
    from claude_trio.protocol.fanout.remote import GatewayLimits

    with trio.fail_after(10):
        async with gateway(
            FakeCLI(), console=True, limits=GatewayLimits(handshake_timeout=0.2)
        ) as (_, port):
            stream = await tcp_from(port)
            async with stream:
                await stream.send_all(b"GET / HTTP/1.1\r\n")  # never finished
                assert await stream.receive_some(100) == b""  # closed by the server


def test_a_page_request_is_anything_but_an_upgrade() -> None:
    page = parse_head(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert page is not None
    assert is_page_request(page)
    upgrade = parse_head(b"GET / HTTP/1.1\r\nUpgrade: WebSocket\r\nConnection: Upgrade\r\n\r\n")
    assert upgrade is not None
    assert not is_page_request(upgrade)
    assert parse_head(b"nonsense\r\n\r\n") is None
    assert parse_head(b"GET / HTTP/1.1\r\n bad: folded\r\n\r\n") is None


def test_the_console_origins_of_a_listener() -> None:
    assert console_origins("0.0.0.0", 80) == frozenset({"http://0.0.0.0:80"})
    assert "http://localhost:8765" in console_origins("127.0.0.1", 8765)
    assert "http://[::1]:9" in console_origins("::1", 9)
