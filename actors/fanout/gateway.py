"""``serve_gateway``: the websocket front of a session host (a
:class:`~claude_trio.actors.fanout.hosts.ServedHost`: a local ``Fleet``, or a cluster's
``RedisFleet``). The gateway never asks which it serves: what differs is declared on the interface.

::

    async with open_fleet(max_live=4) as fleet:
        port = await nursery.start(
            partial(serve_gateway, fleet, token=secret, allowed_origins={"https://app.example"},
                    cwd_root="/srv/work")
        )

Remote clients speak the JSON protocol of :mod:`claude_trio.protocol.fanout.wire` (one op or frame
per text message). The gateway moves bytes and enforces the connection policy; what a message
means is decided by ``decode_op``, what a remote session may do by ``protocol/fanout/remote.py``,
and what a slow subscriber keeps by the fleet (``protocol/fanout/replay.py``). This module is the
listener (options, accept loop, shedding, handshake, authentication); each accepted
connection is served by ``actors/fanout/gateway_connection.py`` (its reader, writer, pinger and op
handlers).

**What a remote session can do by default**: read files and search them (Read, Grep, Glob)
under the server's user, fetch and search the web, keep a todo list and ask its client
questions; it cannot run commands, edit or write files, start subagents or MCP servers, set
its environment or its working directory. ``remote_tools="all"`` opts in to every tool;
``cwd_root`` is the folder sessions run in (``allow_cwd`` lets clients pick one below it);
``allow_env`` lets them set the CLI's environment. See ``protocol/fanout/remote.py``.

Connections (before anything else): at most ``limits.max_connections`` (kept below the
process's descriptor limit), ``max_connections_per_peer``, and as many handshakes in progress
(``max_handshakes``, ``max_handshakes_per_peer``); over a cap, a connection gets ``HTTP 503``
and is closed at once. A handshake must complete within ``handshake_timeout``. Every such
event is logged once per cause, then counted and summarised at most once a minute: a flood
never writes a line (or a traceback) per connection.

Handshake (before the websocket is accepted, so a refused client never gets a socket):

* **Auth**: ``Authorization: Bearer <token>``, or ``?token=<token>`` in the URL for browsers
  (the WebSocket API cannot set headers; a URL can end up in proxy logs, so prefer the header).
  When the header is present it alone decides. Missing or wrong -> HTTP 401. Compared in
  constant time. The token, the request path and the headers are never logged.
* **Origin**: with ``allowed_origins`` given, a request whose ``Origin`` header is not in it
  -> HTTP 403. A request without ``Origin`` is not a browser (browsers always send it on a
  websocket handshake), so cross-site websocket hijacking does not apply and it is allowed.
  ``allowed_origins=None`` turns the check off.
* A request with more than one ``Authorization`` or ``Origin`` header -> HTTP 400 (which one
  would count is exactly what an attacker would like to choose).

The web console (``console=True``, ``claude-trio serve``'s default on loopback): the same
port answers a plain ``GET`` (no ``Upgrade: websocket``) with the console's static pages and
closes that connection (``actors/fanout/gateway_http.py``; the files, headers and policy:
``protocol/fanout/console.py``); the request head is read within ``handshake_timeout``, and
anything else goes on to the websocket handshake unchanged. Its origin (``http://host:port``)
is then admitted by the Origin check.

Close codes: a message longer than ``max_message_size`` (``len()`` of the text, i.e.
characters; trio-websocket's measure) -> 1009; a text frame that is not UTF-8 -> 1007; a
frame wsproto rejects -> 1002; a binary message (the protocol is JSON text) -> 1002; a slow
client -> 1008 ``"slow consumer: ..."``; server shutdown -> 1001; a bug in the gateway -> 1011
(logged; that connection only). A peer that does not answer a ping within ``ping_timeout`` is
presumed gone and its TCP connection is closed. Anything wrong *inside* a well-formed text
message (malformed JSON, unknown op, unknown session, missing field, invalid params, a limit
reached) gets an ``error`` frame and the connection goes on.

Backpressure (the documented policy): each connection has one writer task that sends, in this
order, the replies waiting (``reply``, ``error``, ``opened``, ``resync_required``; at most
``max_pending_replies``, then the connection's ops are not read until some are sent, so a
flooding client is slowed by TCP), then what it follows besides sessions (the inbox's changes,
the governor's figures: each bounded, ``gateway_inbox.py``, ``gateway_governor.py``), then the
events of each attached session in turn. Ops are
read at most ``limits.ops_per_second`` per peer (bursts of ``ops_burst``; the budget is the
peer's, shared by its connections), so a flood costs the server a bounded share of its CPU. Replies
never wait behind events. Events wait in the fleet's per-subscription queue (at most
``client_queue`` events and ``limits.client_queue_bytes`` counted bytes; deltas merge when it
is full); when a session's events do not fit, the fleet drops the subscription and the client
is closed with 1008 and the fleet's reason at once: the writer may finish the frame it is
sending and the close frame follows within ``close_grace``, otherwise TCP is cut. A client
that never reads is therefore closed as soon as its queue overflows (or, when no events come,
when it misses a pong), and what it held is freed at the drop. Each event is encoded once per
session, not once per client (the frame text is cached beside the event in the fleet's
buffer), and the session never waits for a client.

Channels: each connection owns its reply queue and each attached session's
:class:`~claude_trio.actors.fanout.fleet.Subscription` (closed on detach, re-attach, or when the
connection ends; closing it detaches it from the session). The gateway runs one more task, its
governor watch, which reads the host's governor figures while a connection follows them.

Cancellation: cancelling ``serve_gateway`` closes every connection with 1001 (bounded by
``close_grace``, shielded) and ends every task it started. Sessions belong to the fleet, not to
a connection: a client that disconnects leaves its sessions running, to attach to again.

Error handling: a bad message is the client's problem and gets an ``error`` frame; a refused
``fleet.open`` (invalid params) too. A broken connection ends that connection only, and so
does an unexpected exception while serving one (logged, close 1011).
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import os
import resource
from collections import Counter
from collections.abc import Collection, Mapping
from functools import partial
from typing import NoReturn
from urllib.parse import parse_qs, urlsplit

import attrs
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketRequest

from claude_trio.actors.fanout._websocket_private import run_reader, server_connection, wait_request
from claude_trio.actors.fanout.gateway_connection import _Client
from claude_trio.actors.fanout.gateway_governor import GovernorWatch, host_governor
from claude_trio.actors.fanout.gateway_http import (
    PrefixedStream,
    load_console_files,
    route_request,
)
from claude_trio.actors.fanout.gateway_records import GOING_AWAY, INTERNAL_ERROR, _Config
from claude_trio.actors.fanout.hosts import ServedHost
from claude_trio.actors.fanout.owners import GatewayOwner
from claude_trio.actors.session.metrics import unwatch_gateway, watch_gateway
from claude_trio.protocol.checks import check_int, check_text
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.console import console_origins
from claude_trio.protocol.fanout.remote import (
    DEFAULT_PRINCIPAL,
    Admission,
    GatewayLimits,
    Principal,
    RemotePolicy,
    TokenBucket,
    check_token,
    connection_cap,
)

__all__ = ["GatewayLimits", "GatewayOwner", "Principal", "serve_gateway"]

log = logging.getLogger(__name__)

#: Errors of accept() that mean "out of descriptors or memory": shed and retry (as trio does).
_ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_SHED_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
    b"Connection: close\r\n\r\n"
)
#: How often a cause that keeps happening is summarised in the log.
NOTICE_INTERVAL = 60.0


class _Notices:
    """Log lines per cause: the first at once, the rest counted and summarised at most once
    per ``NOTICE_INTERVAL`` (a flood must not write a line per connection)."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._counts: Counter[str] = Counter()

    def seen(self, cause: str) -> bool:
        """True once ``cause`` was logged (its later occurrences are only counted)."""
        return cause in self._last

    def note(self, cause: str, detail: str = "", *, level: int = logging.WARNING) -> None:
        now = trio.current_time()
        last = self._last.get(cause)
        if last is None:
            self._last[cause] = now
            log.log(level, "gateway: %s%s", cause, f" ({detail})" if detail else "")
            return
        self._counts[cause] += 1
        if now - last >= NOTICE_INTERVAL:
            log.log(
                level,
                "gateway: %s: %d more in the last %.0f s",
                cause,
                self._counts.pop(cause),
                now - last,
            )
            self._last[cause] = now


