"""What a gateway connection holds and uses: the gateway's checked settings, what it asks of
the listener that accepted it, one followed session, its ``hello`` answer, the close codes it sends
(``actors/fanout/gateway_connection.py`` is the connection itself)."""

from __future__ import annotations

import importlib.metadata
import logging
from typing import Protocol

import attrs

from claude_trio.actors.fanout.fleet_figures import HostDescription
from claude_trio.actors.fanout.gateway_governor import GovernorWatch
from claude_trio.actors.fanout.hosts import ServedHost, ServedSession
from claude_trio.actors.fanout.subscription import Subscription
from claude_trio.protocol.config.capabilities import architecture_capabilities
from claude_trio.protocol.fanout.codec import to_json_safe
from claude_trio.protocol.fanout.remote import GatewayLimits, Principal, RemotePolicy, TokenBucket
from claude_trio.protocol.fanout.wire import OP_NAMES, PROTOCOL_VERSION, HelloFrame

__all__ = [
    "GOING_AWAY",
    "INTERNAL_ERROR",
    "POLICY_VIOLATION",
    "PROTOCOL_ERROR",
    "TURN_FRAMES",
    "WRITE_CHARS",
    "WRITE_FRAMES",
    "hello_frame",
]

# RFC 6455 7.4.1 close codes we send.
GOING_AWAY = 1001
PROTOCOL_ERROR = 1002
POLICY_VIOLATION = 1008
INTERNAL_ERROR = 1011

# The writer sends the frames ready at once in one write to the socket, up to these bounds.
WRITE_FRAMES = 256
WRITE_CHARS = 256 * 1024
# A client attached to several sessions gets up to this many events of one in a row before the
# next session's turn.
TURN_FRAMES = 32


@attrs.frozen(kw_only=True, repr=False)  # no repr: it holds the tokens
class _Config:
    """The gateway's settings, checked by ``serve_gateway``."""

    fleet: ServedHost
    #: Every token (UTF-8) with the principal it names.
    tokens: tuple[tuple[bytes, Principal], ...]
    allowed_origins: frozenset[str] | None
    max_message_size: int
    client_queue: int
    policy: RemotePolicy
    limits: GatewayLimits


class _Notes(Protocol):
    """Where a connection logs what may repeat (the listener's: once per cause, then counted)."""

    def note(self, cause: str, detail: str = "", *, level: int = logging.WARNING) -> None: ...


class _Listener(Protocol):
    """What a connection uses of the listener that accepted it (``gateway._Server``)."""

    @property
    def config(self) -> _Config: ...

    @property
    def notices(self) -> _Notes: ...

    @property
    def governor(self) -> GovernorWatch:
        """The host's governor figures, for the connections that follow them."""
        ...

    def bucket(self, host: str) -> TokenBucket:
        """The op budget of peer ``host`` (shared by its connections)."""
        ...


@attrs.define(eq=False)
class _Attached:
    """One session this client follows: its subscription and its place in the writer's turn."""

    session_id: str
    #: The session followed (the handle it was attached through, read again when its
    #: execution ends: a continued one is followed on).
    session: ServedSession
    subscription: Subscription
    ready: bool = False  # in the client's ready queue
    #: The seq of the last event sent (a continued session is re-subscribed from it).
    last_sent: int = 0


def hello_frame(
    op_id: str, host: HostDescription, config: _Config, principal: Principal
) -> HelloFrame:
    """The answer to ``hello``: who the server is, what it allows ``principal``, its bounds,
    and what ``host`` says of itself (its cluster, its governor's figures)."""
    limits: dict[str, object] = {
        "max_message_size": config.max_message_size,
        "client_queue": config.client_queue,
        **host.limits,
        **attrs.asdict(config.limits),
    }
    policy = config.policy
    return HelloFrame(
        id=op_id,
        server=f"claude-trio {_version()}",
        protocol=PROTOCOL_VERSION,
        principal=principal.name,
        admin=principal.admin,
        ops=OP_NAMES,
        capabilities=to_json_safe(architecture_capabilities()),
        limits=limits,
        policy={
            "remote_tools": policy.tools,
            "cwd_root_set": policy.cwd_root is not None,
            "allow_cwd": policy.allow_cwd,
            "allow_env": policy.allow_env,
        },
        cluster=None if host.cluster is None else dict(host.cluster),
        governor=host.governor,
    )


def _version() -> str:
    try:
        return importlib.metadata.version("claude-trio")
    except importlib.metadata.PackageNotFoundError:  # a source tree, not installed
        return "unknown"
