"""``claude-trio serve``: a fleet behind a websocket gateway, in one command.

::

    claude-trio serve --offline                     # try it: no API key, no network
    claude-trio serve --host 0.0.0.0 --tokens tokens.json --max-live 8

The token: ``CLAUDE_TRIO_TOKEN`` when set; otherwise one is generated and printed once (so
the one who started the server can give it to a client). A generated token is only accepted
on a loopback address: listening anywhere else needs a token chosen on purpose
(``CLAUDE_TRIO_TOKEN`` or ``--tokens``). ``--tokens FILE`` names principals, a JSON list::

    [{"principal": "alice", "token": "..."},
     {"principal": "ops", "token": "...", "admin": true}]

A session belongs to the principal that opened it; other principals are told it does not
exist; an admin may list and attach to every session.

``--offline`` runs every session against the built-in offline model
(:mod:`claude_trio.offline`). Browsers are refused unless ``--allow-origin`` names their
origin. Log lines go to stderr, plain or one JSON object per line (``--log-json``); none
carries a token, a prompt or a path.

Stopping: the first Ctrl-C (or SIGTERM) drains the fleet - no new session or continuation,
the running executions get ``--drain-grace`` seconds to finish, then the rest are aborted -
and the server exits 0; a second one cancels everything at once (every CLI is still stopped).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import ipaddress
import json
import logging
import os
import secrets
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.actors.fanout.gateway import serve_gateway
from claude_trio.actors.fanout.hosts import ServedHost
from claude_trio.actors.heap import freeze_startup_heap
from claude_trio.actors.session.boundary import open_block_nursery, raise_unwrapped
from claude_trio.cli.args import (
    EXIT_OK,
    EXIT_SESSION_ERROR,
    EXIT_USAGE,
    NO_CREDENTIALS_MESSAGE,
    has_credentials,
)
from claude_trio.cli.logs import configure_logging
from claude_trio.cli.number_args import governor_config
from claude_trio.protocol.errors import InvalidParamsError, ServeUsageError
from claude_trio.protocol.fanout.governor import GovernorConfig
from claude_trio.protocol.fanout.remote import Principal, check_token

log = logging.getLogger(__name__)

TOKEN_ENV = "CLAUDE_TRIO_TOKEN"
"""The environment variable holding the gateway token (``serve``, and clients: ``run
--remote``, ``batch --remote``)."""


@attrs.frozen(kw_only=True, repr=False)  # no repr: it holds the tokens
class ServeConfig:
    host: str
    port: int
    token: str | None
    tokens: Mapping[str, Principal] | None
    token_generated: bool
    max_live: int
    replay_buffer: int
    allow_cwd: bool
    allow_env: bool
    cwd_root: str
    allowed_origins: frozenset[str]
    offline: bool
    drain_grace: float
    redis: str | None = None
    command_timeout: float = 10.0
    idempotency_ttl: float = 24 * 3600.0
    #: The fleet's governor (None: off); ``serve --redis`` runs no fleet: its ``hello``
    #: shows the governor its workers share (``worker``'s options set it).
    governor: GovernorConfig | None = None
    #: ``--remote-tools``: ``read-only`` (the default) or ``all`` (``RemotePolicy.tools``).
    remote_tools: str = "read-only"
    #: ``--console``: the web console on the gateway's port (default: on for loopback).
    console: bool = False


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def read_tokens(path: str) -> dict[str, Principal]:
    """The tokens file (see the module docstring); ``ServeUsageError`` naming the entry and
    the problem, never a token."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ServeUsageError(f"--tokens {path}: not UTF-8 JSON text") from None
    except OSError as exc:
        raise ServeUsageError(f"--tokens {path}: cannot read it ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ServeUsageError(f"--tokens {path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, list) or not data:
        raise ServeUsageError(
            f'--tokens {path}: expected a non-empty JSON list of {{"principal": ..., '
            '"token": ..., "admin": false}} objects'
        )
    tokens: dict[str, Principal] = {}
    for i, entry in enumerate(data, start=1):
        where = f"--tokens {path}, entry {i}"
        if not isinstance(entry, dict):
            raise ServeUsageError(f"{where}: expected an object, got {type(entry).__name__}")
        unknown = set(entry) - {"principal", "token", "admin"}
        if unknown:
            raise ServeUsageError(
                f"{where}: unknown key(s) {sorted(unknown)}; the keys are principal, token, admin"
            )
        for key in ("principal", "token"):
            if key not in entry:
                raise ServeUsageError(f"{where}: {key!r} is missing")
        try:
            token = check_token(entry["token"], "token")
            principal = Principal(name=entry["principal"], admin=entry.get("admin", False))
        except InvalidParamsError as exc:
            raise ServeUsageError(f"{where}: {exc}") from None
        if token in tokens:
            raise ServeUsageError(f"{where}: the same token as an earlier entry")
        tokens[token] = principal
    return tokens


def serve_config(args: argparse.Namespace, environ: Mapping[str, str]) -> ServeConfig:
    """What ``serve`` runs with, checked before anything starts (``ServeUsageError``)."""
    tokens = None
    token = None
    generated = False
    if args.tokens is not None:
        if environ.get(TOKEN_ENV):
            raise ServeUsageError(
                f"both --tokens and {TOKEN_ENV} are set: use one (--tokens names principals)"
            )
        tokens = read_tokens(args.tokens)
    elif environ.get(TOKEN_ENV):
        try:
            token = check_token(environ[TOKEN_ENV], TOKEN_ENV)
        except InvalidParamsError as exc:
            raise ServeUsageError(str(exc)) from None
    else:
        token = secrets.token_urlsafe(32)
        generated = True
    if generated and not is_loopback(args.host):
        raise ServeUsageError(
            f"refusing to listen on {args.host} with a generated token: anyone who can reach "
            f"it would need only the token printed here. Choose one on purpose: set "
            f"{TOKEN_ENV}, or give --tokens FILE (or listen on 127.0.0.1)"
        )
    cwd_root = os.path.abspath(args.cwd_root or os.getcwd())
    if not os.path.isdir(cwd_root):
        raise ServeUsageError(f"--cwd-root {args.cwd_root}: not a directory")
    return ServeConfig(
        host=args.host,
        port=args.port,
        token=token,
        tokens=tokens,
        token_generated=generated,
        max_live=args.max_live,
        replay_buffer=args.replay_buffer,
        idempotency_ttl=args.idempotency_ttl,
        allow_cwd=args.allow_cwd,
        allow_env=args.allow_env,
        cwd_root=cwd_root,
        allowed_origins=frozenset(args.allow_origin or ()),
        offline=args.offline,
        drain_grace=args.drain_grace,
        redis=getattr(args, "redis", None),
        command_timeout=getattr(args, "command_timeout", 10.0),
        governor=governor_config(args),
        remote_tools=getattr(args, "remote_tools", "read-only"),
        console=_console_wanted(getattr(args, "console", None), args.host),
    )


def _console_wanted(flag: bool | None, host: str) -> bool:
    return is_loopback(host) if flag is None else flag


def _console_url_of(config: ServeConfig, port: int) -> str:
    # The token goes in the URL only when it was generated (printed anyway); a chosen one
    # is typed into the console's login form.
    return console_url(config.host, port, config.token if config.token_generated else None)


def console_url(host: str, port: int, token: str | None) -> str:
    """The console's address; with ``token``, in the fragment (never sent to the server)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/" + ("" if token is None else f"#token={token}")


def url_for(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"ws://{shown}:{port}/"


def _gateway_options(config: ServeConfig) -> dict[str, Any]:
    """The ``serve_gateway`` keywords a ``serve`` command's configuration sets (with or
    without Redis)."""
    return {
        "host": config.host,
        "port": config.port,
        "token": config.token,
        "tokens": config.tokens,
        "allowed_origins": config.allowed_origins,
        "cwd_root": config.cwd_root,
        "allow_cwd": config.allow_cwd,
        "allow_env": config.allow_env,
        "remote_tools": config.remote_tools,
        "console": config.console,
    }


def _tokens_file_readable_by_others(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & (stat.S_IRWXG | stat.S_IRWXO))
    except OSError:
        return False


@asynccontextmanager
async def _sessions_env(offline: bool) -> AsyncIterator[Mapping[str, str] | None]:
    if not offline:
        await trio.lowlevel.checkpoint()
        yield None
        return
    from claude_trio.offline import open_offline_model

    async with open_offline_model() as model:
        yield model.env


def listen_problem(exc: OSError, host: str, port: int) -> str:
    """Why ``serve`` cannot listen on ``host:port``, in one line that says what to do."""
    where = f"cannot listen on {host}:{port}"
    if isinstance(exc, socket.gaierror):
        return (
            f"{where}: --host {host} is not an address of this machine (it does not resolve); "
            "give an IP address such as 127.0.0.1 or 0.0.0.0"
        )
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{where}: port {port} is taken (another program listens on it); choose another "
            "with --port N (--port 0: any free port)"
        )
    if exc.errno == errno.EACCES:
        return (
            f"{where}: permission denied (ports below 1024 need privileges); choose another "
            "with --port N"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{where}: --host {host} is not an address of this machine"
    return f"{where}: {exc.strerror or exc}"


async def _start_gateway(nursery: trio.Nursery, host: ServedHost, config: ServeConfig) -> int:
    """Start the gateway in ``nursery``; its port. A socket that cannot listen is a
    ``ServeUsageError`` saying why (see :func:`listen_problem`)."""
    try:
        port: int = await nursery.start(partial(serve_gateway, host, **_gateway_options(config)))
    except OSError as exc:
        raise ServeUsageError(listen_problem(exc, config.host, config.port)) from None
    return port


async def serve(config: ServeConfig, out: TextIO) -> int:
    """Run the server until a signal; see the module docstring."""
    if config.redis is not None:
        return await serve_cluster(config, out)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with (
            _sessions_env(config.offline) as env,
            open_fleet(
                max_live=config.max_live,
                replay_buffer=config.replay_buffer,
                idempotency_ttl=config.idempotency_ttl,
                governor=config.governor,
                env=env,
            ) as fleet,
            open_block_nursery() as nursery,
        ):
            port = await _start_gateway(nursery, fleet, config)
            url = url_for(config.host, port)
            print(f"claude-trio serve: listening on {url}", file=out)
            if config.token_generated:
                # Printed once, here, for whoever started the server; never logged.
                print(f"token: {config.token}", file=out)
                print(f"  clients: export {TOKEN_ENV}={config.token}", file=out)
            if config.console:
                print(f"console: {_console_url_of(config, port)}", file=out)
            if config.offline:
                print(
                    "offline: every session talks to the built-in scripted model "
                    "(no API key, no network)",
                    file=out,
                )
            if config.remote_tools == "all":
                print(
                    "remote tools: all (clients' sessions may run commands and write files as "
                    "this user; with an asking --permission-mode each call waits for an "
                    "answer: claude-trio inbox URL)",
                    file=out,
                )
            print("Ctrl-C drains (running sessions finish), twice stops at once", file=out)
            out.flush()
            _freeze_heap()
            log.info(
                "serve: listening on %s:%d",
                config.host,
                port,
                extra={"event": "listening", "host": config.host, "port": port},
            )
            async for _ in signals:
                break
            log.info(
                "serve: draining, %g s for running sessions",
                config.drain_grace,
                extra={"event": "draining", "deadline_s": config.drain_grace},
            )
            async with trio.open_nursery() as stopping:

                async def second_signal() -> None:
                    async for _ in signals:
                        log.info("serve: stopping now", extra={"event": "stopping"})
                        stopping.cancel_scope.cancel()
                        return

                stopping.start_soon(second_signal)
                await fleet.drain(trio.current_time() + config.drain_grace)
                stopping.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
    log.info("serve: stopped", extra={"event": "stopped"})
    return EXIT_OK


async def serve_cluster(config: ServeConfig, out: TextIO) -> int:  # noqa: ASYNC910 - raises
    """``serve --redis``: the gateway over a Redis cluster's sessions (it runs none itself)."""
    try:
        return await _serve_cluster(config, out)
    except BaseExceptionGroup as group:
        # The Redis fleet's nursery wraps what its block raised (a port that is taken).
        raise_unwrapped(group, None)


