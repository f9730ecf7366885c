"""Benchmark 4: stop means stop, through the real ``claude`` CLI against the Messages API double.

Every round runs a reply that streams some text and then calls Bash with a command that would
leave a file behind a moment later (``sleep``, then ``touch``). The session is stopped at one
of four moments, and the round measures the wall time from the stop to the CLI process being
gone (``/proc/<pid>`` no longer exists: exited and reaped), then waits past the tool's sleep
and checks whether the file appeared (a side effect after the stop):

* ``abort before init``: ``abort()`` right after ``open_session`` yields, before the CLI's turn
  started;
* ``abort mid-tool``: ``abort()`` when the ``tool_use`` event arrives;
* ``deadline mid-tool``: a ``trio.move_on_after`` around the session expires during the tool;
* ``break mid-stream``: the consumer breaks out of its loop at the first text delta.

Side by side, the same mid-tool stop with the raw SDK (``ClaudeSDKClient.disconnect()``, which
ends stdin and gives the CLI 5 s before SIGTERM): the baseline the ratios are taken against.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio
from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, ToolUseBlock

from claude_trio import ExecuteParams, TextDelta, ToolUse, open_session
from claude_trio.actors.session.driver import subprocess_transport
from claude_trio.actors.session.process import CLIProcessTransport
from claude_trio.actors.session.sdk_private import SubprocessCLITransport, subprocess_of
from claude_trio.protocol.config.options import build_options
from claude_trio.testing.hermetic import hermetic_env
from claude_trio.testing.model_double import (
    ModelDouble,
    ModelRequest,
    Reply,
    ReplyText,
    ReplyToolUse,
    is_main_agent,
)

TOOL_DELAY = 1.0
STOP_TARGET_MS = 100.0
PROMPT = "Do the thing."


@attrs.frozen(kw_only=True)
class StopSample:
    to_reaped: float  # seconds from the stop to the CLI process gone
    side_effect: bool  # the tool's file appeared after the stop


@attrs.define
class _Responder:
    """The double's script: streamed text, then a Bash call that touches ``mark``."""

    mark: Path

    def __call__(self, request: ModelRequest) -> Reply:
        if request.tool_results or not is_main_agent(request):
            return Reply.text("done")
        command = f"sleep {TOOL_DELAY:g}; touch {self.mark}"
        return Reply(
            blocks=(
                ReplyText(text="Working on it, one moment. " * 8),
                ReplyToolUse(id="toolu_bench", name="Bash", input={"command": command}),
            ),
            chunk_size=8,
            event_delay=0.005,
        )


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


async def _reaped_after(pid: int, t0: float) -> float:
    await trio.lowlevel.checkpoint()
    # The kernel offers no event for "reaped by someone else": poll its process table.
    while _alive(pid):  # noqa: ASYNC110
        await trio.sleep(0.001)
    return time.perf_counter() - t0


async def _side_effect(mark: Path) -> bool:
    await trio.sleep(TOOL_DELAY + 0.5)
    return await trio.Path(mark).exists()


Scenario = Callable[[dict[str, str], Path, list[CLIProcessTransport]], Awaitable[float]]


def _factory(transports: list[CLIProcessTransport]) -> Callable[[ClaudeAgentOptions], Any]:
    def make(options: ClaudeAgentOptions) -> Any:
        transport = subprocess_transport(options)
        assert isinstance(transport, CLIProcessTransport)
        transports.append(transport)
        return transport

    return make


def _pid(transports: list[CLIProcessTransport]) -> int:
    pid = transports[0].pid
    assert pid is not None
    return pid


async def abort_before_init(env: dict[str, str], work: Path, ts: list[Any]) -> float:
    params = ExecuteParams(prompt=PROMPT, cwd=str(work))
    async with open_session(params, env=env, transport_factory=_factory(ts)) as session:
        pid = _pid(ts)
        t0 = time.perf_counter()
        await session.abort()
        return await _reaped_after(pid, t0)


async def abort_mid_tool(env: dict[str, str], work: Path, ts: list[Any]) -> float:
    params = ExecuteParams(prompt=PROMPT, cwd=str(work))
    async with open_session(params, env=env, transport_factory=_factory(ts)) as session:
        pid = _pid(ts)
        async for event in session.events:
            if isinstance(event, ToolUse):
                t0 = time.perf_counter()
                await session.abort()
                break
        else:
            raise RuntimeError("no tool_use event")
        return await _reaped_after(pid, t0)


