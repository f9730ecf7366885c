"""Benchmark 3: the real ``claude`` CLI against the Messages API double on 127.0.0.1.

* Time to first event, cold (a new CLI process each time): the raw SDK (``ClaudeSDKClient``
  connect + ``query`` until the first text-delta ``StreamEvent``, the same wire moment as our
  first ``text_delta``) against ``open_session`` (until its first ``text_delta`` event),
  interleaved raw / ours for N rounds. Wall clock (``time.perf_counter``).
* Abort latency: a slow streaming reply, ``session.abort()`` at a random point after the first
  text delta; then the time to the terminal event and the time until the CLI process is gone
  (``/proc/<pid>`` no longer exists: exited and reaped).
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio
from bench_replay import subprocess_transport
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, StreamEvent
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

from claude_trio import ExecuteParams, open_session
from claude_trio.protocol.options import build_options
from claude_trio.testing.hermetic import hermetic_env
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply

TTFE_TARGET_MS = 10.0
ABORT_TARGET_MS = 100.0
PROMPT = "Say hello."
QUICK_REPLY = Reply.text("Hello from the model double, streaming a short answer.", chunk_size=8)
# ~2.5 s of streaming: 4,000 characters in 500 deltas, 5 ms apart.
SLOW_REPLY = Reply.text(("The reply keeps streaming while we abort it. " * 90)[:4000],
                        chunk_size=8, event_delay=0.005)  # fmt: skip
ABORT_WINDOW_S = 1.5


@attrs.define
class _Replies:
    """The double's responder: every request gets ``reply`` (title and summary requests too)."""

    reply: Reply

    def __call__(self, request: ModelRequest) -> Reply:
        return self.reply


def _children() -> set[int]:
    """Our child processes that still exist (zombies included)."""
    me = str(os.getpid())
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2 :].split()[1] == me:
            found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    """``/proc/<pid>`` exists: running, or exited and not yet reaped (a zombie)."""
    return os.path.exists(f"/proc/{pid}")


def _is_text_delta(message: object) -> bool:
    return isinstance(message, StreamEvent) and message.event.get("delta", {}).get("type") == (
        "text_delta"
    )


async def raw_ttfe(env: dict[str, str]) -> float:
    """Seconds from creating the client to the first text-delta ``StreamEvent``."""
    params = ExecuteParams(prompt=PROMPT)
    start = time.perf_counter()
    client = ClaudeSDKClient(build_options(params, extra_env=env))
    first = None
    try:
        await client.connect()
        await client.query(PROMPT)
        async for message in client.receive_messages():
            if first is None and _is_text_delta(message):
                first = time.perf_counter()
            if isinstance(message, ResultMessage):
                break
    finally:
        with trio.move_on_after(10, shield=True):
            await client.disconnect()
    if first is None:
        raise RuntimeError("the raw SDK saw no text delta")
    return first - start


async def session_ttfe(env: dict[str, str]) -> float:
    """Seconds from entering ``open_session`` to its first ``text_delta`` event."""
    start = time.perf_counter()
    first = None
    last = None
    async with open_session(ExecuteParams(prompt=PROMPT), env=env) as session:
        async for event in session.events:
            if first is None and event.kind == "text_delta":
                first = time.perf_counter()
            last = event.kind
    if first is None or last != "result":
        raise RuntimeError(f"open_session: first text delta {first}, last event {last}")
    return first - start


@attrs.frozen(kw_only=True)
class AbortSample:
    delay: float  # when the abort came, after the first text delta
    to_return: float  # abort() returned
    to_terminal: float  # the terminal event reached the consumer
    to_reaped: float  # /proc/<pid> gone
    to_exit: float  # the ``async with open_session`` block exited
    terminal: str  # kind (and reason) of the terminal event


async def abort_once(env: dict[str, str], delay: float) -> AbortSample:
    transports: list[SubprocessCLITransport] = []

    def factory(options: ClaudeAgentOptions) -> Any:
        transports.append(subprocess_transport(options))
        return transports[-1]

    terminal = ""
    async with open_session(
        ExecuteParams(prompt=PROMPT), env=env, transport_factory=factory
    ) as session:
        async for event in session.events:
            if event.kind == "text_delta":
                break
        process = transports[0]._process
        assert process is not None
        pid = process.pid
        await trio.sleep(delay)
        t0 = time.perf_counter()
        await session.abort()
        returned = time.perf_counter()
        async for event in session.events:
            if event.kind in ("aborted", "result", "error"):
                terminal = f"{event.kind}:{getattr(event, 'reason', '')}"
                terminal_at = time.perf_counter()
        # The kernel offers no event for "reaped by someone else": poll its process table.
        while _alive(pid):  # noqa: ASYNC110
            await trio.sleep(0.001)
        reaped = time.perf_counter()
    exited = time.perf_counter()
    return AbortSample(
        delay=delay,
        to_return=returned - t0,
        to_terminal=terminal_at - t0,
        to_reaped=reaped - t0,
        to_exit=exited - t0,
        terminal=terminal,
    )


