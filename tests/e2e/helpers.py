"""Shared pieces of the ``open_session`` end-to-end tests (real bundled CLI, model double).

``run_session`` runs one execution to its end and checks the invariants every lifecycle test
must hold afterwards (the event contract of ``claude_trio.testing.check_contract``: one final
terminal event, nothing after it, ``seq`` strictly increasing, tool calls, questions, usage and
subagent attribution; and no ``claude`` child process left). ``sonnet_cost`` prices a double's
usage the way the CLI does for ``claude-sonnet-4-5``, so a test can assert
``Result.usage.cost_usd`` exactly.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from claude_trio.actors.session.open import Session, open_session
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Event,
    Passthrough,
    Result,
    ToolUseSummary,
    is_terminal,
)
from claude_trio.testing import check_contract
from claude_trio.testing.model_double import ReplyUsage

MODEL = "claude-sonnet-4-5"

# Sonnet 4.5 list prices per token: $3 / $15 / $0.30 / $3.75 per MTok (input / output / cache
# read / cache write). The CLI prices a known model from the usage the double reports.
_SONNET_PRICES = (3e-6, 15e-6, 0.3e-6, 3.75e-6)

E = TypeVar("E", bound=Event)

OnEvent = Callable[[Session, Event], Awaitable[None]]


def sonnet_cost(*usages: ReplyUsage) -> float:
    """What the CLI charges for these API calls on ``claude-sonnet-4-5``."""
    inp, out, read, write = _SONNET_PRICES
    return sum(
        u.input_tokens * inp
        + u.output_tokens * out
        + u.cache_read_input_tokens * read
        + u.cache_creation_input_tokens * write
        for u in usages
    )


def workdir(tmp_path: Path) -> str:
    """The CLI's cwd: a folder of the test's own (Bash runs there; resume keys on it)."""
    path = tmp_path / "work"
    path.mkdir(exist_ok=True)
    return str(path)


def params(tmp_path: Path, prompt: str, **kwargs: Any) -> ExecuteParams:
    """``ExecuteParams`` on the priced model, in the test's work folder."""
    kwargs.setdefault("model", MODEL)
    return ExecuteParams(prompt=prompt, cwd=workdir(tmp_path), **kwargs)


async def run_session(
    execute: ExecuteParams,
    env: Mapping[str, str],
    *,
    on_event: OnEvent | None = None,
    **session_kwargs: Any,
) -> list[Event]:
    """Run one execution to its end and return every event; check the end-of-run invariants.

    ``on_event`` is awaited for each event inside the loop (to push, abort, open a gate).
    """
    events: list[Event] = []
    with trio.fail_after(60):
        async with open_session(execute, env=env, **session_kwargs) as session:
            async for event in session.events:
                events.append(event)
                if on_event is not None:
                    await on_event(session, event)
            assert session.ended
    assert_single_final_terminal(events)
    assert_no_child_processes()
    return events


def assert_single_final_terminal(events: Sequence[Event]) -> None:
    """Exactly one event ends the execution, it is the last one, and ``seq`` only grows; and
    the whole stream keeps the contract (``check_contract``: every violation, with its seq)."""
    assert events, "the session produced no events at all"
    check_contract(events)
    last = events[-1]
    assert is_terminal(last), f"the last event is not terminal: {last!r}"
    if isinstance(last, Result):
        assert last.final, f"the last result is not final: {last!r}"
    for event in events[:-1]:
        ends_execution = (
            isinstance(event, Aborted)
            or (isinstance(event, Result) and event.final)
            or (isinstance(event, Error) and event.fatal)
        )
        assert not ends_execution, f"{event!r} ended the execution before the last event"
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs)), f"seq is not strictly increasing: {seqs}"


def _children(pid: int) -> list[tuple[int, str, str]]:
    """``(pid, comm, state)`` of every process whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it exited while we looked
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        head, _, tail = stat.rpartition(")")
        fields = tail.split()
        if int(fields[1]) == pid:
            found.append((int(entry.name), head.partition("(")[2], fields[0]))
    return found


def assert_no_child_processes() -> None:
    """No child of this process is left: no running ``claude``, and no zombie either."""
    children = _children(os.getpid())
    assert children == [], f"processes left behind (pid, comm, state): {children}"


def of_type(events: Sequence[Event], cls: type[E]) -> list[E]:
    """The events of ``cls`` (tool-use summaries left out: see ``real``)."""
    return [e for e in real(events) if isinstance(e, cls)]


def kinds(events: Sequence[Event]) -> list[str]:
    """Event kinds in order, without passthrough frames (CLI status chatter), deltas, and
    tool-use summaries (on by default; the CLI writes them when its side request for the label
    returns, so where they land is not the test's point)."""
    return [e.kind for e in real(events) if e.kind not in ("text_delta", "thinking")]


def real(events: Sequence[Event]) -> list[Event]:
    """``events`` without passthroughs and tool-use summaries."""
    return [e for e in events if not isinstance(e, Passthrough | ToolUseSummary)]


def dump(events: Sequence[Event]) -> str:
    """A readable event listing, for assertion messages."""
    return "\n".join(f"{e.seq:3} t{e.turn} {e!r}"[:300] for e in events)