async def deadline_mid_tool(env: dict[str, str], work: Path, ts: list[Any]) -> float:
    params = ExecuteParams(prompt=PROMPT, cwd=str(work))
    t0 = 0.0
    pid = 0
    with trio.CancelScope() as scope:
        async with open_session(params, env=env, transport_factory=_factory(ts)) as session:
            pid = _pid(ts)
            async for event in session.events:
                if isinstance(event, ToolUse):
                    scope.deadline = trio.current_time() + 0.1
                    t0 = time.perf_counter() + 0.1
    return await _reaped_after(pid, t0)


async def break_mid_stream(env: dict[str, str], work: Path, ts: list[Any]) -> float:
    params = ExecuteParams(prompt=PROMPT, cwd=str(work))
    async with open_session(params, env=env, transport_factory=_factory(ts)) as session:
        pid = _pid(ts)
        async for event in session.events:
            if isinstance(event, TextDelta):
                t0 = time.perf_counter()
                break
    return await _reaped_after(pid, t0)


async def raw_sdk_mid_tool(env: dict[str, str], work: Path, ts: list[Any]) -> float:
    """The baseline: the raw SDK, stopped the way it offers (disconnect)."""
    options = build_options(ExecuteParams(prompt=PROMPT, cwd=str(work)), extra_env=env)
    # The SDK's own transport, as ClaudeSDKClient would build it (given here to know its pid).
    transport = SubprocessCLITransport(prompt=PROMPT, options=options)
    client = ClaudeSDKClient(options, transport=transport)
    await client.connect()
    process = subprocess_of(transport)
    assert process is not None
    pid = process.pid
    try:
        await client.query(PROMPT)
        async for message in client.receive_messages():
            if isinstance(message, AssistantMessage) and any(
                isinstance(b, ToolUseBlock) for b in message.content
            ):
                break
    finally:
        t0 = time.perf_counter()
        with trio.CancelScope(shield=True):
            await client.disconnect()
    return await _reaped_after(pid, t0)


SCENARIOS: dict[str, Scenario] = {
    "abort before init": abort_before_init,
    "abort mid-tool": abort_mid_tool,
    "deadline mid-tool": deadline_mid_tool,
    "break mid-stream": break_mid_stream,
    "raw SDK disconnect() mid-tool": raw_sdk_mid_tool,
}


async def _round(name: str, scenario: Scenario, tmp: Path, n: int) -> StopSample:
    root = tmp / f"{n}"
    work = root / "work"
    work.mkdir(parents=True)
    mark = work / "mark"
    double = ModelDouble(_Responder(mark))
    async with trio.open_nursery() as nursery:
        await nursery.start(double.serve)
        env = hermetic_env(double.base_url, root, sandbox=True)
        with trio.fail_after(60):
            to_reaped = await scenario(env, work, [])
        side_effect = await _side_effect(mark)
        nursery.cancel_scope.cancel()
    return StopSample(to_reaped=to_reaped, side_effect=side_effect)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.1f} ms"


def run(*, rounds: int) -> dict[str, float]:
    """Print, per scenario, the time from the stop to the CLI reaped and the side effects."""

    async def main() -> dict[str, list[StopSample]]:
        results: dict[str, list[StopSample]] = {name: [] for name in SCENARIOS}
        with tempfile.TemporaryDirectory(prefix="claude-trio-bench-stop-") as tmp:
            n = 0
            for _ in range(rounds):  # interleaved: every scenario once per round
                for name, scenario in SCENARIOS.items():
                    n += 1
                    results[name].append(await _round(name, scenario, Path(tmp), n))
        return results

    results = trio.run(main)
    baseline = statistics.median(s.to_reaped for s in results["raw SDK disconnect() mid-tool"])
    print(
        f"  stop -> CLI reaped, and side effects after the stop, {rounds} rounds interleaved "
        f"(a Bash call that touches a file {TOOL_DELAY:g} s after it starts):"
    )
    print(f"    {'scenario':<32}{'median':>11}{'worst':>12}   side effects   vs raw SDK")
    medians: dict[str, float] = {}
    for name, samples in results.items():
        times = [s.to_reaped for s in samples]
        median = statistics.median(times)
        medians[name] = median
        effects = sum(s.side_effect for s in samples)
        print(
            f"    {name:<32}{_ms(median)}  {_ms(max(times))}   {effects:>3} of {len(samples):<3}"
            f"     {median / baseline:6.3f}x"
        )
    ours = [m for name, m in medians.items() if not name.startswith("raw")]
    print(
        f"    target: no side effect after a stop, median <= {STOP_TARGET_MS:g} ms "
        f"(worst scenario median: {max(ours) * 1e3:.1f} ms)"
    )
    return {f"stop_{name.replace(' ', '_')}_ms": m * 1e3 for name, m in medians.items()}
