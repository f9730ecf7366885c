"""The ``claude-trio`` command line, the pure part: arguments, parameters, exit codes.

Shared by the command (``claude_trio.cli``) and the runner of its sessions
(``claude_trio.runner``), so that neither imports the other's module.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
from collections.abc import Mapping, Sequence
from typing import Any

import trio

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.params import ArchitectureConfig, ExecuteParams

EXIT_OK = 0
EXIT_SESSION_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

CREDENTIAL_ENV_VARS: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
)
"""Any one of these (non-empty) lets the ``claude`` CLI reach a model: an API key, a bearer
token (``claude setup-token`` gives an OAuth one), or an Anthropic-compatible endpoint such as
Ollama's."""

NO_CREDENTIALS_MESSAGE = """\
claude-trio: no credentials for the Anthropic API.
  Get an API key at https://console.anthropic.com/ (Settings -> API Keys), then:
      export ANTHROPIC_API_KEY=sk-ant-...
  Or point it at an Anthropic-compatible server (e.g. Ollama):
      export ANTHROPIC_BASE_URL=http://localhost:11434   (or --ollama-base-url URL)
  Or see it work without a key:
      claude-trio demo"""

THINKING_MODES = ("adaptive", "enabled")
EFFORT_LEVELS = ("low", "medium", "high")


def _version() -> str:
    try:
        return importlib.metadata.version("claude-trio")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree, not installed
        return "unknown"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument(
        "--json", action="store_true", help="print one JSON event per line instead of text"
    )
    output.add_argument(
        "--no-thinking-display",
        dest="show_thinking",
        action="store_false",
        help="do not show the model's thinking (it still thinks)",
    )

    parser = argparse.ArgumentParser(
        prog="claude-trio",
        description="Run Claude Code agent sessions and watch their unified event stream.",
    )
    parser.add_argument("--version", action="version", version=f"claude-trio {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    prompt = argparse.ArgumentParser(add_help=False)
    _add_prompt_options(prompt)
    commands.add_parser(
        "run", parents=[output, prompt], help="run one prompt", description="Run one prompt."
    )
    record = commands.add_parser(
        "record",
        parents=[output, prompt],
        help="run one prompt and record the CLI's traffic to a cassette",
        description=(
            "Run one prompt, as `run` does, and write a cassette of everything the CLI wrote "
            "and was sent (secrets scrubbed), to replay in tests with "
            "claude_trio.testing.replay()."
        ),
    )
    record.add_argument(
        "--out", required=True, metavar="FILE", help="the cassette to write (JSON lines)"
    )

    demo = commands.add_parser(
        "demo",
        parents=[output],
        help="a scripted session: no API key, no network",
        description="Replay a scripted session through the real pipeline; no API key needed.",
    )
    demo.add_argument(
        "--record", metavar="FILE", help="also write a cassette of the CLI's traffic to FILE"
    )
    return parser


def _add_prompt_options(run: argparse.ArgumentParser) -> None:
    """The options of a command that runs one prompt (``run``, ``record``)."""
    run.add_argument("prompt", metavar="PROMPT", help="what to ask the agent")
    run.add_argument("--model", help="an alias (opus-4.6, sonnet, ...) or a full model id")
    run.add_argument(
        "--plan", action="store_true", help="plan mode: read-only tools, no edits or shell"
    )
    run.add_argument("--resume", metavar="ID", help="resume the session with this id")
    run.add_argument("--max-turns", type=_positive_int, metavar="N", help="cap the turns")
    run.add_argument("--cwd", metavar="DIR", help="the agent's working directory")
    run.add_argument(
        "--system-prompt",
        metavar="S",
        help="replace Claude Code's system prompt with S (default: Claude Code's own)",
    )
    run.add_argument("--thinking", choices=THINKING_MODES, help="extended thinking mode")
    run.add_argument(
        "--thinking-budget",
        type=_positive_int,
        metavar="N",
        help="thinking budget in tokens (for --thinking enabled on models that take one)",
    )
    run.add_argument("--effort", choices=EFFORT_LEVELS, help="how hard the model works")
    run.add_argument(
        "--ollama-base-url",
        metavar="URL",
        help="an Anthropic-compatible endpoint (becomes ANTHROPIC_BASE_URL for the CLI)",
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line (``sys.argv[1:]`` when ``argv`` is None); exits 2 on bad usage."""
    return build_parser().parse_args(argv)


def execute_params_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ExecuteParams`` keyword arguments for parsed ``run`` (or ``record``) arguments
    (pure).

    ``architecture_config`` is the keyword arguments of an ``ArchitectureConfig``. Without
    ``--system-prompt`` the agent gets Claude Code's own system prompt (the preset): the SDK
    would otherwise send an empty one.
    """
    return {
        "prompt": args.prompt,
        "model": args.model,
        "system_prompt": args.system_prompt,
        "max_turns": args.max_turns,
        "plan_mode": args.plan,
        "cwd": None if args.cwd is None else os.path.abspath(args.cwd),
        "resume_session_id": args.resume,
        "architecture_config": {
            "claude_thinking": args.thinking,
            "claude_thinking_budget": args.thinking_budget,
            "claude_effort": args.effort,
            "claude_use_preset": True if args.system_prompt is None else None,
            "ollama_base_url": args.ollama_base_url,
        },
    }


def build_execute_params(args: argparse.Namespace) -> ExecuteParams:
    """The validated ``ExecuteParams`` for ``run`` arguments; raises ``InvalidParamsError``."""
    kwargs = execute_params_kwargs(args)
    if kwargs["cwd"] is not None and not os.path.isdir(kwargs["cwd"]):
        raise InvalidParamsError("--cwd", args.cwd, "an existing directory")
    config = ArchitectureConfig(**kwargs.pop("architecture_config"))
    return ExecuteParams(**kwargs, architecture_config=config)


def cassette_path(args: argparse.Namespace) -> str | None:
    """Where ``record --out`` or ``demo --record`` writes its cassette (``None``: nowhere)."""
    path = getattr(args, "out", None) if args.command == "record" else getattr(args, "record", None)
    return None if path is None else str(path)


def has_credentials(env: Mapping[str, str], *, ollama_base_url: str | None = None) -> bool:
    """Whether the CLI has some way to reach a model (see :data:`CREDENTIAL_ENV_VARS`)."""
    return bool(ollama_base_url) or any(env.get(name) for name in CREDENTIAL_ENV_VARS)


async def read_stdin_line(prompt: str) -> str | None:
    """A ``read_line`` for ``ask_interactively``: one line of stdin, ``None`` at end of input.

    ``input()`` blocks, so it runs in a worker thread; on cancellation the thread is abandoned
    (it ends with the next line or at exit) so an abort is never held up by a silent user.
    """

    def read() -> str | None:
        try:
            return input(prompt)
        except EOFError:
            return None

    return await trio.to_thread.run_sync(read, abandon_on_cancel=True)
