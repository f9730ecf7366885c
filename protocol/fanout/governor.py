"""The governor's rules: when a fleet may start an execution (pure, no trio, no I/O).

A fleet of sessions shares one model API account, so it should behave like one well-mannered
client: back off together when the API pushes back, never spend past a budget, and serve its
owners fairly. :class:`GovernorRules` decides that. It does no I/O and reads no clock: every
input carries the time as a number (``now``, the host's monotonic clock; ``wall_now``, seconds
since the epoch, only to read a reset time the CLI gives as a wall-clock timestamp), and the
jitter comes from a random source given to it, so a test replays it exactly.

Inputs: :meth:`~GovernorRules.submit` (an open waits for a start), :meth:`~GovernorRules.cancel`
(a waiting open gives up), :meth:`~GovernorRules.observe` (what the CLI reported: a
:class:`RateLimitNotice` or a :class:`RetryNotice`; :func:`signal_of` makes them from our
events), :meth:`~GovernorRules.turn_ended` (a turn's exact cost and its API error status, from
its ``Result``), :meth:`~GovernorRules.execution_ended`. Inputs return :data:`Notice` values
(paused, limit changed, budget reached) for the host to show. :meth:`~GovernorRules.poll` returns
the decisions: :class:`Start`, :class:`Refuse`, :class:`Abort`, :class:`Resumed`, then exactly one
:class:`Wait` (call ``poll`` again at ``until``, or on the next input) or :class:`Idle`.

Rules:

1. **Adaptive concurrency limit (AIMD).** At most ``limit`` executions run; ``limit`` starts at
   ``initial_limit`` (default ``max_live``; a fleet's default governor starts at
   :data:`DEFAULT_START_LIMIT`) and always stays within ``1 <= limit <= max_live``. A fleet
   starts an execution's CLI first and asks the rules only for its first turn (a "start" here
   lets its prompt go to the model): the limit counts model requests, not CLI start-ups. A
   successful turn is evidence for the limit it started under, not for a later, higher one.
   Until the first rejection each success raises the limit by one while it is below one and a
   half times the limit its turn started under (slow start: a round of turns grows it by half,
   so a fleet opened with a low ``initial_limit`` finds the account's limit in a few rounds,
   and two turns of an old limit ending together do not raise it twice); after it, every
   ``increase_after`` successful turns that started under the current limit (or a higher one)
   raise it by one (additive increase). A rejection that follows a raise is a failed probe: the
   successful turns the next raise waits for double (up to ``PROBE_BACKOFF_MAX`` times
   ``increase_after``), so a fleet at the account's limit does not knock on it every few turns;
   they are ``increase_after`` again once a raised limit held until the next raise. A rejection
   (rule 2) multiplies it by ``decrease_factor``, rounded down, at most once per
   ``decrease_interval`` seconds (multiplicative decrease: the ten sessions that see the same
   429 lower it once, not ten times), and not while more executions run than the limit (the
   executions over a lowered limit are the push-back it already answered: their retries do not
   lower it again). A lowered limit stops no running execution; it only holds back starts until
   fewer run.
2. **A shared pause on a rejection.** A rejection is a ``rate_limit_event`` with status
   ``rejected``, an ``api_retry`` for status 429 or 529 (or whose error is ``rate_limit`` or
   says ``overloaded``), or a turn that ended with such an API error. It pauses every start of the
   fleet until the reset: ``resets_at`` of the rate-limit event, the retry's ``delay_ms``, or
   ``default_retry_after`` seconds when the report gives no time, never more than ``max_pause``
   seconds from the report (a pause always ends; a longer window is probed again then). To the
   end of the pause ``resume_jitter * random()`` seconds are added, so hosts that share an
   account do not resume in the same instant. A later rejection can extend a pause, never
   shorten it. Rejections reach running sessions through their own CLI only: the rules tell
   them nothing.
3. **Staggered resume and spaced starts.** Starts take a token from a bucket that refills at
   ``starts_per_second`` up to ``start_burst``; with none left, starts wait for the next token
   (a burst of opens is not a burst of requests). When a pause ends the bucket is empty, so
   the waiting opens start one token apart, not all in the resume's second.
4. **Budgets, exact.** A turn's cost (the accountant's per-turn ``cost_usd``) is spent on the
   fleet (``budget_usd``), on the open's principal (``principal_budgets_usd``) and on its label
   (``label_budgets_usd``). A scope whose spent amount reaches its budget is exhausted: opens in
   it are refused (:class:`Refuse`, reason ``budget_exhausted``, with :class:`BudgetFigures`),
   and with ``on_budget="abort"`` its running executions are aborted (:class:`Abort`); with
   ``"finish"`` (the default) they finish. Nothing starts in an exhausted scope, so the
   overshoot is bounded by the cost of the turns that were running when the budget was
   reached; it is reported (:class:`BudgetReached` when a scope is reached, ``overshoot_usd`` in
   :meth:`~GovernorRules.statistics`).
5. **Fair starts.** Waiting opens of the highest ``priority`` start first; within one priority,
   owners take turns (round robin) and each owner's opens start in the order they came. So an
   open at the head of its owner's queue waits for at most one start of each other owner at
   its priority. A waiting open can be cancelled; :meth:`~GovernorRules.position` is its place
   in the order the rules would start the waiting opens now (0: next). Workers that share a
   governor (``worker --redis``) each keep this order, and across them the open that has
   waited longest at the highest priority starts first (``protocol/cluster/governor_scripts.py``).
6. **Decisions in order.** ``poll`` first ends a pause that is over (:class:`Resumed`), refuses
   the waiting opens of exhausted scopes, aborts what rule 4 aborts, then starts opens while
   rules 1-3 allow, and ends with one :class:`Wait` naming what it waits for (``paused``,
   ``spacing``: a time; ``concurrency``: an execution's end) or :class:`Idle` (nothing waits).
7. **A turn waiting for a person gives its place back.** While a running execution has a
   user-input request pending (an approval, a question, an elicitation:
   :meth:`~GovernorRules.person_asked` until :meth:`~GovernorRules.person_answered`), its CLI
   makes no model request, so it does not count against ``limit``: an interactive session
   waiting for its approval does not hold back the others. Once answered it counts again, at
   once (its turn goes on; the answer is never held), so the executions counted can pass
   ``limit`` for a while; starts then wait until fewer run (rule 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Hashable
from typing import Generic, Literal

import attrs

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.governor_values import (
    DEFAULT_GOVERNOR,
    DEFAULT_START_LIMIT,
    PROBE_BACKOFF_MAX,
    REJECTED_STATUSES,
    Abort,
    BudgetFigures,
    BudgetReached,
    Decision,
    DefaultGovernor,
    GovernorConfig,
    GovernorFigures,
    GovernorStatistics,
    Idle,
    K,
    LimitChanged,
    Notice,
    Paused,
    RateLimitNotice,
    Refuse,
    Resumed,
    RetryNotice,
    SharedStateOutage,
    Signal,
    Start,
    Wait,
    signal_of,
)
from claude_trio.protocol.fanout.remote import TokenBucket

__all__ = [
    "DEFAULT_GOVERNOR",
    "DEFAULT_START_LIMIT",
    "PROBE_BACKOFF_MAX",
    "REJECTED_STATUSES",
    "Abort",
    "BudgetFigures",
    "BudgetReached",
    "Decision",
    "DefaultGovernor",
    "GovernorConfig",
    "GovernorFigures",
    "GovernorRules",
    "GovernorStatistics",
    "Idle",
    "LimitChanged",
    "Notice",
    "Paused",
    "RateLimitNotice",
    "Refuse",
    "Resumed",
    "RetryNotice",
    "SharedStateOutage",
    "Signal",
    "Start",
    "Wait",
    "is_rejection",
    "signal_of",
]

# ---------------------------------------------------------------------------------------------
# The rules


@attrs.frozen(kw_only=True)
class _Open:
    owner: Hashable
    priority: int
    principal: str | None
    label: str | None
    seq: int
    started_under: int = 0
    """The limit when it started: its success is evidence for that limit (rule 1)."""


class GovernorRules(Generic[K]):
    """The governor's state and rules (the module docstring's rules 1-6).

    ``random`` returns a float in ``[0, 1)`` (``random.Random(seed).random`` in a test);
    ``now`` is the host's clock at creation.
    """

    def __init__(self, config: GovernorConfig, *, now: float, random: Callable[[], float]) -> None:
        self.config = config
        self._random = random
        self._limit = config.initial_limit or config.max_live
        self._successes = 0
        self._raise_after = config.increase_after  # successes the next raise waits for
        self._raised = False  # raised since the last decrease: a rejection is a failed probe
        self._last_decrease: float | None = None
        self._paused_until: float | None = None
        self._bucket = TokenBucket(rate=config.starts_per_second, burst=config.start_burst, now=now)
        self._waiting: dict[K, _Open] = {}
        self._turns: list[Hashable] = []  # owners with waiting opens, whose turn is next first
        self._running: dict[K, _Open] = {}
        self._asking: dict[K, set[str]] = {}  # running keys -> their pending request ids
        self._aborted: set[K] = set()
        self._seq = 0
        self._spent_fleet = 0.0
        self._spent_principal: dict[str, float] = {}
        self._spent_label: dict[str, float] = {}
        self._reached: set[tuple[str, str | None]] = set()
        self._starts = 0
        self._refusals = 0
        self._rejections = 0

    # -- views --------------------------------------------------------------------------------

    @property
    def limit(self) -> int:
        """The adaptive concurrency limit (rule 1): ``1 <= limit <= max_live``."""
        return self._limit

    @property
    def paused_until(self) -> float | None:
        return self._paused_until

    @property
    def running(self) -> frozenset[K]:
        return frozenset(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def counted(self) -> int:
        """The running executions counted against ``limit``: those not waiting for a person
        (rule 7)."""
        return len(self._running) - len(self._asking)

    @property
    def asking(self) -> frozenset[K]:
        """The running executions waiting for a person (rule 7)."""
        return frozenset(self._asking)

    def position(self, key: K) -> int | None:
        """``key``'s place in the start order of the waiting opens (0: next); None when it
        does not wait."""
        if key not in self._waiting:
            return None
        return self._order().index(key)

    def spent_usd(
        self, scope: Literal["fleet", "principal", "label"] = "fleet", name: str | None = None
    ) -> float:
        if scope == "fleet":
            return self._spent_fleet
        spent = self._spent_principal if scope == "principal" else self._spent_label
        return spent.get(name or "", 0.0)

    def statistics(self) -> GovernorStatistics:
        budget = self.config.budget_usd
        return GovernorStatistics(
            limit=self._limit,
            max_live=self.config.max_live,
            running=len(self._running),
            waiting=len(self._waiting),
            asking=len(self._asking),
            paused_until=self._paused_until,
            starts=self._starts,
            refusals=self._refusals,
            rejections=self._rejections,
            spent_usd=self._spent_fleet,
            budget_usd=budget,
            overshoot_usd=0.0 if budget is None else max(0.0, self._spent_fleet - budget),
        )

    # -- inputs -------------------------------------------------------------------------------

    def submit(
        self,
        key: K,
        *,
        owner: Hashable = None,
        priority: int = 0,
        principal: str | None = None,
        label: str | None = None,
    ) -> None:
        """An open waits for its start (decided by the next :meth:`poll`)."""
        if key in self._waiting or key in self._running:
            raise ValueError(f"{key!r} was already submitted to the governor")
        self._seq += 1
        self._waiting[key] = _Open(
            owner=owner, priority=priority, principal=principal, label=label, seq=self._seq
        )
        if owner not in self._turns:
            self._turns.append(owner)

    def next_waiting(
        self, *, excluding: Container[K] = ()
    ) -> tuple[K, int, str | None, str | None] | None:
        """The waiting open rule 5 would start first, leaving out ``excluding``: its key,
        priority, principal and label; None when none waits."""
        for key in self._order():
            if key not in excluding:
                entry = self._waiting[key]
                return key, entry.priority, entry.principal, entry.label
        return None

    def extend_pause(self, until: float, *, cause: str) -> list[Notice]:
        """Pause starts until ``until`` (another host's pause, rule 2; a later one is kept)."""
        if self._paused_until is not None and self._paused_until >= until:
            return []
        self._paused_until = until
        return [Paused(until=until, cause=cause)]

    def cancel(self, key: K) -> bool:
        """A waiting open gives up; False when it was not waiting (started, refused, unknown)."""
        entry = self._waiting.pop(key, None)
        if entry is None:
            return False
        self._forget_owner_if_done(entry.owner)
        return True

    def check_budget(
        self, *, principal: str | None = None, label: str | None = None
    ) -> BudgetFigures | None:
        """The exhausted budget (rule 4) an open of ``principal`` and ``label`` would be
        refused for, counted as a refusal; None when none is spent. A host asks before it
        starts the open's CLI, so a refused open costs no CLI."""
        figures = self._exhausted(
            _Open(owner=None, priority=0, principal=principal, label=label, seq=0)
        )
        if figures is not None:
            self._refusals += 1
        return figures

    def observe(self, signal: Signal, *, now: float, wall_now: float) -> list[Notice]:
        """What a session's CLI reported (rule 2). ``wall_now`` converts ``resets_at``."""
        match signal:
            case RateLimitNotice(status="rejected"):
                if signal.resets_at is None:
                    delay = self.config.default_retry_after
                else:
                    delay = signal.resets_at - wall_now
                kind = signal.rate_limit_type or "unknown"
                return self._rejected(now, delay, f"rate limit rejected ({kind})")
            case RateLimitNotice():
                return []
            case RetryNotice():
                if not is_rejection(signal.error_status, signal.error):
                    return []
                delay = (
                    self.config.default_retry_after
                    if signal.delay_ms is None
                    else signal.delay_ms / 1000
                )
                return self._rejected(now, delay, f"API retry after {signal.error_status}")

    def turn_ended(
        self,
        key: K,
        *,
        now: float,
        cost_usd: float,
        api_error_status: int | None = None,
        error: str | None = None,
    ) -> list[Notice]:
        """A turn of ``key``'s execution ended: spend its cost (rule 4); a success counts
        towards a higher limit (rule 1), a 429/529 is a rejection (rule 2)."""
        entry = self._running.get(key)
        if entry is None:
            raise KeyError(f"{key!r} is not running under the governor: start it first")
        if not math.isfinite(cost_usd) or cost_usd < 0:
            raise InvalidParamsError("cost_usd", cost_usd, "a finite number of US dollars >= 0")
        notices: list[Notice] = []
        self._spent_fleet += cost_usd
        if entry.principal is not None:
            spent = self._spent_principal.get(entry.principal, 0.0)
            self._spent_principal[entry.principal] = spent + cost_usd
        if entry.label is not None:
            self._spent_label[entry.label] = self._spent_label.get(entry.label, 0.0) + cost_usd
        for figures in self._scopes(entry):
            scope_id = (figures.scope, figures.name)
            if figures.spent_usd >= figures.budget_usd and scope_id not in self._reached:
                self._reached.add(scope_id)
                notices.append(BudgetReached(figures=figures))
        if is_rejection(api_error_status, error):
            notices += self._rejected(
                now, self.config.default_retry_after, f"API error {api_error_status}"
            )
        elif api_error_status is None and error is None and self._raises(entry.started_under):
            self._successes = 0
            if self._limit < self.config.max_live:
                if self._raised:  # the last raise held until this one
                    self._raise_after = self.config.increase_after
                self._raised = True
                old, self._limit = self._limit, self._limit + 1
                notices.append(LimitChanged(old=old, new=self._limit, cause="succeeded"))
        return notices

    def person_asked(self, key: K, request_id: str) -> None:
        """``key``'s running execution waits for a person's answer to ``request_id`` (rule 7);
        an execution that is not running under the governor is not counted anyway."""
        if key in self._running:
            self._asking.setdefault(key, set()).add(request_id)

    def person_answered(self, key: K, request_id: str) -> None:
        """``request_id`` of ``key`` is resolved (answered, expired, withdrawn...): once none is
        pending the execution counts against the limit again (rule 7)."""
        pending = self._asking.get(key)
        if pending is None:
            return
        pending.discard(request_id)
        if not pending:
            del self._asking[key]

    def execution_ended(self, key: K) -> None:
        """``key``'s execution ended (its slot is free)."""
        if self._running.pop(key, None) is None:
            raise KeyError(f"{key!r} is not running under the governor")
        self._asking.pop(key, None)
        self._aborted.discard(key)

    # -- decisions ----------------------------------------------------------------------------

    def poll(self, now: float, *, admitted: Container[K] | None = None) -> list[Decision[K]]:
        """What to do now (rule 6): starts, refusals, aborts, then one ``Wait`` or ``Idle``.

        ``admitted``: for a limit and count shared with other hosts (decided elsewhere): rule
        1's limit is not applied, only the opens in ``admitted`` start (in rule 5's order)."""
        out: list[Decision[K]] = []
        if self._paused_until is not None and now >= self._paused_until:
            self._paused_until = None
            self._bucket.empty(now)
            out.append(Resumed(at=now))
        for key, entry in list(self._waiting.items()):
            exhausted = self._exhausted(entry)
            if exhausted is not None:
                self.cancel(key)
                self._refusals += 1
                out.append(Refuse(key=key, reason="budget_exhausted", figures=exhausted))
        if self.config.on_budget == "abort":
            for key, entry in self._running.items():
                exhausted = self._exhausted(entry)
                if exhausted is not None and key not in self._aborted:
                    self._aborted.add(key)
                    out.append(Abort(key=key, reason="budget_exhausted", figures=exhausted))
        while self._waiting:
            if self._paused_until is not None:
                out.append(Wait(until=self._paused_until, reason="paused"))
                return out
            if admitted is None and self.counted >= self._limit:
                out.append(Wait(until=None, reason="concurrency"))
                return out
            if admitted is None:
                key = self._order(first_only=True)[0]
            else:
                chosen = next((k for k in self._order() if k in admitted), None)
                if chosen is None:
                    out.append(Wait(until=None, reason="concurrency"))
                    return out
                key = chosen
            ready = self._bucket.ready_at(now)
            if ready > now:
                out.append(Wait(until=ready, reason="spacing"))
                return out
            entry = self._waiting.pop(key)
            self._turns.remove(entry.owner)
            if any(e.owner == entry.owner for e in self._waiting.values()):
                self._turns.append(entry.owner)  # its next open waits for the others' turns
            self._bucket.take(now)
            self._running[key] = attrs.evolve(entry, started_under=self._limit)
            self._starts += 1
            out.append(Start(key=key))
        out.append(Idle())
        return out

    # -- helpers ------------------------------------------------------------------------------

    def _raises(self, started_under: int) -> bool:
        """Whether a successful turn that started under a limit of ``started_under`` raises
        the limit now (rule 1): in slow start while the limit is below one and a half times
        that (a round of turns grows it by half: turns of an old, lower limit ending together
        do not raise it past what they showed); after it, counted only when it started under
        the current limit or a higher one, a raise every ``raise_after`` of them."""
        if self._rejections == 0:
            return self._limit < started_under + max(1, started_under // 2)
        if started_under < self._limit:
            return False
        self._successes += 1
        return self._successes >= self._raise_after

    def _rejected(self, now: float, delay: float, cause: str) -> list[Notice]:
        self._rejections += 1
        notices: list[Notice] = []
        delay = min(max(0.0, delay), self.config.max_pause)
        until = now + delay + self.config.resume_jitter * self._random()
        if self._paused_until is None or until > self._paused_until:
            self._paused_until = until
            notices.append(Paused(until=until, cause=cause))
        last = self._last_decrease
        recent = last is not None and now - last < self.config.decrease_interval
        # More running than the limit: a decrease was made and the executions over it still
        # run; their push-back is the one it answered (no cascade down to one).
        if not recent and self.counted <= self._limit:
            self._last_decrease = now
            self._successes = 0
            if self._raised:  # a failed probe: the next raise waits twice as long
                cap = PROBE_BACKOFF_MAX * self.config.increase_after
                self._raise_after = min(cap, 2 * self._raise_after)
                self._raised = False
            new = max(1, math.floor(self._limit * self.config.decrease_factor))
            if new != self._limit:
                old, self._limit = self._limit, new
                notices.append(LimitChanged(old=old, new=new, cause="rejected"))
        return notices

    def _scopes(self, entry: _Open) -> list[BudgetFigures]:
        config = self.config
        scopes: list[BudgetFigures] = []
        if config.budget_usd is not None:
            scopes.append(self._figures("fleet", None, config.budget_usd, self._spent_fleet))
        if entry.principal is not None and entry.principal in config.principal_budgets_usd:
            budget = config.principal_budgets_usd[entry.principal]
            spent = self._spent_principal.get(entry.principal, 0.0)
            scopes.append(self._figures("principal", entry.principal, budget, spent))
        if entry.label is not None and entry.label in config.label_budgets_usd:
            budget = config.label_budgets_usd[entry.label]
            spent = self._spent_label.get(entry.label, 0.0)
            scopes.append(self._figures("label", entry.label, budget, spent))
        return scopes

    def _figures(
        self,
        scope: Literal["fleet", "principal", "label"],
        name: str | None,
        budget: float,
        spent: float,
    ) -> BudgetFigures:
        def inside(e: _Open) -> bool:
            return (
                scope == "fleet"
                or (scope == "principal" and e.principal == name)
                or (scope == "label" and e.label == name)
            )

        running = sum(1 for e in self._running.values() if inside(e))
        return BudgetFigures(
            scope=scope, name=name, budget_usd=budget, spent_usd=spent, running=running
        )

    def _exhausted(self, entry: _Open) -> BudgetFigures | None:
        for figures in self._scopes(entry):
            if figures.spent_usd >= figures.budget_usd:
                return figures
        return None

    def _forget_owner_if_done(self, owner: Hashable) -> None:
        if not any(e.owner == owner for e in self._waiting.values()):
            self._turns.remove(owner)

    def _order(self, *, first_only: bool = False) -> list[K]:
        """The waiting opens in the order rule 5 would start them."""
        queues: dict[Hashable, list[tuple[int, int, K]]] = {}
        for key, entry in self._waiting.items():
            queues.setdefault(entry.owner, []).append((-entry.priority, entry.seq, key))
        for queue in queues.values():
            queue.sort(key=lambda item: (item[0], item[1]))
        turns = list(self._turns)
        order: list[K] = []
        while queues:
            best = min(queue[0][0] for queue in queues.values())
            # Within the best priority, the first owner in turn order that has an open of it.
            owner = next(o for o in turns if o in queues and queues[o][0][0] == best)
            # The owner's oldest open of that priority (its queue is sorted by priority, seq).
            queue = queues[owner]
            order.append(queue.pop(0)[2])
            if first_only:
                return order
            turns.remove(owner)
            if queue:
                turns.append(owner)
            else:
                del queues[owner]
        return order


def is_rejection(status: int | None, error: str | None) -> bool:
    """Whether an API error status or error text means "slow down" (rule 2)."""
    text = (error or "").lower()
    return status in REJECTED_STATUSES or "overloaded" in text or text == "rate_limit"