async def _serve_cluster(config: ServeConfig, out: TextIO) -> int:
    """``serve_cluster``'s work."""
    from claude_trio.actors.cluster.fleet import open_redis_fleet
    from claude_trio.redis_url import open_redis, persistence_warning

    assert config.redis is not None
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with (
            open_redis(config.redis) as redis,
            open_redis_fleet(
                redis,
                command_timeout=config.command_timeout,
                replay_buffer=config.replay_buffer,
                idempotency_ttl=config.idempotency_ttl,
            ) as fleet,
            open_block_nursery() as nursery,
        ):
            port = await _start_gateway(nursery, fleet, config)
            print(f"claude-trio serve: listening on {url_for(config.host, port)}", file=out)
            if config.token_generated:
                print(f"token: {config.token}", file=out)
                print(f"  clients: export {TOKEN_ENV}={config.token}", file=out)
            if config.console:
                print(f"console: {_console_url_of(config, port)}", file=out)
            print("sessions run on the workers of the Redis cluster", file=out)
            if warning := await persistence_warning(redis, config.redis):
                log.warning(warning, extra={"event": "no_persistence"})
            out.flush()
            _freeze_heap()
            log.info(
                "serve: listening on %s:%d (cluster)",
                config.host,
                port,
                extra={"event": "listening", "host": config.host, "port": port},
            )
            async for _ in signals:
                break
            # Sessions belong to the workers: a gateway stops at once, clients reconnect to
            # another one.
            nursery.cancel_scope.cancel()
    log.info("serve: stopped", extra={"event": "stopped"})
    return EXIT_OK


