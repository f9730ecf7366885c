"""The contract every execution's event stream keeps, as a checker (pure, no trio).

:func:`contract_violations` reads the events of one execution, from its first event, and
returns every place where they break ARCHITECTURE.md's invariants, each with the ``seq`` of
the event at fault, in the order they were found (what only the end of the stream reveals
comes last). ``claude_trio.testing.check_contract`` raises them as one assertion.
Works on any captured stream: a session's, a fleet subscription's (merged deltas skip seqs,
which is allowed), a gateway client's decoded frames. Rules, each with its name:

``final``
    Exactly one event ends the execution (a ``result`` with ``final=True``, ``aborted``, or a
    fatal ``error``) and nothing follows it. With ``complete=True`` (the default) a stream
    without one is a violation; pass ``complete=False`` for a stream cut short on purpose.
``turn``
    Nothing stamped with a turn follows that turn's terminal event (so a turn has one).
``seq``
    ``seq`` strictly increases.
``tool_use``
    Every ``tool_use`` id is reported once.
``tool_result``
    Every ``tool_result`` answers a ``tool_use`` reported before it, and each call has at most
    one result.
``user_input``
    Every ``user_input_request`` id is asked once and resolved exactly once (``complete=True``:
    a request still open at the end is a violation); no resolution without its request.
``usage``
    Usage never decreases: from one ``result`` to the next, neither the session's nor the
    execution's totals go down, field by field; no count is negative.
``ready``
    An execution whose CLI started reports its configuration first: exactly one
    ``adapter_ready``, with only ``warning`` events before it. An execution that fails or is
    aborted before the CLI starts has none: its stream is warnings, then the ``error`` or
    ``aborted`` that ends it. A second ``adapter_ready``, one after any other event, or any
    other event with none before it is a violation.
``subagent``
    Attribution is consistent: a ``subagent_task_id`` only on an ``is_subagent`` event, and
    only for a task whose ``subagent_started`` came before and whose ``subagent_completed``
    did not; a task starts once and completes once; no subagent starts inside itself.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from claude_trio.protocol.session.events import (
    AdapterReady,
    Event,
    Result,
    SubagentCompleted,
    SubagentStarted,
    ToolResult,
    ToolUse,
    UserInputRequest,
    UserInputResolved,
    WarningEvent,
    is_terminal,
)
from claude_trio.protocol.session.transcript import ends_execution
from claude_trio.protocol.session.usage import Usage

__all__ = ["RULES", "Violation", "contract_violations", "describe_violations"]

RULES = (
    "final",
    "turn",
    "seq",
    "tool_use",
    "tool_result",
    "user_input",
    "usage",
    "ready",
    "subagent",
)
"""The names of the rules, in the order the module docstring gives them."""

_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "cost_usd",
)


@attrs.frozen(kw_only=True)
class Violation:
    """One break of the contract: the ``seq`` of the event at fault (``None`` when the fault
    is the stream as a whole, e.g. an empty one), the rule's name, and what is wrong."""

    seq: int | None
    rule: str
    message: str

    def __str__(self) -> str:
        where = "stream" if self.seq is None else f"seq {self.seq}"
        return f"{where} [{self.rule}]: {self.message}"


def describe_violations(violations: Iterable[Violation]) -> str:
    """One line per violation, under a count: what ``check_contract`` raises with."""
    found = list(violations)
    if not found:
        return "the event stream keeps the contract"
    noun = "violation" if len(found) == 1 else "violations"
    lines = [f"{len(found)} {noun} of the event contract:"]
    lines.extend(f"  {v}" for v in found)
    return "\n".join(lines)


def contract_violations(events: Iterable[Event], *, complete: bool = True) -> list[Violation]:
    """Every violation of the contract in ``events`` (one execution, in order), in order.

    See the module docstring for the rules. ``complete=False``: the stream was cut short on
    purpose; its missing end (no final event, questions still open) is not reported.
    """
    checker = _Checker()
    for event in events:
        checker.feed(event)
    return checker.finish(complete=complete)


