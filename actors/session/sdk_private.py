"""Every private name of ``claude-agent-sdk`` that claude-trio relies on, in one place.

Checked against claude-agent-sdk 0.2.189 (bundled CLI 2.1.332); ``pyproject.toml`` pins the
range. When the SDK moves, this is the one module to read again. Each name, and the test that
breaks when it changes:

===============================================  ==============================================
private name                                     pinned by
===============================================  ==============================================
``_internal.message_parser.parse_message``       every test that maps a frame
                                                 (``tests/protocol/test_mapper.py``)
``_internal.transport.subprocess_cli``           ``tests/e2e/test_stop_e2e.py`` (the process is
``.SubprocessCLITransport`` and its ``_process``  killed by its pid)
``permission_prompt_tool_name="stdio"``          ``tests/e2e/test_user_input_e2e.py`` (without
(what ``types._configure_can_use_tool`` sets)    it ``can_use_tool`` never fires)
``ClaudeSDKClient`` reads ``permission_mode``    ``tests/actors/test_session.py::test_no_sdk_``
only for an advisory warning                     ``warning_reaches_the_user``
``ClaudeSDKClient._query``                       every session test (the read loop)
``Query._message_receive``                       every session test (the read loop)
``Query._send_control_request``                  ``tests/actors/test_stop.py`` (``interrupt``
                                                 with ``cancel_queued``)
``_internal.transport.subprocess_cli``           ``tests/testing/test_fake_cli.py`` (the fake's
``._LineFramer``, ``._parse_stdout_line``,       stdout reads exactly as the real transport's:
``._DEFAULT_MAX_BUFFER_SIZE``                    oversize, malformed, CRLF lines)
``_bundled/`` (where the wheel keeps the CLI)    ``tests/e2e/test_cli_smoke.py``
``_cli_version.__cli_version__``                 ``tests/testing/test_cassette.py`` (the version
                                                 a cassette is checked against)
``_internal.session_resume``                     ``tests/redis/test_store_resume_e2e.py`` (a
``.materialize_resume_session``                  conversation continues from a SessionStore)
``_internal.session_summary``                    ``tests/redis/test_redis_store.py`` (the SDK's
``.fold_session_summary``                        conformance suite checks the summaries)
``subprocess_cli.anyio.open_process`` (how the   ``tests/e2e/test_cli_dies_with_parent.py``
transport spawns the CLI); anyio's trio          (the CLI and its tool are gone once the
``Process`` and its stream wrappers              parent is SIGKILLed)
===============================================  ==============================================

The testing kit (``claude_trio.testing``) and the benchmarks import these from here too.

Why each is needed:

* ``parse_message``: the transport tap maps frames in the SDK's reader task (the hot path), so
  it parses them itself, exactly as the SDK would.
* ``SubprocessCLITransport``: the session builds the CLI's transport itself to wrap it (the tap)
  and to kill the CLI and what it started when it does not stop; ``_process`` is the
  ``anyio.abc.Process`` it spawned.
* ``permission_prompt_tool_name="stdio"``: the SDK routes permission prompts over stdio only
  for options that went through its ``_configure_can_use_tool``, which ``ClaudeSDKClient`` does
  only for a transport it builds. That helper also warns ``CanUseToolShadowedWarning`` under
  ``bypassPermissions``, where only AskUserQuestion reaches ``can_use_tool`` - exactly what the
  session wants it for. So :func:`route_permission_prompts` sets the one field itself, and
  :func:`client_options` gives the client (which reads ``permission_mode`` for nothing but that
  warning; the CLI gets its mode from the transport's own options) no permission mode.
* ``_query`` / ``_message_receive``: the read loop receives the SDK's own stream with
  ``receive_nowait`` (``receive_messages()`` costs an async-generator step per message and
  leaves its generators unclosed).
* ``_send_control_request``: ``ClaudeSDKClient.interrupt()`` takes no arguments, and a stop must
  also cancel the messages the CLI has queued (``cancel_queued``), or the CLI runs them as new
  turns right after the interrupt.
* ``_LineFramer``, ``_parse_stdout_line``, ``_DEFAULT_MAX_BUFFER_SIZE``: the fake CLI of the
  testing kit reads its stdout with the SDK's own framing, so a scripted stream fails exactly
  where the real one would.
* ``_bundled``: the folder of the wheel that holds the ``claude`` binary (``bundled_cli_path``).
* ``materialize_resume_session``: the SDK resumes from a ``SessionStore`` only for a transport
  it builds; the session builds its own, so it loads the transcript itself
  (``actors/session/store_resume.py``).
* ``fold_session_summary``: a ``SessionStore`` keeps the SDK's session summaries by folding
  each append into the last one (``actors/cluster/store.py``).
* ``__cli_version__``: the version of that binary, without running it: a cassette records the
  CLI version it was made with, and a replay warns when the installed one differs.
* ``subprocess_cli.anyio``: the transport spawns the CLI with ``anyio.open_process``, which
  forks in one of trio's worker threads; a child asking the kernel for a signal when its
  parent dies (``actors/children.py``) must be forked by a thread that lives as long as the
  process. The SDK module's ``anyio`` becomes a view of anyio (every name the same) whose
  ``open_process`` a transport takes over for its own ``connect`` only
  (:func:`spawning_with`); anyio's trio ``Process`` and stream wrappers make what that
  returns the same type anyio's would be.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import importlib.metadata
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, NoReturn

import anyio
import anyio.abc
import trio
from anyio.streams.memory import MemoryObjectReceiveStream
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

from claude_trio.protocol.config.versions import VERIFIED_SDK
from claude_trio.protocol.errors import LocalProtocolError


def _missing(name: str, cause: BaseException | None = None) -> NoReturn:
    """A private name of the SDK this module relies on is not there: say which, and what to do."""
    try:
        installed = importlib.metadata.version("claude-agent-sdk")
    except importlib.metadata.PackageNotFoundError:
        installed = "(not installed)"
    low, high = VERIFIED_SDK
    span = low if low == high else f"{low} to {high}"
    raise ImportError(
        f"claude-trio needs claude_agent_sdk's {name}, which claude-agent-sdk {installed} does "
        f"not have: install a version claude-trio was verified with ({span}), "
        f"e.g. pip install 'claude-agent-sdk=={high}'"
    ) from cause


try:
    from claude_agent_sdk._cli_version import __cli_version__
    from claude_agent_sdk._internal.message_parser import parse_message
    from claude_agent_sdk._internal.session_resume import materialize_resume_session
    from claude_agent_sdk._internal.session_summary import fold_session_summary
    from claude_agent_sdk._internal.transport import subprocess_cli as _subprocess_cli
    from claude_agent_sdk._internal.transport.subprocess_cli import (
        _DEFAULT_MAX_BUFFER_SIZE,
        SubprocessCLITransport,
        _LineFramer,
        _parse_stdout_line,
    )
except ImportError as exc:
    _missing(f"private names ({exc})", exc)

DEFAULT_MAX_BUFFER_SIZE = _DEFAULT_MAX_BUFFER_SIZE
LineFramer = _LineFramer
parse_stdout_line = _parse_stdout_line
BUNDLED_FOLDER = "_bundled"
BUNDLED_CLI_VERSION: str = __cli_version__
"""The version of the ``claude`` CLI the installed SDK bundles."""

__all__ = [
    "BUNDLED_CLI_VERSION",
    "BUNDLED_FOLDER",
    "DEFAULT_MAX_BUFFER_SIZE",
    "LineFramer",
    "SubprocessCLITransport",
    "anyio_process",
    "client_options",
    "fold_session_summary",
    "materialize_resume_session",
    "message_receive",
    "parse_message",
    "parse_stdout_line",
    "route_permission_prompts",
    "send_control_request",
    "spawning_with",
    "subprocess_of",
]

Spawn = Callable[..., Awaitable[anyio.abc.Process]]
_SPAWN: contextvars.ContextVar[Spawn | None] = contextvars.ContextVar("_SPAWN", default=None)


class _AnyioView:
    """anyio as the SDK's transport module sees it: every name is anyio's, except that
    ``open_process`` is the current task's :func:`spawning_with` spawn when it has one."""

    def __getattr__(self, name: str) -> Any:
        return getattr(anyio, name)

    @staticmethod
    async def open_process(*args: Any, **kwargs: Any) -> anyio.abc.Process:
        spawn = _SPAWN.get()
        if spawn is None:
            return await anyio.open_process(*args, **kwargs)
        return await spawn(*args, **kwargs)


