"""The ``claude-trio`` command: argument parsing, parameter building and exit codes.

``main`` is a thin shell: :func:`parse_args` and :func:`execute_params_kwargs` are pure, the
session itself runs in ``claude_trio.runner.run_command(args, renderer)``, and ``main`` maps the
outcome to an exit code:

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
from collections.abc import Callable, Sequence
from typing import TextIO

from rich.console import Console

from claude_trio.actors.recorder import check_record_to
from claude_trio.args import (
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
from claude_trio.protocol.errors import ClaudeTrioError, InvalidParamsError
from claude_trio.render import EventSink, JsonLinesRenderer, Renderer

__all__ = [
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
    "main",
    "make_renderer",
    "parse_args",
    "read_stdin_line",
]


def make_renderer(args: argparse.Namespace, stream: TextIO) -> EventSink:
    """JSON lines for ``--json``, else the terminal renderer (plain text when not a TTY)."""
    if args.json:
        return JsonLinesRenderer(stream)
    return Renderer(Console(file=stream), show_thinking=args.show_thinking)


RunCommand = Callable[[argparse.Namespace, EventSink], int]


def _load_run_command() -> RunCommand:
    # Imported on use: the runner pulls in the whole session machinery, which `--help`,
    # `--version` and usage errors never need.
    runner = importlib.import_module("claude_trio.runner")
    run_command: RunCommand = runner.run_command
    return run_command


FANOUT_COMMANDS = ("serve", "batch", "worker")
TOKEN_ENV = "CLAUDE_TRIO_TOKEN"


def _run_fanout_command(args: argparse.Namespace) -> int:
    """``serve`` and ``batch``: their own modules, loaded on use (like the runner)."""
    module = importlib.import_module(f"claude_trio.{args.command}")
    command: Callable[[argparse.Namespace], int] = getattr(module, f"{args.command}_command")
    return command(args)


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
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    if args.command in FANOUT_COMMANDS:
        return _run_fanout_command(args)
    cassette = cassette_path(args)
    try:
        if cassette is not None:
            check_record_to(cassette)  # fail before anything starts
        if args.command in ("run", "record"):
            if getattr(args, "remote", None) is not None:
                if not os.environ.get(TOKEN_ENV):
                    errors.print(
                        f"claude-trio: --remote needs the server's token in {TOKEN_ENV} "
                        "(claude-trio serve prints one, or set it on both sides)",
                        markup=False,
                    )
                    return EXIT_USAGE
            elif not has_credentials(
                os.environ, ollama_base_url=args.ollama_base_url, provider=args.provider
            ):
                errors.print(NO_CREDENTIALS_MESSAGE, markup=False)
                return EXIT_USAGE
            build_execute_params(args)
    except InvalidParamsError as exc:
        errors.print(f"claude-trio: {exc}", markup=False)
        return EXIT_USAGE
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


if __name__ == "__main__":
    raise SystemExit(main())