class _Checker:
    def __init__(self) -> None:
        self.found: list[Violation] = []
        self.last: Event | None = None
        self.final: Event | None = None
        self.closed_turns: dict[int, int] = {}  # turn -> seq of its terminal event
        self.tool_uses: dict[str, int] = {}
        self.tool_results: dict[str, int] = {}
        self.requests: dict[str, int] = {}
        self.resolved: dict[str, int] = {}
        self.started: dict[str, int] = {}
        self.completed: dict[str, int] = {}
        self.session_usage: tuple[int, Usage] | None = None
        self.execution_usage: tuple[int, Usage] | None = None
        self.ready: Event | None = None
        self.before_ready: Event | None = None  # the first event that needed one before it

    def flag(self, event: Event | None, rule: str, message: str) -> None:
        self.found.append(
            Violation(seq=None if event is None else event.seq, rule=rule, message=message)
        )

    def feed(self, event: Event) -> None:
        after_the_end = self.final is not None
        self._order(event)
        if not after_the_end:  # past the end, the ``final`` rule has said it
            self._turns(event)
            self._ready(event)
        match event:
            case ToolUse():
                self._tool_use(event)
            case ToolResult():
                self._tool_result(event)
            case UserInputRequest():
                self._request(event)
            case UserInputResolved():
                self._resolution(event)
            case Result():
                self._usage(event)
            case SubagentStarted() | SubagentCompleted():
                self._task(event)
            case _:
                pass
        self._attribution(event)
        self.last = event

    def finish(self, *, complete: bool) -> list[Violation]:
        if self.ready is None and self.before_ready is not None:
            # Whether or not the stream was cut short: adapter_ready was due before this one.
            self.flag(
                self.before_ready,
                "ready",
                f"{self.before_ready.kind} and no adapter_ready before it (an execution whose "
                "CLI started reports adapter_ready first, after warnings only)",
            )
        if complete:
            if self.final is None:
                self.flag(
                    self.last,
                    "final",
                    "the stream ended without the event that ends the execution (a result "
                    "with final=True, aborted, or a fatal error)",
                )
            for request_id, seq in self.requests.items():
                if request_id not in self.resolved:
                    self.found.append(
                        Violation(
                            seq=seq,
                            rule="user_input",
                            message=f"user_input_request {request_id!r} was never resolved",
                        )
                    )
        return self.found

    # -- the rules ---------------------------------------------------------------------------

    def _order(self, event: Event) -> None:
        if self.final is not None:
            self.flag(
                event,
                "final",
                f"{event.kind} after the event that ended the execution "
                f"({self.final.kind} at seq {self.final.seq})",
            )
        elif ends_execution(event):
            self.final = event
        last = self.last
        if last is not None and event.seq <= last.seq:
            self.flag(
                event, "seq", f"seq {event.seq} after seq {last.seq}: not strictly increasing"
            )

    def _turns(self, event: Event) -> None:
        ended_at = self.closed_turns.get(event.turn)
        if ended_at is not None:
            self.flag(
                event,
                "turn",
                f"{event.kind} stamped with turn {event.turn}, which ended at seq {ended_at}",
            )
        elif is_terminal(event):
            self.closed_turns[event.turn] = event.seq

    def _tool_use(self, event: ToolUse) -> None:
        first = self.tool_uses.get(event.tool_use_id)
        if first is not None:
            self.flag(
                event,
                "tool_use",
                f"tool_use {event.tool_use_id!r} reported again (first at seq {first})",
            )
        else:
            self.tool_uses[event.tool_use_id] = event.seq

    def _tool_result(self, event: ToolResult) -> None:
        if event.tool_use_id not in self.tool_uses:
            self.flag(
                event,
                "tool_result",
                f"tool_result for {event.tool_use_id!r}, whose tool_use was not reported before",
            )
        first = self.tool_results.get(event.tool_use_id)
        if first is not None:
            self.flag(
                event,
                "tool_result",
                f"a second tool_result for {event.tool_use_id!r} (the first at seq {first})",
            )
        else:
            self.tool_results[event.tool_use_id] = event.seq

    def _request(self, event: UserInputRequest) -> None:
        first = self.requests.get(event.request_id)
        if first is not None:
            self.flag(
                event,
                "user_input",
                f"user_input_request {event.request_id!r} asked again (first at seq {first})",
            )
        else:
            self.requests[event.request_id] = event.seq

    def _resolution(self, event: UserInputResolved) -> None:
        if event.request_id not in self.requests:
            self.flag(
                event,
                "user_input",
                f"user_input_resolved for {event.request_id!r}, which was not asked before",
            )
        first = self.resolved.get(event.request_id)
        if first is not None:
            self.flag(
                event,
                "user_input",
                f"user_input_request {event.request_id!r} resolved again ({event.outcome}; "
                f"first at seq {first})",
            )
        else:
            self.resolved[event.request_id] = event.seq

    def _usage(self, event: Result) -> None:
        for name, usage in (("usage", event.usage), ("execution_usage", event.execution_usage)):
            negative = [f for f in _USAGE_FIELDS if getattr(usage, f) < 0]
            if negative:
                self.flag(event, "usage", f"result.{name} has negative {', '.join(negative)}")
        self.session_usage = self._not_less(
            event, "session_usage", event.session_usage, self.session_usage
        )
        self.execution_usage = self._not_less(
            event, "execution_usage", event.execution_usage, self.execution_usage
        )

    def _not_less(
        self, event: Event, name: str, usage: Usage, before: tuple[int, Usage] | None
    ) -> tuple[int, Usage]:
        if before is not None:
            seq, previous = before
            down = [
                f"{f} {getattr(previous, f)} -> {getattr(usage, f)}"
                for f in _USAGE_FIELDS
                if getattr(usage, f) < getattr(previous, f)
            ]
            if down:
                self.flag(
                    event,
                    "usage",
                    f"{name} went down since the result at seq {seq}: {', '.join(down)}",
                )
        return (event.seq, usage)

    def _ready(self, event: Event) -> None:
        if isinstance(event, AdapterReady):
            if self.ready is not None:
                self.flag(
                    event, "ready", f"a second adapter_ready (the first at seq {self.ready.seq})"
                )
            elif self.before_ready is not None:
                before = self.before_ready
                self.flag(
                    event,
                    "ready",
                    f"adapter_ready after {before.kind} at seq {before.seq}: only warnings "
                    "come before it",
                )
                self.ready = event
                self.before_ready = None  # reported here, not again at the end
            else:
                self.ready = event
            return
        if self.ready is not None or self.before_ready is not None:
            return
        if isinstance(event, WarningEvent):
            return
        if ends_execution(event) and not isinstance(event, Result):
            return  # failed or aborted before the CLI started: no adapter_ready
        self.before_ready = event

    def _task(self, event: SubagentStarted | SubagentCompleted) -> None:
        task = event.task_id
        if isinstance(event, SubagentStarted):
            if event.subagent_task_id == task:
                self.flag(event, "subagent", f"subagent {task!r} started inside itself")
            first = self.started.get(task)
            if first is not None:
                self.flag(
                    event, "subagent", f"subagent {task!r} started again (first at seq {first})"
                )
            else:
                self.started[task] = event.seq
            return
        if task not in self.started:
            self.flag(
                event, "subagent", f"subagent {task!r} completed but its start was not reported"
            )
        first = self.completed.get(task)
        if first is not None:
            self.flag(
                event, "subagent", f"subagent {task!r} completed again (first at seq {first})"
            )
        else:
            self.completed[task] = event.seq

    def _attribution(self, event: Event) -> None:
        task = event.subagent_task_id
        if task is None:
            return
        if not event.is_subagent:
            self.flag(
                event,
                "subagent",
                f"{event.kind} names subagent {task!r} but is not marked is_subagent",
            )
        if task not in self.started:
            self.flag(
                event,
                "subagent",
                f"{event.kind} attributed to subagent {task!r}, whose start was not reported "
                "before it",
            )
            return
        done = self.completed.get(task)
        if done is not None and done < event.seq:
            self.flag(
                event,
                "subagent",
                f"{event.kind} attributed to subagent {task!r} after it completed at seq {done}",
            )