@attrs.define(eq=False)
class _Server:
    config: _Config
    admission: Admission
    notices: _Notices = attrs.field(factory=_Notices)
    #: One op budget per peer, shared by its connections: a reconnect gets no fresh burst.
    #: A peer's budget is forgotten once it has no connection and has refilled (forgetting it
    #: then changes nothing), so this holds about as many entries as there are connections.
    buckets: dict[str, TokenBucket] = attrs.field(factory=dict)
    #: The web console's files (``console=True``), or None: no page is served.
    console_files: Mapping[str, bytes] | None = None
    #: The host's governor figures for the connections that follow them (``governor`` op).
    governor: GovernorWatch = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.governor = GovernorWatch(partial(host_governor, self.config.fleet))

    def bucket(self, host: str) -> TokenBucket:
        bucket = self.buckets.get(host)
        if bucket is None:
            now = trio.current_time()
            if len(self.buckets) > 2 * self.admission.connections + 64:
                for idle in [h for h, b in self.buckets.items() if self._forgettable(h, b, now)]:
                    del self.buckets[idle]
            limits = self.config.limits
            bucket = self.buckets[host] = TokenBucket(
                rate=limits.ops_per_second, burst=limits.ops_burst, now=now
            )
        return bucket

    def _forgettable(self, host: str, bucket: TokenBucket, now: float) -> bool:
        return self.admission.of(host) == (0, 0) and bucket.full(now)

    def closed(self, host: str, *, in_handshake: bool) -> None:
        self.admission.closed(host, in_handshake=in_handshake)
        bucket = self.buckets.get(host)
        if bucket is not None and self._forgettable(host, bucket, trio.current_time()):
            del self.buckets[host]


