"""What every part of a :class:`~claude_trio.testing.fake_cli.FakeTurn` shares: the turn's
identity and state, its user messages, and the way its frames reach stdout."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

import trio

from claude_trio.testing import frames
from claude_trio.testing.fake_cli._input import UserInput

if TYPE_CHECKING:
    from claude_trio.testing.fake_cli._control import PendingRequest
    from claude_trio.testing.fake_cli._transport import FakeTransport


class Ids(TypedDict):
    """The ids every frame of a turn carries."""

    session_id: str
    uuid: str


class TurnCore:
    """The base of :class:`~claude_trio.testing.fake_cli.FakeTurn`: its state and primitives."""

    def __init__(self, process: FakeTransport, number: int, messages: list[UserInput]) -> None:
        self.process = process
        self.number = number
        #: The user messages this turn consumed (the first, then any folded ones).
        self.messages = messages
        self.session_id = process.session_id
        self.finished = False
        self.interrupted = False
        self._scope: trio.CancelScope | None = None
        self._started_at = trio.current_time()
        # The open API call, and the sums over this turn's API calls.
        self._message_id: str | None = None
        self._message_usage: dict[str, int] = {}
        self._block_index = 0
        self._api_calls = 0
        self._usage: dict[str, int] = {}
        self._cost = 0.0
        self._texts: list[str] = []
        self._open_tools: set[str] = set()
        # The control requests this turn sent (cancelled if the turn is interrupted).
        self._requests: list[PendingRequest] = []

    @property
    def prompt(self) -> str:
        """The text of the message that started this turn ('' for a follow-up turn)."""
        return self.messages[0].text if self.messages else ""

    @property
    def user_message_uuids(self) -> list[str]:
        return [m.uuid for m in self.messages if m.uuid is not None]

    # -- output ---------------------------------------------------------------------------------

    def _ids(self) -> Ids:
        """The session id and a fresh uuid, for the next frame."""
        return {"session_id": self.session_id, "uuid": self.process._next_id()}

    async def _emit(self, frame: Mapping[str, Any]) -> None:
        await self.process._emit(frame)

    async def frame(self, body: Mapping[str, Any]) -> None:
        """Emit any frame (``session_id`` and ``uuid`` are filled in when missing)."""
        await self._emit(frames.with_ids(body, **self._ids()))

    async def raw(self, text: str) -> None:
        """Write raw text to stdout, no newline added (partial lines, noise, oversize lines)."""
        await self.process._emit_line(text)

    async def sleep(self, seconds: float) -> None:
        """Wait on the trio clock (jumps instantly under ``MockClock(autojump_threshold=0)``)."""
        await trio.sleep(seconds)

    def _now_iso(self) -> str:
        # A timestamp on the trio clock, so frames are reproducible under MockClock.
        return frames.timestamp_at(trio.current_time())

    # -- user messages --------------------------------------------------------------------------

    async def _echo(self, message: UserInput) -> None:
        await trio.lowlevel.checkpoint()
        if not self.process.replay_user_messages:
            return
        frame = frames.user_echo(
            message.content,
            uuid=message.uuid or self.process._next_id(),
            timestamp=self._now_iso(),
            session_id=self.session_id,
        )
        # The fake draws one more id here and leaves it unused; the ids of every later frame
        # count it.
        self.process._next_id()
        await self._emit(frame)

    async def fold_pending(self) -> list[UserInput]:
        """Consume every queued user message into this turn (echo + listed in its result)."""
        await trio.lowlevel.checkpoint()
        folded = []
        while (message := self.process._runner.take_user_input()) is not None:
            self.messages.append(message)
            folded.append(message)
            await self._echo(message)
        return folded
