"""What a remote client may make a session do, and how many connections a server admits
(pure: no trio, no I/O; the gateway resolves paths and counts sockets, this module decides).

Rules:

1. **The operator's policy wins.** A :class:`RemotePolicy` is set when the server starts and no
   op can change it: :func:`remote_params` rewrites what a client asked for.
2. **Tools.** ``tools="read-only"`` (the default) forces ``plan_mode=True`` on every remote
   session: the CLI is given only the read-only built-in tools (``tools.READONLY_BUILTINS``:
   reading, searching, the todo tools, ToolSearch, AskUserQuestion) and refuses the mutating
   ones (``tools.MUTATING_BUILTINS``: Bash, Monitor, Edit, Write, EnterWorktree, Task,
   SendMessage, ...); skills' shell execution is turned off too. A client's ``tools`` list
   can only narrow that one. MCP servers never come from a client. ``tools="all"`` is the
   operator's explicit opt-in to everything the CLI does under ``bypassPermissions`` (run
   commands, write files) as the server's user.
   A client may choose a ``permission_mode`` that asks or denies (``default``, ``plan``,
   ``dontAsk``): it decides which of the offered tools ask first (the client answers with the
   ``answer`` op), never which tools are offered (``plan_mode`` is forced whatever the mode).
   A mode that runs tools without asking (:data:`WRITING_MODES`) is refused at ``open`` and
   ``continue`` as it is for a switch (rule 8), for the session and for each of its
   subagents; unset, the session runs as every local one does. Settings files are not loaded
   (``setting_sources=()``, and a client may not name any): their hooks, ``statusLine`` and
   ``apiKeyHelper`` run commands whatever the tool list says. No MCP server of the server's
   configuration starts either (``strict_mcp_config=True``: none of the folder's
   ``.mcp.json``, the user's or plugins'): a server's tools are not read-only tools.
3. **Working directory.** With ``cwd_root`` set, every remote session runs in that folder or,
   when ``allow_cwd`` is on, in a folder below it that the client names relative to it (an
   absolute path must lie inside it too). The client's path is resolved by the gateway
   (symlinks included) and must stay inside the resolved root and be a directory; errors
   quote only what the client sent, never a server path. ``allow_cwd`` needs ``cwd_root``.
   This confines the *working directory*, which is what the read-only tools and relative
   paths start from; it is not a sandbox: Read and Grep can still read any absolute path the
   server's user can read. A client that wants that confinement asks for a path scope
   (``protocol/extensions/scope.py``): with ``cwd_root`` set, its ``allowed_paths`` and
   ``read_only_paths`` must lie inside the root too (resolved by the gateway, symlinks
   included; refused otherwise), and its ``disallowed_paths`` may name anything (they only
   narrow).
4. **Environment.** ``allow_env`` lets clients set ``custom_env`` / ``ollama_baseUrl`` (off by
   default; rule 3 of ``wire.py``).
5. **Errors that reach a remote client name a field, never a server path.** :func:`remote_event`
   replaces the message of an ``error`` event with code ``cli_not_found`` or ``internal`` (they
   name the CLI's path, an exception's repr) by a plain one, and cuts the CLI's stderr lines
   off a ``cli_exited`` message; the events as the fleet keeps them are unchanged.
   ``wire_frames.remote_event_frame`` is the text message that carries an event to a remote
   client, with this rule applied (also to an event a cluster's stream holds as JSON text).
6. **Admission.** :class:`Admission` counts connections and handshakes in progress, in total and
   per peer, and says which cap a new connection would exceed (it is then shed at once).
7. **Principals.** Each token names a :class:`Principal`. A session belongs to the principal
   that opened it: another principal is told the session does not exist (the same answer as
   for an id nobody knows, so ids do not leak), unless it is an ``admin``, which may list and
   attach to every session. :func:`check_token` is the one rule for what a token may be.
8. **Live controls.** A remote client may switch a running session's model and permission mode
   (ops ``set_model``, ``set_permission_mode``), which change no code or file on the server.
   Under ``tools="read-only"`` a session can never be switched to a mode that runs tools
   without asking (:data:`WRITING_MODES`: ``acceptEdits``, ``bypassPermissions``, ``auto``):
   :func:`permission_mode_refusal` says why, for ``open`` (:func:`open_refusal`) and
   ``continue`` as for a switch. Plan mode's tool list (rule 2) already keeps the writing
   tools away whatever the mode; the refusal is a second wall, so that no client choice
   depends on the first one alone.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from typing import Any, Literal, TypeAlias

import attrs

from claude_trio.protocol.checks import check_bool, check_number, positive_int, seconds
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PERMISSION_MODES
from claude_trio.protocol.config.tools import READONLY_BUILTINS
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.session.events import Error, Event

RemoteTools: TypeAlias = Literal["read-only", "all"]

_STDERR_MARK = "; last stderr lines:"


def _check_tools(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("read-only", "all"):
        raise InvalidParamsError(attribute.name, value, "'read-only' or 'all'")


def _check_flag(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_bool(attribute.name, value, allowed="True or False (a bool, not a string)")


def _check_root(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not (isinstance(value, str) and value.startswith("/") and "\x00" not in value):
        raise InvalidParamsError(attribute.name, value, "an absolute path or None")


@attrs.frozen(kw_only=True)
class RemotePolicy:
    """What remote clients may do (rules 1-4). The secure default: read-only tools, the
    server's own working directory, no environment, no ``cwd``."""

    tools: RemoteTools = attrs.field(default="read-only", validator=_check_tools)
    cwd_root: str | None = attrs.field(default=None, validator=_check_root)
    allow_cwd: bool = attrs.field(default=False, validator=_check_flag)
    allow_env: bool = attrs.field(default=False, validator=_check_flag)

    def __attrs_post_init__(self) -> None:
        if self.allow_cwd and self.cwd_root is None:
            raise InvalidParamsError(
                "allow_cwd",
                True,
                "needs cwd_root: the folder that remote sessions' working directories must "
                "stay inside",
            )