def _check_options(
    *,
    host: object,
    port: object,
    token: object,
    tokens: object,
    allowed_origins: object,
    max_message_size: object,
    client_queue: object,
    limits: object,
) -> None:
    check_text("host", host, allowed="an address or host name (a non-empty string)")
    check_int("port", port, 0, 65535, allowed="an int from 0 to 65535 (0: any free port)")
    if (token is None) == (tokens is None):
        raise InvalidParamsError(
            "token",
            "<hidden>",
            "exactly one of token= (one secret, one principal) and tokens= (a mapping of "
            "tokens to principals)",
        )
    if token is not None:
        check_token(token)
    if tokens is not None:
        if not isinstance(tokens, Mapping) or not tokens:
            raise InvalidParamsError(
                "tokens", "<hidden>", "a non-empty mapping of tokens to Principal objects"
            )
        for i, (secret, principal) in enumerate(tokens.items()):
            check_token(secret, f"tokens (entry {i + 1})")
            if not isinstance(principal, Principal):
                raise InvalidParamsError(
                    f"tokens (entry {i + 1})", principal, "a Principal(name=..., admin=...)"
                )
    if allowed_origins is not None:
        if isinstance(allowed_origins, str | bytes) or not isinstance(allowed_origins, Collection):
            raise InvalidParamsError(
                "allowed_origins", allowed_origins, "a collection of origins, or None"
            )
        for origin in allowed_origins:
            check_text("allowed_origins", origin, allowed="origins like 'https://app.example'")
    check_int(
        "max_message_size", max_message_size, 1, 64 * 2**20, allowed="an int from 1 to 64 MiB"
    )
    check_int("client_queue", client_queue, 1, 10**6, allowed="an int from 1 to 1,000,000")
    if not isinstance(limits, GatewayLimits):
        raise InvalidParamsError("limits", limits, "a GatewayLimits or None")


