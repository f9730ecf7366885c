"""A real ``redis-server`` for tests: on a free loopback port, in a directory of its own, stopped
when the block ends, and killed when the process that started it dies, however it dies (no
process is left behind: ``actors/children.py``).

``scripts/ensure-redis`` installs the Debian package when the binary is missing. By default the
server keeps nothing on disk (``--save '' --appendonly no``); ``persist=True`` turns on the
append-only file with an fsync per write, so :meth:`RedisServer.restart` keeps what was written.
``tls=RedisTLS(...)`` serves TLS only (``--port 0 --tls-port N``) with the given certificate, and
``url`` is then a ``rediss://`` URL that trusts the given CA (``?ssl_ca_certs=``).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import quote

import attrs
import trio

from claude_trio.actors.children import open_child_process
from claude_trio.protocol.errors import ClaudeTrioError

__all__ = ["RedisServer", "RedisServerError", "RedisTLS", "open_redis_server"]

_START_TIMEOUT = 10.0
_STOP_GRACE = 5.0


class RedisServerError(ClaudeTrioError, RuntimeError):
    """``redis-server`` is missing or did not start (the message says what to do)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@attrs.frozen(kw_only=True)
class RedisTLS:
    """The PEM files of a TLS ``redis-server``: its certificate chain and key, and the CA that
    clients verify it with (clients are not asked for a certificate)."""

    cert_file: Path
    key_file: Path
    ca_file: Path


class RedisServer:
    """One ``redis-server`` process; ``url`` is what a client connects to."""

    def __init__(
        self,
        *,
        binary: str,
        directory: Path,
        password: str | None,
        persist: bool,
        tls: RedisTLS | None = None,
        extra_args: tuple[str, ...] = (),
    ):
        self.binary = binary
        self.extra_args = extra_args
        self.directory = directory
        self.password = password
        self.persist = persist
        self.tls = tls
        self.port = 0
        self._process: trio.Process | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls is None:
            return f"redis://{auth}127.0.0.1:{self.port}/0"
        ca = quote(str(self.tls.ca_file), safe="/")
        return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={ca}"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    @property
    def pid(self) -> int | None:
        """The ``redis-server`` process's id while it runs (a benchmark reads its CPU)."""
        return self._process.pid if self._process is not None and self.running else None

    def _argv(self) -> list[str]:
        if self.tls is None:
            ports = ["--port", str(self.port)]
        else:
            ports = [
                "--port", "0",  # no plain-text listener at all
                "--tls-port", str(self.port),
                "--tls-cert-file", str(self.tls.cert_file),
                "--tls-key-file", str(self.tls.key_file),
                "--tls-ca-cert-file", str(self.tls.ca_file),
                "--tls-auth-clients", "no",
            ]  # fmt: skip
        argv = [
            self.binary,
            *ports,
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--logfile", str(self.log_path),
            "--daemonize", "no",
            "--save", "",
        ]  # fmt: skip
        if self.persist:
            argv += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            argv += ["--appendonly", "no"]
        if self.password:
            argv += ["--requirepass", self.password]
        return argv + list(self.extra_args)

    async def start(self) -> None:
        """Start the server (on its port, or on a free one the first time) and wait until it
        accepts connections."""
        await trio.lowlevel.checkpoint()
        if self.running:
            raise RedisServerError("redis-server is already running")
        first = self.port == 0
        for _ in range(5 if first else 1):
            if first:
                self.port = _free_port()
            # Killed with this process, however it dies (no redis-server is left behind).
            process = await open_child_process(self._argv(), start_new_session=True)
            self._process = process
            if await self._wait_ready(process):
                return
            await self._reap(process)
        raise RedisServerError(
            f"redis-server did not start on 127.0.0.1:{self.port}; see {self.log_path}"
        )

    async def _wait_ready(self, process: trio.Process) -> bool:
        deadline = trio.current_time() + _START_TIMEOUT
        while process.poll() is None and trio.current_time() < deadline:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", self.port)
            except OSError as e:
                if e.errno not in (errno.ECONNREFUSED, None):
                    raise
                await trio.sleep(0.02)
                continue
            await stream.aclose()
            return True
        await trio.lowlevel.checkpoint()
        return False

    async def _reap(self, process: trio.Process) -> None:
        await trio.lowlevel.checkpoint()
        if process.returncode is None:
            process.terminate()
            with trio.move_on_after(_STOP_GRACE, shield=True):
                await process.wait()
            if process.returncode is None:
                process.kill()
                with trio.CancelScope(shield=True):
                    await process.wait()
        self._process = None

    async def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after a grace period) and wait for it."""
        await trio.lowlevel.checkpoint()
        if self._process is not None:
            await self._reap(self._process)

    async def kill(self) -> None:
        """Kill the server at once (SIGKILL): what a crash looks like to its clients."""
        await trio.lowlevel.checkpoint()
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            await self._reap(self._process)

    async def restart(self) -> None:
        """Stop and start again on the same port."""
        await self.stop()
        await self.start()


@asynccontextmanager
async def open_redis_server(
    directory: str | os.PathLike[str],
    *,
    password: str | None = None,
    persist: bool = False,
    tls: RedisTLS | None = None,
    extra_args: tuple[str, ...] = (),
) -> AsyncIterator[RedisServer]:
    """Run ``redis-server`` in ``directory`` on a free 127.0.0.1 port for the block (TLS only,
    when ``tls`` is given; ``extra_args`` are added to its command line)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RedisServerError(
            "redis-server is not installed: run scripts/ensure-redis (it installs the Debian "
            "package redis-server)"
        )
    path = trio.Path(directory)
    await path.mkdir(parents=True, exist_ok=True)
    server = RedisServer(
        binary=binary,
        directory=Path(path),
        password=password,
        persist=persist,
        tls=tls,
        extra_args=extra_args,
    )
    await server.start()
    try:
        yield server
    finally:
        with trio.CancelScope(shield=True):
            await server.stop()
