"""The checks of a fleet's session options: by name and type, before any session starts.

A fleet passes its ``open_session`` keywords (:data:`SESSION_OPTIONS`) to every session;
:func:`check_session_options` refuses an unknown key or a value of the wrong type by name when
the fleet opens or a session starts, instead of letting each session fail later with a
misleading error. :func:`check_together` refuses options that cannot go together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from claude_trio.actors.session.driver import DriverConfig
from claude_trio.actors.session.open_checks import MIN_BUFFER_SIZE, check_session_store
from claude_trio.actors.session.pool import CLIPool
from claude_trio.actors.session.tracing import check_tracing_options
from claude_trio.protocol.checks import check_env, check_int, check_text
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.custom_tools import check_custom_tools
from claude_trio.protocol.extensions.hooks import check_hooks
from claude_trio.protocol.fanout.governor import (
    DEFAULT_GOVERNOR,
    DEFAULT_START_LIMIT,
    DefaultGovernor,
    GovernorConfig,
)

__all__ = [
    "SESSION_OPTIONS",
    "check_pool",
    "check_session_options",
    "check_together",
    "fleet_governor",
]

SESSION_OPTIONS: frozenset[str] = frozenset(
    {
        "transport_factory",
        "env",
        "cli_path",
        "stderr",
        "max_buffer_size",
        "config",
        "pool",
        "custom_tools",
        "hooks",
        "session_store",
        "tracer_provider",
        "trace_content",
        "meter_provider",
    }
)
"""The ``open_session`` keywords a fleet passes through (``on_user_input`` is always manual).
``custom_tools`` and ``hooks`` are the operator's code: a fleet served by the gateway gives
them to remote sessions too, but no client can send any."""


def check_session_options(options: Mapping[str, Any]) -> None:
    """Refuse an unknown key or a value of the wrong type by name, before any session starts
    (a wrong value would otherwise fail every session later, each with a misleading error)."""
    for key, value in options.items():
        if key == "on_user_input":
            raise InvalidParamsError(
                "on_user_input",
                value,
                "not an option of a fleet: its sessions are answered with FleetSession.answer()",
            )
        if key not in SESSION_OPTIONS:
            raise InvalidParamsError(
                "session option", key, "one of " + ", ".join(sorted(SESSION_OPTIONS))
            )
        if value is None:
            continue
        if key == "pool":
            if not isinstance(value, CLIPool):
                raise InvalidParamsError("pool", value, "a CLIPool (open_cli_pool) or None")
            # Fleet sessions answer user input with FleetSession.answer(): say it now, not
            # as a failure of every session.
            value.check(user_input=True)
            continue
        match key:
            case "transport_factory" | "stderr":
                if not callable(value):
                    raise InvalidParamsError(key, value, "a callable or None")
            case "env":
                check_env("env", value)
            case "cli_path":
                check_text("cli_path", value)
            case "max_buffer_size":
                check_int("max_buffer_size", value, MIN_BUFFER_SIZE)
            case "config":
                if not isinstance(value, DriverConfig):
                    raise InvalidParamsError("config", value, "a DriverConfig or None")
            case "custom_tools":
                check_custom_tools(value)
            case "hooks":
                check_hooks(value)
            case "session_store":
                check_session_store(value)
            case "tracer_provider":
                check_tracing_options(value, None)
            case "trace_content":
                check_tracing_options(None, value)
            case "meter_provider":
                check_tracing_options(None, None, value)
    check_together(options)


def check_together(options: Mapping[str, Any]) -> None:
    """Options that cannot go together (checked again on the merged options of a start)."""
    if options.get("pool") is not None and options.get("custom_tools"):
        raise InvalidParamsError(
            "pool", options["pool"], "None with custom_tools (a warm CLI has no custom tools)"
        )
    if options.get("pool") is not None and options.get("hooks"):
        raise InvalidParamsError(
            "pool", options["pool"], "None with hooks (a warm CLI has no hooks)"
        )


def fleet_governor(
    governor: GovernorConfig | DefaultGovernor | None,
    budget_usd: float | None,
    governor_random: Callable[[], float],
    *,
    max_live: int,
) -> GovernorConfig | None:
    """``open_fleet``'s governor settings, checked: the default one starts at
    ``DEFAULT_START_LIMIT`` model requests at once (slow start finds more in a few turns), and
    ``budget_usd`` is the config's fleet budget."""
    if governor is DEFAULT_GOVERNOR:
        governor = GovernorConfig(
            max_live=max_live, initial_limit=min(DEFAULT_START_LIMIT, max_live)
        )
    if not (governor is None or isinstance(governor, GovernorConfig)):
        raise InvalidParamsError(
            "governor", governor, "a GovernorConfig, None (no governor) or DEFAULT_GOVERNOR"
        )
    if budget_usd is not None:
        if governor is None:
            raise InvalidParamsError(
                "budget_usd", budget_usd, "None when governor=None (a budget needs the governor)"
            )
        governor = attrs.evolve(governor, budget_usd=budget_usd)
    if not callable(governor_random):
        raise InvalidParamsError("governor_random", governor_random, "a callable -> [0, 1)")
    return governor


def check_pool(session_options: Mapping[str, Any], max_live: int) -> None:
    """A fleet's ``pool=`` must leave its sessions a slot: its warm CLIs count against
    ``max_live``."""
    pool = session_options.get("pool")
    if isinstance(pool, CLIPool) and pool.size >= max_live:
        raise InvalidParamsError(
            "pool",
            f"a pool of {pool.size}",
            f"fewer warm CLIs than max_live={max_live}: they count against it (together never "
            "more CLIs than the cap), and sessions need at least one slot",
        )