async def serve_gateway(
    fleet: ServedHost,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    tokens: Mapping[str, Principal] | None = None,
    allowed_origins: Collection[str] | None,
    max_message_size: int = 64 * 1024,
    client_queue: int = 1000,
    remote_tools: str = "read-only",
    cwd_root: str | None = None,
    allow_cwd: bool = False,
    allow_env: bool = False,
    limits: GatewayLimits | None = None,
    console: bool = False,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """Serve ``fleet`` over websockets on ``host:port`` until cancelled.

    ``fleet``: the session host it serves (a :class:`~claude_trio.actors.fanout.hosts.ServedHost`:
    the ``Fleet`` of an ``open_fleet`` block, or a cluster's ``RedisFleet``).

    ``task_status.started(port)`` gives the bound port (useful with ``port=0``) once the
    socket listens. ``token``: one secret of 16 to 4096 visible ASCII characters, whose
    holders are all one principal; or ``tokens``: each token with the :class:`Principal` it
    names (a session belongs to the principal that opened it; others are told it does not
    exist, except admins, who may list and attach to every session). ``remote_tools``:
    ``"read-only"`` (the default: remote sessions run in plan mode) or ``"all"``.
    ``cwd_root``: the absolute path of the folder remote sessions run in; ``allow_cwd``
    lets clients pick a folder below it (``params.cwd``), ``allow_env`` lets them set the
    CLI's environment (both off by default). ``limits``: every other bound
    (:class:`~claude_trio.protocol.fanout.remote.GatewayLimits`). Every option is checked here, by
    type: ``allow_cwd="false"`` is an error, not ``True``. ``console``: also answer plain
    HTTP ``GET`` requests on the same port with the web console's pages
    (``protocol/fanout/console.py``); its own origin (``http://host:port``) is then allowed
    too. See the module docstring.
    """
    limits = GatewayLimits() if limits is None else limits
    _check_options(
        host=host,
        port=port,
        token=token,
        tokens=tokens,
        allowed_origins=allowed_origins,
        max_message_size=max_message_size,
        client_queue=client_queue,
        limits=limits,
    )
    if not isinstance(fleet, ServedHost):
        raise InvalidParamsError(
            "fleet",
            fleet,
            "a session host a gateway can serve (actors/fanout/hosts.py, ServedHost): the Fleet of "
            "an open_fleet block, or an open_redis_fleet's RedisFleet",
        )
    policy = RemotePolicy(
        tools=remote_tools,  # type: ignore[arg-type]  # checked by RemotePolicy
        cwd_root=cwd_root,
        allow_cwd=allow_cwd,
        allow_env=allow_env,
    )
    if cwd_root is not None and not await trio.Path(cwd_root).is_dir():
        raise InvalidParamsError("cwd_root", cwd_root, "an existing directory")
    table = {token: DEFAULT_PRINCIPAL} if token is not None else dict(tokens or {})
    config = _Config(
        fleet=fleet,
        tokens=tuple((secret.encode(), principal) for secret, principal in table.items()),
        allowed_origins=None if allowed_origins is None else frozenset(allowed_origins),
        max_message_size=max_message_size,
        client_queue=client_queue,
        policy=policy,
        limits=limits,
    )
    if not isinstance(console, bool):
        raise InvalidParamsError("console", console, "True or False")
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = connection_cap(limits, None if soft == resource.RLIM_INFINITY else soft)
    if cap < limits.max_connections:
        log.warning(
            "gateway: at most %d connections (the descriptor limit is %d, %d kept in reserve)",
            cap,
            soft,
            limits.fd_reserve,
        )
    server = _Server(
        config=config,
        admission=Admission(
            max_connections=cap,
            max_connections_per_peer=limits.max_connections_per_peer,
            max_handshakes=limits.max_handshakes,
            max_handshakes_per_peer=limits.max_handshakes_per_peer,
        ),
    )
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    if console:
        server.console_files = load_console_files()
        if config.allowed_origins is not None:
            server.config = attrs.evolve(
                config, allowed_origins=config.allowed_origins | console_origins(host, bound)
            )
    watch_gateway(server.admission)  # its connections in the metrics, while it serves
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.governor.run)
            for listener in listeners:
                nursery.start_soon(_accept_loop, server, listener, nursery)
            log.info("gateway listening on %s:%d", host, bound)
            task_status.started(bound)
            await trio.sleep_forever()
    finally:
        unwatch_gateway(server.admission)
    raise AssertionError("unreachable: sleep_forever returned")  # pragma: no cover