def _freeze_heap() -> None:
    """The server has started: its start-up's objects leave the collector's walks."""
    frozen = freeze_startup_heap()
    log.info(
        "%d objects of the start-up frozen (kept out of the collector's walks)",
        frozen,
        extra={"event": "heap_frozen", "objects": frozen},
    )


def serve_command(args: argparse.Namespace) -> int:
    """``claude-trio serve``: the exit code (0; 1 when it cannot listen where asked - the port
    is taken, the host is not this machine's - or ``--redis`` names a Redis that cannot be used
    at start; 2 for a usage error). Each failure is one line on stderr."""
    errors = sys.stderr
    try:
        config = serve_config(args, os.environ)
    except ServeUsageError as exc:
        print(f"claude-trio serve: {exc}", file=errors)
        return EXIT_USAGE
    if config.redis is not None:
        if config.offline:
            print(
                "claude-trio serve: --offline is a worker's option with --redis (the workers "
                "run the sessions): claude-trio worker --redis URL --offline",
                file=errors,
            )
            return EXIT_USAGE
        from claude_trio.protocol.errors import RedisUsageError
        from claude_trio.redis_url import check_redis_url

        try:
            check_redis_url(config.redis)
        except RedisUsageError as exc:
            print(f"claude-trio serve: {exc}", file=errors)
            return EXIT_USAGE
    elif not config.offline and not has_credentials(os.environ):
        print(NO_CREDENTIALS_MESSAGE, file=errors)
        print("  Or serve the built-in offline model:\n      claude-trio serve --offline",
              file=errors)  # fmt: skip
        return EXIT_USAGE
    configure_logging(errors, json_lines=args.log_json)
    if args.tokens is not None and _tokens_file_readable_by_others(args.tokens):
        log.warning("serve: the tokens file can be read by other users of this machine (chmod 600)")
    from claude_trio.protocol.errors import RedisUnavailableError

    with contextlib.suppress(KeyboardInterrupt):
        try:
            return trio.run(serve, config, sys.stdout)
        except (RedisUnavailableError, ServeUsageError) as exc:
            print(f"claude-trio serve: {exc}", file=errors)
            return EXIT_SESSION_ERROR
    return EXIT_OK
