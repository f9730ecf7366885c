"""``claude-trio acp``: an Agent Client Protocol agent on stdio (``actors/editor/agent.py``).

The sessions run in a local fleet (``--max-live`` CLIs at once; ``--offline``: against the
built-in offline model, no API key and no network), or with ``--remote URL`` on a
``claude-trio serve`` server (the token in ``CLAUDE_TRIO_TOKEN``), where they outlive the
editor: restart it and ``session/load`` shows the conversation and the running turn.

stdout carries the protocol only: once the agent holds it, file descriptor 1 points at
stderr, so nothing else printed by this process (or a library in it) can break a message.
Exit codes as the other commands: 0 when the editor closed stdin, 2 for a usage error, 1 when
the host failed (its message on stderr), 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from claude_trio.actors.editor.agent import serve_editor
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.actors.fanout.hosts import SessionHost
from claude_trio.cli.args import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SESSION_ERROR,
    EXIT_USAGE,
    NO_CREDENTIALS_MESSAGE,
    has_credentials,
)
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.editor.history import config_dir
from claude_trio.protocol.errors import ClaudeTrioError

__all__ = ["acp_command", "acp_usage_problem", "remote_session_params", "session_params"]

TOKEN_ENV = "CLAUDE_TRIO_TOKEN"


def acp_usage_problem(args: argparse.Namespace, environ: Any = os.environ) -> str | None:
    """Why ``acp`` cannot start as asked (None: it can)."""
    if args.remote is not None:
        if args.offline:
            return (
                "--offline is for sessions run here; with --remote the server runs them "
                "(claude-trio serve --offline serves the offline model)"
            )
        if not environ.get(TOKEN_ENV):
            return f"--remote needs the server's token in {TOKEN_ENV}"
    elif not args.offline and not has_credentials(environ):
        return NO_CREDENTIALS_MESSAGE.removeprefix("claude-trio: ")
    return None


def session_params(**fields: Any) -> ExecuteParams:
    """A session's parameters from what the editor said (prompt, cwd, MCP servers, mode,
    images). An empty MCP list is left out, so a gateway's policy is not asked about it."""
    return ExecuteParams(**_without_empty(fields))


def remote_session_params(**fields: Any) -> ExecuteParams:
    """With ``--remote``: the same without the editor's folder, which names a folder of the
    editor's machine; the server runs the session in its own (``serve --cwd-root``), under the
    session id it chooses."""
    for local in ("cwd", "session_id", "resume_session_id"):
        fields.pop(local, None)
    return ExecuteParams(**_without_empty(fields))


def _without_empty(fields: dict[str, Any]) -> dict[str, Any]:
    if not fields.get("mcp_servers"):
        fields.pop("mcp_servers", None)
    for optional in ("images", "model"):
        if not fields.get(optional):
            fields.pop(optional, None)
    return fields


@asynccontextmanager
async def _open_host(args: argparse.Namespace) -> AsyncIterator[tuple[SessionHost, Path | None]]:
    """The host, and the config folder of its CLIs when they run here (their transcripts)."""
    if args.remote is not None:
        from claude_trio.client import connect_gateway

        async with connect_gateway(args.remote, token=os.environ[TOKEN_ENV]) as gateway:
            yield gateway, None
    elif args.offline:
        from claude_trio.offline import open_offline_model

        async with (
            open_offline_model() as offline,
            open_fleet(max_live=args.max_live, env=offline.env) as fleet,
        ):
            yield fleet, config_dir(offline.env, os.environ)
    else:
        async with open_fleet(max_live=args.max_live) as fleet:
            yield fleet, config_dir({}, os.environ)


async def _serve(args: argparse.Namespace, stdin_fd: int, stdout_fd: int) -> None:
    from claude_trio.cli.args import _version

    stdin = trio.lowlevel.FdStream(stdin_fd)
    stdout = trio.lowlevel.FdStream(stdout_fd)
    async with stdin, stdout, _open_host(args) as (host, transcripts):
        await serve_editor(
            host,
            stdin,
            stdout,
            make_params=session_params if args.remote is None else remote_session_params,
            permission_mode=args.permission_mode,
            version=_version(),
            transcripts=transcripts,
        )


def acp_command(args: argparse.Namespace) -> int:
    """Run ``claude-trio acp`` until the editor closes stdin; the exit code."""
    problem = acp_usage_problem(args)
    if problem is not None:
        print(f"claude-trio: {problem}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.flush()
    stdin_fd, stdout_fd = os.dup(0), os.dup(1)
    os.dup2(2, 1)  # the protocol owns the real stdout; stray prints go to stderr
    try:
        trio.run(_serve, args, stdin_fd, stdout_fd)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except ClaudeTrioError as exc:
        print(f"claude-trio: error: {exc}", file=sys.stderr)
        return EXIT_SESSION_ERROR
    return EXIT_OK