async def _accept_loop(
    server: _Server, listener: trio.SocketListener, nursery: trio.Nursery
) -> None:
    """Accept connections, shedding those over a cap at once (our ``serve_listeners``: it
    lets us refuse before any task or buffer exists, and log per cause, not per socket)."""
    try:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                    raise
                server.notices.note(
                    "accept failed: out of descriptors or memory, retrying in 0.1 s",
                    os.strerror(exc.errno),
                    level=logging.ERROR,
                )
                await trio.sleep(0.1)
                continue
            host = _peer_host(stream)
            cause = server.admission.admit(host)
            if cause is not None:
                server.notices.note(f"shedding connections over the cap of {cause}", host)
                await _shed(stream)
                continue
            nursery.start_soon(_serve_connection, server, stream, host)
    finally:
        with trio.CancelScope(shield=True):
            await listener.aclose()


async def _shed(stream: trio.SocketStream) -> None:
    # A fresh socket's send buffer is empty, so this never waits in practice; bounded anyway.
    with trio.move_on_after(0.05), contextlib.suppress(trio.BrokenResourceError):
        await stream.send_all(_SHED_RESPONSE)
    await stream.aclose()


def _peer_host(stream: trio.SocketStream) -> str:
    try:
        return str(stream.socket.getpeername()[0])
    except OSError:
        return "<unknown peer>"


