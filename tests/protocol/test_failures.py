"""protocol/session/failures.py: what went wrong with the CLI, in words a user can act on."""

from __future__ import annotations

import errno

from claude_agent_sdk import CLIConnectionError, CLINotFoundError, ProcessError

from claude_trio.protocol.session.failures import describe_failure


def _spawn_failed(cause: Exception) -> CLIConnectionError:
    """What the SDK's transport raises when spawning failed with ``cause``."""
    wrapped = CLIConnectionError(f"Failed to start Claude Code: {cause}")
    wrapped.__cause__ = cause
    return wrapped


def test_a_missing_cli_names_the_path_tried() -> None:
    error = describe_failure(CLINotFoundError("Claude Code not found"), cli_path="/opt/claude")
    assert error.code == "cli_not_found"
    assert "/opt/claude" in error.message
    assert (error.errno, error.path) == (errno.ENOENT, "/opt/claude")


def test_a_file_that_cannot_execute_names_the_errno_and_the_path() -> None:
    cause = PermissionError(errno.EACCES, "Permission denied")
    error = describe_failure(_spawn_failed(cause), cli_path="/tmp/claude")
    assert error.code == "cli_not_found"
    assert "[Errno 13] Permission denied" in error.message
    assert "chmod +x /tmp/claude" in error.message
    assert (error.errno, error.path) == (errno.EACCES, "/tmp/claude")


def test_a_nul_in_the_command_line_is_a_config_error_not_a_missing_cli() -> None:
    error = describe_failure(_spawn_failed(ValueError("embedded null byte")), cli_path=None)
    assert error.code == "config"
    assert "NUL" in error.message
    assert "chmod" not in error.message


def test_a_command_line_over_the_limit_is_a_config_error() -> None:
    cause = OSError(errno.E2BIG, "Argument list too long")
    error = describe_failure(_spawn_failed(cause), cli_path=None)
    assert error.code == "config"
    assert "Argument list too long" in error.message
    assert "chmod" not in error.message


def test_an_exit_names_the_code_and_the_last_stderr_lines() -> None:
    error = describe_failure(
        ProcessError("boom", exit_code=3, stderr="x"), cli_path=None, stderr_tail=["fatal: a"]
    )
    assert error.code == "cli_exited"
    assert "exited with code 3" in error.message
    assert "fatal: a" in error.message
