"""The CLI as a subprocess, and how it is stopped for good.

The SDK's own ``SubprocessCLITransport.close()`` ends stdin, then waits 5 s for the CLI to exit
before it sends SIGTERM: five seconds in which an agent that was not interrupted goes on running
tools on the user's machine. And a SIGKILLed CLI leaves its tools running: the CLI starts each
shell in a session of its own, so neither the CLI's process group nor its death reaches them.

So claude-trio never relies on that close. :class:`CLIProcessTransport` is the SDK's transport
plus :meth:`~CLIProcessTransport.kill_now`, which freezes the CLI and everything it started
(SIGSTOP, walking the process table from the CLI down until no new process turns up: a stopped
process cannot start another one), then SIGKILLs them all, and
:meth:`~CLIProcessTransport.kill_tools`, the same for what the CLI started but not the CLI. The
session's stop (``actors/session/stopper.py``) kills the CLI's tools, then interrupts the CLI, keeps
killing whatever it still starts until it settled, lets the settled CLI exit on the end of its
input, and ``kill_now`` takes whatever is left.

The walk reads the process table once per round (``/proc/<pid>/stat`` on Linux, a millisecond or
two; psutil elsewhere, whose ``children()`` reads the whole table once per process asked), and a
round is repeated only while it finds new processes. It blocks: the stop's repeated walks run in
a worker thread (:func:`kills_processes`).

A transport given by the caller (a fake CLI in tests, a custom transport) can offer the same by
having ``kill_now()`` and ``kill_tools()`` methods (see :class:`Killable`); without them, its own
``close()`` decides.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, Protocol, cast, runtime_checkable

import anyio
import anyio.abc
import psutil
import sniffio
from claude_agent_sdk import Transport

from claude_trio.actors.children import open_child_process
from claude_trio.actors.session.sdk_private import (
    SubprocessCLITransport,
    anyio_process,
    spawning_with,
    subprocess_of,
)

LINUX = sys.platform.startswith("linux")


@runtime_checkable
class Killable(Protocol):
    """A transport whose process (and everything it started) can be killed at once."""

    def kill_now(self) -> None:
        """Kill the CLI and its descendants now; a no-op when it is not running."""
        ...

    def kill_tools(self) -> None:
        """Kill what the CLI started (its tools), not the CLI; a no-op when there is none."""
        ...


class CLIProcessTransport(SubprocessCLITransport):
    """The SDK's subprocess transport with a kill that reaches the CLI's tools too, and a CLI
    that dies with this process: on Linux it is sent SIGTERM when this process dies, however
    it dies (it then kills its tools and exits; see ``actors/children.py``)."""

    async def connect(self) -> None:
        with spawning_with(_spawn_cli):
            await super().connect()

    def kill_now(self) -> None:
        pid = self._running_pid()
        if pid is not None:
            kill_process_tree(pid)

    def kill_tools(self) -> None:
        self.kill_children()

    def kill_children(self, *, tools_only: bool = False) -> tuple[int, ...]:
        """:meth:`kill_tools`, returning the killed processes that are the CLI's own children
        (it reaps them: see :func:`reaped`). ``tools_only``: only what runs in a session other
        than the CLI's, and what that started: the CLI starts each Bash call in a session of
        its own, its helpers (``ps``, ``rg``, the shell snapshot) and MCP servers in its own."""
        pid = self._running_pid()
        if pid is None:
            return ()
        children = _children_of()
        frozen = freeze_tree(pid, include_root=False, children=children, tools_only=tools_only)
        killed = set(_kill(frozen))
        return tuple(child for child, _ in children.get(pid, ()) if child in killed)

    @property
    def kills_processes(self) -> bool:
        """Its kills walk real processes (they block: see :func:`kills_processes`)."""
        return True

    @property
    def pid(self) -> int | None:
        """The CLI's process id while it runs (None before connect and after close)."""
        process = subprocess_of(self)
        return None if process is None else process.pid

    def _running_pid(self) -> int | None:
        process = subprocess_of(self)
        if process is None or process.returncode is not None:
            return None
        return process.pid


async def _spawn_cli(
    command: Sequence[str],
    *,
    stdin: int | None,
    stdout: int | None,
    stderr: int | None,
    **options: Any,
) -> anyio.abc.Process:
    """``anyio.open_process`` for the CLI, forked so that it is sent SIGTERM when this process
    dies (Linux, under trio; anyio's own spawn elsewhere)."""
    if not LINUX or sniffio.current_async_library() != "trio":
        return await anyio.open_process(
            command, stdin=stdin, stdout=stdout, stderr=stderr, **options
        )
    process = await open_child_process(
        [os.fspath(part) for part in command],
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        death_signal=signal.SIGTERM,
        **options,
    )
    return anyio_process(process)


