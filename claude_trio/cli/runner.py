"""The session side of the ``claude-trio`` command: ``run`` (``--remote URL``: on a
``claude-trio serve`` server, through :mod:`claude_trio.client`) and ``demo``.

:func:`run_command` is what ``cli.session_command`` calls once the arguments are valid. Each
command is one session whose every event goes to the renderer; they differ only in the session
they open (``run``: the user's prompt on the real API, or with ``--offline`` on the built-in
offline model, :mod:`claude_trio.offline`; ``demo``: :mod:`claude_trio.cli.demo`). With
``--record FILE`` either writes a cassette of the CLI's traffic too. The exit code
follows the execution's final terminal event: 0 for a result that is not an error, 1 for an
error result, an abort, a fatal error, or a stream that ended without any terminal event; 130
after Ctrl-C.

Ctrl-C. While a session runs, SIGINT is taken from trio (``trio.open_signal_receiver``) instead
of letting trio raise ``KeyboardInterrupt`` at whatever checkpoint the main task is in: the first
Ctrl-C aborts the execution as ``abort()`` does (``session.abort()``: the CLI is interrupted, the
``aborted`` event is shown with the turn's usage, the CLI is disconnected when the block ends); a
second one - or a first one while the session is still connecting - cancels everything at once
(``open_session``'s teardown is shielded and bounded, so the CLI is still reaped). Either way
:func:`run_command` returns 130. Outside that window (trio starting or stopping) trio raises
``KeyboardInterrupt`` as usual and ``cli.main`` turns it into 130. A terminal's Ctrl-C also
reaches the ``claude`` child (same process group); that path was checked too: the turn still
ends as ``aborted``, 130, and the CLI is reaped.

Closed output (``claude-trio demo | head``): the execution is aborted, stdout is pointed at
/dev/null so no later flush fails, and the exit code is 1 - no traceback.

User input during ``run``: AskUserQuestion and MCP elicitations are asked interactively when
stdin is a terminal and the output is not ``--json``. Otherwise nobody can answer, so the session
does not intercept user input at all (``on_user_input=None``): the model is then not offered
AskUserQuestion and elicitations are cancelled, rather than the model asking questions that can
only expire after ``user_input_timeout`` ("manual" would hang until then too).

Tool approvals (``--permission-mode default`` or ``acceptEdits``) are asked at the terminal the
same way: ``y`` allow, ``n`` deny (with an optional message for the model), ``e`` allow with
an edited input (JSON), ``a`` always allow for the session. With nobody at a terminal each
approval is denied at once with a message saying no one could answer
(:func:`answer_unattended`): the model learns why and can say so, and nothing runs unapproved.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, assert_never

import attrs
import trio
from rich.console import Console

from claude_trio.actors.channel import SourceView
from claude_trio.actors.extensions.broker import UserInputHandler
from claude_trio.actors.session.boundary import raise_unwrapped
from claude_trio.actors.session.open import open_session
from claude_trio.cli.args import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SESSION_ERROR,
    build_execute_params,
    cassette_path,
    read_stdin_line,
)
from claude_trio.cli.demo import open_demo_session
from claude_trio.cli.render import EventSink, Renderer, ask_interactively
from claude_trio.client import RemoteSession, connect_gateway
from claude_trio.offline import open_offline_model
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import ClaudeTrioError, InvalidParamsError
from claude_trio.protocol.extensions.approvals import ASKING_MODES
from claude_trio.protocol.session.events import Event, Result, UserInputRequest, is_terminal


class RunnableSession(Protocol):
    """What the runner needs of a :class:`~claude_trio.actors.session.open.Session`."""

    @property
    def events(self) -> trio.abc.ReceiveChannel[Event]: ...

    async def abort(self) -> None: ...


SessionOpener = Callable[[], AbstractAsyncContextManager[RunnableSession]]
"""Opens the session to run (``open_session`` with its arguments bound)."""


def exit_code(terminal: Event | None) -> int:
    """The exit code for the execution's final terminal event (``None``: there was none)."""
    if isinstance(terminal, Result) and not terminal.is_error:
        return EXIT_OK
    return EXIT_SESSION_ERROR


