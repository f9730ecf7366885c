"""The CLI as a subprocess, and how it is stopped for good.

The SDK's own ``SubprocessCLITransport.close()`` ends stdin, then waits 5 s for the CLI to exit
before it sends SIGTERM: five seconds in which an agent that was not interrupted goes on running
tools on the user's machine. And a SIGKILLed CLI leaves its tools running: the CLI starts each
shell in a session of its own, so neither the CLI's process group nor its death reaches them.

So claude-trio never relies on that close. :class:`CLIProcessTransport` is the SDK's transport
plus :meth:`~CLIProcessTransport.kill_now`, which freezes the CLI and everything it started
(SIGSTOP, walking the process tree from the CLI down until no new process turns up: a stopped
process cannot start another one), then SIGKILLs them all, and
:meth:`~CLIProcessTransport.kill_tools`, the same for what the CLI started but not the CLI. The
session's stop (``actors/core.py``) interrupts the CLI first; once the CLI confirmed (it starts
nothing new from then on) its tools are killed at once rather than left to the CLI's own, slower
teardown of them; the CLI then settles and exits on the end of its input, and ``kill_now``
takes whatever is left.

A transport given by the caller (a fake CLI in tests, a custom transport) can offer the same by
having a ``kill_now()`` method (see :class:`Killable`); without one, its own ``close()`` decides.
"""

from __future__ import annotations

import contextlib
from typing import Protocol, cast, runtime_checkable

import psutil
from claude_agent_sdk import Transport

from .sdk_private import SubprocessCLITransport, subprocess_of


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
    """The SDK's subprocess transport with a kill that reaches the CLI's tools too."""

    def kill_now(self) -> None:
        process = subprocess_of(self)
        if process is None or process.returncode is not None:
            return
        kill_process_tree(process.pid)

    def kill_tools(self) -> None:
        process = subprocess_of(self)
        if process is None or process.returncode is not None:
            return
        try:
            children = psutil.Process(process.pid).children()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return
        for child in children:
            kill_process_tree(child.pid)

    @property
    def pid(self) -> int | None:
        """The CLI's process id while it runs (None before connect and after close)."""
        process = subprocess_of(self)
        return None if process is None else process.pid


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


def kill_tools(transport: Transport) -> None:
    """Kill what ``transport``'s CLI started, if it can be (the CLI itself lives on)."""
    killable = _killable(transport)
    if killable is not None:
        killable.kill_tools()


def kill_process_tree(pid: int) -> list[int]:
    """Freeze ``pid`` and every descendant, then SIGKILL them all; returns the pids killed.

    Each process is stopped before its children are listed, so one that forks meanwhile is
    found when its own children are listed. A descendant that already detached itself from the
    tree (double fork) is out of reach, as it is for any supervisor.
    """
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    frozen: dict[int, psutil.Process] = {}
    todo = [root]
    while todo:
        process = todo.pop()
        if process.pid in frozen:
            continue
        try:
            process.suspend()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        frozen[process.pid] = process
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            todo.extend(process.children())
    for process in frozen.values():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            process.kill()
    return list(frozen)