async def _with_double(
    reply: Reply, body: Callable[[Callable[[], dict[str, str]]], Any]
) -> Any:
    with tempfile.TemporaryDirectory(prefix="claude-trio-bench-") as tmp:
        double = ModelDouble(_Replies(reply))
        count = 0

        def fresh_env() -> dict[str, str]:
            # A new config/tmp folder per CLI: every start is cold, none sees another's files.
            nonlocal count
            count += 1
            return hermetic_env(double.base_url, Path(tmp) / str(count), sandbox=True)

        async with trio.open_nursery() as nursery:
            await nursery.start(double.serve)
            result = await body(fresh_env)
            nursery.cancel_scope.cancel()
        return result


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.1f} ms"


def run(*, rounds: int, aborts: int, seed: int = 1) -> dict[str, float]:
    """Print TTFE (raw vs ours) and abort latencies; return the medians."""
    before = _children()

    async def ttfe(fresh_env: Callable[[], dict[str, str]]) -> tuple[list[float], list[float]]:
        await raw_ttfe(fresh_env())  # warm-up: page cache, imports
        await session_ttfe(fresh_env())
        raw: list[float] = []
        ours: list[float] = []
        for _ in range(rounds):
            with trio.fail_after(60):
                raw.append(await raw_ttfe(fresh_env()))
                ours.append(await session_ttfe(fresh_env()))
        return raw, ours

    raw, ours = trio.run(_with_double, QUICK_REPLY, ttfe)
    diffs = [o - r for r, o in zip(raw, ours, strict=True)]
    raw_med, ours_med = statistics.median(raw), statistics.median(ours)
    print(f"  time to first event, cold, {rounds} rounds interleaved (median / min / max):")
    print(f"    raw SDK:       {_ms(raw_med)}  {_ms(min(raw))}  {_ms(max(raw))}")
    print(f"    open_session:  {_ms(ours_med)}  {_ms(min(ours))}  {_ms(max(ours))}")
    print(
        f"    difference:    {_ms(ours_med - raw_med)} (median of each), "
        f"{_ms(statistics.median(diffs))} (median of per-round differences); "
        f"target within {TTFE_TARGET_MS:g} ms"
    )

    rng = random.Random(seed)

    async def abort_all(fresh_env: Callable[[], dict[str, str]]) -> list[AbortSample]:
        samples = []
        for _ in range(aborts):
            with trio.fail_after(60):
                samples.append(await abort_once(fresh_env(), rng.uniform(0, ABORT_WINDOW_S)))
        return samples

    samples = trio.run(_with_double, SLOW_REPLY, abort_all)
    kinds: dict[str, int] = {}
    for sample in samples:
        kinds[sample.terminal] = kinds.get(sample.terminal, 0) + 1

    def line(name: str, values: list[float]) -> str:
        return f"    {name:<24} median {_ms(statistics.median(values))}   worst {_ms(max(values))}"

    print(f"  abort at a random point of a streaming reply, {aborts} aborts:")
    print(line("abort() returned", [s.to_return for s in samples]))
    print(line("terminal event received", [s.to_terminal for s in samples]))
    print(line("CLI process reaped", [s.to_reaped for s in samples]))
    print(line("open_session block exited", [s.to_exit for s in samples]))
    print(f"    terminal events: {kinds}; target: reaped median <= {ABORT_TARGET_MS:g} ms")
    left = _children() - before
    if left:
        raise RuntimeError(f"child processes left behind: {sorted(left)}")
    return {
        "ttfe_raw_ms": raw_med * 1e3,
        "ttfe_session_ms": ours_med * 1e3,
        "ttfe_diff_ms": statistics.median(diffs) * 1e3,
        "abort_terminal_ms": statistics.median(s.to_terminal for s in samples) * 1e3,
        "abort_reaped_ms": statistics.median(s.to_reaped for s in samples) * 1e3,
        "abort_reaped_worst_ms": max(s.to_reaped for s in samples) * 1e3,
    }
