"""The gateway client's settings and figures: :class:`ClientConfig` (its bounds, deadlines and
reconnection backoff), :class:`ClientStatistics` (what ``GatewayClient.statistics()``
returns), and the check of the URL ``connect_gateway`` is given.
"""

from __future__ import annotations

import random
from urllib.parse import urlsplit

import attrs

from claude_trio.protocol.checks import positive_int, seconds
from claude_trio.protocol.errors import InvalidParamsError

__all__ = ["ClientConfig", "ClientStatistics"]


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
    presumed dead and replaced. ``close_timeout``: for the closing handshake.
    ``max_message_size``: the largest frame accepted, in characters.
    """

    max_queue: int = attrs.field(default=1000, validator=positive_int)
    connect_attempts: int = attrs.field(default=3, validator=positive_int)
    reconnect_attempts: int = attrs.field(default=10, validator=positive_int)
    backoff_base: float = attrs.field(default=0.2, validator=seconds)
    backoff_max: float = attrs.field(default=5.0, validator=seconds)
    connect_timeout: float = attrs.field(default=10.0, validator=seconds)
    ping_interval: float = attrs.field(default=20.0, validator=seconds)
    ping_timeout: float = attrs.field(default=20.0, validator=seconds)
    close_timeout: float = attrs.field(default=5.0, validator=seconds)
    max_message_size: int = attrs.field(default=64 * 2**20, validator=positive_int)

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
