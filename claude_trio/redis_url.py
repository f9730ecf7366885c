"""Connecting to the Redis of a cluster from a ``redis://`` URL (``serve --redis``, ``worker``).

The URL carries everything coredis takes: ``redis://[user:password@]host:port/db``, and
``rediss://`` for TLS (``?ssl_ca_certs=/path/ca.pem`` names the CA that signed the server's
certificate; ``ssl_certfile``/``ssl_keyfile`` a client certificate). Over TLS the server's
certificate must verify and name the URL's host (``ssl_check_hostname=false`` turns the name
check off; coredis alone would skip it). A URL without a password uses ``REDISCLI_AUTH`` from
the environment when set (the variable ``redis-cli`` reads), so the password need not appear on
a command line.

A Redis Cluster is named by the scheme ``redis+cluster://host:port`` (``rediss+cluster://``
for TLS, with the same query options): ``host:port`` is any one of its masters, the client
discovers the others and follows each key to the node that serves its hash slot
(``coredis.RedisCluster``). A cluster has no database numbers, so the URL names none.

:func:`open_redis` asks the server for a PING before handing the client out, so a wrong CA, a
refused password or a closed port stops a command at once with :class:`RedisUnavailableError`
saying which, rather than a traceback or a gateway that waits for a Redis it cannot use.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import trio

from claude_trio.protocol.errors import RedisUnavailableError, RedisUsageError

__all__ = ["check_redis_url", "is_cluster_url", "open_redis", "persistence_warning"]

PASSWORD_ENV = "REDISCLI_AUTH"
# How long the first PING may take: a server that accepts the connection and never answers
# (a wrong port, a proxy) fails the command instead of hanging it.
FIRST_PING_TIMEOUT = 10.0
_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://``, ``rediss+cluster://``)."""
    return urlsplit(url).scheme in _CLUSTER_SCHEMES


def check_redis_url(url: str) -> None:
    """``RedisUsageError`` unless ``url`` is a redis:// or rediss:// URL with a host (or a
    cluster's ``redis+cluster://host:port``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix", *_CLUSTER_SCHEMES):
        raise RedisUsageError(
            f"--redis {_shown(url)}: not a Redis URL; use redis://host:port/db "
            "(rediss:// for TLS, redis+cluster://host:port for a Redis Cluster)"
        )
    if parts.scheme in _CLUSTER_SCHEMES and parts.path.strip("/") not in ("", "0"):
        raise RedisUsageError(
            f"--redis {_shown(url)}: a Redis Cluster has only database 0; "
            "drop the /db from the URL"
        )
    if parts.scheme != "unix" and not parts.hostname:
        raise RedisUsageError(f"--redis {_shown(url)}: the URL names no host")
    try:
        _ = parts.port
    except ValueError:
        raise RedisUsageError(f"--redis {_shown(url)}: the port is not a number") from None


def _shown(url: str) -> str:
    """The URL without its password (never logged or printed)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return parts._replace(netloc=netloc).geturl()


@asynccontextmanager
async def open_redis(url: str, environ: Mapping[str, str] | None = None) -> AsyncIterator[Any]:
    """An open ``coredis.Redis`` client (responses decoded) for ``url``, closed after; a
    ``coredis.RedisCluster`` for a ``redis+cluster://`` URL."""
    import coredis
    from coredis.connection import TCPLocation

    check_redis_url(url)
    environ = os.environ if environ is None else environ
    kwargs: dict[str, Any] = {"decode_responses": True}
    if urlsplit(url).password is None and environ.get(PASSWORD_ENV):
        kwargs["password"] = environ[PASSWORD_ENV]
    problem: str | None = None
    scheme = urlsplit(url).scheme
    target = _with_hostname_check(url)
    factory: Any = coredis.Redis
    if scheme in _CLUSTER_SCHEMES:
        target = urlsplit(target)._replace(scheme=_CLUSTER_SCHEMES[scheme], path="").geturl()
        factory = coredis.RedisCluster
        # The URL's node as coredis's own pool would take it, but as a ``TCPLocation``: given
        # none, coredis makes one of a kind it has deprecated, and warns on every connect.
        node = urlsplit(target)
        kwargs["startup_nodes"] = [TCPLocation(node.hostname or "", node.port or 6379)]
    async with factory.from_url(target, **kwargs) as client:
        try:
            with trio.fail_after(FIRST_PING_TIMEOUT):
                await client.ping()
        except (coredis.exceptions.RedisError, trio.TooSlowError) as exc:
            # Raised after the client's block: inside it, coredis' task group would wrap it.
            problem = _explain(exc)
        else:
            yield client
    if problem is not None:
        raise RedisUnavailableError(f"cannot use Redis at {_shown(url)}: {problem}")