def cwd_candidate(root: str, requested: str | None) -> str:
    """The path to resolve for a session's working directory (rule 3): ``root`` itself, or
    ``requested`` taken relative to it."""
    if requested is None:
        return root
    return posixpath.join(root, requested)


def is_inside(path: str, root: str) -> bool:
    """True when resolved ``path`` is ``root`` or below it (both resolved, absolute)."""
    path = posixpath.normpath(path)
    root = posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def open_refusal(params: ExecuteParams, policy: RemotePolicy) -> str | None:
    """Why the policy refuses what a client asked for in ``open`` (rules 2 and 8), or
    ``None``. What the policy merely rewrites is :func:`remote_params`' job."""
    if policy.tools != "read-only":
        return None
    if params.permission_mode is not None:
        refusal = permission_mode_refusal(policy, params.permission_mode)
        if refusal is not None:
            return "params.permission_mode" + refusal.removeprefix("set_permission_mode")
    for name, definition in params.subagents.items():
        mode = definition.permission_mode
        refusal = permission_mode_refusal(policy, mode) if mode is not None else None
        if refusal is not None:
            field = f"params.subagents[{name!r}].permission_mode"
            return field + refusal.removeprefix("set_permission_mode")
    if params.setting_sources:
        return (
            "params.setting_sources: this server's remote sessions are read-only and load no "
            "settings files (their hooks and helpers run commands); leave it unset"
        )
    return None


def remote_params(params: ExecuteParams, policy: RemotePolicy, cwd: str | None) -> ExecuteParams:
    """``params`` as the policy lets them run (rules 1-3); ``cwd`` is the resolved folder."""
    if policy.tools == "read-only":
        config = params.architecture_config
        if config.claude_disable_skill_shell_execution is not True:
            config = attrs.evolve(config, claude_disable_skill_shell_execution=True)
        # Subagents get the read-only tools too, whatever their definition asks for.
        subagents = {
            name: attrs.evolve(
                definition,
                tools=tuple(
                    tool for tool in definition.tools or READONLY_BUILTINS
                    if tool in READONLY_BUILTINS
                ),
            )
            for name, definition in params.subagents.items()
        }
        params = attrs.evolve(
            params,
            plan_mode=True,
            architecture_config=config,
            subagents=subagents,
            setting_sources=(),
            strict_mcp_config=True,
        )
    if cwd is not None or params.cwd is not None:
        params = attrs.evolve(params, cwd=cwd)
    return params


WRITING_MODES: frozenset[str] = frozenset({"acceptEdits", "bypassPermissions", "auto"})
"""Permission modes that let the CLI run tools (edits, commands) without asking (rule 8)."""


def permission_mode_refusal(policy: RemotePolicy, mode: str) -> str | None:
    """Why a remote client may not switch a session to ``mode`` (rule 8), or ``None``."""
    if policy.tools == "read-only" and mode in WRITING_MODES:
        allowed = ", ".join(m for m in PERMISSION_MODES if m not in WRITING_MODES)
        return (
            f"set_permission_mode: {mode!r} lets the CLI run tools without asking, and this "
            f"server's remote sessions are read-only; allowed: {allowed}"
        )
    return None