if not isinstance(getattr(_subprocess_cli, "anyio", None), _AnyioView):
    if getattr(_subprocess_cli, "anyio", None) is not anyio:
        _missing("subprocess_cli.anyio (the transport no longer spawns with anyio)")
    setattr(_subprocess_cli, "anyio", _AnyioView())  # noqa: B010 (a module's private name)


def anyio_process(process: trio.Process) -> anyio.abc.Process:
    """``process`` as the ``anyio.abc.Process`` that ``anyio.open_process`` gives under trio
    (anyio's own trio wrappers)."""
    from anyio._backends._trio import Process, ReceiveStreamWrapper, SendStreamWrapper

    return Process(
        process,
        SendStreamWrapper(process.stdin) if process.stdin else None,
        ReceiveStreamWrapper(process.stdout) if process.stdout else None,
        ReceiveStreamWrapper(process.stderr) if process.stderr else None,
    )


@contextlib.contextmanager
def spawning_with(spawn: Spawn) -> Iterator[None]:
    """While the block runs, a subprocess transport's ``connect`` in this task spawns its CLI
    with ``await spawn(command, *, stdin, stdout, stderr, cwd, env, user)`` (the arguments
    it gives ``anyio.open_process``), which returns an ``anyio.abc.Process``."""
    token = _SPAWN.set(spawn)
    try:
        yield
    finally:
        _SPAWN.reset(token)


