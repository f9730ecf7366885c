"""What went wrong with the CLI, in words a user can act on (pure).

:func:`describe_failure` turns an exception the SDK or its transport raised into the ``error``
event that names the cause and the fix: a missing or unexecutable binary (with the path tried),
an exit code with the CLI's last stderr lines, a line over the SDK's buffer cap, a malformed
line, a deadline.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence

from claude_agent_sdk import CLIConnectionError, CLIJSONDecodeError, CLINotFoundError, ProcessError

from claude_trio.protocol.session.events import Error, ErrorCode

BUNDLED_CLI = "the bundled CLI"


def stderr_suffix(stderr_tail: Sequence[str]) -> str:
    """``"; last stderr lines: ..."`` when the CLI wrote any, else ``""``."""
    if not stderr_tail:
        return ""
    return "; last stderr lines:\n" + "\n".join(stderr_tail)


def _spawn_failure(exc: BaseException, cli_path: str | None) -> Error:
    """Starting the process failed: say whether the binary or the command line was at fault."""
    cause = exc.__cause__
    path = cli_path or BUNDLED_CLI
    if isinstance(cause, ValueError) and "null byte" in str(cause):
        return Error(
            code="config",
            message="an option the CLI gets on its command line or in its environment holds a "
            f"NUL character, which no process can be given ({cause}); remove it",
        )
    if isinstance(cause, OSError) and cause.errno == errno.E2BIG:
        return Error(
            code="config",
            message="the CLI's command line and environment are over the system's limit "
            f"([Errno {cause.errno}] {cause.strerror}): an option is too long (a system "
            "prompt, an environment value); shorten it",
        )
    where = f"[Errno {cause.errno}] {cause.strerror}" if isinstance(cause, OSError) else str(exc)
    return Error(
        code="cli_not_found",
        message=(
            f"could not start the claude CLI at {path} ({where}). Check that the file is an "
            f"executable claude binary (chmod +x {path}), or drop cli_path= to use the one "
            "bundled with claude-agent-sdk"
        ),
        errno=cause.errno if isinstance(cause, OSError) else None,
        path=cli_path,
    )


def describe_failure(
    exc: BaseException, *, cli_path: str | None, stderr_tail: Sequence[str] = ()
) -> Error:
    """The fatal ``error`` event for ``exc`` (``cli_path``: the path tried, None = bundled)."""
    code: ErrorCode
    if isinstance(exc, CLINotFoundError):
        return Error(
            code="cli_not_found",
            message=(
                f"{exc}. The claude CLI ships inside the claude-agent-sdk wheel "
                f"(claude_agent_sdk/_bundled/claude): reinstall claude-agent-sdk, or pass "
                f"cli_path= / put `claude` on PATH. Tried: {cli_path or BUNDLED_CLI}"
            ),
            errno=errno.ENOENT,
            path=cli_path,
        )
    elif isinstance(exc, ProcessError):
        code = "cli_exited"
        message = f"the CLI exited with code {exc.exit_code}" + stderr_suffix(stderr_tail)
    elif isinstance(exc, CLIJSONDecodeError):
        code = "transport"
        if "maximum buffer size" in str(exc):
            message = (
                f"the CLI wrote a line over the SDK's buffer cap: {exc.line}. Raise it with "
                "open_session(max_buffer_size=...)"
            )
        else:
            message = f"the CLI wrote a malformed line ({exc.original_error}): {exc.line[:200]!r}"
    elif isinstance(exc, TimeoutError):
        code = "cli_timeout"
        message = str(exc) or "the CLI did not answer in time"
    elif isinstance(exc, CLIConnectionError) and "Failed to start" in str(exc):
        return _spawn_failure(exc, cli_path)
    elif isinstance(exc, CLIConnectionError):
        code = "cli_exited"
        message = f"lost the connection to the CLI: {exc}" + stderr_suffix(stderr_tail)
    else:
        code = "internal"
        message = f"{type(exc).__name__}: {exc}"
    return Error(message=message, code=code)
