"""The contract kit: check that a captured event stream keeps claude-trio's invariants.

::

    events = [event async for event in session.events]
    check_contract(events)          # raises ContractViolationError listing every violation

The rules (``claude_trio.protocol.session.contract``, ARCHITECTURE.md's invariants): one event ends
the execution and nothing follows it; a turn's events come before its terminal event; ``seq``
strictly increases; every ``tool_use`` is reported once and has at most one result, reported
after it; every user-input request is resolved exactly once; usage never decreases;
``adapter_ready`` comes once, after warnings only (none when the execution ended before its
CLI started); subagent attribution is consistent. Every violation is reported, each with the
``seq`` of the event at fault, not just the first.

With pytest, the ``event_contract`` fixture checks every stream a test watched
(:class:`ContractRecorder`) at teardown, and :func:`assert_contract` fails the test with the
list and without a traceback into the kit.
"""

from __future__ import annotations

from collections.abc import Iterable

from claude_trio.protocol.errors import ClaudeTrioError
from claude_trio.protocol.session.contract import (
    RULES,
    Violation,
    contract_violations,
    describe_violations,
)
from claude_trio.protocol.session.events import Event

__all__ = [
    "RULES",
    "ContractRecorder",
    "ContractViolationError",
    "Violation",
    "check_contract",
    "contract_violations",
]


class ContractViolationError(ClaudeTrioError, AssertionError):
    """A stream broke the contract. ``violations`` lists every break, in order; the message
    has one line per violation, starting with the ``seq`` of the event at fault."""

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        super().__init__(describe_violations(violations))


def check_contract(events: Iterable[Event], *, complete: bool = True) -> None:
    """Raise :class:`ContractViolationError` unless ``events`` (one execution's, from its
    first event, in order) keep the contract.

    ``complete=False`` for a stream cut short on purpose (a test that stops reading): its
    missing end is then not a violation. A stream that starts in the middle (a replay from
    a ``last_seq``) is not one execution's whole stream: check the whole one instead.
    """
    violations = contract_violations(events, complete=complete)
    if violations:
        raise ContractViolationError(violations)


class ContractRecorder:
    """Records the streams a test watches, to check them all at once (the ``event_contract``
    fixture checks them at teardown)::

        async for event in observe(session.events, event_contract.watch("main session")):
            ...

    Each :meth:`watch` returns an observer (a function taking an event) for one stream.
    """

    def __init__(self) -> None:
        self._streams: list[tuple[str, list[Event], bool]] = []

    def watch(self, name: str | None = None, *, complete: bool = True) -> _Recorder:
        """An observer that records one stream under ``name`` (default: its number)."""
        events: list[Event] = []
        self._streams.append((name or f"stream {len(self._streams) + 1}", events, complete))
        return _Recorder(events)

    def problems(self) -> list[str]:
        """One report per stream that broke the contract (empty when every stream kept it)."""
        found = []
        for name, events, complete in self._streams:
            violations = contract_violations(events, complete=complete)
            if violations:
                found.append(f"{name}: {describe_violations(violations)}")
        return found

    def check(self) -> None:
        """Raise :class:`ContractViolationError` for the first stream that broke the contract,
        with the reports of all of them."""
        for _, events, complete in self._streams:
            violations = contract_violations(events, complete=complete)
            if violations:
                error = ContractViolationError(violations)
                error.args = ("\n".join(self.problems()),)
                raise error


class _Recorder:
    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def __call__(self, event: Event) -> None:
        self.events.append(event)