def route_permission_prompts(options: ClaudeAgentOptions) -> ClaudeAgentOptions:
    """The transport's options: with a ``can_use_tool``, permission prompts go over stdio."""
    if options.can_use_tool is None:
        return options
    return dataclasses.replace(options, permission_prompt_tool_name="stdio")


def client_options(options: ClaudeAgentOptions) -> ClaudeAgentOptions:
    """The ``ClaudeSDKClient``'s options for a transport built from ``options``."""
    if options.can_use_tool is None:
        return options
    if hasattr(options, "__post_init__"):  # not today's SDK: let its __init__ run
        return dataclasses.replace(options, permission_mode=None)
    # A shallow copy with one field changed: what dataclasses.replace gives for a dataclass
    # without __post_init__, without reading its ~50 fields one by one (once per session).
    changed = copy.copy(options)
    changed.permission_mode = None
    return changed


def _private(obj: object, name: str, owner: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError as exc:
        _missing(f"{owner}.{name}", exc)


def _query(client: ClaudeSDKClient) -> Any:
    query = _private(client, "_query", "ClaudeSDKClient")
    if query is None:
        raise LocalProtocolError("the ClaudeSDKClient is not connected")
    return query


def message_receive(client: ClaudeSDKClient) -> MemoryObjectReceiveStream[dict[str, Any]]:
    """The receive side of a connected client's message stream."""
    receive: MemoryObjectReceiveStream[dict[str, Any]] = _private(
        _query(client), "_message_receive", "Query"
    )
    return receive


async def send_control_request(client: ClaudeSDKClient, request: dict[str, Any]) -> dict[str, Any]:
    """Send one control request and return the CLI's response payload. The SDK's own deadline
    is 60 s: callers put theirs around it."""
    send = _private(_query(client), "_send_control_request", "Query")
    response: dict[str, Any] = await send(request)
    return response


def subprocess_of(transport: SubprocessCLITransport) -> anyio.abc.Process | None:
    """The CLI process a subprocess transport spawned (None before connect / after close)."""
    process: anyio.abc.Process | None = _private(
        transport, "_process", "SubprocessCLITransport"
    )
    return process
