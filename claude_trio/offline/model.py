"""The built-in offline model: the real ``claude`` CLI against a small scripted model that
answers any prompt, so the fan-out stack (``serve``, ``batch``, the client) can be tried and
tested with no API key and no network.

Every turn goes the same way: the model thinks a little, says it will plan, writes a
one-item todo list with ``TodoWrite`` (a tool that works for remote sessions under the
gateway's default read-only policy too, and touches nothing), then answers with a text that
echoes the prompt - and, in a continued conversation, the prompts before it, which shows the
model saw the earlier turns. It never asks a question, so unattended runs finish.

To try tool approvals offline: a prompt with ``#write PATH`` makes the model write a short
file at ``PATH`` with the ``Write`` tool instead of its todo list, and ``#bash COMMAND`` run
``COMMAND`` (the rest of the line; a bare ``#bash`` runs :data:`BASH_COMMAND`, which touches a
file, so the CLI asks first) with ``Bash``; its answer then quotes the start of the tool's
result, so whoever drives it sees what the model saw (the file written, a denial, an error).
With an asking permission mode the call waits for an approval (``claude-trio serve --offline
--remote-tools all``, answered with ``claude-trio inbox``).

To try retries offline: a prompt that contains ``#overloaded`` is answered ``529
overloaded_error`` (with ``retry-after: 1``) the first time the model sees it, and normally
after that; ``#rate-limited`` does the same with ``429 rate_limit_error``.

::

    async with open_offline_model() as offline:
        async with open_fleet(env=offline.env) as fleet:
            ...
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs

from claude_trio.actors.session.boundary import open_block_nursery
from claude_trio.offline.hermetic import hermetic_env
from claude_trio.offline.model_double import (
    HttpError,
    ModelDouble,
    ModelRequest,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    ReplyUsage,
    Responder,
    Response,
)

__all__ = [
    "BASH_MARK",
    "OFFLINE_ENV",
    "OVERLOADED_MARK",
    "RATE_LIMITED_MARK",
    "Offline",
    "OfflineModel",
    "offline_responder",
    "open_offline_model",
]

OVERLOADED_MARK = "#overloaded"
WRITE_MARK = "#write "
BASH_MARK = "#bash "
#: What ``#write PATH`` writes.
WRITTEN_TEXT = "written by the offline model\n"
RATE_LIMITED_MARK = "#rate-limited"
#: The command a bare ``#bash`` prompt makes the model run.
BASH_COMMAND = "touch offline-bash-ran && echo offline bash ran"

#: What every reply costs, in the double's usage (the CLI prices it as it would the model's).
TOOL_USAGE = ReplyUsage(input_tokens=120, output_tokens=40, cache_read_input_tokens=800)
ANSWER_USAGE = ReplyUsage(input_tokens=180, output_tokens=60, cache_read_input_tokens=800)

OFFLINE_ENV: Mapping[str, str] = {
    # CLI 2.1.332 offers TodoWrite only with both switches (see claude_trio/cli/demo.py).
    "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1",
    "CLAUDE_CODE_ENABLE_TASKS": "0",
    # The CLI sends even 127.0.0.1 through HTTP(S)_PROXY when one is set.
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def _without_reminders(text: str) -> str:
    # The CLI folds context into user messages as <system-reminder> sections.
    while "<system-reminder>" in text and "</system-reminder>" in text:
        start = text.index("<system-reminder>")
        end = text.index("</system-reminder>", start) + len("</system-reminder>")
        text = text[:start] + text[end:]
    return text.strip()


def _user_text(message: Mapping[str, Any]) -> str:
    """What the user typed last in a user message: its last text block (not tool results,
    not the CLI's reminders; a prompt that follows a failed turn shares its message)."""
    content = message.get("content")
    if isinstance(content, str):
        return _without_reminders(content)
    if not isinstance(content, list):
        return ""
    parts = [
        _without_reminders(str(block.get("text", "")))
        for block in content
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    parts = [p for p in parts if p]
    return parts[-1] if parts else ""


def _prompts_and_tool_done(request: ModelRequest) -> tuple[list[str], bool]:
    """The user's prompts, oldest first, and whether this turn already used its tool."""
    prompts: list[str] = []
    tool_after_last_prompt = False
    for message in request.messages:
        role = message.get("role")
        if role == "user":
            text = _user_text(message)
            if text:
                prompts.append(text)
                tool_after_last_prompt = False
        elif role == "assistant":
            content = message.get("content")
            if isinstance(content, list) and any(
                isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content
            ):
                tool_after_last_prompt = True
    return prompts, tool_after_last_prompt


def _tool_request(prompt: str) -> tuple[str, dict[str, Any]] | None:
    """The tool a ``#write`` / ``#bash`` prompt asks for (name, input), or None."""
    for mark, name in ((WRITE_MARK, "Write"), (BASH_MARK, "Bash")):
        if mark in prompt:
            rest = (prompt.split(mark, 1)[1].splitlines() or [""])[0].strip()
            if name == "Write":
                return name, {"file_path": rest, "content": WRITTEN_TEXT}
            return name, {
                "command": rest or BASH_COMMAND,
                "description": "Run the command asked for",
            }
    return None


def _last_tool_result(request: ModelRequest) -> str | None:
    """The text of the last tool result the model was sent (None: there is none)."""
    for message in reversed(request.messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = " ".join(
                        str(b.get("text", "")) for b in inner if isinstance(b, Mapping)
                    )
                error = "error: " if block.get("is_error") else ""
                return error + str(inner)
    return None


def _shorten(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@attrs.define(eq=False)
class OfflineModel:
    """The scripted model (a responder for :class:`ModelDouble`). See the module docstring."""

    #: Prompts answered with an error once already (``#overloaded``, ``#rate-limited``).
    failed_once: set[str] = attrs.field(factory=set)

    def __call__(self, request: ModelRequest) -> Response | None:
        if request.is_tool_use_summary or request.pending_tool_use_ids:
            return None  # the double answers summary labels itself; the CLI never asks then
        if request.is_subagent:
            return Reply.text("Nothing to add.", usage=TOOL_USAGE)
        prompts, tool_done = _prompts_and_tool_done(request)
        prompt = prompts[-1] if prompts else ""
        failure = self._failure(prompt)
        if failure is not None:
            return failure
        asked = _tool_request(prompt)
        if not tool_done and asked is not None:
            name, tool_input = asked
            return Reply(
                blocks=(
                    ReplyText(text=f"Running {name} as asked."),
                    ReplyToolUse(
                        id=f"toolu_offline_{len(request.tool_uses) + 1:04d}",
                        name=name,
                        input=tool_input,
                    ),
                ),
                usage=TOOL_USAGE,
                chunk_size=12,
            )
        if not tool_done:
            tool_id = f"toolu_offline_{len(request.tool_uses) + 1:04d}"
            todo = {
                "content": "Answer the question",
                "status": "completed",
                "activeForm": "Answering the question",
            }
            return Reply(
                blocks=(
                    ReplyThinking(
                        thinking=f"The user asks: {_shorten(prompt, 80)}. A short plan first."
                    ),
                    ReplyText(text="Let me plan this first."),
                    ReplyToolUse(id=tool_id, name="TodoWrite", input={"todos": [todo]}),
                ),
                usage=TOOL_USAGE,
                chunk_size=12,
            )
        answer = f"You said: {_shorten(prompt)}"
        if asked is not None:
            answer += f" (the tool said: {_shorten(_last_tool_result(request) or '', 120)})"
        if len(prompts) > 1:
            earlier = "; ".join(_shorten(p, 80) for p in prompts[:-1])
            answer += f" (earlier in this conversation: {earlier})"
        return Reply(blocks=(ReplyText(text=answer),), usage=ANSWER_USAGE, chunk_size=12)

    def _failure(self, prompt: str) -> Response | None:
        for mark, status in ((OVERLOADED_MARK, 529), (RATE_LIMITED_MARK, 429)):
            if mark in prompt and prompt not in self.failed_once:
                self.failed_once.add(prompt)
                return HttpError(status=status, headers={"retry-after": "1"})
        return None


def offline_responder() -> Responder:
    """A fresh scripted model (see the module docstring)."""
    return OfflineModel()


@attrs.frozen(kw_only=True)
class Offline:
    """A running offline model: ``env`` points a CLI at it (pass it as the sessions' ``env``);
    ``double`` records every request."""

    double: ModelDouble
    env: Mapping[str, str]


@asynccontextmanager
async def open_offline_model(*, folder: Path | None = None) -> AsyncIterator[Offline]:
    """Serve the offline model on 127.0.0.1 and make the CLI's environment for it.

    The CLI keeps its config (and so every conversation's transcript) and its temp files in
    ``folder`` (a temporary folder, removed at the end, when None). Everything is gone when
    the block ends; an exception raised in the block comes out as itself.
    """
    with tempfile.TemporaryDirectory(prefix="claude-trio-offline-") as tmp:
        root = Path(tmp) if folder is None else folder
        # A server runs it for as long as it likes: keep few requests, never call it a
        # runaway (the scripted model answers everything but requests the CLI never sends).
        double = ModelDouble(offline_responder(), max_unscripted=2**62, keep_requests=64)
        async with open_block_nursery() as nursery:
            await nursery.start(double.serve)
            # IS_SANDBOX lets the CLI run bypassPermissions as root (local sessions'
            # default mode); the model only ever lists the working directory.
            env = {**hermetic_env(double.base_url, root / "cli", sandbox=True), **OFFLINE_ENV}
            yield Offline(double=double, env=env)
