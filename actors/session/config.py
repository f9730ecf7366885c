"""The deadlines of one session's actors (:class:`DriverConfig`)."""

from __future__ import annotations

import attrs

from claude_trio.protocol.checks import seconds


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
    """

    connect_timeout: float = attrs.field(default=20.0, validator=seconds)
    control_timeout: float = attrs.field(default=5.0, validator=seconds)
    interrupt_timeout: float = attrs.field(default=2.0, validator=seconds)
    abort_grace: float = attrs.field(default=3.0, validator=seconds)
    exit_grace: float = attrs.field(default=2.0, validator=seconds)
    close_grace: float = attrs.field(default=15.0, validator=seconds)
    stall_timeout: float = attrs.field(default=30.0, validator=seconds)
