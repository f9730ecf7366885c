"""Benchmark 3: the real ``claude`` CLI against the Messages API double on 127.0.0.1.

* Time to first event, cold (a new CLI process each time): the raw SDK (``ClaudeSDKClient``
  connect + ``query`` until the first text-delta ``StreamEvent``, the same wire moment as our
  first ``text_delta``) against ``open_session`` (until its first ``text_delta`` event),
  interleaved raw / ours for N rounds. Wall clock (``time.perf_counter``).
* Warm vs cold (the pool): ``open_session`` on a CLI it starts itself (cold) against
  ``open_session(pool=...)`` taking a CLI that ``open_cli_pool`` started and initialized ahead
  of time (warm), alternating cold / warm for N rounds; time to the first event that is not a
  ``passthrough`` (``turn_started``) and to the first ``text_delta``.
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
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio
from bench_replay import subprocess_transport
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, StreamEvent

from claude_trio import Error, ExecuteParams, open_cli_pool, open_session
from claude_trio.actors.session.sdk_private import SubprocessCLITransport, subprocess_of
from claude_trio.protocol.config.options import build_options
from claude_trio.session import CLIPool
from claude_trio.testing.hermetic import hermetic_env
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply

TTFE_TARGET_MS = 10.0
WARM_TARGET_RATIO = 0.2
# A CLI keeps working for about 1.6 s after it answered ``initialize`` (~0.15 CPU-s here), and a
# pool slot starts a new CLI as soon as its last one was taken: before each warm or cold
# measurement, wait for the pool to be ready and then this long, so neither side shares the
# CPUs with a CLI still starting up.
SETTLE_S = 2.0
PARAMS = ExecuteParams(prompt="Say hello.")
ABORT_TARGET_MS = 100.0
PROMPT = PARAMS.prompt
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


@attrs.frozen(kw_only=True)
class FirstEvents:
    """Seconds from entering ``open_session`` to its first events."""

    first_event: float  # the first event that is not a ``passthrough`` (CLI side frames)
    first_kind: str  # its kind (``turn_started``)
    first_text: float  # the first ``text_delta``


async def session_first_events(
    env: dict[str, str] | None, *, pool: CLIPool | None = None
) -> FirstEvents:
    """Run one session to its ``result``; time its first event and first ``text_delta``."""
    start = time.perf_counter()
    first = first_text = None
    first_kind = last = ""
    error = None
    async with open_session(PARAMS, env=env, pool=pool) as session:
        async for event in session.events:
            if isinstance(event, Error):
                error = event
            if first is None and event.kind != "passthrough":
                first, first_kind = time.perf_counter(), event.kind
            if first_text is None and event.kind == "text_delta":
                first_text = time.perf_counter()
            last = event.kind
    if first is None or first_text is None or last != "result":
        raise RuntimeError(
            f"open_session: first event {first_kind or None}, first text delta at {first_text}, "
            f"last event {last or None}; {error!r}"
        )
    return FirstEvents(
        first_event=first - start, first_kind=first_kind, first_text=first_text - start
    )


async def _settled(pool: CLIPool) -> None:
    """Wait until the pool holds a ready CLI, then ``SETTLE_S`` (see there)."""
    while pool.statistics().ready < 1:  # the pool offers no event for it: poll
        stats = pool.statistics()
        if stats.failures:
            raise RuntimeError(f"the pool could not start a CLI: {stats.last_error}")
        await trio.sleep(0.005)
    await trio.sleep(SETTLE_S)


async def warm_vs_cold(
    fresh_env: Callable[[], dict[str, str]], rounds: int
) -> tuple[list[FirstEvents], list[FirstEvents]]:
    """Alternate a cold session and a warm one (a pool hit, checked) for ``rounds`` rounds.

    Both run with the same options. A cold session gets no pool, so it starts and initializes
    its own CLI inside the measured interval, with a fresh config folder as everywhere in this
    benchmark; the pool's CLIs share one folder of their own.
    """
    cold: list[FirstEvents] = []
    warm: list[FirstEvents] = []
    async with open_cli_pool(PARAMS, size=1, env=fresh_env(), user_input=False) as pool:
        for i in range(rounds + 1):  # round 0 is a warm-up: page cache, imports
            with trio.fail_after(60):
                await _settled(pool)
                sample = await session_first_events(fresh_env())
                if i:
                    cold.append(sample)
                await _settled(pool)
                hits = pool.statistics().hits
                sample = await session_first_events(None, pool=pool)
                if pool.statistics().hits != hits + 1:
                    raise RuntimeError(f"expected a warm hit, the pool says {pool.statistics()}")
                if i:
                    warm.append(sample)
    return cold, warm


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
        process = subprocess_of(transports[0])
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
    """Print TTFE (raw vs ours, warm vs cold) and abort latencies; return the medians."""
    before = _children()

    async def ttfe(fresh_env: Callable[[], dict[str, str]]) -> tuple[list[float], list[float]]:
        await raw_ttfe(fresh_env())  # warm-up: page cache, imports
        await session_first_events(fresh_env())
        raw: list[float] = []
        ours: list[float] = []
        for _ in range(rounds):
            with trio.fail_after(60):
                raw.append(await raw_ttfe(fresh_env()))
                ours.append((await session_first_events(fresh_env())).first_text)
        return raw, ours

    raw, ours = trio.run(_with_double, QUICK_REPLY, ttfe)
    diffs = [o - r for r, o in zip(raw, ours, strict=True)]
    raw_med, ours_med = statistics.median(raw), statistics.median(ours)
    print(
        f"  cold start -> first text delta, raw SDK vs open_session, {rounds} rounds interleaved "
        "(median / min / max):"
    )
    print(f"    raw SDK:       {_ms(raw_med)}  {_ms(min(raw))}  {_ms(max(raw))}")
    print(f"    open_session:  {_ms(ours_med)}  {_ms(min(ours))}  {_ms(max(ours))}")
    print(
        f"    difference:    {_ms(ours_med - raw_med)} (median of each), "
        f"{_ms(statistics.median(diffs))} (median of per-round differences); "
        f"target within {TTFE_TARGET_MS:g} ms"
    )

    cold, warm = trio.run(_with_double, QUICK_REPLY, partial(warm_vs_cold, rounds=rounds))
    kinds_seen = sorted({s.first_kind for s in cold + warm})
    print(
        f"  warm (pool hit) vs cold, {rounds} rounds interleaved, {SETTLE_S:g} s settle before "
        f"each (median / min / max):"
    )
    warm_ratios = {}
    for label, attr in (
        (f"first event ({', '.join(kinds_seen)})", "first_event"),
        ("first text_delta", "first_text"),
    ):
        c = [getattr(s, attr) for s in cold]
        w = [getattr(s, attr) for s in warm]
        c_med, w_med = statistics.median(c), statistics.median(w)
        warm_ratios[attr] = w_med / c_med
        target = f"; target <= {WARM_TARGET_RATIO:g}" if attr == "first_event" else ""
        print(f"    {label}:")
        print(f"      cold:            {_ms(c_med)}  {_ms(min(c))}  {_ms(max(c))}")
        print(f"      warm:            {_ms(w_med)}  {_ms(min(w))}  {_ms(max(w))}")
        print(f"      ratio warm/cold: {w_med / c_med:7.2f} (medians){target}")

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
        "cold_first_event_ms": statistics.median(s.first_event for s in cold) * 1e3,
        "warm_first_event_ms": statistics.median(s.first_event for s in warm) * 1e3,
        "warm_cold_first_event_ratio": warm_ratios["first_event"],
        "warm_cold_first_text_ratio": warm_ratios["first_text"],
        "abort_terminal_ms": statistics.median(s.to_terminal for s in samples) * 1e3,
        "abort_reaped_ms": statistics.median(s.to_reaped for s in samples) * 1e3,
        "abort_reaped_worst_ms": max(s.to_reaped for s in samples) * 1e3,
    }