def _killable(transport: Transport) -> Killable | None:
    """``transport`` as a :class:`Killable` if it is one. The same test as ``isinstance(...,
    Killable)`` (both methods present, not None) without the cost of a runtime protocol check,
    which every session's teardown would pay."""
    if (
        getattr(transport, "kill_now", None) is not None
        and getattr(transport, "kill_tools", None) is not None
    ):
        return cast(Killable, transport)
    return None


def kill_now(transport: Transport) -> bool:
    """Kill ``transport``'s process tree if it can be; False when the transport cannot."""
    killable = _killable(transport)
    if killable is None:
        return False
    killable.kill_now()
    return True


def kill_tools(transport: Transport, *, tools_only: bool = False) -> tuple[int, ...]:
    """Kill what ``transport``'s CLI started, if it can be (the CLI itself lives on); returns
    the killed processes the CLI will reap, when the transport can tell (``kill_children()``,
    as :class:`CLIProcessTransport` has; ``tools_only`` as there, where it can be told)."""
    kill_children = getattr(transport, "kill_children", None)
    if callable(kill_children):
        killed = kill_children(tools_only=tools_only)
        return tuple(killed) if isinstance(killed, tuple) else ()
    killable = _killable(transport)
    if killable is not None:
        killable.kill_tools()
    return ()


def reaped(pids: tuple[int, ...]) -> bool:
    """Whether the CLI reaped these children of its: it saw them exit (their ``/proc`` entries
    are gone; True where there is no ``/proc``)."""
    return not _PROC_STAT or not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def kills_processes(transport: Transport) -> bool:
    """Whether ``transport``'s kills walk real processes, taking milliseconds of blocking reads
    (:func:`freeze_tree`): the stop then repeats them in a worker thread. A fake CLI's kills
    are instant and stay on trio's clock (a thread would let a ``MockClock`` jump)."""
    return getattr(transport, "kills_processes", False) is True


def kill_process_tree(pid: int) -> list[int]:
    """Freeze ``pid`` and every descendant, then SIGKILL them all; returns the pids killed.

    Each process is stopped before the table is read again, so one that forks meanwhile is
    found by the next read. A descendant that already detached itself from the tree (double
    fork) is out of reach, as it is for any supervisor.
    """
    return _kill(freeze_tree(pid, include_root=True))


def freeze_tree(
    pid: int,
    *,
    include_root: bool,
    children: dict[int, list[Child]] | None = None,
    tools_only: bool = False,
) -> list[int]:
    """SIGSTOP every descendant of ``pid`` (and ``pid`` itself with ``include_root``), reading
    the process table again until a read finds no new one; returns the pids frozen.
    ``children``: a first read of the table the caller made already. ``tools_only``: only the
    descendants in a session other than ``pid``'s, and everything under them."""
    session = _session_of(pid) if tools_only else None
    frozen: list[int] = []
    seen: set[int] = set()
    if include_root:
        if not _signal(pid, signal.SIGSTOP):
            return []
        frozen.append(pid)
    seen.add(pid)
    while True:
        table = children if children is not None else _children_of()
        children = None
        new = [
            child
            for child in _descendants(pid, table, outside=session, every=not tools_only)
            if child not in seen
        ]
        if not new:
            return frozen
        for child in new:
            seen.add(child)
            if _signal(child, signal.SIGSTOP):
                frozen.append(child)


def _kill(pids: list[int]) -> list[int]:
    for pid in pids:
        _signal(pid, signal.SIGKILL)
    return pids


def _signal(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


Child = tuple[int, int | None]
"""A process and its session id."""


def _descendants(
    pid: int, children: dict[int, list[Child]], *, outside: int | None, every: bool
) -> list[int]:
    """``pid``'s descendants: ``every`` one, or those in a session other than ``outside`` and
    everything under them."""
    found: list[int] = []
    todo = [(child, every) for child in children.get(pid, ())]
    while todo:
        (child, session), taken = todo.pop()
        taken = taken or session != outside
        if taken:
            found.append(child)
        todo.extend((grandchild, taken) for grandchild in children.get(child, ()))
    return found


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _children_of() -> dict[int, list[Child]]:
    """Every process's children (parent pid -> (pid, session id)), from one read of the
    process table."""
    if not _PROC_STAT:
        return _children_by_psutil()
    children: dict[int, list[Child]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                stat = os.read(fd, 512)
            finally:
                os.close(fd)
            # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
            fields = stat[stat.rindex(b")") + 4 :].split(b" ", 3)
            ppid, session = int(fields[0]), int(fields[2])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        children.setdefault(ppid, []).append((int(name), session))
    return children


def _children_by_psutil() -> dict[int, list[Child]]:
    children: dict[int, list[Child]] = {}
    for process in psutil.process_iter(["ppid"]):
        ppid = process.info.get("ppid")
        if isinstance(ppid, int):
            children.setdefault(ppid, []).append((process.pid, _session_of(process.pid)))
    return children


_PROC_STAT = os.path.exists(f"/proc/{os.getpid()}/stat")
