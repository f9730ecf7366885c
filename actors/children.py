"""Child processes that die with their parent, however it dies.

A process that claude-trio or its testing kit starts and then forgets (a ``redis-server`` the
kit runs for a test, a worker a benchmark runs) must not outlive the process that started it:
not when that process ends normally (its ``async with`` stops the child), and not when it is
killed (SIGKILL, an out-of-memory kill, a CI timeout) and has no chance to stop anything.

:func:`open_child_process` starts one so. On Linux the child asks the kernel for SIGKILL when
its parent dies (``prctl(PR_SET_PDEATHSIG)`` between fork and exec). The kernel sends it when
the *thread* that forked the child exits, so the child is forked from the calling thread, the
one running ``trio.run`` (``trio.lowlevel.open_process`` forks in a worker thread, which trio
ends after a few idle seconds: its children would be killed then; a ``trio.run`` in a thread
of its own takes its children with it when that thread ends). Forking from the trio thread
blocks it for the fork and exec, a millisecond or two. Elsewhere (macOS) it is
``trio.lowlevel.open_process``: the child is stopped by its owner's ``async with``, not at a
kill.

:func:`run_child_process` is ``trio.run_process`` for such a child (a benchmark's workers
and servers): cancelled, it stops the child. A program turns SIGTERM (a CI timeout) into that
cancellation with :func:`sigterm_interrupts`, as trio does for Ctrl-C, so it stops what it
started itself, cleanly. A session's CLI is started so too (``actors/session/process.py``
takes the SDK's spawn over), with SIGTERM as its signal: the CLI answers it by killing the
tools it runs (each in a session of its own, which a SIGKILL of the CLI would leave running)
and exiting.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import trio

__all__ = [
    "die_with_parent",
    "open_child_process",
    "run_child_process",
    "sigterm_interrupts",
    "terminated",
]

_PR_SET_PDEATHSIG = 1
_LINUX = sys.platform.startswith("linux")
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True) if _LINUX else None


def die_with_parent(
    parent: int | None = None, *, signum: int = signal.SIGKILL
) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child sent ``signum`` (SIGKILL) when the thread that
    forks it exits (Linux; None elsewhere). ``parent``: the pid of the process forking (this
    one): a child whose parent already died before the request gets it at once."""
    if _libc is None:
        return None
    prctl = _libc.prctl
    expected = os.getpid() if parent is None else parent

    def preexec() -> None:  # in the child, between fork and exec: no allocation, no locks
        if prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0 or os.getppid() != expected:
            os.kill(os.getpid(), signum)

    return preexec


async def open_child_process(
    command: Sequence[str],
    *,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    death_signal: int = signal.SIGKILL,
    **options: Any,
) -> trio.Process:
    """``trio.lowlevel.open_process(command, ...)`` whose child is sent ``death_signal``
    (SIGKILL) when this process dies (see the module docstring). ``stdin``/``stdout``/
    ``stderr``: as ``subprocess.Popen`` takes them (``subprocess.PIPE`` gives the process a
    trio stream). The caller owns the process: stop it and ``await process.wait()``."""
    preexec = die_with_parent(signum=death_signal)
    if preexec is None:
        return await trio.lowlevel.open_process(
            command, stdin=stdin, stdout=stdout, stderr=stderr, **options
        )
    await trio.lowlevel.checkpoint()
    return _spawn(command, stdin, stdout, stderr, preexec, options)


@trio.lowlevel.enable_ki_protection  # a Ctrl-C comes at the next checkpoint, never mid-fork
def _spawn(
    command: Sequence[str],
    stdin: int | None,
    stdout: int | None,
    stderr: int | None,
    preexec: Callable[[], None],
    options: dict[str, Any],
) -> trio.Process:
    ours: list[int] = []  # the parent's ends of the pipes, until they are the streams'
    theirs: list[int] = []  # the child's ends, closed here once it has them

    def pipe(spec: int | None, *, to_child: bool) -> tuple[int | None, int | None]:
        if spec != subprocess.PIPE:
            return spec, None
        read, write = os.pipe()
        child, parent = (read, write) if to_child else (write, read)
        theirs.append(child)
        ours.append(parent)
        return child, parent

    try:
        child_in, parent_in = pipe(stdin, to_child=True)
        child_out, parent_out = pipe(stdout, to_child=False)
        child_err, parent_err = pipe(stderr, to_child=False)
        # In this thread, on purpose (see the module docstring): a fork of a millisecond or two.
        popen = subprocess.Popen(
            list(command),
            stdin=child_in,
            stdout=child_out,
            stderr=child_err,
            preexec_fn=preexec,
            **options,
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    streams = [
        None if fd is None else trio.lowlevel.FdStream(fd)
        for fd in (parent_in, parent_out, parent_err)
    ]
    # trio.Process has no public constructor; _create is how open_process makes one.
    process: trio.Process = trio.Process._create(popen, *streams)
    return process


async def run_child_process(
    command: Sequence[str],
    *,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    check: bool = True,
    task_status: trio.TaskStatus[trio.Process] = trio.TASK_STATUS_IGNORED,
    **options: Any,
) -> int:
    """``trio.run_process`` for a child started by :func:`open_child_process`: run it to its
    end and return its exit code (``subprocess.CalledProcessError`` for a non-zero one when
    ``check``). ``await nursery.start(partial(run_child_process, ...))`` gives the process
    (its pipes: yours to close) once it started. Cancelled: SIGTERM, then SIGKILL after 5 s, as
    ``trio.run_process`` does, and the process is waited for."""
    process = await open_child_process(
        command, stdin=stdin, stdout=stdout, stderr=stderr, **options
    )
    try:
        task_status.started(process)
        code = await process.wait()
    finally:
        if process.returncode is None:
            process.terminate()
            with trio.move_on_after(5, shield=True):
                await process.wait()
            if process.returncode is None:
                process.kill()
                with trio.CancelScope(shield=True):
                    await process.wait()
    if check and code != 0:
        raise subprocess.CalledProcessError(code, list(command))
    return code


def sigterm_interrupts() -> None:
    """From now on SIGTERM (what a CI timeout or ``kill`` sends) is Ctrl-C: trio raises
    ``KeyboardInterrupt`` in ``trio.run``'s main task at a safe point, so every nursery is
    cancelled and every ``async with`` stops what it started. Call it from the main thread,
    before ``trio.run``."""

    def interrupt(signum: int, frame: object) -> None:
        _terminated.append(signum)
        os.kill(os.getpid(), signal.SIGINT)  # trio's SIGINT handler delivers it safely

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # A shell starts a background job with SIGINT ignored; trio then leaves it so, and
        # the SIGINT above would be lost.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)


_terminated: list[int] = []


def terminated() -> bool:
    """Whether a ``KeyboardInterrupt`` came from SIGTERM (see :func:`sigterm_interrupts`):
    a program then exits with 143, as a process killed by SIGTERM does."""
    return bool(_terminated)
