"""Checks shared by the lifecycle e2e tests: no ``claude`` left behind, one final terminal event.

``open_session`` promises that nothing it starts outlives its ``async with``. The only process
it starts is the CLI (a direct child of the test process; the CLI starts MCP servers as its own
children), so after the block no child of ours may be a ``claude``, and no child may be a zombie
(an exited CLI nobody waited for). /proc is read directly: the check must not depend on the
code it checks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from claude_trio.protocol.session.events import Event, Result, is_terminal
from claude_trio.testing import check_contract


@attrs.frozen(kw_only=True)
class Child:
    pid: int
    comm: str
    state: str
    cmdline: str


def children(ppid: int | None = None) -> list[Child]:
    """The processes whose parent is ``ppid`` (default: this process), read from /proc."""
    parent = os.getpid() if ppid is None else ppid
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # exited while we looked
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and ")", so split at the last ")".
        head, _, tail = stat.rpartition(")")
        fields = tail.split()
        if int(fields[1]) != parent:
            continue
        found.append(
            Child(
                pid=int(entry.name), comm=head.partition("(")[2], state=fields[0], cmdline=cmdline
            )
        )
    return found


def assert_no_cli_left() -> None:
    """No child of ours is a ``claude`` CLI, and none is a zombie."""
    left = [
        c
        for c in children()
        if c.state == "Z" or "claude" in c.comm or "claude" in c.cmdline.split(" ")[0]
    ]
    assert left == [], f"processes left behind by the session: {left}"


def assert_one_final_terminal(events: Sequence[Event]) -> Event:
    """The last event is the execution's one final terminal event; return it.

    Every terminal event before it must be a non-final ``Result`` (a turn that did not end the
    execution); an ``Aborted`` or fatal ``Error`` ends the execution, so only the last may be one.
    The whole stream must keep the contract too (``check_contract``).
    """
    assert events, "no events at all"
    check_contract(events)
    *before, last = events
    assert is_terminal(last), f"the last event is not terminal: {last!r}"
    if isinstance(last, Result):
        assert last.final, f"the last result is not final: {last!r}"
    for event in before:
        if is_terminal(event):
            assert isinstance(event, Result), f"a terminal event before the end: {event!r}"
            assert not event.final, f"a final result before the end: {event!r}"
    return last


def kinds(events: Sequence[Event]) -> list[str]:
    """The kinds of ``events`` that tell a story (no passthrough frames)."""
    return [e.kind for e in events if e.kind != "passthrough"]
