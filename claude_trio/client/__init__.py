"""``connect_gateway``: a client of ``serve_gateway`` that gives remote sessions the shape of
local ones, and survives dropped connections.

::

    async with connect_gateway("ws://127.0.0.1:8765/", token=token) as gw:
        session = await gw.open(ExecuteParams(prompt="review a.py"))
        async for event in session.events:        # the classes a local session yields
            ...
        await session.continue_("now the tests")  # the next execution of the conversation
        async for event in session.events:
            ...

``session.events`` yields the event classes of :mod:`claude_trio.protocol.session.events` (decoded
with the codec; ``raw`` is ``None``) and ends after the execution's final terminal event, as a local
session's does. ``push``, ``answer``, ``abort`` and ``continue_`` are the gateway's ops.

The token: ``token=``, or else the ``CLAUDE_TRIO_TOKEN`` environment variable.

**Dropped connections.** When the connection drops (the server went away or closed it: seen at
once; a proxy cut it, or the peer went silent: no pong within ``ping_timeout`` of a ping sent
every ``ping_interval``), the client reconnects with exponential backoff (with jitter; given
several URLs, the gateways of one cluster, each attempt goes to the next one, and it backs off
only after every one failed) and attaches every session it follows again from the last ``seq``
it queued, so the consumer sees every event exactly once, in order: no gap, no duplicate
(``protocol/fanout/follow.py`` decides what to queue, drop and re-attach). If the server no
longer holds the events after that seq (its replay buffer evicted them), ``session.events``
raises :class:`ResyncRequiredError`; if it no longer knows the session (it restarted, or forgot it),
:class:`SessionLostError`. An op whose reply was lost with the connection is sent again when it
is safe to repeat (``hello``, ``list``, ``abort``, ``set_model``, ``set_permission_mode``,
and ``open``, which carries an idempotency key: the server answers a repeat with the session
the first one started); ``continue`` asks the server whether it started (and is sent again, with
its key, only if not); otherwise (``push``, ``answer``) it raises :class:`ConnectionLostError`,
as the server may or may not have acted on it. An op sent while there is no connection waits
for the next one. After
``reconnect_attempts`` failed attempts in a row (or a refused handshake: a revoked token), the
client gives up: every waiting op and every session's events raise
:class:`GatewayUnavailableError` (or :class:`GatewayRefusedError`): an ``async for`` over
``session.events`` never hangs on a server that is gone.

**Seeing it happen.** ``session.events`` yields only the session's events (the classes a
local session yields) and simply pauses while the client reconnects. To show the user what is
going on, give ``ClientConfig(on_connection=callback)``: a plain function called with
:class:`Reconnecting` (``attempt``, ``delay``, ``error``) before each attempt,
:class:`Reconnected` (``attempts``) once a connection is back, :class:`GaveUp` (``error``)
when the client stops trying. The client also logs each drop and reconnection (logger
``claude_trio.client.connection``, WARNING).

The errors are all :class:`~claude_trio.errors.GatewayError` subclasses: import them from
:mod:`claude_trio.errors`.

**Backpressure.** Each session queues at most ``max_queue`` events for its consumer. When a
consumer falls that far behind, the client detaches that session and attaches it again from
its last seq once the consumer has caught up to half the queue: a slow consumer costs a replay
from the server's buffer, never unbounded memory, and never holds up the connection's other
sessions.

Errors the server sends for an op raise :class:`RemoteOpError` with the code of
``protocol/fanout/wire.py`` and the server's message. Nothing ``connect_gateway`` starts outlives
its
``async with``.

The parts: ``config.py`` (:class:`ClientConfig`, :class:`ClientStatistics`), ``session.py``
(:class:`RemoteSession`, :class:`RemoteEvents`), ``connection.py`` (:func:`connect_gateway`,
:class:`GatewayClient`: the connection, its tasks and the reconnection), ``inbox.py``
(``GatewayClient.inbox()``: the server's inbox, followed across reconnects), ``governor.py``
(``GatewayClient.follow_governor()``: the server's governor figures as they change, a
:class:`GovernorFeed`), ``inflight.py`` (an op in flight, a connection). Import from here.
"""

from claude_trio.client.config import (
    ClientConfig,
    ClientStatistics,
    ConnectionNotice,
    GaveUp,
    Reconnected,
    Reconnecting,
)
from claude_trio.client.connection import GatewayClient, connect_gateway
from claude_trio.client.governor import GovernorFeed
from claude_trio.client.session import RemoteEvents, RemoteSession

__all__ = [
    "ClientConfig",
    "ClientStatistics",
    "ConnectionNotice",
    "GatewayClient",
    "GaveUp",
    "GovernorFeed",
    "Reconnected",
    "Reconnecting",
    "RemoteEvents",
    "RemoteSession",
    "connect_gateway",
]
