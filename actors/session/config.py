"""The deadlines of one session's actors (:class:`DriverConfig`)."""

from __future__ import annotations

from typing import Literal

import attrs

from claude_trio.protocol.checks import seconds
from claude_trio.protocol.errors import InvalidParamsError


def _check_flush(_inst: object, attribute: attrs.Attribute[str], value: object) -> None:
    if value not in ("batched", "eager"):
        raise InvalidParamsError(attribute.name, value, "'batched' or 'eager'")


@attrs.frozen(kw_only=True)
class DriverConfig:
    """Our deadlines (seconds), all far below the SDK's 60 s defaults.

    ``connect_timeout``: spawn + ``initialize``. ``control_timeout``: other control requests.
    ``interrupt_timeout``: how long the CLI has to confirm an interrupt before it is killed.
    ``abort_grace``: after a confirmed interrupt, how long the CLI has to finish the interrupted
    turn (its result carries the turn's usage) and report it is idle, before it is killed.
    ``exit_grace``: how long an idle CLI has to exit after its input ended, before it is killed.
    ``close_grace``: the bound on the whole teardown (it covers the three above and the kill).
    ``stall_timeout``: while a turn is open and the CLI has written nothing for this long, it is
    asked a cheap control request (``mcp_status``); a CLI that does not answer within
    ``control_timeout`` is wedged (stopped, hung): the execution ends with a ``cli_timeout``
    error and the CLI is killed. A CLI busy in a long tool answers, and goes on.

    With ``open_session(session_store=...)``: ``store_load_timeout``, how long each read of the
    store may take when a resume loads the transcript from it (the SDK's ``load_timeout_ms``);
    ``store_flush``, when the CLI's transcript is written to the store (the SDK's
    ``session_store_flush``): ``"batched"`` once per turn, ``"eager"`` after every frame.
    """

    connect_timeout: float = attrs.field(default=20.0, validator=seconds)
    control_timeout: float = attrs.field(default=5.0, validator=seconds)
    interrupt_timeout: float = attrs.field(default=2.0, validator=seconds)
    abort_grace: float = attrs.field(default=3.0, validator=seconds)
    exit_grace: float = attrs.field(default=2.0, validator=seconds)
    close_grace: float = attrs.field(default=15.0, validator=seconds)
    stall_timeout: float = attrs.field(default=30.0, validator=seconds)
    store_load_timeout: float = attrs.field(default=60.0, validator=seconds)
    store_flush: Literal["batched", "eager"] = attrs.field(
        default="batched", validator=_check_flush
    )
