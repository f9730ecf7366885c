"""The fake CLI itself: the script and the settings shared by every process it starts."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions

from claude_trio.protocol.checks import check_number
from claude_trio.protocol.errors import InvalidParamsError, LocalProtocolError
from claude_trio.testing.fake_cli._errors import ScriptError
from claude_trio.testing.fake_cli._transport import FakeTransport
from claude_trio.testing.fake_cli._turn import FakeTurn, Responder


class FakeCLI:
    """A scripted fake CLI: configuration shared by every process it starts, and the factory.

    ``responder`` scripts each turn: an async function given a :class:`FakeTurn`, or a sequence
    of them (turn *n* uses the *n*-th; a turn beyond the end is a :class:`ScriptError`). The
    default answers every turn with the text ``"ok"``.

    Use ``fake.transport_for(options)`` (or ``fake(options)``, so the object itself is a
    ``transport_factory``) to get a new fake process for ``ClaudeSDKClient(options,
    transport=...)``. The SDK applies no CLI flags to a custom transport, so the fake reads what
    it needs from the options: ``model``, ``permission_mode``, ``cwd``, ``max_buffer_size``,
    ``stderr`` and ``extra_args["replay-user-messages"]`` (echo of user messages; override with
    ``replay_user_messages``).

    Fault switches: ``unanswered`` lists control-request subtypes the fake never answers (e.g.
    ``{"initialize"}`` or ``{"interrupt"}``); ``line_ending="\\r\\n"`` writes every frame with CRLF.

    Timing and versions: ``init_delay`` is how long the CLI takes from a user message to the
    start of its turn (``init``), the window in which a stop lands "before the turn started";
    ``interrupt_delay`` is how long it takes, once it confirmed an interrupt, to finish the
    interrupted turn (its interruption message and result; the real one takes 15-30 ms);
    ``cancel_queued=False`` makes it a CLI that ignores an interrupt's ``cancel_queued`` (queued
    messages survive and run afterwards, as with older CLIs); ``ignores_interrupts=True``
    confirms every interrupt and goes on regardless (a wedged CLI).
    """

    def __init__(
        self,
        responder: Responder | Sequence[Responder] | None = None,
        *,
        session_id: str | None = None,
        model: str | None = None,
        unanswered: Collection[str] = (),
        replay_user_messages: bool | None = None,
        line_ending: str = "\n",
        extra_initialize_response: Mapping[str, Any] | None = None,
        init_delay: float = 0.0,
        interrupt_delay: float = 0.0,
        cancel_queued: bool = True,
        ignores_interrupts: bool = False,
    ) -> None:
        if line_ending not in ("\n", "\r\n"):
            raise InvalidParamsError("line_ending", line_ending, 'use "\\n" or "\\r\\n"')
        self.responder = responder
        self.session_id = session_id
        self.model = model
        self.unanswered = frozenset(unanswered)
        self.replay_user_messages = replay_user_messages
        self.line_ending = line_ending
        self.extra_initialize_response = dict(extra_initialize_response or {})
        self.init_delay = check_number("init_delay", init_delay, minimum=0, allowed="seconds, >= 0")
        self.interrupt_delay = check_number(
            "interrupt_delay", interrupt_delay, minimum=0, allowed="seconds, >= 0"
        )
        self.cancel_queued = cancel_queued
        self.ignores_interrupts = ignores_interrupts
        #: Every process this fake started, oldest first.
        self.transports: list[FakeTransport] = []

    def transport_for(self, options: ClaudeAgentOptions | None = None) -> FakeTransport:
        """A new fake process that will be driven with ``options`` (recorded as given)."""
        transport = FakeTransport(self, options or ClaudeAgentOptions(), len(self.transports) + 1)
        self.transports.append(transport)
        return transport

    __call__ = transport_for

    @property
    def transport(self) -> FakeTransport:
        """The most recent process (most tests use exactly one)."""
        if not self.transports:
            raise LocalProtocolError("FakeCLI has no transport yet: call fake.transport_for()")
        return self.transports[-1]

    @property
    def script_errors(self) -> list[BaseException]:
        """Exceptions raised by scripts in any process (each made its process exit with 1)."""
        return [e for t in self.transports for e in t.script_errors]

    def responder_for_turn(self, number: int) -> Responder:
        responder = self.responder
        if responder is None:
            return _say_ok
        if isinstance(responder, Sequence):
            if number > len(responder):
                raise ScriptError(
                    f"turn {number} started but the FakeCLI script has only "
                    f"{len(responder)} responder(s)"
                )
            return responder[number - 1]
        return responder


async def _say_ok(turn: FakeTurn) -> None:
    await turn.text("ok")
