"""The checks of ``open_session``'s arguments: a wrong one is refused before anything starts,
with an error naming it and what it takes."""

from __future__ import annotations

from claude_trio.actors.session.core import DriverConfig
from claude_trio.actors.session.pool import CLIPool
from claude_trio.actors.session.recorder import check_record_to
from claude_trio.protocol.checks import check_bool, check_env, check_int, check_text
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.approvals import ASKING_MODES
from claude_trio.protocol.extensions.custom_tools import CustomTool, check_custom_tools
from claude_trio.protocol.extensions.hooks import Hook, check_hooks
from claude_trio.protocol.extensions.options import check_server_name

__all__ = [
    "MIN_BUFFER_SIZE",
    "check_extensions",
    "check_options",
    "check_session_store",
    "check_session_store_with_pool",
]

MIN_BUFFER_SIZE = 1024
"""The smallest ``max_buffer_size`` (bytes of one CLI output line) a session takes."""


def check_options(
    params: object,
    on_user_input: object,
    transport_factory: object,
    env: object,
    cli_path: object,
    stderr: object,
    max_buffer_size: object,
    config: object,
    pool: object,
    passthrough: object,
    record_to: object = None,
) -> None:
    """Refuse a wrong argument before anything starts, naming it."""
    if not isinstance(params, ExecuteParams):
        raise InvalidParamsError("params", params, "an ExecuteParams")
    if on_user_input is not None and on_user_input != "manual" and not callable(on_user_input):
        raise InvalidParamsError(
            "on_user_input",
            on_user_input,
            'None, "manual", or an async function taking a UserInputRequest',
        )
    if on_user_input is None and params.permission_mode in ASKING_MODES:
        raise InvalidParamsError(
            "on_user_input",
            on_user_input,
            f'an async handler or "manual": permission_mode={params.permission_mode!r} asks '
            'before tool calls (user_input_request events with source="tool_permission"), and '
            "without anyone to answer the CLI would deny each of them; or choose a mode that "
            "never asks ('bypassPermissions', 'dontAsk', 'plan')",
        )
    for name, value in (("transport_factory", transport_factory), ("stderr", stderr)):
        if value is not None and not callable(value):
            raise InvalidParamsError(name, value, "None or a callable")
    if env is not None:
        check_env("env", env)
    if cli_path is not None:
        check_text("cli_path", cli_path, allowed="None or a path to the claude binary")
    if max_buffer_size is not None:
        allowed = f"None or an int >= {MIN_BUFFER_SIZE}"
        check_int("max_buffer_size", max_buffer_size, MIN_BUFFER_SIZE, allowed=allowed)
    if config is not None and not isinstance(config, DriverConfig):
        raise InvalidParamsError("config", config, "None or a DriverConfig")
    if pool is not None and not isinstance(pool, CLIPool):
        raise InvalidParamsError("pool", pool, "None or a CLIPool (open_cli_pool)")
    check_bool("passthrough", passthrough)
    if record_to is not None:
        check_record_to(record_to)
        if pool is not None:
            raise InvalidParamsError(
                "record_to", record_to, "not with pool=: a pool's CLIs start before the session"
            )


def check_session_store(session_store: object) -> None:
    """Refuse what is not a ``SessionStore`` (it needs at least ``append`` and ``load``)."""
    if session_store is None:
        return
    for method in ("append", "load"):
        if not callable(getattr(session_store, method, None)):
            raise InvalidParamsError(
                "session_store",
                session_store,
                "None or a SessionStore (with async append and load), e.g. RedisSessionStore",
            )


def check_session_store_with_pool(session_store: object, pool: object) -> None:
    """``check_session_store``, and never with a pool (its CLIs start before the session)."""
    check_session_store(session_store)
    if session_store is not None and pool is not None:
        raise InvalidParamsError(
            "session_store", session_store, "not with pool=: a pool's CLIs start before the session"
        )


def check_extensions(
    params: ExecuteParams, custom_tools: object, pool: object, hooks: object = ()
) -> tuple[tuple[CustomTool, ...], tuple[Hook, ...]]:
    """The custom tools and hooks, checked, and what they and the inline skills need of the
    rest."""
    tools = check_custom_tools(custom_tools)
    checked_hooks = check_hooks(hooks)
    if tools:
        check_server_name(params.mcp_servers)
    if pool is not None and (tools or checked_hooks or params.inline_skills):
        raise InvalidParamsError(
            "pool",
            pool,
            "None with custom_tools or inline_skills (or hooks): a warm CLI was started before "
            "the session's own tools, hooks and skills existed",
        )
    return tools, checked_hooks
