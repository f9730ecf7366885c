"""Replaying a cassette: a transport that plays a recorded CLI session back through the real SDK.

::

    async with open_session(params, on_user_input=answer, transport_factory=replay(PATH)) as s:
        async for event in s.events:
            ...

Record one with ``claude-trio run "prompt" --record PATH`` or ``open_session(...,
record_to=PATH)`` (``actors/session/recorder.py``). The replay is the CLI the cassette heard: the
SDK gets the recorded frames, the session maps them as it would the live CLI's, and what the
session writes (the prompt, pushes, answers, interrupts) is compared with what was recorded.

* **Time.** With ``timing="recorded"`` (the default) each frame comes at its recorded time
  after what it followed: under ``trio.testing.MockClock`` the replay is exact, in virtual
  time. ``timing="asap"`` plays each frame as soon as what it waits for was written.
* **Writes** are matched in order (writes recorded back to back, which raced, in any order),
  with the ids the SDK and the session pick at random bound to the recorded ones. A write the
  cassette did not record, or one it recorded that does not come within ``patience`` seconds
  of when it was due, ends the replay: the CLI "hangs up" (the session ends with an ``error``
  event whose message is the mismatch), :attr:`Replay.mismatches` lists it, and
  :meth:`Replay.check` raises :class:`CassetteMismatchError` with a diff naming the first
  difference. The ``replay_cassette`` pytest fixture checks at teardown.
* **Versions.** A cassette recorded with another CLI or SDK version than the installed ones
  replays with a :class:`CassetteVersionWarning`.
* **Stopping.** ``kill_now()`` ends the output at once (exit -9), as a killed CLI's would;
  ``kill_tools()`` has nothing to kill.

The rules of the player are ``protocol/cassettes/player.py``'s. :data:`DEMO_CASSETTE` and
:data:`DEMO_ABORT_CASSETTE` are cassettes of ``claude-trio demo`` (``scripts/record_cassettes``
records them again).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import claude_agent_sdk
import trio
from claude_agent_sdk import (
    ClaudeAgentOptions,
    CLIConnectionError,
    CLIJSONDecodeError,
    ProcessError,
    Transport,
)

from claude_trio.actors.session.sdk_private import BUNDLED_CLI_VERSION
from claude_trio.protocol.cassettes.format import Cassette, parse_cassette, version_notice
from claude_trio.protocol.cassettes.player import Emit, Finish, Mismatch, Player, Wait
from claude_trio.protocol.cassettes.scrub import Scrubber
from claude_trio.protocol.checks import MAX_SECONDS, check_number
from claude_trio.protocol.errors import (
    CassetteError,
    ClaudeTrioError,
    InvalidParamsError,
    LocalProtocolError,
)

__all__ = [
    "DEMO_ABORT_CASSETTE",
    "DEMO_CASSETTE",
    "CassetteError",
    "CassetteMismatchError",
    "CassetteVersionWarning",
    "Replay",
    "ReplayTransport",
    "load_cassette",
    "replay",
]

_CASSETTES = resources.files("claude_trio.testing") / "cassettes"
DEMO_CASSETTE: Path = Path(str(_CASSETTES / "demo.jsonl"))
"""A cassette of ``claude-trio demo``: the real CLI against the demo's scripted model, with
thinking, a todo list, a file read, a subagent running Bash, a question and the answer. Replay
it with ``demo_params(folder)`` and ``on_user_input=answer_demo_question``
(``claude_trio.cli.demo``)."""
DEMO_ABORT_CASSETTE: Path = Path(str(_CASSETTES / "demo-abort.jsonl"))
"""The demo aborted the moment the model asks its question (``session.abort()`` on the
``user_input_request`` event, before the answer): the interrupt, the CLI's interrupted turn."""

Timing = Literal["recorded", "asap"]


class CassetteMismatchError(ClaudeTrioError, CLIConnectionError):
    """The test wrote what the cassette did not record, or did not write what it did.

    To the SDK it is the CLI hanging up (a ``CLIConnectionError``): the session ends with an
    ``error`` event carrying this message.
    """


