"""What went wrong with the CLI, in words a user can act on (pure).

:func:`describe_failure` turns an exception the SDK or its transport raised into the ``error``
event that names the cause and the fix: a missing or unexecutable binary (with the path tried),
an exit code with the CLI's last stderr lines, a line over the SDK's buffer cap, a malformed
line, a deadline.
"""

from __future__ import annotations

from collections.abc import Sequence

from claude_agent_sdk import CLIConnectionError, CLIJSONDecodeError, CLINotFoundError, ProcessError

from .events import Error, ErrorCode

BUNDLED_CLI = "the bundled CLI"


def stderr_suffix(stderr_tail: Sequence[str]) -> str:
    """``"; last stderr lines: ..."`` when the CLI wrote any, else ``""``."""
    if not stderr_tail:
        return ""
    return "; last stderr lines:\n" + "\n".join(stderr_tail)


def describe_failure(
    exc: BaseException, *, cli_path: str | None, stderr_tail: Sequence[str] = ()
) -> Error:
    """The fatal ``error`` event for ``exc`` (``cli_path``: the path tried, None = bundled)."""
    code: ErrorCode
    if isinstance(exc, CLINotFoundError):
        code = "cli_not_found"
        message = (
            f"{exc}. The claude CLI ships inside the claude-agent-sdk wheel "
            f"(claude_agent_sdk/_bundled/claude): reinstall claude-agent-sdk, or pass "
            f"cli_path= / put `claude` on PATH. Tried: {cli_path or BUNDLED_CLI}"
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
        code = "cli_not_found"
        path = cli_path or BUNDLED_CLI
        message = (
            f"could not start the claude CLI at {path}: {exc}. Check that the file is an "
            f"executable claude binary (chmod +x {path}), or drop cli_path= to use the one "
            "bundled with claude-agent-sdk"
        )
    elif isinstance(exc, CLIConnectionError):
        code = "cli_exited"
        message = f"lost the connection to the CLI: {exc}" + stderr_suffix(stderr_tail)
    else:
        code = "internal"
        message = f"{type(exc).__name__}: {exc}"
    return Error(message=message, code=code)