def remote_event(event: Event) -> Event:
    """``event`` as a remote client may see it (rule 5)."""
    if not isinstance(event, Error):
        return event
    if event.code in ("cli_not_found", "internal"):
        return attrs.evolve(
            event,
            message=(
                "the server could not start or run this session's CLI (a server-side "
                "problem; the operator can see the details)"
                if event.code == "cli_not_found"
                else "the server failed while running this session (a server-side problem; "
                "the operator can see the details)"
            ),
            detail=None,
        )
    if event.code == "cli_exited" and _STDERR_MARK in event.message:
        cut = event.message.split(_STDERR_MARK, 1)[0]
        return attrs.evolve(event, message=cut + " (its stderr is kept on the server)")
    return event


TOKEN_MIN_CHARS = 16
TOKEN_MAX_CHARS = 4096


def check_token(token: object, where: str = "token") -> str:
    """``token`` if it is 16 to 4096 visible ASCII characters; else ``InvalidParamsError``
    naming ``where`` (never the token itself: errors and logs must not carry it)."""
    if not isinstance(token, str):
        raise InvalidParamsError(where, "<hidden>", "a string")
    if not TOKEN_MIN_CHARS <= len(token) <= TOKEN_MAX_CHARS or not all(
        "\x21" <= c <= "\x7e" for c in token
    ):
        raise InvalidParamsError(
            where,
            "<hidden>",
            f"{TOKEN_MIN_CHARS} to {TOKEN_MAX_CHARS} visible ASCII characters, no spaces (got "
            f"{len(token)} characters); for example secrets.token_urlsafe(32)",
        )
    return token


