"""The ``claude-trio`` command line, the pure part: arguments, parameters, exit codes.

Shared by the command (``claude_trio.cli``) and the runner of its sessions
(``claude_trio.cli.runner``), so that neither imports the other's module.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import trio
from claude_agent_sdk import ClaudeAgentOptions

from claude_trio.actors.session.credentials import credentials_refusal
from claude_trio.cli.number_args import (
    _positive_float,
    add_governor_options,
)
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.permissions import PERMISSION_MODES
from claude_trio.protocol.config.providers import PROVIDER_NAMES
from claude_trio.protocol.config.subagents import SubagentDefinition, subagent_from_mapping
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.scope import SCOPE_ENFORCEMENTS, SETTING_SOURCES
from claude_trio.protocol.extensions.skills import InlineSkill

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
  Or log the CLI in (claude login), as a session accepts too.
  Or see it work without a key:
      claude-trio demo"""

THINKING_MODES = ("adaptive", "enabled")
EFFORT_LEVELS = ("low", "medium", "high")


def _version() -> str:
    try:
        return importlib.metadata.version("claude-trio")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree, not installed
        return "unknown"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535; 0: any free port)")
    return value


def _ws_url(text: str) -> str:
    """``--remote URL``: a websocket URL with a host (checked before anything starts)."""
    parts = urlsplit(text)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a ws:// or wss:// URL with a host (e.g. ws://127.0.0.1:8765/)"
        )
    return text


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
    run = commands.add_parser(
        "run", parents=[output, prompt], help="run one prompt", description="Run one prompt."
    )
    run.add_argument(
        "--remote",
        type=_ws_url,
        metavar="URL",
        help="run it on a claude-trio server (ws://host:port/; token in CLAUDE_TRIO_TOKEN)",
    )
    add_record_option(run)
    add_offline_option(run, "the session talks to the built-in scripted model")

    # `record PROMPT --out FILE` is `run PROMPT --record FILE` under its own name: the command
    # a user looks for to make a cassette of a prompt.
    record = commands.add_parser(
        "record",
        parents=[output, prompt],
        help="run one prompt and write a cassette of it (as run PROMPT --record FILE)",
        description="Run one prompt and write a cassette of the CLI's traffic (secrets "
        "scrubbed) to FILE, to replay in tests with claude_trio.testing.replay(). With "
        "--offline it needs no API key and no network.",
    )
    record.add_argument(
        "--out", dest="record", metavar="FILE", required=True, help="where the cassette goes"
    )
    add_offline_option(record, "the session talks to the built-in scripted model")

    demo = commands.add_parser(
        "demo",
        parents=[output],
        help="a scripted session: no API key, no network",
        description="Replay a scripted session through the real pipeline; no API key needed.",
    )
    add_record_option(demo)
    add_offline_option(demo, "(always so for the demo)")
    add_fanout_commands(commands)
    add_acp_command(commands)
    return parser


def add_record_option(command: argparse.ArgumentParser) -> None:
    """``--record FILE``: the same option on every command that records a cassette."""
    command.add_argument(
        "--record",
        metavar="FILE",
        help="also write a cassette of everything the CLI wrote and was sent (secrets "
        "scrubbed) to FILE, to replay in tests with claude_trio.testing.replay()",
    )


def add_offline_option(command: argparse.ArgumentParser, what: str) -> None:
    """``--offline``: the same option on every command that runs sessions (``claude_trio.offline``:
    the real CLI against a scripted model on 127.0.0.1)."""
    command.add_argument("--offline", action="store_true", help=f"no API key, no network: {what}")


