"""``WatchedStore`` (``protocol/cluster/move.py`` rule 9): a worker's wait for a tool result to
be in the session store ends when the SDK's append of it returns, not before, and not for a
subagent's transcript or another conversation's result."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from claude_trio.actors.cluster.move import WatchedStore


class MemoryStore:
    """Enough of a ``SessionStore``: appends take ``delay`` seconds (a slow Redis)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.entries: list[Any] = []

    async def append(self, key: Any, entries: list[Any]) -> None:
        await trio.sleep(self.delay)
        self.entries += entries

    async def load(self, key: Any) -> list[Any] | None:
        await trio.lowlevel.checkpoint()
        return self.entries or None


def tool_result(tool_use_id: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": "ok"}
    return {"type": "user", "uuid": f"u-{tool_use_id}", "message": {"content": [block]}}


MAIN = {"project_key": "p", "session_id": "conv"}


async def test_a_wait_ends_once_the_append_holding_the_result_returned(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = MemoryStore(delay=0.5)
    store = WatchedStore(inner)  # type: ignore[arg-type]
    ended_at: list[float] = []

    async def wait() -> None:
        await store.wait_stored("conv", "t2")
        ended_at.append(trio.current_time())
        assert tool_result("t2") in inner.entries  # in the store before the wait ends

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.sleep(1)
        await store.append({**MAIN, "subpath": "subagents/agent-1"}, [tool_result("t2")])  # type: ignore[typeddict-item]
        await store.append({"project_key": "p", "session_id": "other"}, [tool_result("t2")])  # type: ignore[typeddict-item]
        await store.append(MAIN, [tool_result("t1")])  # type: ignore[arg-type]
        assert ended_at == []
        await store.append(MAIN, [{"type": "attachment"}, tool_result("t2")])  # type: ignore[arg-type]
    assert ended_at == [3.0]  # 1 s, then four appends of 0.5 s each
    assert store.holds("conv", "t1")


async def test_a_bounded_wait_gives_up_and_forget_drops_a_conversation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = WatchedStore(MemoryStore(delay=0))  # type: ignore[arg-type]
    with trio.move_on_after(10) as waited:
        await store.wait_stored("conv", "t9")
    assert waited.cancelled_caught
    assert trio.current_time() == 10
    await store.append(MAIN, [tool_result("t9")])  # type: ignore[arg-type]
    assert store.holds("conv", "t9")
    store.forget("conv")
    assert not store.holds("conv", "t9")
