"""The governor actor: a fleet's one well-mannered client of the model API.

It drives the pure rules of ``protocol/fanout/governor.py`` with trio's clock. The fleet
(``actors/fanout/fleet.py``) hands it every execution that wants to start (``submit``), every
session's rate-limit reports (``signal``: a cheap check of the event's kind, inline where the
fleet already sees each event, no task per session), each turn's exact cost (``turn_ended``)
and each execution's end (``execution_ended``). One task (``run``) polls the rules whenever an
input arrives or a time they named comes, and carries out their decisions through the
callbacks the fleet gave: start an execution (it then asks the fleet's slot queue for a CLI
slot, so ``max_live`` still caps CLIs), refuse it (``budget_exhausted``), abort it.

The rules sit behind :class:`GovernorState`, a small interface; :class:`GovernorRules` is the
in-process one. A state shared by several processes (``actors/cluster/governor.py``, in
Redis) implements :class:`SharedGovernorState` too: ``run`` then also runs its ``sync`` task,
which talks to the shared store and hands back what it learnt (notices, and a wake-up: an
admission, a shared pause) through ``notify``.

Notices (paused, resumed, limit changed, budget reached) are kept, the latest
``NOTICES_KEPT``, as :class:`GovernorNotice` with wall-clock times, and logged; the figures
are :meth:`Governor.figures` (``Fleet.statistics().governor``).

Channels: none of its own; inputs are synchronous calls that set a wake-up event.
Cancellation: ``run`` ends when the fleet's nursery is cancelled. Error handling: a callback
must not raise (the fleet's do not); the rules' own errors are bugs and propagate.
"""

from __future__ import annotations

import collections
import datetime
import json
import logging
import math
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

import attrs
import trio

from claude_trio.protocol.fanout.governor import (
    DEFAULT_GOVERNOR,
    Abort,
    BudgetFigures,
    BudgetReached,
    Decision,
    GovernorConfig,
    GovernorFigures,
    GovernorStatistics,
    LimitChanged,
    Notice,
    Paused,
    Refuse,
    Resumed,
    SharedStateOutage,
    Signal,
    Start,
    Wait,
    signal_of,
)
from claude_trio.protocol.session.events import Error, Event

__all__ = [
    "DEFAULT_GOVERNOR",
    "NOTICES_KEPT",
    "Governor",
    "GovernorFigures",
    "GovernorNotice",
    "GovernorState",
    "GovernorStateFactory",
    "SharedGovernorState",
    "budget_refusal",
]

log = logging.getLogger("claude_trio.actors.fanout.governor")

K = TypeVar("K", bound=Hashable)

#: How many of the latest notices a governor keeps.
NOTICES_KEPT = 64

#: Event kinds that can carry a rate-limit report (``signal_of`` reads them).
SIGNAL_KINDS = frozenset({"retry", "warning", "passthrough"})


class GovernorState(Protocol[K]):
    """What the governor actor asks of its rules (``GovernorRules`` is one)."""

    def submit(
        self,
        key: K,
        *,
        owner: Hashable = None,
        priority: int = 0,
        principal: str | None = None,
        label: str | None = None,
    ) -> None: ...

    def cancel(self, key: K) -> bool: ...

    def check_budget(
        self, *, principal: str | None = None, label: str | None = None
    ) -> BudgetFigures | None: ...

    def observe(self, signal: Signal, *, now: float, wall_now: float) -> list[Notice]: ...

    def turn_ended(
        self,
        key: K,
        *,
        now: float,
        cost_usd: float,
        api_error_status: int | None = None,
        error: str | None = None,
    ) -> list[Notice]: ...

    def person_asked(self, key: K, request_id: str) -> None: ...

    def person_answered(self, key: K, request_id: str) -> None: ...

    def execution_ended(self, key: K) -> None: ...

    def poll(self, now: float) -> list[Decision[K]]: ...

    def position(self, key: K) -> int | None: ...

    def statistics(self) -> GovernorStatistics: ...


class GovernorStateFactory(Protocol):
    """Makes a fleet's governor state (``open_fleet(governor_state=...)``);
    ``GovernorRules`` is one."""

    def __call__(
        self, config: GovernorConfig, *, now: float, random: Callable[[], float]
    ) -> GovernorState[Any]: ...


@runtime_checkable
class SharedGovernorState(Protocol):
    """A :class:`GovernorState` kept with other hosts: its ``sync`` task (run by the
    governor's ``run``) talks to the shared store, and calls ``notify`` with the notices it
    learns (an empty list: only wake the governor to poll)."""

    async def sync(self, notify: Callable[[list[Notice]], None]) -> None: ...


