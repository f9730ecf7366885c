"""Helpers for actor tests: a session over the scripted fake CLI, and stream invariants."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from claude_trio import DriverConfig, Event, ExecuteParams, Session, is_terminal, open_session
from claude_trio.testing import FakeCLI, check_contract

# Short, distinct deadlines so exact-virtual-time asserts name which one fired.
CONFIG = DriverConfig(
    connect_timeout=7.0,
    control_timeout=2.0,
    interrupt_timeout=1.5,
    abort_grace=3.0,
    exit_grace=0.75,
    close_grace=11.0,
    stall_timeout=40.0,
)


@asynccontextmanager
async def fake_session(
    fake: FakeCLI, prompt: str = "hello", **kwargs: Any
) -> AsyncIterator[Session]:
    params = kwargs.pop("params", None) or ExecuteParams(prompt=prompt)
    kwargs.setdefault("config", CONFIG)
    async with open_session(params, transport_factory=fake, **kwargs) as session:
        yield session


async def collect(
    session: Session, on_event: Callable[[Event], Any] | None = None
) -> list[Event]:
    """Every event of the execution; ``on_event`` may be async (it runs inside the loop)."""
    events: list[Event] = []
    async for event in session.events:
        events.append(event)
        if on_event is not None:
            result = on_event(event)
            if hasattr(result, "__await__"):
                await result
    return events


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def check_stream(events: list[Event]) -> None:
    """The invariants every execution's stream keeps: the contract kit's rules (ARCHITECTURE.md,
    invariants 1-3, 5-7, with every violation listed), and the same three again by hand."""
    check_contract(events)
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs)), f"seq not strictly increasing: {seqs}"
    terminals = [e for e in events if is_terminal(e)]
    assert terminals, "no terminal event"
    last = events[-1]
    assert is_terminal(last), f"the stream does not end with its terminal event: {last.kind}"
    final = [e for e in terminals if getattr(e, "final", True)]
    assert len(final) == 1, f"not exactly one execution-ending event: {kinds(final)}"
    closed_turns: set[int] = set()
    for event in events:
        assert event.turn not in closed_turns, f"{event.kind} after turn {event.turn} ended"
        if is_terminal(event):
            closed_turns.add(event.turn)


def assert_no_leak(fake: FakeCLI) -> None:
    for transport in fake.transports:
        assert transport.closed, "the fake CLI was never closed"
        assert not transport.process_alive, "the fake CLI process is still alive"


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()
