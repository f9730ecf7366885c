"""The ``claude-trio`` command: argument parsing, parameter building and exit codes.

``main`` is a thin shell: it parses the arguments (:func:`parse_args`, pure) and calls the
command's function, found in one table, :data:`COMMANDS` (its module imported then). ``run``,
``record`` (``run --record`` under its own name) and ``demo`` are :func:`session_command`: it
checks what can be checked before anything starts (credentials, parameters, where a cassette
goes), runs the session in
``claude_trio.cli.runner.run_command(args, renderer)`` and maps the outcome to an exit code;
``serve``, ``batch`` and ``worker`` live in modules of their own and use the same codes:

* 0 - the session succeeded (``--help`` and ``--version`` too);
* 1 - the session ended in error (``run_command`` returned 1, or a claude-trio error escaped);
* 2 - a usage error: bad arguments, invalid parameters, no credentials (one clear line, no
  traceback);
* 130 - interrupted with Ctrl-C (the shell convention, 128 + SIGINT).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from rich.console import Console

from claude_trio.actors.session.recorder import check_record_to
from claude_trio.cli.args import (
    CREDENTIAL_ENV_VARS,
    EFFORT_LEVELS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SESSION_ERROR,
    EXIT_USAGE,
    NO_CREDENTIALS_MESSAGE,
    THINKING_MODES,
    build_execute_params,
    build_parser,
    cassette_path,
    execute_params_kwargs,
    has_credentials,
    parse_args,
    read_stdin_line,
)
from claude_trio.cli.render import EventSink, JsonLinesRenderer, Renderer
from claude_trio.cli.telemetry import TELEMETRY_COMMANDS, command_telemetry
from claude_trio.protocol.errors import ClaudeTrioError, InvalidParamsError

__all__ = [
    "COMMANDS",
    "CREDENTIAL_ENV_VARS",
    "EFFORT_LEVELS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SESSION_ERROR",
    "EXIT_USAGE",
    "NO_CREDENTIALS_MESSAGE",
    "THINKING_MODES",
    "build_execute_params",
    "build_parser",
    "cassette_path",
    "execute_params_kwargs",
    "has_credentials",
    "load_command",
    "main",
    "make_renderer",
    "parse_args",
    "read_stdin_line",
    "session_command",
]


def make_renderer(args: argparse.Namespace, stream: TextIO) -> EventSink:
    """JSON lines for ``--json``, else the terminal renderer (plain text when not a TTY).

    The demo's and ``--offline`` sessions are not offered for ``--resume``: they live in a
    temporary folder, deleted when the command ends."""
    if args.json:
        return JsonLinesRenderer(stream)
    kept = args.command != "demo" and not getattr(args, "offline", False)
    return Renderer(Console(file=stream), show_thinking=args.show_thinking, resumable=kept)


RunCommand = Callable[[argparse.Namespace, EventSink], int]
Command = Callable[[argparse.Namespace], int]

COMMANDS: Mapping[str, str] = {
    "run": "claude_trio.cli:session_command",
    "demo": "claude_trio.cli:session_command",
    "record": "claude_trio.cli:session_command",
    "serve": "claude_trio.cli.serve:serve_command",
    "batch": "claude_trio.batch:batch_command",
    "worker": "claude_trio.cli.worker:worker_command",
    "acp": "claude_trio.cli.acp:acp_command",
    "inbox": "claude_trio.cli.inbox:inbox_command",
}
"""Every command -> ``module:function``, the function that runs it with the parsed arguments
and returns the exit code. The module is imported when its command runs: the session
machinery and the servers are more than ``--help``, ``--version`` and usage errors need."""

TOKEN_ENV = "CLAUDE_TRIO_TOKEN"


def load_command(name: str) -> Command:
    """The function of command ``name`` (see :data:`COMMANDS`), its module imported now."""
    module, _, function = COMMANDS[name].partition(":")
    command: Command = getattr(importlib.import_module(module), function)
    return command


def _load_run_command() -> RunCommand:
    # Imported on use: the runner pulls in the whole session machinery.
    runner = importlib.import_module("claude_trio.cli.runner")
    run_command: RunCommand = runner.run_command
    return run_command


def _exit_code(code: object) -> int:
    """The int for a ``SystemExit`` code (argparse uses 0 and 2)."""
    if code is None:
        return EXIT_OK
    return code if isinstance(code, int) else EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``claude-trio``; returns the exit code (see the module docstring)."""
    try:
        args = parse_args(argv)
    except SystemExit as exit_:  # argparse has printed the usage error, help or version
        return _exit_code(exit_.code)
    command = load_command(args.command)
    if args.command not in TELEMETRY_COMMANDS:
        return command(args)
    with command_telemetry():
        return command(args)


def _errors() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _usage_problem(args: argparse.Namespace) -> str | None:
    """Why ``run`` / ``demo`` cannot start as asked (``None``: it can); raises
    ``InvalidParamsError`` for a bad parameter."""
    cassette = cassette_path(args)
    if cassette is not None:
        check_record_to(cassette)  # fail before anything starts
    if args.command not in ("run", "record"):
        return None
    if getattr(args, "remote", None) is not None:
        if args.offline or cassette is not None:
            option = "--offline" if args.offline else "--record"
            return (
                f"{option} is for a session run here; with --remote the server runs it "
                "(claude-trio serve --offline serves the offline model)"
            )
        if not os.environ.get(TOKEN_ENV):
            return (
                f"--remote needs the server's token in {TOKEN_ENV} "
                "(claude-trio serve prints one, or set it on both sides)"
            )
    elif not args.offline and not has_credentials(
        os.environ, ollama_base_url=args.ollama_base_url, provider=args.provider
    ):
        return NO_CREDENTIALS_MESSAGE.removeprefix("claude-trio: ")
    build_execute_params(args)
    return None


def session_command(args: argparse.Namespace) -> int:
    """``run``, ``record`` and ``demo``: one session, its events shown as they come
    (``claude_trio.cli.runner``)."""
    errors = _errors()
    try:
        usage = _usage_problem(args)
    except InvalidParamsError as exc:
        usage = str(exc)
    if usage is not None:
        errors.print(f"claude-trio: {usage}", markup=False)
        return EXIT_USAGE
    cassette = cassette_path(args)
    renderer = make_renderer(args, sys.stdout)
    problem: str | None = None
    try:
        code = _load_run_command()(args, renderer)
    except KeyboardInterrupt:
        code, problem = EXIT_INTERRUPTED, "interrupted"
    except InvalidParamsError as exc:
        code, problem = EXIT_USAGE, str(exc)
    except ClaudeTrioError as exc:
        code, problem = EXIT_SESSION_ERROR, f"error: {exc}"
    except BaseExceptionGroup as group:
        # Ctrl-C can surface from a nursery wrapped in a group; anything else is a bug to show.
        interrupts, rest = group.split(KeyboardInterrupt)
        if interrupts is None or rest is not None:
            raise
        code, problem = EXIT_INTERRUPTED, "interrupted"
    finally:
        renderer.close()  # stop the spinner before anything goes to stderr
    if problem is not None:
        errors.print(f"claude-trio: {problem}", markup=False)
    elif cassette is not None and code in (EXIT_OK, EXIT_SESSION_ERROR):
        errors.print(f"claude-trio: cassette written to {cassette}", markup=False)
    return code

