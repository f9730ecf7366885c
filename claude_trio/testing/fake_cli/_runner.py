"""The fake CLI's turn runner: the queue of user messages and the loop that runs their turns.

One turn runs at a time. A user message that arrives while a turn runs waits in the queue, where
the running turn can fold it in (``FakeTurn.fold_pending``, done by ``tool_result``); what is
still queued at the result starts the next turn. ``FakeTurn.wake`` queues a turn with no user
message, and ``FakeTurn.background`` runs a job past the result. When stdin has ended and nothing
is left to run, the process exits: with 1 if the last result was an error, as the real CLI does.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

import trio

from ._errors import ScriptError
from ._input import UserInput
from ._turn import BackgroundJob, FakeTurn, Wake

if TYPE_CHECKING:
    from ._transport import FakeTransport


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
        """Stop the running turn, if it has not finished."""
        turn = self.current
        if turn is not None and not turn.finished:
            turn._interrupt()

    async def run_turns(self, nursery: trio.Nursery) -> None:
        """Run queued turns until stdin ends and nothing is left; ``nursery`` runs background
        jobs."""
        self._nursery = nursery
        process = self._process
        while True:
            await trio.lowlevel.checkpoint()
            while not self._pending:
                if self._stdin_eof and self._background == 0:
                    # stdin EOF and nothing left to do: the CLI exits, with 1 after an error
                    # result (as the real one does, for shell scripts).
                    process._terminate(1 if process._last_result_is_error else 0, ())
                    return
                await self._changed.wait()
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
            try:
                await job()
            except Exception as exc:
                self._process._script_failed(exc)
            finally:
                self._background -= 1
                self._ping()

        self._nursery.start_soon(run)