def _check_principal_name(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not (
        isinstance(value, str)
        and 0 < len(value) <= 256
        and value.isprintable()
        and value.strip() == value
    ):
        raise InvalidParamsError(
            attribute.name, value, "a name of 1 to 256 printable characters, no outer spaces"
        )


@attrs.frozen(kw_only=True)
class Principal:
    """Who a token speaks for (rule 7): ``name`` owns the sessions it opens; an ``admin`` may
    list and attach to every session."""

    name: str = attrs.field(validator=_check_principal_name)
    admin: bool = attrs.field(default=False, validator=_check_flag)

    def may_see(self, owner: str | None) -> bool:
        """Whether a session opened by principal ``owner`` (None: not through a gateway)
        exists for this principal."""
        return self.admin or owner == self.name


DEFAULT_PRINCIPAL = Principal(name="default", admin=True)
"""The principal of a gateway's single ``token``: whoever has the one secret may see every
session of the fleet (including those its operator started), as there is no one to keep
them from."""


ShedCause: TypeAlias = Literal[
    "connections", "connections per peer", "handshakes", "handshakes per peer"
]


class Admission:
    """Connection and handshake counts against their caps (rule 6)."""

    def __init__(
        self,
        *,
        max_connections: int,
        max_connections_per_peer: int,
        max_handshakes: int,
        max_handshakes_per_peer: int,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_peer = max_connections_per_peer
        self.max_handshakes = max_handshakes
        self.max_handshakes_per_peer = max_handshakes_per_peer
        self._connections: Counter[str] = Counter()
        self._handshakes: Counter[str] = Counter()
        self.connections = 0
        self.handshakes = 0

    def admit(self, peer: str) -> ShedCause | None:
        """Count a new connection from ``peer`` (in its handshake), or say which cap it
        would exceed (then nothing is counted)."""
        if self.connections >= self.max_connections:
            return "connections"
        if self._connections[peer] >= self.max_connections_per_peer:
            return "connections per peer"
        if self.handshakes >= self.max_handshakes:
            return "handshakes"
        if self._handshakes[peer] >= self.max_handshakes_per_peer:
            return "handshakes per peer"
        self.connections += 1
        self._connections[peer] += 1
        self.handshakes += 1
        self._handshakes[peer] += 1
        return None

    def handshake_done(self, peer: str) -> None:
        self.handshakes -= 1
        _decrement(self._handshakes, peer)

    def closed(self, peer: str, *, in_handshake: bool) -> None:
        if in_handshake:
            self.handshake_done(peer)
        self.connections -= 1
        _decrement(self._connections, peer)

    def of(self, peer: str) -> tuple[int, int]:
        """``(connections, handshakes)`` of ``peer``."""
        return self._connections[peer], self._handshakes[peer]


def _decrement(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]




def _rate(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_number(
        attribute.name, value, above=0, maximum=1e9, allowed="a number of operations per second > 0"
    )


@attrs.frozen(kw_only=True)
class GatewayLimits:
    """Every bound of a gateway the operator may set (all checked: positive ints, seconds).

    Connections (rule 6): ``max_connections`` in total (lowered to leave ``fd_reserve``
    descriptors of the process's limit free, so the server sheds before ``accept`` fails) and
    ``max_connections_per_peer``; handshakes in progress, ``max_handshakes`` and
    ``max_handshakes_per_peer``, each given ``handshake_timeout`` seconds. A connection over a
    cap is answered ``503`` and closed at once.

    Liveness: a ping every ``ping_interval`` seconds; no pong within ``ping_timeout`` -> the
    connection is cut. ``close_grace``: how long a closing connection may take to finish the
    frame it is sending and its closing handshake.

    Per client (a peer address; "principal" once tokens name principals): at most
    ``client_queue_bytes`` counted bytes of events waiting per attached session (with
    ``client_queue`` events, the slow-client bound), ``max_pending_replies`` replies waiting
    (then its ops are not read until they are sent), ``max_sessions_per_client`` sessions not
    ended and ``max_waiting_per_client`` of them waiting for a slot, and
    ``max_attached_per_client`` sessions followed by one connection (so a client holds at most
    that many times ``client_queue_bytes``). In total: ``max_sessions`` sessions not ended in
    the fleet. A peer's ops (all its connections together) are read at most
    ``ops_per_second`` on average, in bursts of ``ops_burst`` (:class:`TokenBucket`): a
    flooding client is slowed by TCP, not answered faster than that, so it cannot take the
    server's CPU from the others.
    """

    max_connections: int = attrs.field(default=512, validator=positive_int)
    max_connections_per_peer: int = attrs.field(default=64, validator=positive_int)
    max_handshakes: int = attrs.field(default=256, validator=positive_int)
    max_handshakes_per_peer: int = attrs.field(default=16, validator=positive_int)
    fd_reserve: int = attrs.field(default=64, validator=positive_int)
    handshake_timeout: float = attrs.field(default=10.0, validator=seconds)
    ping_interval: float = attrs.field(default=20.0, validator=seconds)
    ping_timeout: float = attrs.field(default=20.0, validator=seconds)
    close_grace: float = attrs.field(default=5.0, validator=seconds)
    client_queue_bytes: int = attrs.field(default=8 * 2**20, validator=positive_int)
    max_pending_replies: int = attrs.field(default=64, validator=positive_int)
    max_sessions: int = attrs.field(default=256, validator=positive_int)
    max_sessions_per_client: int = attrs.field(default=16, validator=positive_int)
    max_waiting_per_client: int = attrs.field(default=8, validator=positive_int)
    max_attached_per_client: int = attrs.field(default=32, validator=positive_int)
    ops_per_second: float = attrs.field(default=50.0, validator=_rate)
    ops_burst: int = attrs.field(default=100, validator=positive_int)


def connection_cap(limits: GatewayLimits, descriptor_limit: int | None) -> int:
    """The total connection cap: ``max_connections``, lowered below the process's descriptor
    limit by ``fd_reserve`` (sessions' pipes, the listeners, logs), at least 1."""
    if descriptor_limit is None or descriptor_limit <= 0:
        return limits.max_connections
    return max(1, min(limits.max_connections, descriptor_limit - limits.fd_reserve))


class TokenBucket:
    """At most ``rate`` operations per second on average, ``burst`` at once (rule 6's CPU
    counterpart). ``take(now)`` spends a token and says how long to wait before using it."""

    def __init__(self, *, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._last = now

    def full(self, now: float) -> bool:
        """True when the bucket would be full at ``now`` (forgetting it then changes nothing)."""
        return self._tokens + (now - self._last) * self.rate >= self.burst

    def _refill(self, now: float) -> None:
        if now > self._last:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now

    def take(self, now: float) -> float:
        """Seconds to wait before the next operation (0.0 when a token is there)."""
        self._refill(now)
        self._tokens -= 1
        if self._tokens >= -1e-9:  # float dust from the refill is not worth a sleep
            return 0.0
        return -self._tokens / self.rate

    def ready_at(self, now: float) -> float:
        """When a token is there (``now`` if it is); spends nothing."""
        self._refill(now)
        missing = 1.0 - self._tokens
        return now if missing <= 1e-9 else now + missing / self.rate

    def empty(self, now: float) -> None:
        """Spend every token: the bucket refills from ``now``."""
        self._refill(now)
        self._tokens = 0.0