class CassetteVersionWarning(UserWarning):
    """The cassette was recorded with another CLI or SDK version than the installed ones."""


def load_cassette(path: str | os.PathLike[str]) -> Cassette:
    """Read and parse the cassette at ``path``; a malformed one raises
    :class:`~claude_trio.protocol.cassettes.format.CassetteError` naming the line and the
    problem."""
    if not isinstance(path, str | os.PathLike):
        raise InvalidParamsError("cassette", path, "a path, or a Cassette from load_cassette()")
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CassetteError(
            f"{source}: no such cassette (record one with `claude-trio run PROMPT --record FILE`)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"{source}: cannot be read ({exc})") from None
    return parse_cassette(text, source=source)


class Replay:
    """A transport factory that replays one cassette (``open_session(...,
    transport_factory=replay(cassette))``); each transport it builds plays it from the start.

    ``transports`` are the transports built, oldest first; :attr:`mismatches` what they found.
    """

    def __init__(self, cassette: Cassette, *, timing: Timing, patience: float) -> None:
        self.cassette = cassette
        self.timing = timing
        self.patience = patience
        self.transports: list[ReplayTransport] = []

    def __call__(self, options: ClaudeAgentOptions | None = None) -> ReplayTransport:
        transport = ReplayTransport(self, options or ClaudeAgentOptions())
        self.transports.append(transport)
        return transport

    @property
    def mismatches(self) -> list[str]:
        """Every mismatch found, one per transport that found one."""
        return [t.mismatch for t in self.transports if t.mismatch is not None]

    def check(self) -> None:
        """Raise :class:`CassetteMismatchError` for the first mismatch found, if any."""
        found = self.mismatches
        if found:
            raise CassetteMismatchError(found[0])


def replay(
    cassette: str | os.PathLike[str] | Cassette,
    *,
    timing: Timing = "recorded",
    patience: float = 10.0,
) -> Replay:
    """A transport factory that plays ``cassette`` (a path, or a :class:`Cassette`) back.

    ``timing``: ``"recorded"`` (each frame at its recorded time after what it followed) or
    ``"asap"``. ``patience``: how long after it was due a recorded write may be late before the
    replay fails. Warns :class:`CassetteVersionWarning` when the cassette was recorded with
    another CLI or SDK version than the installed ones.
    """
    if timing not in ("recorded", "asap"):
        raise InvalidParamsError("timing", timing, "'recorded' or 'asap'")
    seconds = check_number(
        "patience",
        patience,
        above=0,
        maximum=MAX_SECONDS,
        allowed="a number of seconds > 0 (at most a day)",
    )
    loaded = cassette if isinstance(cassette, Cassette) else load_cassette(cassette)
    notice = version_notice(
        loaded.header, cli_version=BUNDLED_CLI_VERSION, sdk_version=claude_agent_sdk.__version__
    )
    if notice is not None:
        warnings.warn(CassetteVersionWarning(f"{loaded.source}: {notice}"), stacklevel=2)
    return Replay(loaded, timing=timing, patience=seconds)


class ReplayTransport(Transport):
    """One replay of a cassette, behind the SDK's ``Transport`` interface (see the module
    docstring).

    Channels: none; no task of its own either. Its output is read by the SDK's reader task,
    which waits on an event every write, end of input, kill and close pokes.
    Cancellation: a read cancelled while it waits loses nothing (the frame is played on the
    next read).
    Error handling: a mismatch raises :class:`CassetteMismatchError` from ``write()`` and
    from the reader (the CLI hangs up), and is kept in :attr:`mismatch`; a recorded exit code
    other than 0 is the real transport's ``ProcessError``.
    """

    def __init__(self, owner: Replay, options: ClaudeAgentOptions) -> None:
        self.owner = owner
        self.options = options
        self.connected = False
        self.closed = False
        self.input_ended = False
        self.killed = False
        self._player: Player | None = None
        self._changed = trio.Event()
        self._scrubber = Scrubber.for_environment(os.environ, options.env or {})
        #: The mismatch that ended this replay (``None`` while there is none).
        self.mismatch: str | None = None

    @property
    def player(self) -> Player:
        if self._player is None:
            raise LocalProtocolError("the replay transport is not connected")
        return self._player

    def _poke(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _note(self, mismatch: Mismatch) -> None:
        if self.mismatch is None:
            self.mismatch = str(mismatch)
        self._poke()

    async def connect(self) -> None:
        await trio.lowlevel.checkpoint()
        if self.connected:
            return
        self.connected = True
        self._player = Player(
            self.owner.cassette,
            start=trio.current_time(),
            timing=self.owner.timing,
            patience=self.owner.patience,
            scrubber=self._scrubber,
        )

    def is_ready(self) -> bool:
        return self.connected and not self.closed and not self.killed and not self.input_ended

    async def write(self, data: str) -> None:
        await trio.lowlevel.checkpoint()
        if not self.is_ready():
            raise CLIConnectionError("ProcessTransport is not ready for writing")
        for line in data.splitlines():
            if not line.strip():
                continue
            mismatch = self.player.write(line, trio.current_time())
            if mismatch is not None:
                self._note(mismatch)
                raise CassetteMismatchError(str(mismatch))
        self._poke()

    async def end_input(self) -> None:
        await trio.lowlevel.checkpoint()
        if self.connected and not self.input_ended:
            self.input_ended = True
            self.player.end_input(trio.current_time())
            self._poke()

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        if not self.connected:
            raise CLIConnectionError("Not connected")
        return _ReplayReader(self)

    async def close(self) -> None:
        await trio.lowlevel.checkpoint()
        self.closed = True
        self._poke()

    def kill_now(self) -> None:
        """The CLI is killed: its output ends now, with exit code -9."""
        if self.connected and not self.killed:
            self.killed = True
            self._poke()

    def kill_tools(self) -> None:
        """A replayed CLI runs no tools: nothing to kill."""


class _ReplayReader:
    """The replayed CLI's output (an iterator class: the SDK cancels its reader at any await)."""

    def __init__(self, transport: ReplayTransport) -> None:
        self._transport = transport
        self._done = False

    def __aiter__(self) -> _ReplayReader:
        return self

    async def __anext__(self) -> dict[str, Any]:
        transport = self._transport
        while True:
            await trio.lowlevel.checkpoint()
            if self._done or transport.closed:
                raise StopAsyncIteration
            if transport.killed:
                self._done = True
                raise ProcessError(
                    "Command failed with exit code -9",
                    exit_code=-9,
                    stderr="Check stderr output for details",
                )
            changed = transport._changed
            step = transport.player.step(trio.current_time())
            match step:
                case Emit(record=record, value=value):
                    if record.kind == "stderr":
                        if transport.options.stderr is not None:
                            transport.options.stderr(value)
                        continue
                    return value  # type: ignore[no-any-return]
                case Wait(until=until):
                    with trio.move_on_at(until if until is not None else float("inf")):
                        await changed.wait()
                case Finish(record=record):
                    self._done = True
                    if record is not None and record.kind == "exit" and record.value:
                        raise ProcessError(
                            f"Command failed with exit code {record.value}",
                            exit_code=record.value,
                            stderr="Check stderr output for details",
                        )
                    if record is not None and record.kind == "error":
                        raise _recorded_error(record.value)
                    raise StopAsyncIteration
                case Mismatch():
                    transport._note(step)
                    self._done = True
                    raise CassetteMismatchError(str(step))


def _recorded_error(value: dict[str, Any]) -> Exception:
    message = str(value.get("message", "reading the CLI's output failed"))
    if value.get("type") == "CLIJSONDecodeError":
        return CLIJSONDecodeError(str(value.get("line", "")), ValueError(message))
    return CLIConnectionError(message)