def user_input_handler(
    args: argparse.Namespace, sink: EventSink, *, stdin_is_tty: bool
) -> UserInputHandler | None:
    """How ``run`` answers questions: interactively on a terminal, else not at all.

    See the module docstring for why "not at all" is ``None`` and not ``"manual"``.
    """
    if args.json or not stdin_is_tty:
        if getattr(args, "permission_mode", None) in ASKING_MODES:
            return answer_unattended
        return None
    # The questions go where the events go, so they appear in order with the rest.
    console = sink.console if isinstance(sink, Renderer) else Console(stderr=True)

    async def ask(request: UserInputRequest) -> Any:
        return await ask_interactively(request, console=console, read_line=read_stdin_line)

    return ask


UNATTENDED_DENIAL = (
    "No one could answer the permission request: claude-trio run has no terminal to ask at "
    "(stdin is not a terminal, or --json), so the tool call was denied."
)


async def answer_unattended(request: UserInputRequest) -> Any:
    """``run`` with an asking permission mode and nobody at a terminal: every tool approval is
    denied at once, saying why (rather than waiting for ``user_input_timeout``); questions get
    no answer and elicitations are cancelled, as when nothing is intercepted."""
    await trio.lowlevel.checkpoint()
    match request.source:
        case "tool_permission":
            return {"decision": "deny", "message": UNATTENDED_DENIAL}
        case "model-tool":
            return {}
        case "mcp-elicitation":
            return {"action": "cancel"}
        case _:
            assert_never(request.source)


@attrs.define(eq=False)
class _RunState:
    """What the interrupt watcher and the event loop share."""

    cancel_scope: trio.CancelScope
    session: RunnableSession | None = None
    interrupted: bool = False
    code: int = EXIT_SESSION_ERROR
    error: ClaudeTrioError | None = None


async def _watch_interrupts(
    interrupts: AsyncIterator[int], state: _RunState, nursery: trio.Nursery
) -> None:
    """First Ctrl-C: abort the execution; a second one (or one while connecting): cancel all."""
    async for _ in interrupts:
        session = state.session
        if state.interrupted or session is None:
            state.interrupted = True
            state.cancel_scope.cancel()
            return
        state.interrupted = True
        # In its own task: abort() waits for the CLI's confirmation, and a second Ctrl-C must
        # still be heard meanwhile.
        nursery.start_soon(session.abort)


def _output_closed(sink: EventSink, event: Event) -> bool:
    """Feed ``event``; True when whoever reads our output went away (``| head``)."""
    try:
        sink.feed(event)
    except BrokenPipeError:  # JsonLinesRenderer
        return True
    except SystemExit:
        # rich's Console turns a broken pipe into SystemExit(1) (Console.on_broken_pipe).
        return True
    return False


async def _show_events(
    opener: SessionOpener, sink: EventSink, state: _RunState, on_output_closed: Callable[[], None]
) -> int:
    if isinstance(sink, Renderer):
        sink.wait("starting claude…")
    terminal: Event | None = None
    async with opener() as session:
        state.session = session
        try:
            async for event in session.events:
                if _output_closed(sink, event):
                    on_output_closed()
                    # Nobody is watching: stop the agent rather than let it work unseen.
                    await session.abort()
                    return EXIT_SESSION_ERROR
                if is_terminal(event):
                    terminal = event
        finally:
            state.session = None
    return exit_code(terminal)


def _ignore() -> None:
    pass


async def run_session(
    opener: SessionOpener, sink: EventSink, *, on_output_closed: Callable[[], None] = _ignore
) -> int:
    """Open a session, feed every event to ``sink``; the exit code (see the module docstring).

    A :class:`~claude_trio.protocol.errors.ClaudeTrioError` raised while opening or running the
    session is re-raised as itself (not inside an exception group), for ``cli.main`` to map.
    When feeding ``sink`` fails with a broken pipe, ``on_output_closed`` is called, the
    execution is aborted and the exit code is 1.
    """
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:
            state = _RunState(cancel_scope=nursery.cancel_scope)
            nursery.start_soon(_watch_interrupts, interrupts, state, nursery)
            try:
                state.code = await _show_events(opener, sink, state, on_output_closed)
            except ClaudeTrioError as exc:
                state.error = exc
            finally:
                nursery.cancel_scope.cancel()  # the watcher (and an abort still confirming)
    if state.interrupted:
        return EXIT_INTERRUPTED
    if state.error is not None:
        raise state.error
    return state.code