def _add_prompt_options(run: argparse.ArgumentParser) -> None:
    """The options of a command that runs one prompt (``run``; ``record`` parses them to say
    that it became ``run --record``)."""
    run.add_argument("prompt", metavar="PROMPT", help="what to ask the agent")
    run.add_argument("--model", help="an alias (opus-4.6, sonnet, ...) or a full model id")
    run.add_argument(
        "--plan", action="store_true", help="plan mode: read-only tools, no edits or shell"
    )
    run.add_argument(
        "--permission-mode",
        choices=PERMISSION_MODES,
        help="the CLI's permission mode (default: bypassPermissions, nothing asks); "
        "'default' and 'acceptEdits' ask before tool calls: y allow, n deny, e edit the input, "
        "a always allow. Without a terminal to ask at, such calls are denied",
    )
    run.add_argument("--resume", metavar="ID", help="resume the session with this id")
    _conversation_arguments(run)
    run.add_argument("--max-turns", type=_positive_int, metavar="N", help="cap the turns")
    run.add_argument("--cwd", metavar="DIR", help="the agent's working directory")
    system = run.add_mutually_exclusive_group()
    system.add_argument(
        "--system-prompt",
        metavar="S",
        help="replace Claude Code's system prompt with S (default: Claude Code's own)",
    )
    system.add_argument(
        "--append-system-prompt",
        metavar="S",
        help="add S to the end of Claude Code's system prompt",
    )
    system.add_argument(
        "--system-prompt-file",
        metavar="FILE",
        help="replace Claude Code's system prompt with the text of FILE (read by the CLI)",
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
    _session_surface_arguments(run)


def add_acp_command(commands: Any) -> None:
    """``acp``: an Agent Client Protocol agent on stdio, for editors (``claude_trio.cli.acp``)."""
    acp = commands.add_parser(
        "acp",
        help="be an Agent Client Protocol agent on stdio (for editors: Zed, JetBrains, ...)",
        description="Speak the Agent Client Protocol on stdin/stdout, so an editor can run "
        "Claude Code sessions: in a local fleet, or with --remote on a claude-trio server, "
        "where they outlive the editor. Register it as an agent server in the editor.",
    )
    acp.add_argument(
        "--remote",
        type=_ws_url,
        metavar="URL",
        help="the sessions live on a claude-trio server (ws://host:port/; token in "
        "CLAUDE_TRIO_TOKEN)",
    )
    acp.add_argument(
        "--max-live", type=_positive_int, default=4, metavar="N", help="CLIs running at once"
    )
    acp.add_argument(
        "--permission-mode",
        choices=PERMISSION_MODES,
        default="default",
        help="the sessions' permission mode to start with (default: ask the editor)",
    )
    add_offline_option(acp, "every session talks to the built-in scripted model")


def add_fanout_commands(commands: Any) -> None:
    """``serve`` and ``batch``: many sessions, from one command."""
    serve = commands.add_parser(
        "serve",
        help="serve sessions to websocket clients (a fleet behind a gateway)",
        description="Serve Claude Code sessions over websockets: a fleet with a cap on live "
        "CLIs behind an authenticated gateway. The token comes from CLAUDE_TRIO_TOKEN, or is "
        "generated and printed once (loopback addresses only).",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=_port, default=8765, help="port (0: any free one)")
    serve.add_argument(
        "--max-live", type=_positive_int, default=4, metavar="N", help="CLIs running at once"
    )
    add_governor_options(serve, budget=True)
    serve.add_argument(
        "--replay-buffer",
        type=_positive_int,
        default=2000,
        metavar="N",
        help="events kept per session for clients that reconnect",
    )
    serve.add_argument(
        "--idempotency-ttl",
        type=_positive_float,
        default=24 * 3600.0,
        metavar="SECONDS",
        help="how long an open's or continue's idempotency key is kept: a retry with it "
        "within that time returns the session the first one started (default: a day)",
    )
    serve.add_argument(
        "--allow-cwd",
        action="store_true",
        help="let clients choose a working directory inside --cwd-root",
    )
    serve.add_argument(
        "--cwd-root", metavar="DIR", help="the folder sessions run in (default: this one)"
    )
    serve.add_argument(
        "--allow-env", action="store_true", help="let clients set the CLI's environment"
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="a browser origin allowed to connect (repeatable; default: no browser)",
    )
    serve.add_argument(
        "--tokens", metavar="FILE", help="a JSON list of {principal, token, admin} entries"
    )
    serve.add_argument(
        "--remote-tools",
        choices=("read-only", "all"),
        default="read-only",
        help="what clients' sessions may run: read-only tools (the default), or all of them "
        "(commands, edits) as this user; a client's asking permission mode (default, "
        "acceptEdits) then asks before each call, answered with `claude-trio inbox URL`",
    )
    serve.add_argument(
        "--console",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve the web console on the same port (default: on when listening on a "
        "loopback address; --no-console turns it off)",
    )
    add_offline_option(serve, "every session talks to the built-in scripted model")
    serve.add_argument(
        "--log-json", action="store_true", help="log lines as one JSON object per line"
    )
    serve.add_argument(
        "--drain-grace",
        type=_positive_float,
        default=30.0,
        metavar="S",
        help="on Ctrl-C, seconds running sessions get to finish (default 30)",
    )
    serve.add_argument(
        "--redis",
        metavar="URL",
        help="serve the sessions of a Redis cluster run by `claude-trio worker` nodes "
        "(redis://[:password@]host:port/db, rediss:// for TLS); this node then runs none",
    )
    serve.add_argument(
        "--command-timeout",
        type=_positive_float,
        default=10.0,
        metavar="S",
        help="with --redis: how long a push, answer or abort waits for the worker's outcome",
    )

    inbox = commands.add_parser(
        "inbox",
        help="answer the approvals and questions waiting across a server's sessions",
        description="Follow the inbox of a claude-trio server (the sessions your token may "
        "see) and answer each request at this terminal as it arrives, as `run` asks: y / n / "
        "e / a for a tool approval, an option for a question. The token comes from "
        "CLAUDE_TRIO_TOKEN. Runs until Ctrl-C or the end of its input.",
    )
    inbox.add_argument("url", metavar="URL", help="the server, ws://host:port/")
    inbox.add_argument(
        "--count",
        type=_positive_int,
        metavar="N",
        help="exit after answering N requests",
    )

    worker = commands.add_parser(
        "worker",
        help="run sessions of a Redis cluster (served by `claude-trio serve --redis`)",
        description="A node of a Redis cluster: claims executions from the cluster's jobs "
        "stream while it has a free slot, runs them, and stores every event in the "
        "session's stream. Transcripts go to Redis too, so any worker can continue a "
        "conversation or take over a dead worker's sessions.",
    )
    worker.add_argument(
        "--redis",
        metavar="URL",
        required=True,
        help="redis://[:password@]host:port/db (rediss:// for TLS)",
    )
    worker.add_argument(
        "--max-live", type=_positive_int, default=4, metavar="N", help="CLIs running at once"
    )
    worker.add_argument(
        "--replay-buffer",
        type=_positive_int,
        default=2000,
        metavar="N",
        help="events kept per session (in the fleet, and in the session's stream)",
    )
    add_offline_option(worker, "every session talks to the built-in scripted model")
    add_governor_options(worker, budget=True)
    worker.add_argument(
        "--local-governor",
        action="store_true",
        help="govern this worker's starts alone (by default the governor's pause, "
        "concurrency limit, running count and budget are shared by every worker in Redis)",
    )
    worker.add_argument("--worker-id", metavar="ID", help="this node's name (default: random)")
    worker.add_argument(
        "--dead-after",
        type=_positive_float,
        default=5.0,
        metavar="S",
        help="a worker silent for this long is taken to be dead: its sessions move to another "
        "worker, and it is fenced off them if it was only paused (default 5)",
    )
    worker.add_argument(
        "--log-json", action="store_true", help="log lines as one JSON object per line"
    )
    worker.add_argument(
        "--drain-grace",
        type=_positive_float,
        default=30.0,
        metavar="S",
        help="on Ctrl-C, seconds running sessions get to finish (default 30)",
    )

    batch = commands.add_parser(
        "batch",
        help="run many prompts, with a live progress display",
        description="Run every prompt of a JSON-lines file (a prompt string, or an object "
        'with "prompt", an optional "key" and other ExecuteParams fields), a few at a time; '
        "one result line per item in --out. Re-running with the same --out skips the items "
        "already done.",
    )
    batch.add_argument("prompts", metavar="PROMPTS.jsonl", help="the items, one per line")
    batch.add_argument(
        "--out",
        metavar="FILE",
        help="the results, one JSON line per item (default: PROMPTS.results.jsonl)",
    )
    batch.add_argument(
        "--max-live", type=_positive_int, default=4, metavar="N", help="items running at once"
    )
    batch.add_argument(
        "--remote",
        type=_ws_url,
        action="append",
        metavar="URL",
        help="run them on a claude-trio server (ws://host:port/); repeat it for the gateways "
        "of one cluster (serve --redis): a connection that fails or drops goes to the next",
    )
    batch.add_argument(
        "--budget",
        type=_positive_float,
        metavar="USD",
        help="start no new item once this much was spent (items already running finish)",
    )
    batch.add_argument(
        "--retries",
        type=_non_negative_int,
        default=4,
        metavar="N",
        help="retries of an item that hit 429, 529 or overloaded (default 4)",
    )
    batch.add_argument("--model", help="the model of items that do not name one")
    add_governor_options(batch, budget=False)
    add_offline_option(batch, "the items run against the built-in scripted model")


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _conversation_arguments(run: argparse.ArgumentParser) -> None:
    """Where the conversation starts: a fork, a chosen id, a truncated resume."""
    run.add_argument(
        "--fork-session",
        action="store_true",
        help="with --resume: go on under a new session id, leaving the old session as it was",
    )
    run.add_argument(
        "--session-id",
        metavar="UUID",
        help="the id the new conversation gets (with --resume only for --fork-session)",
    )
    run.add_argument(
        "--resume-session-at",
        metavar="UUID",
        help="with --resume: load the conversation only up to this message and go on from it",
    )
    run.add_argument(
        "--resume-drops-turn",
        metavar="UUID",
        help="with --resume-session-at: the user prompt whose turn is dropped (the CLI refuses "
        "the resume if more would be)",
    )


def _request_arguments(run: argparse.ArgumentParser) -> None:
    """What the CLI sends along with its API requests, and what it starts or expands."""
    run.add_argument(
        "--strict-mcp-config",
        action="store_true",
        help="start no MCP server of the folder's .mcp.json, the user's configuration or "
        "plugins (settings files still load)",
    )
    run.add_argument(
        "--beta",
        dest="betas",
        action="append",
        metavar="NAME",
        default=[],
        help="a beta header for the API requests (e.g. context-1m-2025-08-07); repeatable",
    )
    run.add_argument(
        "--task-budget",
        type=_positive_int,
        metavar="TOKENS",
        help="tell the model its token budget for the task, so it paces itself",
    )
    run.add_argument(
        "--include-hook-events",
        action="store_true",
        help="report each hook the CLI runs (passthrough events)",
    )
    run.add_argument(
        "--verbatim",
        dest="verbatim_prompts",
        action="store_true",
        help="deliver the prompt as written: no @file expansion, no slash commands",
    )
    run.add_argument(
        "--client-app",
        metavar="NAME",
        help="your app's identifier (my-app/1.0.0), sent with the API requests",
    )


def _tool_list(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _session_surface_arguments(run: argparse.ArgumentParser) -> None:
    """``run``'s options for what a session can be told beyond the prompt and the model."""
    run.add_argument(
        "--image",
        dest="images",
        action="append",
        metavar="PATH",
        default=[],
        help="send an image (PNG, JPEG, GIF, WebP) with the prompt; repeatable",
    )
    run.add_argument(
        "--timeout", type=_positive_float, metavar="S", help="stop the execution after S seconds"
    )
    run.add_argument(
        "--idle-timeout",
        type=_positive_float,
        metavar="S",
        help="stop when the CLI says nothing for S seconds",
    )
    run.add_argument(
        "--max-budget", type=_positive_float, metavar="USD", help="stop once this much is spent"
    )
    run.add_argument(
        "--provider",
        choices=PROVIDER_NAMES,
        help="send the requests to another server (its credential variable must be set)",
    )
    run.add_argument("--fallback-model", metavar="M", help="the model to use when M is overloaded")
    _request_arguments(run)
    run.add_argument(
        "--agents",
        metavar="FILE",
        help='subagents as JSON: {"name": {"description": ..., "prompt": ..., "tools": [...]}}',
    )
    run.add_argument(
        "--output-schema",
        metavar="FILE",
        help="a JSON Schema (an object) the final answer must follow",
    )
    run.add_argument(
        "--allowed-tools", type=_tool_list, metavar="A,B", default=[], help="tools allowed"
    )
    run.add_argument(
        "--disallowed-tools", type=_tool_list, metavar="A,B", default=[], help="tools denied"
    )
    scope = run.add_argument_group(
        "path scope",
        "confine the agent's file tools (and, in the CLI's OS sandbox, Bash) to paths; "
        "relative paths are taken from the current directory",
    )
    scope.add_argument(
        "--allow-path",
        dest="allowed_paths",
        action="append",
        metavar="PATH",
        default=[],
        help="the agent may read and write PATH (and below); with this or --read-path it "
        "reaches nothing else but --cwd; repeatable",
    )
    scope.add_argument(
        "--read-path",
        dest="read_only_paths",
        action="append",
        metavar="PATH",
        default=[],
        help="the agent may read but not write PATH; repeatable",
    )
    scope.add_argument(
        "--deny-path",
        dest="disallowed_paths",
        action="append",
        metavar="PATH",
        default=[],
        help="the agent may neither read nor write PATH (wins over the others); repeatable",
    )
    scope.add_argument(
        "--scope",
        dest="scope_enforcement",
        choices=SCOPE_ENFORCEMENTS,
        default="hard",
        help="hard (default): refuse to start when Bash cannot be sandboxed; soft: start "
        "with a warning",
    )
    scope.add_argument(
        "--setting-source",
        dest="setting_sources",
        action="append",
        choices=SETTING_SOURCES,
        help="load this settings file (user, project, local); repeatable. Default: all of "
        "them, or none with a path scope",
    )
    run.add_argument(
        "--skill",
        dest="skills",
        action="append",
        metavar="DIR",
        default=[],
        help="offer the skill in DIR (its SKILL.md and files) to this session only, as "
        "inline:<name>; repeatable",
    )


def _json_file(option: str, path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except OSError as exc:
        raise InvalidParamsError(option, path, f"a readable file ({exc.strerror})") from None
    except ValueError as exc:
        raise InvalidParamsError(option, path, f"a JSON file ({exc})") from None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line (``sys.argv[1:]`` when ``argv`` is None); exits 2 on bad usage."""
    return build_parser().parse_args(argv)


def _absolute(paths: Sequence[str]) -> list[str]:
    """Command-line paths, relative ones taken from the current directory."""
    return [os.path.abspath(path) for path in paths]


def execute_params_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ExecuteParams`` keyword arguments for parsed ``run`` (or ``record``) arguments
    (pure).

    ``architecture_config`` is the keyword arguments of an ``ArchitectureConfig``. Without
    ``--system-prompt`` or ``--system-prompt-file`` the agent gets Claude Code's own system
    prompt (the preset, with ``--append-system-prompt`` at its end): the SDK would otherwise
    send an empty one.
    """
    return {
        "prompt": args.prompt,
        "model": args.model,
        "system_prompt": _system_prompt(args),
        "max_turns": args.max_turns,
        "plan_mode": args.plan,
        "permission_mode": getattr(args, "permission_mode", None),
        "cwd": None if args.cwd is None else os.path.abspath(args.cwd),
        "resume_session_id": args.resume,
        "fork_session": getattr(args, "fork_session", False),
        "session_id": getattr(args, "session_id", None),
        "resume_session_at": getattr(args, "resume_session_at", None),
        "resume_drops_turn": getattr(args, "resume_drops_turn", None),
        "strict_mcp_config": getattr(args, "strict_mcp_config", False),
        "betas": getattr(args, "betas", []),
        "task_budget": getattr(args, "task_budget", None),
        "include_hook_events": getattr(args, "include_hook_events", False),
        "verbatim_prompts": getattr(args, "verbatim_prompts", False),
        "client_app": getattr(args, "client_app", None),
        "run_timeout": getattr(args, "timeout", None),
        "idle_timeout": getattr(args, "idle_timeout", None),
        "max_budget_usd": getattr(args, "max_budget", None),
        "provider": getattr(args, "provider", None),
        "fallback_model": getattr(args, "fallback_model", None),
        "allowed_tools": getattr(args, "allowed_tools", []),
        "disallowed_tools": getattr(args, "disallowed_tools", []),
        "allowed_paths": _absolute(getattr(args, "allowed_paths", [])),
        "read_only_paths": _absolute(getattr(args, "read_only_paths", [])),
        "disallowed_paths": _absolute(getattr(args, "disallowed_paths", [])),
        "scope_enforcement": getattr(args, "scope_enforcement", "hard"),
        "setting_sources": getattr(args, "setting_sources", None),
        "architecture_config": {
            "claude_thinking": args.thinking,
            "claude_thinking_budget": args.thinking_budget,
            "claude_effort": args.effort,
            "claude_use_preset": True if _uses_preset(args) else None,
            "ollama_base_url": args.ollama_base_url,
        },
    }


def _system_prompt(args: argparse.Namespace) -> str | dict[str, str] | None:
    """``--system-prompt`` as is, ``--append-system-prompt`` (appended to the preset),
    ``--system-prompt-file`` as the file form (its path made absolute)."""
    path = getattr(args, "system_prompt_file", None)
    if path is not None:
        return {"type": "file", "path": os.path.abspath(path)}
    append: str | None = getattr(args, "append_system_prompt", None)
    replace: str | None = args.system_prompt
    return append if append is not None else replace


def _uses_preset(args: argparse.Namespace) -> bool:
    """Claude Code's own prompt, unless ``--system-prompt`` or ``--system-prompt-file``
    replaces it."""
    return args.system_prompt is None and getattr(args, "system_prompt_file", None) is None


def build_execute_params(args: argparse.Namespace) -> ExecuteParams:
    """The validated ``ExecuteParams`` for ``run`` arguments (files read: images, agents,
    the output schema); raises ``InvalidParamsError`` naming the option."""
    kwargs = execute_params_kwargs(args)
    if kwargs["cwd"] is not None and not os.path.isdir(kwargs["cwd"]):
        raise InvalidParamsError("--cwd", args.cwd, "an existing directory")
    config = ArchitectureConfig(**kwargs.pop("architecture_config"))
    images = tuple(ImageInput.from_path(path) for path in getattr(args, "images", []))
    subagents: dict[str, SubagentDefinition] = {}
    if getattr(args, "agents", None):
        raw = _json_file("--agents", args.agents)
        if not isinstance(raw, dict):
            raise InvalidParamsError("--agents", args.agents, "a JSON object: name -> definition")
        subagents = {name: subagent_from_mapping(name, value) for name, value in raw.items()}
    schema = None
    if getattr(args, "output_schema", None):
        schema = _json_file("--output-schema", args.output_schema)
    skills = tuple(InlineSkill.from_dir(folder) for folder in getattr(args, "skills", []))
    return ExecuteParams(
        **kwargs,
        architecture_config=config,
        images=images,
        subagents=subagents,
        output_schema=schema,
        inline_skills=skills,
    )


def cassette_path(args: argparse.Namespace) -> str | None:
    """Where ``run --record``, ``record --out`` or ``demo --record`` writes its cassette
    (``None``: nowhere)."""
    path = getattr(args, "record", None)
    return None if path is None else str(path)


def has_credentials(
    env: Mapping[str, str], *, ollama_base_url: str | None = None, provider: str | None = None
) -> bool:
    """Whether the CLI has some way to reach a model: one of :data:`CREDENTIAL_ENV_VARS`, or
    any other source a session accepts (a ``claude login``, an ``apiKeyHelper``, Bedrock or
    Vertex: ``protocol/config/credentials.py``). A provider's own credential is checked when
    the session starts, naming its variable."""
    if provider not in (None, "anthropic"):
        return True
    if ollama_base_url or any(env.get(name) for name in CREDENTIAL_ENV_VARS):
        return True
    return credentials_refusal(ClaudeAgentOptions(), env) is None


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