@attrs.frozen(kw_only=True)
class GovernorNotice:
    """A notice of the governor, for people: ``kind`` (``paused``, ``resumed``,
    ``limit_changed``, ``budget_reached``, ``budget_abort``, and in a cluster
    ``shared_state_unavailable`` / ``shared_state_back``: Redis could not be reached, new
    starts waited), when (``at``, seconds since the
    epoch), a one-line ``message``, for a pause when starts resume (``resumes_at``, seconds
    since the epoch), and for a budget the scope's figures when it was reached or aborted
    (``budget``: its ``running`` executions bound the overshoot to come)."""

    kind: Literal[
        "paused",
        "resumed",
        "limit_changed",
        "budget_reached",
        "budget_abort",
        "shared_state_unavailable",
        "shared_state_back",
    ]
    at: float
    message: str
    resumes_at: float | None = None
    budget: BudgetFigures | None = None


def clock_time(at: float) -> str:
    """``HH:MM:SS`` of a wall-clock time (local time), for displays."""
    return datetime.datetime.fromtimestamp(at).strftime("%H:%M:%S")


class Governor(Generic[K]):
    """The actor (see the module docstring). ``start``, ``refuse``, ``abort``: what to do
    with an execution the rules decided on; ``wall_clock``: seconds since the epoch (to read
    a reset time and show times)."""

    def __init__(
        self,
        state: GovernorState[K],
        *,
        start: Callable[[K], None],
        refuse: Callable[[K, BudgetFigures], None],
        abort: Callable[[K, BudgetFigures], None],
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.state = state
        self._start = start
        self._refuse = refuse
        self._abort = abort
        self._wall = wall_clock
        self._wake = trio.Event()
        self._running: set[K] = set()
        self._notices: collections.deque[GovernorNotice] = collections.deque(maxlen=NOTICES_KEPT)
        #: The pause's end (the host's clock) and the same in wall-clock time, read once.
        self._pause_wall: tuple[float, float] | None = None

    # -- inputs (synchronous, from the fleet) -------------------------------------------------

    def submit(
        self,
        key: K,
        *,
        owner: Hashable = None,
        priority: int = 0,
        principal: str | None = None,
        label: str | None = None,
    ) -> None:
        """``key`` waits for its start."""
        self.state.submit(key, owner=owner, priority=priority, principal=principal, label=label)
        self._wake.set()

    def cancel(self, key: K) -> bool:
        """A waiting ``key`` gives up; False when it was not waiting."""
        cancelled = self.state.cancel(key)
        if cancelled:
            self._wake.set()
        return cancelled

    def position(self, key: K) -> int | None:
        return self.state.position(key)

    def check_budget(
        self, *, principal: str | None = None, label: str | None = None
    ) -> BudgetFigures | None:
        """The spent budget an open of ``principal`` and ``label`` is refused for (counted as
        a refusal), None when it may start: checked before its CLI starts."""
        return self.state.check_budget(principal=principal, label=label)

    def signal(self, event: Event) -> None:
        """A session's event: a rate-limit report is read, anything else costs a set lookup."""
        if event.kind not in SIGNAL_KINDS:
            return
        signal = signal_of(event)
        if signal is None:
            return
        self._noted(self.state.observe(signal, now=trio.current_time(), wall_now=self._wall()))

    def turn_ended(
        self, key: K, cost_usd: float, api_error_status: int | None, error: str | None
    ) -> None:
        """A turn of a started execution ended (its exact cost, its API error if any)."""
        if key not in self._running:
            return
        cost = cost_usd if math.isfinite(cost_usd) and cost_usd >= 0 else 0.0
        self._noted(
            self.state.turn_ended(
                key,
                now=trio.current_time(),
                cost_usd=cost,
                api_error_status=api_error_status,
                error=error,
            )
        )

    def person_asked(self, key: K, request_id: str) -> None:
        """A started execution waits for a person (an approval, a question): it gives its
        place under the limit back until answered (the rules' rule 7)."""
        if key in self._running:
            self.state.person_asked(key, request_id)
            self._wake.set()

    def person_answered(self, key: K, request_id: str) -> None:
        """A request :meth:`person_asked` told of is resolved: the execution counts again."""
        if key in self._running:
            self.state.person_answered(key, request_id)

    def execution_ended(self, key: K) -> None:
        """A started execution is over (its CLI gone)."""
        if key in self._running:
            self._running.discard(key)
            self.state.execution_ended(key)
            self._wake.set()

    # -- views ----------------------------------------------------------------------------------

    def notices(self) -> tuple[GovernorNotice, ...]:
        """The latest notices, oldest first."""
        return tuple(self._notices)

    def figures(self) -> GovernorFigures:
        s = self.state.statistics()
        resumes_at = None
        if s.paused_until is not None:
            # Read in wall-clock time once per pause: figures read twice in one pause are
            # equal (a gateway pushes the figures to its followers when they change).
            seen = self._pause_wall
            if seen is None or seen[0] != s.paused_until:
                wall = self._wall() + max(0.0, s.paused_until - trio.current_time())
                seen = self._pause_wall = (s.paused_until, wall)
            resumes_at = seen[1]
        return GovernorFigures(
            limit=s.limit,
            max_live=s.max_live,
            running=s.running,
            waiting=s.waiting,
            paused=s.paused_until is not None,
            resumes_at=resumes_at,
            starts=s.starts,
            refusals=s.refusals,
            rejections=s.rejections,
            spent_usd=s.spent_usd,
            budget_usd=s.budget_usd,
            overshoot_usd=s.overshoot_usd,
            last_notice=self._notices[-1].message if self._notices else None,
            asking=s.asking,
            cluster_running=s.cluster_running,
            degraded=s.degraded,
        )

    # -- the task -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Carry out the rules' decisions, forever (until cancelled); with a shared state,
        run its ``sync`` task too."""
        if isinstance(self.state, SharedGovernorState):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.state.sync, self._noted, name="governor sync")
                await self._decide()
        else:
            await self._decide()

    async def _decide(self) -> None:
        while True:
            wake = self._wake = trio.Event()
            until = math.inf
            for decision in self.state.poll(trio.current_time()):
                match decision:
                    case Start():
                        self._running.add(decision.key)
                        self._start(decision.key)
                    case Refuse():
                        self._refuse(decision.key, decision.figures)
                    case Abort():
                        self._note(
                            "budget_abort",
                            f"aborting a running execution: {_budget_text(decision.figures)}",
                            budget=decision.figures,
                        )
                        self._abort(decision.key, decision.figures)
                    case Resumed():
                        self._note("resumed", "starts resumed after a rate-limit pause")
                    case Wait(until=float() as at):
                        until = at
                    case _:
                        pass
            with trio.move_on_at(until):
                await wake.wait()

    # -- helpers --------------------------------------------------------------------------------

    def _noted(self, notices: list[Notice]) -> None:
        for notice in notices:
            match notice:
                case Paused():
                    resumes = self._wall() + max(0.0, notice.until - trio.current_time())
                    self._note(
                        "paused",
                        f"paused: rate limit ({notice.cause}), resumes {clock_time(resumes)}",
                        resumes_at=resumes,
                    )
                case LimitChanged():
                    self._note(
                        "limit_changed",
                        f"concurrency limit {notice.old} -> {notice.new} ({notice.cause})",
                    )
                case BudgetReached():
                    self._note(
                        "budget_reached",
                        f"budget reached: {_budget_text(notice.figures)}",
                        budget=notice.figures,
                    )
                case SharedStateOutage(unavailable=True):
                    self._note(
                        "shared_state_unavailable",
                        f"shared state unavailable, new starts wait: {notice.cause}",
                        level=logging.WARNING,
                    )
                case SharedStateOutage():
                    self._note("shared_state_back", "shared state back, starts resume")
        self._wake.set()

    def _note(
        self,
        kind: str,
        message: str,
        *,
        resumes_at: float | None = None,
        budget: BudgetFigures | None = None,
        level: int = logging.INFO,
    ) -> None:
        notice = GovernorNotice(
            kind=kind,  # type: ignore[arg-type]
            at=self._wall(),
            message=message,
            resumes_at=resumes_at,
            budget=budget,
        )
        self._notices.append(notice)
        log.log(level, "governor: %s", message, extra={"event": "governor", "notice": kind})


def _budget_text(figures: BudgetFigures) -> str:
    scope = figures.scope if figures.name is None else f"{figures.scope} {figures.name!r}"
    return (
        f"{scope} spent ${figures.spent_usd:.4f} of ${figures.budget_usd:.4f}"
        f" ({figures.running} running)"
    )


def budget_message(figures: BudgetFigures) -> str:
    """What a refused open's error says."""
    return f"budget_exhausted: not started, the {_budget_text(figures)}"


def budget_refusal(figures: BudgetFigures) -> Error:
    """The ``budget_exhausted`` error that ends a refused execution, with the figures."""
    return Error(
        message=budget_message(figures),
        code="budget_exhausted",
        detail=json.dumps(attrs.asdict(figures)),
        phase="init",
    )
