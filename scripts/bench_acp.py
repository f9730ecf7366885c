"""Benchmark 15: the editor face, ``claude-trio acp --offline``, against ``claude-trio run``.

Both sides run the real bundled CLI against the built-in offline model, as subprocesses, rounds
interleaved:

* **first text**: from ``session/prompt`` to the first ``agent_message_chunk`` (the agent
  already initialized, the session new: the prompt opens its host session, so the CLI's
  start is in it), and from the agent process's start to that chunk; against ``claude-trio run
  --offline``'s time from its start to that same text on its stdout (the same process work:
  interpreter, imports, offline model, CLI start, first turn; its header line and the
  model's thinking come before it, as the thought chunk does in the editor).
* **cancel**: a prompt whose allowed Bash call touches a file, sleeps, then touches another;
  once the first file exists, ``session/cancel``, timed to the prompt's ``cancelled`` answer,
  and the second file checked after the command's own end (a side effect after the stop).
  Against the abort bound: ``session.abort()`` on the same call through ``open_session`` in
  this process (the same offline model), timed to the session's terminal event.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import trio
from acp import PROTOCOL_VERSION, schema, text_block
from acp.stdio import spawn_agent_process

from claude_trio import ExecuteParams, ToolUse, open_session
from claude_trio.offline import open_offline_model
from claude_trio.protocol.session.events import is_terminal

PROMPT = "what is trio?"
#: The offline model's first text for PROMPT, streamed in pieces (its thinking and ``run``'s
#: header come before it): the first piece of it is the time to first text, on either side.
FIRST_TEXT = b"Let me plan this first."
FIRST_PIECE = FIRST_TEXT[:8]
SLEEP = 2.0
COMMAND = (sys.executable, "-m", "claude_trio.cli")


def _env() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ANTHROPIC_") and key != "CLAUDE_CODE_OAUTH_TOKEN"
    }


@attrs.define(eq=False)
class _Editor:
    """The client side: allows every tool, notes when the first text chunk arrives."""

    first_chunk_at: float | None = None
    first_text: str | None = None

    async def request_permission(self, **_kwargs: Any) -> schema.RequestPermissionResponse:
        await asyncio.sleep(0)
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id="allow")
        )

    async def session_update(self, session_id: str, update: Any, **_kwargs: Any) -> None:
        await asyncio.sleep(0)
        if isinstance(update, schema.AgentMessageChunk) and self.first_chunk_at is None:
            self.first_chunk_at = time.perf_counter()
            content = update.content
            self.first_text = content.text if isinstance(content, schema.TextContentBlock) else None

    def on_connect(self, conn: Any) -> None:
        pass


@attrs.frozen(kw_only=True)
class _AcpSample:
    prompt_to_chunk: float
    start_to_chunk: float
    cancel_to_answer: float
    side_effect: bool


async def _until(path: Path) -> None:
    while not path.exists():  # noqa: ASYNC110, ASYNC240 (a file another process makes)
        await asyncio.sleep(0.002)


async def _acp_round(work: Path) -> _AcpSample:
    editor = _Editor()
    started = time.perf_counter()
    async with spawn_agent_process(editor, *COMMAND, "acp", "--offline", env=_env()) as (
        conn,
        process,
    ):
        try:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(work), mcp_servers=[])
            t0 = time.perf_counter()
            done = await conn.prompt(session_id=new.session_id, prompt=[text_block(PROMPT)])
            assert done.stop_reason == "end_turn", done
            assert editor.first_chunk_at is not None, "no agent_message_chunk"
            assert editor.first_text, "an empty first agent_message_chunk"
            assert FIRST_TEXT.decode().startswith(editor.first_text), editor.first_text
            first = editor.first_chunk_at
            begun, after = work / "begun", work / "after"
            other = await conn.new_session(cwd=str(work), mcp_servers=[])
            command = f"#bash touch {begun}; sleep {SLEEP:g}; touch {after}"
            prompt = asyncio.create_task(
                conn.prompt(session_id=other.session_id, prompt=[text_block(command)])
            )
            await asyncio.wait_for(_until(begun), 60)
            t1 = time.perf_counter()
            await conn.cancel(session_id=other.session_id)
            cancelled = await prompt
            t2 = time.perf_counter()
            assert cancelled.stop_reason == "cancelled", cancelled
            await asyncio.sleep(SLEEP + 0.5)
            return _AcpSample(
                prompt_to_chunk=first - t0,
                start_to_chunk=first - started,
                cancel_to_answer=t2 - t1,
                side_effect=after.exists(),
            )
        finally:
            if process.returncode is None:
                process.terminate()
                await process.wait()


async def _run_round(work: Path) -> float:
    """``claude-trio run --offline``: from its start to the first text on its stdout."""
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *COMMAND,
        "run",
        "--offline",
        PROMPT,
        cwd=work,
        env=_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    first: float | None = None
    shown = b""
    while chunk := await process.stdout.read(4096):
        shown += chunk
        if first is None and FIRST_PIECE in shown:
            first = time.perf_counter()
    assert await process.wait() == 0, "claude-trio run --offline failed"
    assert first is not None, f"claude-trio run never printed {FIRST_PIECE!r}: {shown!r}"
    return first - started


async def _abort_round(work: Path) -> tuple[float, bool]:
    """The abort bound: ``abort()`` mid-tool through ``open_session`` to the terminal event."""
    begun, after = work / "begun", work / "after"
    params = ExecuteParams(
        prompt=f"#bash touch {begun}; sleep {SLEEP:g}; touch {after}",
        cwd=str(work),
        permission_mode="bypassPermissions",
    )
    async with open_offline_model() as offline, open_session(params, env=offline.env) as session:
        t0 = 0.0
        async for event in session.events:
            if isinstance(event, ToolUse):
                while not await trio.Path(begun).exists():  # noqa: ASYNC110
                    await trio.sleep(0.002)
                t0 = time.perf_counter()
                await session.abort()
            if is_terminal(event):
                break
        took = time.perf_counter() - t0
        assert t0, "the offline model's Bash call never started"
    await trio.sleep(SLEEP + 0.5)
    return took, after.exists()


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.1f} ms"


def run(*, rounds: int) -> dict[str, float]:
    """Print the editor face's time to first text and to a cancelled prompt, side by side."""
    acp: list[_AcpSample] = []
    runs: list[float] = []
    aborts: list[tuple[float, bool]] = []
    with tempfile.TemporaryDirectory(prefix="claude-trio-bench-acp-") as tmp:
        for n in range(rounds):  # interleaved: each side once per round
            for side in ("acp", "run", "abort"):
                work = Path(tmp) / f"{n}-{side}"
                work.mkdir()
                if side == "acp":
                    acp.append(asyncio.run(asyncio.wait_for(_acp_round(work), 180)))
                elif side == "run":
                    runs.append(asyncio.run(asyncio.wait_for(_run_round(work), 180)))
                else:
                    aborts.append(trio.run(_abort_round, work))
    prompt_first = statistics.median(s.prompt_to_chunk for s in acp)
    start_first = statistics.median(s.start_to_chunk for s in acp)
    run_first = statistics.median(runs)
    cancel = statistics.median(s.cancel_to_answer for s in acp)
    abort = statistics.median(t for t, _ in aborts)
    print(f"  {rounds} rounds interleaved, medians (worst), wall clock:")
    print(
        f"    acp: session/prompt -> first agent_message_chunk  {_ms(prompt_first)} "
        f"({_ms(max(s.prompt_to_chunk for s in acp)).strip()})"
    )
    print(
        f"    acp: process start -> first agent_message_chunk   {_ms(start_first)} "
        f"({_ms(max(s.start_to_chunk for s in acp)).strip()})"
    )
    print(
        f"    run --offline: process start -> first text        {_ms(run_first)} "
        f"({_ms(max(runs)).strip()})"
    )
    print(
        f"    ratios: acp start->chunk / run {start_first / run_first:5.2f}x; "
        f"acp prompt->chunk / run {prompt_first / run_first:5.2f}x"
    )
    effects = sum(s.side_effect for s in acp)
    print(
        f"    acp: session/cancel mid-tool -> 'cancelled'       {_ms(cancel)} "
        f"({_ms(max(s.cancel_to_answer for s in acp)).strip()}), side effects after: "
        f"{effects} of {len(acp)}"
    )
    print(
        f"    abort bound: abort() mid-tool -> terminal event    {_ms(abort)} "
        f"({_ms(max(t for t, _ in aborts)).strip()}), side effects after: "
        f"{sum(e for _, e in aborts)} of {len(aborts)}"
    )
    print(f"    ratio: cancel / abort bound {cancel / abort:5.2f}x; the issue's bound: 1000 ms")
    return {
        "acp_prompt_to_first_chunk_ms": prompt_first * 1e3,
        "acp_start_to_first_chunk_ms": start_first * 1e3,
        "run_start_to_first_text_ms": run_first * 1e3,
        "acp_cancel_ms": cancel * 1e3,
        "abort_bound_ms": abort * 1e3,
    }
