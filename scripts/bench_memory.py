"""Benchmark 2: the adapter's own memory per session, 1,000 sessions parked mid-turn.

Every session runs on a :class:`ReplayTransport` that stops after the turn's first text delta
(a CLI waiting for the model), so the CLI is out of the picture. Each session's consumer reads
up to that first ``text_delta`` and parks. Memory is what ``tracemalloc`` sees allocated and
still alive once all of them are parked, divided by their number. The bare-SDK line does the
same with ``ClaudeSDKClient`` (connect, query, read up to the first text-delta ``StreamEvent``)
on the same transport; the difference is the adapter's own cost.

A second pair (informational, fewer sessions) parks the consumer after its first event while
the replay keeps producing (fresh dicts, as the real transport parses them): every buffer on
the way is then full. For the bare SDK that is its 100-frame message stream; for
``open_session`` it is the ``EventStream`` at its capacity (256 mapped events), since the tap
takes message frames out before they reach the SDK's stream.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable, Coroutine
from typing import Any

import trio
import trio.testing
from bench_replay import Recording, ReplayTransport, replay_factory
from claude_agent_sdk import ClaudeSDKClient, StreamEvent

from claude_trio import ExecuteParams, open_session
from claude_trio.protocol.config.options import build_options

TARGET_KIB = 64
PARAMS = ExecuteParams(prompt="Summarize the workspace.")

Parker = Callable[
    [Recording, dict[str, object], trio.Event, Callable[[], None]], Coroutine[Any, Any, None]
]


def _is_text_delta(message: object) -> bool:
    return isinstance(message, StreamEvent) and message.event.get("delta", {}).get("type") == (
        "text_delta"
    )


async def park_bare(
    recording: Recording, transport_kwargs: dict[str, object], hold: trio.Event,
    parked: Callable[[], None],
) -> None:
    client = ClaudeSDKClient(
        build_options(PARAMS), transport=ReplayTransport(recording, **transport_kwargs)  # type: ignore[arg-type]
    )
    await client.connect()
    await client.query(PARAMS.prompt)
    messages = client.receive_messages()
    while not _is_text_delta(await messages.__anext__()):
        pass
    parked()
    await hold.wait()
    await messages.aclose()  # type: ignore[attr-defined]
    await client.disconnect()


async def park_session(
    recording: Recording, transport_kwargs: dict[str, object], hold: trio.Event,
    parked: Callable[[], None],
) -> None:
    async with open_session(
        PARAMS, transport_factory=replay_factory(recording, **transport_kwargs)
    ) as session:
        async for event in session.events:
            if event.kind == "text_delta":
                break
        parked()
        await hold.wait()


async def _measure(
    parker: Parker, recording: Recording, count: int, transport_kwargs: dict[str, object]
) -> float:
    """Bytes per parked session (tracemalloc, after a full collection)."""
    hold = trio.Event()
    all_parked = trio.Event()
    done = 0

    def parked() -> None:
        nonlocal done
        done += 1
        if done == count:
            all_parked.set()

    gc.collect()
    # The cyclic GC rescans the growing heap every few thousand allocations, which makes
    # parking N sessions quadratic; it is off while they park, and a full collection runs
    # before the measurement.
    gc.disable()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(parker, recording, transport_kwargs, hold, parked)
            await all_parked.wait()
            await trio.testing.wait_all_tasks_blocked()
            gc.collect()
            used = tracemalloc.get_traced_memory()[0] - base
            hold.set()
    finally:
        tracemalloc.stop()
        gc.enable()
    return used / count


def run(recording: Recording, *, sessions: int, stalled_sessions: int) -> dict[str, float]:
    """Print per-session memory for both sides, idle mid-turn and with full buffers."""
    # Fresh dicts on both sides: what each side keeps of a frame is then really counted.
    idle: dict[str, object] = {"pause_after": recording.first_text_delta_index() + 1, "fresh": True}
    stalled: dict[str, object] = {"fresh": True}
    trio.run(_measure, park_bare, recording, 10, idle)  # warm-up: imports, caches
    trio.run(_measure, park_session, recording, 10, idle)
    bare = trio.run(_measure, park_bare, recording, sessions, idle)
    ours = trio.run(_measure, park_session, recording, sessions, idle)
    print(f"  sessions parked mid-turn:    {sessions} (after the first text delta)")
    print(f"  bare ClaudeSDKClient:        {bare / 1024:7.1f} KiB per session")
    print(
        f"  open_session:                {ours / 1024:7.1f} KiB per session  "
        f"(target <= {TARGET_KIB} KiB; adapter's own {(ours - bare) / 1024:+.1f} KiB)"
    )
    bare_full = trio.run(_measure, park_bare, recording, stalled_sessions, stalled)
    ours_full = trio.run(_measure, park_session, recording, stalled_sessions, stalled)
    print(
        f"  stalled consumer, full buffers ({stalled_sessions} sessions, informational): "
        f"bare {bare_full / 1024:.1f} KiB, open_session {ours_full / 1024:.1f} KiB per session"
    )
    return {
        "bare_kib": bare / 1024,
        "adapter_kib": ours / 1024,
        "bare_full_kib": bare_full / 1024,
        "adapter_full_kib": ours_full / 1024,
    }
