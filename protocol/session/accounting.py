"""Per-turn, per-execution and per-session usage from the CLI's results (pure, no I/O).

Rules:

1. Only ``ResultMessage`` s count. ``AssistantMessage.usage`` is the ``message_start`` snapshot
   of one API call and every block of that call repeats it, so counting it would count partial
   snapshots (and each of them several times). The result's ``usage`` is already the turn's
   total over all of the turn's API calls.
2. Token counts of a turn are the result's ``usage`` normalized with
   :func:`~.usage.normalize_usage` (missing fields are zeros).
3. ``total_cost_usd`` is CUMULATIVE for the CLI process. A turn's cost is the difference
   between this result's cumulative cost and the previous one. A cumulative that goes DOWN
   means a new CLI process (a resume) or a ``conversation_reset``: the counter restarted, so the
   turn's cost is the new cumulative itself.
4. A result with no ``total_cost_usd`` costs nothing and leaves the previous cumulative as the
   reference, so the next result's difference is still right.
5. Interrupted turns count like any other: the mapper records the late result of an aborted
   turn even when it emits no event for it.
6. ``start_execution()`` restarts the execution total; the session total never restarts and
   never decreases (every field of a turn is >= 0).
7. A resumed conversation: the CLI restores the conversation's cost so far into its cumulative
   counter, so its first result reports the old cost plus the turn's. ``baseline_cost`` (the
   cost the CLI carries over, read from the conversation's transcript before it starts) is
   the reference for that first difference, so a turn's cost is always that turn's.
8. ``turns`` lists every counted turn in order, interrupted ones included (rule 5).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import attrs
from claude_agent_sdk import ResultMessage

from claude_trio.protocol.checks import finite_float
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage, add_usage, normalize_usage


@attrs.frozen(kw_only=True)
class TurnUsage:
    """What one result adds: the turn's usage and the running totals that include it."""

    turn: Usage
    execution: Usage
    session: Usage


class UsageLedger:
    """Accumulates turn usage over one session. Pure: feed it results, read the totals."""

    def __init__(self, *, baseline_cost: float | None = None) -> None:
        self._last_cumulative_cost: float | None = baseline_cost
        self._execution = ZERO_USAGE
        self._session = ZERO_USAGE
        self._turns: list[Usage] = []

    @property
    def turns(self) -> tuple[Usage, ...]:
        """Every counted turn's usage, in order (rule 8)."""
        return tuple(self._turns)

    def carry_over(self, cost: float) -> None:
        """The CLI starts from ``cost`` already spent (a resumed conversation, rule 7); call
        before the first result."""
        if self._last_cumulative_cost is None:
            self._last_cumulative_cost = cost

    @property
    def execution(self) -> Usage:
        return self._execution

    @property
    def session(self) -> Usage:
        return self._session

    def start_execution(self) -> None:
        """A new execution begins: its total restarts at zero (the session total goes on)."""
        self._execution = ZERO_USAGE

    def _turn_cost(self, cumulative: float | None) -> float:
        """The cost of the turn whose result reports ``cumulative``, and remember it (rule 3, 4)."""
        total = finite_float(cumulative)
        if total is None or total < 0:
            return 0.0
        previous = self._last_cumulative_cost
        self._last_cumulative_cost = total
        if previous is None or total < previous:
            return total
        return total - previous

    def record_result(self, result: ResultMessage) -> TurnUsage:
        """Count one result and return the turn's usage with the running totals."""
        turn = normalize_usage(result.usage, cost_usd=self._turn_cost(result.total_cost_usd))
        self._turns.append(turn)
        self._execution = add_usage(self._execution, turn)
        self._session = add_usage(self._session, turn)
        return TurnUsage(turn=turn, execution=self._execution, session=self._session)


def transcript_cost(lines: Iterable[str]) -> float | None:
    """The cost a resumed conversation carries over: the last ``cost-state`` row's
    ``totalCostUSD`` in the CLI's transcript (JSON lines), or None when it has none."""
    cost: float | None = None
    for line in lines:
        if '"cost-state"' not in line:
            continue  # cheap filter: transcripts are mostly messages
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or row.get("type") != "cost-state":
            continue
        value = finite_float(row.get("totalCostUSD"))
        if value is not None and value >= 0:
            cost = value
    return cost
