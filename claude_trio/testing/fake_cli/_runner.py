"""The fake CLI's turn runner: the queue of user messages and the loop that runs their turns.

One turn runs at a time. A user message that arrives while a turn runs waits in the queue, where
the running turn can fold it in (``FakeTurn.fold_pending``, done by ``tool_result``); what is
still queued at the result starts the next turn. ``FakeTurn.wake`` queues a turn with no user
message, and ``FakeTurn.background`` runs a job past the result. When stdin has ended and nothing
is left to run, the process exits: with 1 if the last result was an error, as the real CLI does.

Interrupts, as the real CLI handles them for an SDK client: the running turn stops, and so do
background jobs (the CLI sweeps background subagents when an SDK client interrupts); queued
messages survive (the answer lists them under ``still_queued``, and they run as turns of their
own afterwards) unless the interrupt asked ``cancel_queued``, which cancels them (listed under
``cancelled``). An interrupt that finds no turn running latches: the next turn starts
interrupted.

The runner reports the process's state the way the real CLI does for the SDK host
(``session_state_changed``, ``sdk_host_only``): ``running`` when a user message or a wake-up
arrives while it was idle, ``idle`` when nothing is running or queued any more.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

import trio

from claude_trio.testing import frames
from claude_trio.testing.fake_cli._errors import ScriptError
from claude_trio.testing.fake_cli._input import UserInput
from claude_trio.testing.fake_cli._turn import BackgroundJob, FakeTurn, Wake

if TYPE_CHECKING:
    from claude_trio.testing.fake_cli._transport import FakeTransport


class TurnRunner:
    """The queue and the turn loop of one fake process; background jobs run in its nursery."""

    def __init__(self, process: FakeTransport) -> None:
        self._process = process
        self._pending: collections.deque[UserInput | Wake] = collections.deque()
        self._changed = trio.Event()
        #: The running turn, if any.
        self.current: FakeTurn | None = None
        self._turns = 0
        self._background = 0
        self._stdin_eof = False
        self._nursery: trio.Nursery | None = None
        self._latched = False
        self._state = "idle"
        self._background_scopes: set[trio.CancelScope] = set()

    @property
    def busy(self) -> bool:
        """A turn or a background job is running."""
        return self.current is not None or self._background > 0

    def _ping(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def enqueue(self, item: UserInput | Wake) -> None:
        self._pending.append(item)
        self._ping()

    @property
    def idle(self) -> bool:
        return not self._pending and self.current is None and self._background == 0

    async def report_state(self) -> None:
        """Emit ``session_state_changed`` when the state changed since the last report."""
        state = "idle" if self.idle else "running"
        if state == self._state:
            await trio.lowlevel.checkpoint()
        else:
            self._state = state
            process = self._process
            await process._emit(
                frames.session_state_changed(
                    state, session_id=process.session_id, uuid=process._next_id()
                )
            )

    def end_of_input(self) -> None:
        """Stdin ended: exit once nothing is left to run."""
        self._stdin_eof = True
        self._ping()

    def take_user_input(self) -> UserInput | None:
        """The queued user message at the head of the queue, taken out, if there is one."""
        if self._pending and isinstance(self._pending[0], UserInput):
            message = self._pending.popleft()
            assert isinstance(message, UserInput)
            return message
        return None

    def queued_uuids(self) -> list[str | None]:
        """The uuids of the queued user messages."""
        return [p.uuid for p in self._pending if isinstance(p, UserInput)]

    def interrupt(self) -> None:
        """Stop the running turn, if it has not finished; with none running, latch (the next
        turn starts interrupted)."""
        turn = self.current
        if turn is not None and not turn.finished:
            turn._interrupt()
        elif turn is None and self._pending:
            self._latched = True
        for scope in self._background_scopes:
            scope.cancel()

    def cancel_queued(self) -> list[str | None]:
        """Drop every queued user message (``cancel_queued``); returns their uuids."""
        cancelled = [p.uuid for p in self._pending if isinstance(p, UserInput)]
        self._pending = collections.deque(p for p in self._pending if not isinstance(p, UserInput))
        self._ping()
        return cancelled

    async def run_turns(self, nursery: trio.Nursery) -> None:
        """Run queued turns until stdin ends and nothing is left; ``nursery`` runs background
        jobs."""
        self._nursery = nursery
        process = self._process
        while True:
            await trio.lowlevel.checkpoint()
            while not self._pending:
                changed = self._changed  # taken first: a ping during the report is not lost
                await self.report_state()
                if self._stdin_eof and self._background == 0:
                    # stdin EOF and nothing left to do: the CLI exits, with 1 after an error
                    # result (as the real one does, for shell scripts).
                    process._terminate(1 if process._last_result_is_error else 0, ())
                    return
                await changed.wait()
            await self.report_state()
            if not self._pending:
                continue  # cancelled while the state was reported
            item = self._pending.popleft()
            self._turns += 1
            match item:
                case UserInput():
                    try:
                        responder = process.cli.responder_for_turn(self._turns)
                    except ScriptError as exc:
                        process._script_failed(exc)
                        return
                    messages = [item]
                case Wake(responder=responder):
                    messages = []
            turn = FakeTurn(process, self._turns, messages)
            if self._latched:
                self._latched = False
                turn._interrupt()
            self.current = turn
            try:
                await turn._run(responder)
            finally:
                self.current = None

    def spawn_background(self, job: BackgroundJob) -> None:
        assert self._nursery is not None
        self._background += 1

        async def run() -> None:
            await trio.lowlevel.checkpoint()
            scope = trio.CancelScope()
            self._background_scopes.add(scope)
            try:
                with scope:
                    await job()
            except Exception as exc:
                self._process._script_failed(exc)
            finally:
                self._background_scopes.discard(scope)
                self._background -= 1
                self._ping()

        self._nursery.start_soon(run)