PERSISTENCE_NODES_MAX = 64
"""The masters of a Redis Cluster whose persistence a start checks."""


async def persistence_warning(
    client: Any, url: str, environ: Mapping[str, str] | None = None
) -> str | None:
    """One line saying that the Redis ``client`` (opened from ``url``) keeps nothing across a
    restart (neither ``appendonly yes`` nor a ``save`` schedule), and what to do; None when
    it persists, or when it does not let ``CONFIG GET`` tell (managed services often do not).
    On a Redis Cluster every master is asked (each through its own connection)."""
    import coredis

    await trio.lowlevel.checkpoint()
    try:
        if is_cluster_url(url):
            nodes = [n for n in await client.cluster_nodes() if "master" in n["flags"]]
            configs = []
            for node in nodes[:PERSISTENCE_NODES_MAX]:
                node_url = _node_url(url, str(node["host"]), int(node["port"]))
                async with open_redis(node_url, environ) as one:
                    configs.append((f"{node['host']}:{node['port']}", await _persistence(one)))
        else:
            parts = urlsplit(url)
            configs = [(f"{parts.hostname}:{parts.port or 6379}", await _persistence(client))]
    except (coredis.exceptions.RedisError, RedisUnavailableError):
        return None
    bare = [where for where, persists in configs if not persists]
    if not bare:
        return None
    return (
        f"Redis at {', '.join(bare)} has no persistence (appendonly no, no save schedule): a "
        "restart loses every job, session record and event stream; turn on the append-only "
        "file (appendonly yes in redis.conf, or CONFIG SET appendonly yes)"
    )


async def _persistence(client: Any) -> bool:
    config = await client.config_get(["appendonly", "save"])
    return bool(config.get("appendonly") == "yes" or config.get("save", "").strip())


def _node_url(url: str, host: str, port: int) -> str:
    """``url`` (a cluster's) for one of its nodes: same credentials and options."""
    parts = urlsplit(url)
    scheme = _CLUSTER_SCHEMES.get(parts.scheme, parts.scheme)
    userinfo, _, _ = parts.netloc.rpartition("@")
    netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
    return parts._replace(scheme=scheme, netloc=netloc, path="/0").geturl()


def _with_hostname_check(url: str) -> str:
    parts = urlsplit(url)
    tls = parts.scheme in ("rediss", "rediss+cluster")
    if not tls or "ssl_check_hostname" in parse_qs(parts.query):
        return url
    query = f"{parts.query}&ssl_check_hostname=true" if parts.query else "ssl_check_hostname=true"
    return parts._replace(query=query).geturl()


def _explain(exc: BaseException) -> str:
    """What went wrong, in words, from coredis' exception and its causes."""
    import coredis

    if isinstance(exc, trio.TooSlowError):
        return f"no answer to PING within {FIRST_PING_TIMEOUT:g} s"
    if isinstance(exc, coredis.exceptions.AuthenticationFailureError):
        return "the server refused the password (wrong password, or wrong user)"
    if isinstance(exc, coredis.exceptions.AuthenticationRequiredError):
        return (
            "the server requires a password: give it in the URL (redis://:PASSWORD@host...) "
            f"or in {PASSWORD_ENV}"
        )
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"the server's TLS certificate did not verify ({cause.verify_message}); name "
                "the CA that signed it: rediss://host:port/0?ssl_ca_certs=/path/to/ca.pem"
            )
        if isinstance(cause, ssl.SSLError):
            return f"the TLS handshake failed ({cause.reason or cause}); is the port a TLS port?"
        if isinstance(cause, OSError) and cause.strerror:
            return f"cannot connect ({cause.strerror})"
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, coredis.exceptions.ConnectionError):
        return f"{exc} (a TLS-only port? then use rediss://)"
    return f"{type(exc).__name__}: {exc}"
