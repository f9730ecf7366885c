"""``claude-trio`` commands as child processes, for tests that run a deployment as a user
does: a ``serve`` (or ``serve --redis``) gateway and ``worker`` nodes, each a real process on
127.0.0.1, started with :func:`open_command` (or :func:`open_gateway_process` and
:func:`open_worker_process`).

Each command is started so that it dies with the process that started it, however that one
dies (``actors/children.py``); :func:`open_command` returns once the command printed its
readiness line (a gateway's ``listening on ws://...``, a worker's ``running up to N``), and at
the end of the block stops it as an operator does (Ctrl-C) and checks that it exited 0.
:meth:`CommandProcess.kill` kills one mid-test (SIGKILL) with the CLIs it ran, as a machine
lost would leave them (then the end of the block checks nothing of it).

Its standard error goes to ``<directory>/<name>.stderr``; with ``--log-json`` its JSON log
lines are read back with :meth:`CommandProcess.log_events`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import psutil
import trio

from claude_trio.actors.children import open_child_process

__all__ = [
    "COMMAND",
    "CommandProcess",
    "command_env",
    "open_command",
    "open_gateway_process",
    "open_worker_process",
]

COMMAND = (sys.executable, "-m", "claude_trio.cli")
"""How the ``claude-trio`` command of this Python environment is run."""

GATEWAY_READY = b"listening on ws://"
WORKER_READY = b"running up to"


def command_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any Anthropic credential or claude-trio token (a
    command under test gets only what the test gives it), plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ANTHROPIC_")
        and key not in ("CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_TRIO_TOKEN")
    }
    env.update(extra or {})
    return env


@attrs.define(eq=False)
class CommandProcess:
    """A running ``claude-trio`` command (see :func:`open_command`)."""

    name: str
    process: trio.Process
    #: What it printed on standard output up to its readiness line.
    stdout: str
    stderr_path: Path
    killed: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        """A gateway's websocket URL, from its ``listening on ws://...`` line."""
        for line in self.stdout.splitlines():
            if "listening on " in line:
                return line.split("listening on ", 1)[1].split()[0]
        raise ValueError(f"{self.name} printed no 'listening on' line: {self.stdout!r}")

    def log_events(self, event: str, logger: str | None = None) -> list[dict[str, Any]]:
        """Its JSON log lines (``--log-json``) with this ``event`` (and ``logger``)."""
        lines = [
            json.loads(li) for li in self.stderr_path.read_text().splitlines() if li[:1] == "{"
        ]
        return [
            li
            for li in lines
            if li.get("event") == event and (logger is None or li.get("logger") == logger)
        ]

    async def kill(self) -> bool:
        """SIGKILL it, wait for it, then kill the processes it had started (a worker's CLIs,
        orphaned by its death); True when they are all gone within 5 s."""
        children = psutil.Process(self.pid).children(recursive=True)
        self.killed = True
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        return await trio.to_thread.run_sync(
            lambda: psutil.wait_procs(children, timeout=5)[1] == []
        )


@asynccontextmanager
async def open_command(
    argv: Sequence[str],
    *,
    name: str,
    directory: Path,
    ready: bytes,
    env: Mapping[str, str] | None = None,
    check_exit: bool = True,
    stop_timeout: float = 60.0,
    start_timeout: float = 60.0,
) -> AsyncIterator[CommandProcess]:
    """Run ``claude-trio *argv`` until the block ends; yield it once its standard output
    showed ``ready``.

    ``env``: its whole environment (default: :func:`command_env`). At the end of the block it
    is interrupted (SIGINT, Ctrl-C) unless it was killed, and with ``check_exit`` its exit code
    must be 0 within ``stop_timeout`` seconds (else after ``stop_timeout`` it is killed). When
    the block raises, it is killed at once.
    """
    stderr_path = directory / f"{name}.stderr"
    with stderr_path.open("wb") as stderr:
        process = await open_child_process(  # dies with the test run
            [*COMMAND, *argv],
            env=dict(command_env() if env is None else env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr.fileno(),
        )
    try:
        assert process.stdout is not None
        seen = b""
        with trio.fail_after(start_timeout):
            while ready not in seen:
                chunk = await process.stdout.receive_some()
                assert chunk, f"{name} exited early: {stderr_path.read_text()}"
                seen += chunk
        command = CommandProcess(
            name=name, process=process, stdout=seen.decode(), stderr_path=stderr_path
        )
        yield command
        if not command.killed:
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
            if check_exit:
                with trio.fail_after(stop_timeout):
                    code = await process.wait()
                assert code == 0, f"{name} exited with {code}: {stderr_path.read_text()}"
            else:
                with trio.move_on_after(stop_timeout):
                    await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(10, shield=True):
                await process.wait()


def open_gateway_process(
    directory: Path, name: str, redis_url: str | None, *argv: str, **options: Any
) -> contextlib.AbstractAsyncContextManager[CommandProcess]:
    """``claude-trio serve --port 0`` (with ``--redis redis_url`` when given; else pass
    ``--offline`` or the like in ``argv``); its :attr:`~CommandProcess.url` is where clients
    connect. ``options``: as :func:`open_command`."""
    redis = ("--redis", redis_url) if redis_url is not None else ()
    return open_command(
        ("serve", *redis, "--port", "0", *argv), name=name, directory=directory,
        ready=GATEWAY_READY, **options,
    )  # fmt: skip


def open_worker_process(
    directory: Path, name: str, redis_url: str, *argv: str, **options: Any
) -> contextlib.AbstractAsyncContextManager[CommandProcess]:
    """``claude-trio worker --redis redis_url --worker-id name``. ``options``: as
    :func:`open_command`."""
    return open_command(
        ("worker", "--redis", redis_url, "--worker-id", name, *argv), name=name,
        directory=directory, ready=WORKER_READY, **options,
    )  # fmt: skip
