"""The gateway client's settings and figures: :class:`ClientConfig` (its bounds, deadlines and
reconnection backoff), :class:`ClientStatistics` (what ``GatewayClient.statistics()``
returns), what ``ClientConfig.on_connection`` is told while the client reconnects
(:class:`Reconnecting`, :class:`Reconnected`, :class:`GaveUp`), and the checks of the URL
and token ``connect_gateway`` is given.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import attrs

from claude_trio.protocol.checks import positive_int, seconds
from claude_trio.protocol.errors import GatewayError, InvalidParamsError
from claude_trio.protocol.fanout.remote import check_token

__all__ = [
    "ClientConfig",
    "ClientStatistics",
    "ConnectionNotice",
    "GaveUp",
    "Reconnected",
    "Reconnecting",
]


@attrs.frozen(kw_only=True)
class Reconnecting:
    """The connection is down and the client is about to try again: ``attempt`` (1 for the
    first try after the connection dropped) starts after ``delay`` seconds (0 for the
    first); ``error`` says why the connection dropped, or why the previous attempt failed."""

    attempt: int
    delay: float
    error: str


@attrs.frozen(kw_only=True)
class Reconnected:
    """A new connection said hello after ``attempts`` attempts; every followed session is
    attached again from the last event it received (what it missed comes next, exactly
    once)."""

    attempts: int


@attrs.frozen(kw_only=True)
class GaveUp:
    """The client stopped trying (``ClientConfig.reconnect_attempts`` failed attempts in a
    row, or a refused handshake): every waiting op and every session's events raise
    ``error`` (a :class:`~claude_trio.errors.GatewayUnavailableError` or
    :class:`~claude_trio.errors.GatewayRefusedError`)."""

    error: GatewayError


#: What ``ClientConfig.on_connection`` is called with.
ConnectionNotice: TypeAlias = Reconnecting | Reconnected | GaveUp


def _callable_or_none(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not callable(value):
        raise InvalidParamsError(
            attribute.name, value, "a function taking a ConnectionNotice, or None"
        )


@attrs.frozen(kw_only=True)
class ClientConfig:
    """The client's bounds and deadlines (seconds).

    ``max_queue``: events per session waiting for the consumer (backpressure, see
    :mod:`claude_trio.client`). ``connect_attempts`` / ``reconnect_attempts``: failed
    attempts in a row before the first connection, or a reconnection, gives up; between
    attempts the client waits ``backoff_base * 2**n`` seconds (at most ``backoff_max``),
    times a random factor from 0.5 to 1 (so clients that lost one server do not all come
    back at once). ``connect_timeout``: for one TCP connect and handshake (also what a
    server that closes the TCP connection without answering the handshake costs:
    trio-websocket 0.12 waits for the answer until then). ``ping_interval`` /
    ``ping_timeout``: a ping every interval; no pong within the timeout -> the connection is
    presumed dead and replaced (a dead peer is noticed within ``ping_interval +
    ping_timeout``; a closed one at once). ``close_timeout``: for the closing handshake.
    ``max_message_size``: the largest frame accepted, in characters.

    ``on_connection``: called with a :data:`ConnectionNotice` while the connection is down:
    :class:`Reconnecting` before each attempt, :class:`Reconnected` when one succeeded,
    :class:`GaveUp` when the client stops trying (an ``async for`` over a session's events
    then raises that error). A plain function, called in the client's connection task: keep
    it quick (to handle notices in a task of yours, ``send_nowait`` them into a memory
    channel); what it raises ends the ``connect_gateway`` block. The events themselves carry
    no notice: ``session.events`` yields only the session's events, as a local session's
    does, and simply goes on once reconnected.
    """

    max_queue: int = attrs.field(default=1000, validator=positive_int)
    connect_attempts: int = attrs.field(default=3, validator=positive_int)
    reconnect_attempts: int = attrs.field(default=10, validator=positive_int)
    backoff_base: float = attrs.field(default=0.2, validator=seconds)
    backoff_max: float = attrs.field(default=5.0, validator=seconds)
    connect_timeout: float = attrs.field(default=10.0, validator=seconds)
    ping_interval: float = attrs.field(default=5.0, validator=seconds)
    ping_timeout: float = attrs.field(default=10.0, validator=seconds)
    close_timeout: float = attrs.field(default=5.0, validator=seconds)
    max_message_size: int = attrs.field(default=64 * 2**20, validator=positive_int)
    on_connection: Callable[[ConnectionNotice], object] | None = attrs.field(
        default=None, validator=_callable_or_none, eq=False
    )

    def backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failed attempts in a row (at least 1)."""
        delay: float = min(self.backoff_max, self.backoff_base * 2.0 ** min(failures - 1, 30))
        return delay * random.uniform(0.5, 1.0)


@attrs.frozen(kw_only=True)
class ClientStatistics:
    """``connections``: websocket connections made so far (1 + reconnections);
    ``sessions``: sessions followed now; ``replayed``: events dropped to be replayed (a
    consumer behind, or in flight when a connection dropped)."""

    connections: int
    sessions: int
    replayed: int


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        raise InvalidParamsError("url", url, "a ws:// or wss:// URL")
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise InvalidParamsError(
            "url", url, "a ws:// or wss:// URL with a host, e.g. ws://127.0.0.1:8765/"
        )
    return url


#: Where ``connect_gateway`` reads the token when it is given none.
TOKEN_ENV = "CLAUDE_TRIO_TOKEN"


def _resolve_token(token: str | None) -> str:
    """``token`` checked, or without one the one in :data:`TOKEN_ENV` (``InvalidParamsError``
    saying how to give one)."""
    if token is not None:
        return check_token(token)
    token = os.environ.get(TOKEN_ENV)
    if token is None:
        raise InvalidParamsError(
            "token",
            None,
            f"the gateway's token: pass token=..., or set {TOKEN_ENV} in the environment",
        )
    return check_token(token, TOKEN_ENV)


def connect_arguments(
    url: str | Sequence[str], token: str | None, config: ClientConfig | None
) -> tuple[tuple[str, ...], list[tuple[bytes, bytes]], ClientConfig]:
    """``connect_gateway``'s arguments, checked: its gateways' URLs, the handshake's headers
    (the token given, else ``TOKEN_ENV``'s), its config."""
    urls = (url,) if isinstance(url, str) else tuple(url)
    if not urls:
        raise InvalidParamsError("url", url, "a ws:// or wss:// URL, or a sequence of them")
    urls = tuple(_check_url(u) for u in urls)
    token = _resolve_token(token)
    config = config or ClientConfig()
    if not isinstance(config, ClientConfig):
        raise InvalidParamsError("config", config, "a ClientConfig or None")
    return urls, [(b"authorization", f"Bearer {token}".encode())], config