def session_opener(args: argparse.Namespace, sink: EventSink) -> SessionOpener:
    """The session ``args.command`` runs; raises ``InvalidParamsError`` for bad parameters."""
    cassette = cassette_path(args)
    recording: dict[str, Any] = {} if cassette is None else {"record_to": cassette}
    match args.command:
        case "run" | "record":
            params = build_execute_params(args)
            handler = user_input_handler(args, sink, stdin_is_tty=sys.stdin.isatty())
            if getattr(args, "remote", None) is not None:
                return functools.partial(
                    open_remote_session,
                    args.remote,
                    os.environ.get("CLAUDE_TRIO_TOKEN", ""),
                    params,
                    on_user_input=handler,
                )
            if getattr(args, "offline", False):
                return functools.partial(
                    open_offline_session, params, on_user_input=handler, **recording
                )
            return functools.partial(open_session, params, on_user_input=handler, **recording)
        case "demo":
            return functools.partial(open_demo_session, **recording)
        case other:
            raise InvalidParamsError("command", other, "'run', 'record' or 'demo'")


@asynccontextmanager
async def open_offline_session(
    params: ExecuteParams,
    *,
    on_user_input: UserInputHandler | None = None,
    record_to: str | None = None,
) -> AsyncIterator[RunnableSession]:
    """``run --offline``: the session's CLI talks to the built-in offline model, served on
    127.0.0.1 for as long as the session runs (:func:`claude_trio.offline.open_offline_model`)."""
    async with (
        open_offline_model() as offline,
        open_session(
            params, on_user_input=on_user_input, env=offline.env, record_to=record_to
        ) as session,
    ):
        yield session


REMOTE_ABORT_GRACE = 10.0
"""How long leaving ``run --remote`` early may wait for the server to abort the session."""


class _AnsweredEvents(SourceView[Event]):
    """A remote session's events; each question is answered in a task of its own, by the
    handler or, without one (nobody at a terminal), with "no answer". Closing it closes the
    session's events too."""

    def __init__(
        self, session: RemoteSession, handler: UserInputHandler | None, nursery: trio.Nursery
    ) -> None:
        super().__init__(session.events)
        self._session = session
        self._handler = handler
        self._nursery = nursery
        #: The execution's final terminal event came (nothing left to stop on the server).
        self.ended = False

    def _admit(self, item: Any) -> Event:
        event: Event = item
        if isinstance(event, UserInputRequest):
            self._nursery.start_soon(self._answer, event)
        if is_terminal(event) and getattr(event, "final", True):
            self.ended = True
        return event

    async def _answer(self, request: UserInputRequest) -> None:
        if self._handler is not None:
            answer = await self._handler(request)
        elif request.source == "tool_permission":
            answer = await answer_unattended(request)
        else:
            await trio.lowlevel.checkpoint()
            answer = {} if request.source == "model-tool" else {"action": "decline"}
        await self._session.answer(request.request_id, answer)

    def _discard(self) -> None:
        super()._discard()
        self._session.events.close()


@attrs.define(eq=False)
class _RemoteRun:
    """What the runner needs of a session, over a :class:`RemoteSession`."""

    session: RemoteSession
    events: _AnsweredEvents

    async def abort(self) -> None:
        await self.session.abort()


@asynccontextmanager
async def open_remote_session(
    url: str,
    token: str,
    params: ExecuteParams,
    *,
    on_user_input: UserInputHandler | None = None,
) -> AsyncIterator[RunnableSession]:
    """``run --remote``: one session on a claude-trio server, through the client
    (:func:`claude_trio.client.connect_gateway`). Leaving the block before the execution's
    end stops it on the server too (a server's session does not stop with its client), as
    leaving ``open_session`` does. The caller's exception leaves as itself."""
    async with connect_gateway(url, token=token) as gateway:
        session = await gateway.open(params)
        caller: BaseException | None = None
        try:
            async with trio.open_nursery() as nursery:
                events = _AnsweredEvents(session, on_user_input, nursery)
                try:
                    yield _RemoteRun(session=session, events=events)
                except BaseException as exc:
                    caller = exc
                    raise
                finally:
                    nursery.cancel_scope.cancel()
                    if not events.ended:
                        with trio.move_on_after(REMOTE_ABORT_GRACE, shield=True):
                            await session.abort()
        except BaseExceptionGroup as group:
            raise_unwrapped(group, caller)


def run_command(args: argparse.Namespace, renderer: EventSink) -> int:
    """Run ``claude-trio run`` / ``demo``; return the exit code."""
    opener = session_opener(args, renderer)
    return trio.run(
        functools.partial(run_session, opener, renderer, on_output_closed=_silence_stdout)
    )


def _silence_stdout() -> None:
    """Point stdout at /dev/null once its reader is gone, so no later flush fails.

    The recipe of the Python docs ("Note on SIGPIPE"); rich does the same for its console.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
