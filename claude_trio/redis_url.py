"""Connecting to the Redis of a cluster from a ``redis://`` URL (``serve --redis``, ``worker``).

The URL carries everything coredis takes: ``redis://[user:password@]host:port/db``, and
``rediss://`` for TLS (``?ssl_cert_reqs=...&ssl_ca_certs=...`` pass through). A URL without a
password uses ``REDISCLI_AUTH`` from the environment when set (the variable ``redis-cli``
reads), so the password need not appear on a command line.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

__all__ = ["RedisUsageError", "check_redis_url", "open_redis"]

PASSWORD_ENV = "REDISCLI_AUTH"


class RedisUsageError(Exception):
    """A Redis URL that cannot be used; the message says what to do."""


def check_redis_url(url: str) -> None:
    """``RedisUsageError`` unless ``url`` is a redis:// or rediss:// URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise RedisUsageError(
            f"--redis {_shown(url)}: not a Redis URL; use redis://host:port/db "
            "(rediss:// for TLS)"
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
    """An open ``coredis.Redis`` client (responses decoded) for ``url``, closed after."""
    import coredis

    check_redis_url(url)
    environ = os.environ if environ is None else environ
    kwargs: dict[str, Any] = {"decode_responses": True}
    if urlsplit(url).password is None and environ.get(PASSWORD_ENV):
        kwargs["password"] = environ[PASSWORD_ENV]
    async with coredis.Redis.from_url(url, **kwargs) as client:
        yield client
