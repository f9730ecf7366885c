"""``claude-trio inbox URL``: answer the requests waiting across a server's sessions at a
terminal, as ``run`` asks its own (``cli/render.py``'s ``ask_interactively``: ``y`` / ``n`` /
``e`` / ``a`` for a tool approval, an option or free text for a question, one value per field
for an elicitation).

It follows the server's inbox (``GatewayClient.inbox()``, the principal's sessions only) and
asks each request in the order it arrived; one resolved meanwhile (answered elsewhere, expired,
its session ended) is not asked, and an answer that came too late is said so. It runs until
Ctrl-C (exit 130), the end of its input (exit 0), or ``--count`` answers (exit 0). The token
comes from ``CLAUDE_TRIO_TOKEN``, as for ``run --remote``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import trio
from rich.console import Console
from rich.text import Text

from claude_trio.actors.extensions.broker import AnswerAccepted
from claude_trio.actors.fanout.inbox import InboxChannel
from claude_trio.cli.args import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SESSION_ERROR,
    EXIT_USAGE,
    read_stdin_line,
)
from claude_trio.cli.render import STYLE_DIM, STYLE_WARN, ReadLine, ask_interactively
from claude_trio.client import connect_gateway
from claude_trio.protocol.errors import ClaudeTrioError, InvalidParamsError
from claude_trio.protocol.fanout.inbox import InboxItem

__all__ = ["answer_inbox", "inbox_command"]

TOKEN_ENV = "CLAUDE_TRIO_TOKEN"


def _heading(item: InboxItem) -> str:
    name = item.label or item.session
    age = item.age(time.time())
    what = {"tool_permission": "approval", "model-tool": "question"}.get(
        item.source, "elicitation"
    )
    return f"── {name} · {what} · waiting {age:.0f} s"


class _EndOfInput(Exception):
    """The terminal's input ended: stop asking."""


async def answer_inbox(
    inbox: InboxChannel,
    *,
    console: Console,
    read_line: ReadLine,
    count: int | None = None,
) -> int:
    """Ask each request of ``inbox`` at the terminal and answer it; the number answered."""
    await trio.lowlevel.checkpoint()
    asked: set[tuple[str, str]] = set()
    answered = 0

    async def reading(prompt: str) -> str | None:
        line = await read_line(prompt)
        if line is None:
            raise _EndOfInput
        return line

    while count is None or answered < count:
        while True:  # what changed while the user was answering
            try:
                inbox.receive_nowait()
            except trio.WouldBlock:
                break
        waiting = {(i.session, i.request_id): i for i in inbox.items}
        asked &= waiting.keys()  # resolved ones never come back
        item = next((i for k, i in waiting.items() if k not in asked), None)
        if item is None:
            await inbox.receive()
            continue
        asked.add((item.session, item.request_id))
        console.print()
        console.print(Text(_heading(item), style=STYLE_DIM))
        try:
            answer = await ask_interactively(item.request, console=console, read_line=reading)
        except _EndOfInput:
            break
        outcome = await inbox.answer(item.session, item.request_id, answer)
        if isinstance(outcome, AnswerAccepted):
            answered += 1
            console.print(Text("answered", style=STYLE_DIM))
        else:  # resolved meanwhile: answered elsewhere, expired, its session ended
            console.print(Text(f"not answered: {outcome.reason}", style=STYLE_WARN))
    return answered


async def _run(url: str, token: str, count: int | None) -> int:
    console = Console(highlight=False, soft_wrap=True)
    async with connect_gateway(url, token=token) as gateway, gateway.inbox() as inbox:
        console.print(Text(f"following the inbox of {url} (Ctrl-C to stop)", style=STYLE_DIM))
        await answer_inbox(inbox, console=console, read_line=read_stdin_line, count=count)
    return EXIT_OK


def inbox_command(args: argparse.Namespace) -> int:
    """``claude-trio inbox URL [--count N]``; the exit code."""
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    token = os.environ.get(TOKEN_ENV)
    if not token:
        errors.print(
            f"claude-trio: inbox needs the server's token in {TOKEN_ENV} "
            "(claude-trio serve prints one, or set it on both sides)",
            markup=False,
        )
        return EXIT_USAGE
    try:
        return trio.run(_run, args.url, token, args.count)
    except KeyboardInterrupt:
        errors.print("claude-trio: interrupted", markup=False)
        return EXIT_INTERRUPTED
    except InvalidParamsError as exc:  # a URL that is not a websocket URL
        errors.print(f"claude-trio: {exc}", markup=False)
        return EXIT_USAGE
    except ClaudeTrioError as exc:
        errors.print(f"claude-trio: error: {exc}", markup=False)
        return EXIT_SESSION_ERROR
    except BaseExceptionGroup as group:
        interrupts, rest = group.split(KeyboardInterrupt)
        if interrupts is None or rest is not None:
            raise
        errors.print("claude-trio: interrupted", markup=False)
        return EXIT_INTERRUPTED
    finally:
        sys.stdout.flush()