def _peer(stream: trio.SocketStream | PrefixedStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "<unknown peer>"
    return f"{host}:{port}"


async def _serve_connection(server: _Server, stream: trio.SocketStream, host: str) -> None:
    """One TCP connection: a console page request answered at once, or the websocket."""
    files = server.console_files
    if files is None:
        await _serve_stream(server, stream, host)
        return
    deadline = trio.current_time() + server.config.limits.handshake_timeout
    try:
        routed = await route_request(stream, files, deadline)
    except BaseException:
        server.closed(host, in_handshake=True)
        with trio.CancelScope(shield=True):
            await stream.aclose()
        raise
    if routed is None:
        server.closed(host, in_handshake=True)
        with trio.CancelScope(shield=True):
            await stream.aclose()
        return
    await _serve_stream(server, routed, host, deadline=deadline)


async def _serve_stream(
    server: _Server,
    stream: trio.SocketStream | PrefixedStream,
    host: str,
    *,
    deadline: float | None = None,
) -> None:
    """One TCP connection: the handshake, the policy checks, then the client."""
    config = server.config
    peer = _peer(stream)
    flooding = trio.Event()
    connection = server_connection(
        stream, max_message_size=config.max_message_size, on_flood=flooding.set
    )
    in_handshake = True
    code, reason = GOING_AWAY, "server shutting down"
    try:
        async with trio.open_nursery() as nursery:
            reader_done = trio.Event()
            # Shielded: on shutdown the reader must still read the client's answer to our
            # close frame (the closing handshake below); it is cancelled right after that.
            reader_scope = trio.CancelScope(shield=True)

            async def read() -> None:
                try:
                    with reader_scope:
                        await run_reader(connection)
                finally:
                    reader_done.set()

            nursery.start_soon(read)

            async def cut_a_flood() -> None:
                await flooding.wait()
                server.notices.note("cutting clients that flood while being closed", peer)
                await stream.aclose()

            nursery.start_soon(cut_a_flood)
            accepted = False
            try:
                request = await _handshake(server, connection, reader_done, peer, deadline)
                server.admission.handshake_done(host)
                in_handshake = False
                who = None if request is None else _authenticate(config, request)
                if isinstance(who, tuple):
                    assert request is not None
                    await _refuse(server, request, who, peer)
                elif request is not None:
                    assert who is not None
                    ws = await request.accept()
                    accepted = True
                    log.debug(
                        "gateway: %s connected as %s",
                        peer,
                        who.name,
                        extra={"event": "connected", "peer": peer, "principal": who.name},
                    )
                    await _Client(server, ws, stream, peer, host, who).run()
            except Exception as exc:
                # A bug met by one connection must not end the server and its other clients.
                # Logged with its traceback once per exception type, then counted.
                if not server.notices.seen(f"error {type(exc).__name__}"):
                    log.exception("gateway: the connection of %s failed", peer)
                server.notices.note(f"error {type(exc).__name__}", peer, level=logging.ERROR)
                code, reason = INTERNAL_ERROR, "internal error"
            finally:
                # Only an accepted websocket has a closing handshake; a refused or unfinished
                # one just loses its TCP connection (below).
                if accepted:
                    with trio.move_on_after(config.limits.close_grace, shield=True):
                        await connection.aclose(code, reason)
                reader_scope.cancel()
                nursery.cancel_scope.cancel()
    finally:
        server.closed(host, in_handshake=in_handshake)
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def _handshake(
    server: _Server,
    connection: WebSocketConnection,
    reader_done: trio.Event,
    peer: str,
    deadline: float | None,
) -> WebSocketRequest | None:
    """The upgrade request, or None when the client did not send one in time (or the reader
    gave up on it: a malformed or oversize request, answered 400 by wsproto)."""
    request: WebSocketRequest | None = None
    if deadline is None:
        deadline = trio.current_time() + server.config.limits.handshake_timeout
    with trio.move_on_at(deadline) as timer:
        async with trio.open_nursery() as race:

            async def get() -> None:
                nonlocal request
                request = await wait_request(connection)
                race.cancel_scope.cancel()

            async def give_up() -> None:
                await reader_done.wait()
                race.cancel_scope.cancel()

            race.start_soon(get)
            race.start_soon(give_up)
    if request is None:
        if timer.cancelled_caught:
            server.notices.note("handshakes not completed in time", peer, level=logging.INFO)
        else:
            server.notices.note("malformed handshakes", peer, level=logging.INFO)
    return request


async def _refuse(
    server: _Server, request: WebSocketRequest, refusal: tuple[int, str], peer: str
) -> None:
    await trio.lowlevel.checkpoint()
    status, why = refusal
    server.notices.note(f"refused handshakes: HTTP {status}, {why}", peer, level=logging.INFO)
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    with contextlib.suppress(ConnectionClosed):  # the client may go before it has the answer
        await request.reject(status, extra_headers=headers, body=why.encode() + b"\n")


def _authenticate(config: _Config, request: WebSocketRequest) -> Principal | tuple[int, str]:
    """The principal the request's token names, or ``(HTTP status, why)`` if the handshake
    must be refused. Never echoes the token: the reason names only what was wrong."""
    headers: dict[str, list[str]] = {}
    for name, value in request.headers:
        headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    for unique in ("authorization", "origin"):
        if len(headers.get(unique, ())) > 1:
            return 400, f"bad request: more than one {unique.title()} header"
    authorization = headers.get("authorization")
    if authorization is not None:
        scheme, _, presented = authorization[0].strip().partition(" ")
        if scheme.lower() != "bearer":
            return 401, "unauthorized: the Authorization header must be 'Bearer <token>'"
        principal = _principal_of(presented.strip(), config)
    else:
        tokens = parse_qs(urlsplit(request.path).query).get("token")
        if not tokens:
            return 401, "unauthorized: send 'Authorization: Bearer <token>' (or ?token=)"
        if len(tokens) > 1:
            return 400, "bad request: more than one token parameter"
        principal = _principal_of(tokens[0], config)
    if principal is None:
        return 401, "unauthorized: wrong token"
    origins = headers.get("origin")
    if (
        config.allowed_origins is not None
        and origins is not None
        and origins[0] not in config.allowed_origins
    ):
        return 403, "forbidden: this Origin is not allowed"
    return principal


def _principal_of(presented: str, config: _Config) -> Principal | None:
    """The principal of the presented token. Every token is compared, in constant time each,
    so the time taken does not say which token (or which prefix) came close."""
    given = presented.encode()
    found = None
    for secret, principal in config.tokens:
        if hmac.compare_digest(given, secret):
            found = principal
    return found
