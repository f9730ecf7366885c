"""The fleet governor shared by a cluster's nodes, in Redis (``worker --redis``).

Each worker runs its own fleet, and each fleet its own governor actor
(``actors/fanout/governor.py``); with this state they govern as one. What must hold across
the cluster lives in Redis, one Lua script per decision (``protocol/cluster/governor_scripts.py``):

* **The pause** (rule 2). A rejection any node sees sets the shared pause-until (a later one
  only extends it); every node adopts it, adding its own ``resume_jitter`` when it resumes,
  so the nodes do not resume in one instant either.
* **The adaptive limit** (rule 1). One multiplicative decrease per ``decrease_interval`` for
  the whole cluster (two nodes rejected at once lower it once), increases from every node's
  successful turns; it never passes the sum of the live nodes' ``max_live``.
* **The count** of running executions (rules 1, 7). A start takes a lease (a member of a
  sorted set scored by its expiry) only while fewer than the limit are held; a node renews
  its executions' leases while they run, so a node killed without a word loses its leases
  ``lease_ttl`` seconds later. An execution waiting for a person gives its lease back until
  answered, then takes it again at once, as rule 7 says.
* **The budgets** (rule 4): spent as counters (``HINCRBYFLOAT``) per scope (the fleet, each
  principal, each label), checked by the start's script: nothing starts in an exhausted
  scope on any node.

* **The order across nodes** (rule 5). Each start tells Redis the node's waiting head (its
  priority, how long it has waited); a node yields a free place to the live nodes whose heads
  go first (a higher priority, or the same one waiting longer), one place each, so the open
  that has waited longest at the highest priority starts first, whichever node it is on.

What stays on each node: its queue and its own order (rule 5: priority, then its owners in
turn), its start spacing (rule 3), its running executions (a :class:`GovernorRules` without
budgets, whose own limit is not applied: ``poll(admitted=...)`` starts only the opens Redis
admitted).

**Redis outage.** While Redis cannot be reached the state is *degraded* (``degraded`` in the
figures; a :class:`SharedStateOutage` notice when it starts and when it ends, which the
governor keeps and logs): no open is admitted, so new starts wait, and no budget can be
overspent unseen; running executions go on. What they report (turn costs, successes, a
rejection, ended executions) is kept in memory and sent when Redis is back (each turn's
report once: a report sent again after a lost reply is not counted twice); a rejection seen
meanwhile pauses this node at once. Lost: what a node kept for Redis when the node itself
dies before Redis is back (its last turns' costs), and leases that lapse during an outage
longer than ``lease_ttl`` (renewed, counted again, when it ends).

Channels: none; inputs are the synchronous calls of :class:`GovernorState`, which set a
wake-up event for ``sync``. Cancellation: ``sync`` runs inside the governor's ``run`` and ends
with it, giving the node's leases back (one shielded call, bounded by ``call_timeout``);
each Redis call is bounded by ``call_timeout``. Error handling: a Redis error or a
call past its time makes the state degraded until a later round succeeds.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Hashable
from typing import Any, Generic, Literal, TypeVar

import attrs
import coredis
import trio

from claude_trio.actors.fanout.governor import GovernorStateFactory
from claude_trio.protocol.checks import check_number, validator
from claude_trio.protocol.cluster.governor_scripts import (
    ACQUIRE_SCRIPT,
    FIGURES_SCRIPT,
    LEASES_SCRIPT,
    REJECT_SCRIPT,
    TURN_SCRIPT,
)
from claude_trio.protocol.cluster.keys import DEFAULT_PREFIX, RedisKeys
from claude_trio.protocol.fanout.governor import (
    Abort,
    BudgetFigures,
    BudgetReached,
    Decision,
    GovernorConfig,
    GovernorFigures,
    GovernorRules,
    GovernorStatistics,
    LimitChanged,
    Notice,
    Paused,
    RateLimitNotice,
    Refuse,
    RetryNotice,
    SharedStateOutage,
    Signal,
    Start,
    is_rejection,
)

__all__ = [
    "RedisGovernorState",
    "SharedGovernorConfig",
    "rejection_delay",
    "shared_figures",
    "shared_governor",
]

log = logging.getLogger("claude_trio.actors.cluster.governor")

K = TypeVar("K", bound=Hashable)

REDIS_ERRORS = (coredis.exceptions.RedisError, TimeoutError, OSError, trio.TooSlowError)

#: How long a turn report's "seen" marker is kept (seconds): a report re-sent within it is
#: not counted twice.
SEEN_TTL = 24 * 3600

Scope = Literal["fleet", "principal", "label"]


@attrs.frozen(kw_only=True)
class SharedGovernorConfig:
    """How a node shares its governor: ``node`` (its name, a worker's id), the key
    ``prefix``, ``lease_ttl`` (seconds an execution's lease and a node's registration last
    unless renewed; a killed node's count is freed after it), ``poll_interval`` (how often a
    node whose opens wait for the cluster's limit asks again; it also asks at once when
    another node makes room, read from the freed stream), ``call_timeout`` (the longest
    one Redis call may take before the state is degraded), ``retry_max`` (the longest pause
    between two tries while degraded)."""

    node: str
    prefix: str = DEFAULT_PREFIX
    lease_ttl: float = attrs.field(default=10.0, validator=validator(check_number, above=0))
    poll_interval: float = attrs.field(default=0.2, validator=validator(check_number, above=0))
    call_timeout: float = attrs.field(default=2.0, validator=validator(check_number, above=0))
    retry_max: float = attrs.field(default=2.0, validator=validator(check_number, above=0))


def shared_governor(redis: Any, shared: SharedGovernorConfig) -> GovernorStateFactory:
    """``open_fleet(governor_state=...)``: the fleet's governor state shared in ``redis``."""

    def make(
        config: GovernorConfig, *, now: float, random: Callable[[], float]
    ) -> RedisGovernorState[Any]:
        return RedisGovernorState(redis, shared, config, now=now, random=random)

    return make


async def shared_figures(redis: Any, prefix: str = DEFAULT_PREFIX) -> GovernorFigures | None:
    """The governor figures the cluster's workers share, read from Redis (for a gateway's
    ``hello``): the limit, the executions counted on every worker (``running`` and
    ``cluster_running``), the pause (``resumes_at`` in the Redis server's clock, seconds since
    the epoch), starts and rejections, the fleet's spend. None when no worker shares a
    governor. ``waiting``, ``refusals`` and the budget are each worker's own: 0 and None
    here."""
    keys = RedisKeys(prefix)
    names = [keys.governor(p) for p in ("state", "leases", "spent", "nodes", "caps")]
    reply = await redis.register_script(FIGURES_SCRIPT)(keys=names, args=[])
    now, count, cap, limit, paused, rejections, starts, spent = reply
    if not limit and int(cap) == 0:
        return None
    max_live = max(1, int(cap))
    resumes_at = float(paused) if float(paused) > float(now) else None
    return GovernorFigures(
        limit=max(1, min(int(limit or max_live), max_live)),
        max_live=max_live,
        running=int(count),
        waiting=0,
        paused=resumes_at is not None,
        resumes_at=resumes_at,
        starts=int(starts),
        refusals=0,
        rejections=int(rejections),
        spent_usd=float(spent),
        budget_usd=None,
        overshoot_usd=0.0,
        cluster_running=int(count),
    )


def rejection_delay(signal: Signal, config: GovernorConfig, *, wall_now: float) -> float | None:
    """The pause a report asks for (rule 2: seconds from now, within ``[0, max_pause]``,
    without jitter); None when it is no rejection."""
    match signal:
        case RateLimitNotice(status="rejected"):
            resets = signal.resets_at
            delay = config.default_retry_after if resets is None else resets - wall_now
        case RetryNotice() if is_rejection(signal.error_status, signal.error):
            ms = signal.delay_ms
            delay = config.default_retry_after if ms is None else ms / 1000
        case _:
            return None
    return min(max(0.0, delay), config.max_pause)


@attrs.frozen(kw_only=True)
class _Turn:
    """A turn's report, kept until Redis applied it."""

    id: str
    cost_usd: float
    fields: tuple[str, ...]
    succeeded: bool
    started_under: int
    """The shared limit when its execution was admitted (a success raises only that one)."""


def _field(scope: Scope, name: str | None) -> str:
    return "fleet" if scope == "fleet" else f"{scope}:{name}"


class RedisGovernorState(Generic[K]):
    """A :class:`~claude_trio.actors.fanout.governor.GovernorState` shared in Redis (see the
    module docstring); its ``sync`` task is run by the governor actor."""

    def __init__(
        self,
        redis: Any,
        shared: SharedGovernorConfig,
        config: GovernorConfig,
        *,
        now: float,
        random: Callable[[], float],
    ) -> None:
        self.config = config
        self.shared = shared
        self._redis = redis
        self._random = random
        # The local part: queue, fair order, spacing, running executions; no budgets.
        local = attrs.evolve(
            config, budget_usd=None, principal_budgets_usd={}, label_budgets_usd={}
        )
        self.local: GovernorRules[K] = GovernorRules(local, now=now, random=random)
        keys = RedisKeys(shared.prefix)
        parts = ("state", "leases", "spent", "nodes", "caps", "freed", "waiting")
        self._keys = [keys.governor(p) for p in parts]
        self._keys_of = keys
        self._acquire = redis.register_script(ACQUIRE_SCRIPT)
        self._reject = redis.register_script(REJECT_SCRIPT)
        self._turn = redis.register_script(TURN_SCRIPT)
        self._leases_script = redis.register_script(LEASES_SCRIPT)
        self._kick = trio.Event()
        self._scopes: dict[K, tuple[str | None, str | None]] = {}  # principal, label
        #: Since when each waiting open waits (this node's clock): a start tells Redis how
        #: long, for the fair order across the nodes.
        self._waiting_since: dict[K, float] = {}
        self._started_under: dict[K, int] = {}  # the shared limit each was admitted under
        self._admitted: dict[K, str] = {}  # waiting opens Redis gave a lease
        self._leases: dict[K, str] = {}  # running executions' leases
        self._asking: set[K] = set()  # of those, waiting for a person (lease given back)
        self._released: set[str] = set()  # leases to drop in Redis
        self._turns: list[_Turn] = []  # turn reports Redis has not applied yet
        self._rejection: tuple[float, str] | None = None  # the longest pause not sent yet
        self._refused: dict[K, BudgetFigures] = {}
        self._aborted: set[K] = set()
        self._reached: set[str] = set()
        self._lease_seq = 0
        self._refusals = 0
        # What Redis said last.
        self._limit = config.initial_limit or config.max_live
        self._count = 0
        self._rejections = 0
        self._spent: dict[str, float] = {}
        self._shared_pause = 0.0  # server time
        self._jittered: tuple[float, float] | None = None  # (shared pause, local until)
        self._degraded = False
        self.outages = 0

    # -- GovernorState: inputs ----------------------------------------------------------------

    def submit(
        self,
        key: K,
        *,
        owner: Hashable = None,
        priority: int = 0,
        principal: str | None = None,
        label: str | None = None,
    ) -> None:
        self.local.submit(key, owner=owner, priority=priority, principal=principal, label=label)
        self._scopes[key] = (principal, label)
        self._waiting_since[key] = trio.current_time()
        self._kick.set()

    def cancel(self, key: K) -> bool:
        cancelled = self.local.cancel(key)
        if cancelled:
            self._forget_waiting(key)
            self._kick.set()
        return cancelled

    def position(self, key: K) -> int | None:
        return self.local.position(key)

    def check_budget(
        self, *, principal: str | None = None, label: str | None = None
    ) -> BudgetFigures | None:
        figures = self._exhausted(principal, label)
        if figures is not None:
            self._refusals += 1
        return figures

    def observe(self, signal: Signal, *, now: float, wall_now: float) -> list[Notice]:
        delay = rejection_delay(signal, self.config, wall_now=wall_now)
        if delay is None:
            return []
        self._rejected(delay, "rate limit" if isinstance(signal, RateLimitNotice) else "retry")
        return self._local_only(self.local.observe(signal, now=now, wall_now=wall_now))

    def turn_ended(
        self,
        key: K,
        *,
        now: float,
        cost_usd: float,
        api_error_status: int | None = None,
        error: str | None = None,
    ) -> list[Notice]:
        notices = self.local.turn_ended(
            key, now=now, cost_usd=cost_usd, api_error_status=api_error_status, error=error
        )
        principal, label = self._scopes.get(key, (None, None))
        fields = ["fleet"]
        if principal is not None:
            fields.append(_field("principal", principal))
        if label is not None:
            fields.append(_field("label", label))
        succeeded = api_error_status is None and error is None
        report = _Turn(
            id=uuid.uuid4().hex,
            cost_usd=cost_usd,
            fields=tuple(fields),
            succeeded=succeeded,
            started_under=self._started_under.get(key, self._limit),
        )
        self._turns.append(report)
        if is_rejection(api_error_status, error):
            self._rejected(self.config.default_retry_after, f"API error {api_error_status}")
        self._kick.set()
        return self._local_only(notices)

    def person_asked(self, key: K, request_id: str) -> None:
        self.local.person_asked(key, request_id)
        if key in self._leases:
            self._asking.add(key)
            self._kick.set()

    def person_answered(self, key: K, request_id: str) -> None:
        self.local.person_answered(key, request_id)
        if key in self._asking and key not in self.local.asking:
            self._asking.discard(key)
            self._kick.set()

    def execution_ended(self, key: K) -> None:
        self.local.execution_ended(key)
        lease = self._leases.pop(key, None)
        if lease is not None:
            self._released.add(lease)
        self._asking.discard(key)
        self._aborted.discard(key)
        self._scopes.pop(key, None)
        self._started_under.pop(key, None)
        self._kick.set()

    # -- GovernorState: decisions and figures -------------------------------------------------

    def poll(self, now: float) -> list[Decision[K]]:
        out: list[Decision[K]] = []
        for key, figures in list(self._refused.items()):
            del self._refused[key]
            if self.local.cancel(key):
                self._forget_waiting(key)
                self._refusals += 1
                out.append(Refuse(key=key, reason="budget_exhausted", figures=figures))
        if self.config.on_budget == "abort":
            for key in self._leases:
                spent = self._exhausted(*self._scopes.get(key, (None, None)))
                if spent is not None and key not in self._aborted:
                    self._aborted.add(key)
                    out.append(Abort(key=key, reason="budget_exhausted", figures=spent))
        for decision in self.local.poll(now, admitted=self._admitted):
            if isinstance(decision, Start):
                self._leases[decision.key] = self._admitted.pop(decision.key)
                self._waiting_since.pop(decision.key, None)
            out.append(decision)
        return out

    def statistics(self) -> GovernorStatistics:
        s = self.local.statistics()
        spent = self._spent.get("fleet", 0.0) + sum(t.cost_usd for t in self._turns)
        budget = self.config.budget_usd
        return attrs.evolve(
            s,
            limit=self._limit,
            refusals=self._refusals,
            rejections=max(self._rejections, s.rejections),
            spent_usd=spent,
            budget_usd=budget,
            overshoot_usd=0.0 if budget is None else max(0.0, spent - budget),
            cluster_running=self._count,
            degraded=self._degraded,
        )

    @property
    def degraded(self) -> bool:
        """Redis cannot be reached now: no new start is admitted."""
        return self._degraded

    # -- the sync task --------------------------------------------------------------------------

    async def sync(self, notify: Callable[[list[Notice]], None]) -> None:
        """Talk to Redis whenever an input arrives, when another node makes room under the
        limit while opens wait here, and every so often: send the reports, renew the leases,
        read the shared figures, ask for the starts of waiting opens."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_freed)
                await self._sync(notify)
        finally:
            # The fleet closes: give this node's leases back (its executions end with it),
            # so the other nodes need not wait for them to lapse, and drop its waiting head.
            held = [*self._leases.values(), *self._admitted.values(), *self._released]
            if held or self._waiting_since:
                timeout = self.shared.call_timeout
                with trio.move_on_after(timeout, shield=True):  # noqa: ASYNC912 - the call awaits
                    try:
                        await self._call(self._leases_script, [self.shared.lease_ttl, 0, 0, *held])
                    except REDIS_ERRORS:
                        log.info("governor: leases left to lapse", extra={"event": "governor"})

    async def _sync(self, notify: Callable[[list[Notice]], None]) -> None:
        pause = 0.05
        while True:
            kick = self._kick = trio.Event()
            try:
                notices = await self.sync_once()
            except REDIS_ERRORS as exc:
                if not self._degraded:
                    self._degraded = True
                    self.outages += 1
                    # The governor notes it (kept, and logged as a warning).
                    notify([SharedStateOutage(unavailable=True, cause=f"redis: {exc!r}")])
                await trio.sleep(pause)
                pause = min(pause * 2, self.shared.retry_max)
                continue
            if self._degraded:
                self._degraded = False
                notices = [SharedStateOutage(unavailable=False), *notices]
            pause = 0.05
            notify(notices)
            wait = self.shared.lease_ttl / 3
            if self._waiting_for_cluster():
                wait = min(wait, self.shared.poll_interval)
            with trio.move_on_after(wait):
                await kick.wait()

    def _waiting_for_cluster(self) -> bool:
        """Some opens wait here that Redis has neither admitted nor refused."""
        return self.local.waiting > len(self._admitted) + len(self._refused)

    async def _watch_freed(self) -> None:
        """Read the freed stream (``KEYS[6]`` of the scripts), blocking, and start a sync round
        when another node made room while opens wait here: they start then, not at the next
        ``poll_interval``. A Redis error is the sync loop's to report; this waits
        ``retry_max`` and reads again (the polling still admits meanwhile)."""
        freed = self._keys[5]
        block_ms = max(1, int(self.shared.lease_ttl / 3 * 1000))
        last: str | None = None
        while True:
            try:
                with trio.fail_after(block_ms / 1000 + self.shared.call_timeout):
                    if last is None:  # from the newest entry on
                        newest = await self._redis.xrevrange(freed, count=1)
                        last = str(newest[0].identifier) if newest else "0-0"
                    got = await self._redis.xread({freed: last}, count=64, block=block_ms)
            except REDIS_ERRORS as exc:
                if last is not None:  # once per streak of failures
                    log.info(
                        "governor: the freed stream cannot be read, polling meanwhile: %r",
                        exc,
                        extra={"event": "governor"},
                    )
                last = None
                await trio.sleep(self.shared.retry_max)
                continue
            entries = next(iter(got.values()), ()) if got else ()
            if entries:
                last = str(entries[-1].identifier)
                if self._waiting_for_cluster():
                    self._kick.set()

    async def _call(self, script: Any, args: list[Any], *, keys: list[str] | None = None) -> Any:
        head = [
            self.shared.node,
            self.config.max_live,
            self.shared.lease_ttl,
            self.config.initial_limit or self.config.max_live,
        ]
        with trio.fail_after(self.shared.call_timeout):
            return await script(keys=keys or self._keys, args=[*head, *args])

    async def sync_once(self) -> list[Notice]:
        """One round of ``sync`` (its notices): send the reports kept, renew and drop the
        leases, read the shared figures, ask Redis to admit the waiting opens. A Redis error
        propagates (``sync`` then marks the state degraded)."""
        notices: list[Notice] = []
        config = self.config
        if self._rejection is not None:
            (delay, cause), self._rejection = self._rejection, None
            try:
                reply = await self._call(
                    self._reject, [delay, config.decrease_factor, config.decrease_interval]
                )
            except BaseException:
                self._rejected(delay, cause)  # sent again in the next round
                raise
            now, until, old, new = (float(v) for v in reply)
            notices += self._limit_moved(int(old), int(new), "rejected")
            notices += self._adopt_pause(now, until)
        while self._turns:
            turn = self._turns[0]
            args = [
                turn.cost_usd,
                int(turn.succeeded),
                config.increase_after,
                SEEN_TTL,
                turn.started_under,
            ]
            keys = [*self._keys, self._keys_of.governor(f"seen:{turn.id}")]
            reply = await self._call(self._turn, [*args, *turn.fields], keys=keys)
            self._turns.pop(0)
            notices += self._limit_moved(int(reply[1]), int(reply[2]), "succeeded")
        notices += await self._refresh()
        await self._admit(notices)
        return notices

    async def _refresh(self) -> list[Notice]:
        renew = [lease for key, lease in self._leases.items() if key not in self._asking]
        renew += self._admitted.values()
        drop = sorted(self._released | {self._leases[key] for key in self._asking})
        sent = set(self._released)
        waits = int(self._waiting_for_cluster())
        reply = await self._call(
            self._leases_script, [self.shared.lease_ttl, waits, len(renew), *renew, *drop]
        )
        self._released -= sent
        now = float(reply[0])
        self._count = int(reply[1])
        limit = int(reply[2])
        notices = self._limit_moved(
            self._limit, limit, "rejected" if limit < self._limit else "succeeded"
        )
        self._rejections = int(reply[4])
        pairs = reply[7:]
        self._spent = {pairs[i]: float(pairs[i + 1]) for i in range(0, len(pairs), 2)}
        for figures in self._all_budgets():
            scope_id = _field(figures.scope, figures.name)
            if figures.spent_usd >= figures.budget_usd and scope_id not in self._reached:
                self._reached.add(scope_id)
                notices.append(BudgetReached(figures=figures))
        return notices + self._adopt_pause(now, float(reply[3]))

    async def _admit(self, notices: list[Notice]) -> None:
        """Ask Redis to start waiting opens, in this node's order, while it has CLIs for
        them and Redis admits."""
        await trio.lowlevel.checkpoint()
        while self.local.counted + len(self._admitted) < self.config.max_live:
            excluding = self._admitted.keys() | self._refused.keys()
            head = self.local.next_waiting(excluding=excluding)
            if head is None:
                return
            key, priority, principal, label = head
            budgets = self._budgets(principal, label)
            self._lease_seq += 1
            lease = f"{self.shared.node}:{self._lease_seq}"
            since = self._waiting_since.get(key, trio.current_time())
            waited = max(0.0, trio.current_time() - since)
            args: list[Any] = [lease, self.shared.lease_ttl, priority, waited]
            for figures in budgets:
                args += [_field(figures.scope, figures.name), figures.budget_usd]
            status, now, first, second = await self._call(self._acquire, args)
            match status:
                case "ok":
                    self._count, self._limit = int(first), int(second)
                    if self.local.position(key) is None:  # cancelled meanwhile
                        self._released.add(lease)
                        continue
                    self._admitted[key] = lease
                    self._started_under[key] = self._limit
                case "paused":
                    notices += self._adopt_pause(float(now), float(first))
                    return
                case "exhausted":
                    self._spent[first] = float(second)
                    figures = next(
                        f
                        for f in self._budgets(principal, label)
                        if _field(f.scope, f.name) == first
                    )
                    self._refused[key] = figures
                case _:  # full, or yielded to the heads of other nodes (fair order)
                    self._count, self._limit = int(first), int(second)
                    return

    # -- helpers ------------------------------------------------------------------------------

    def _rejected(self, delay: float, cause: str) -> None:
        if self._rejection is None or delay > self._rejection[0]:
            self._rejection = (delay, cause)
        self._kick.set()

    def _adopt_pause(self, server_now: float, until: float) -> list[Notice]:
        """The shared pause, on this node's clock, with this node's jitter (drawn once for
        each shared pause)."""
        if until <= server_now:
            return []
        if self._jittered is None or self._jittered[0] != until:
            local = trio.current_time() + (until - server_now)
            self._jittered = (until, local + self.config.resume_jitter * self._random())
        return self.local.extend_pause(self._jittered[1], cause="rate limit, shared by the cluster")

    def _limit_moved(
        self, old: int, new: int, cause: Literal["rejected", "succeeded"]
    ) -> list[Notice]:
        self._limit = new
        return [] if old == new else [LimitChanged(old=old, new=new, cause=cause)]

    @staticmethod
    def _local_only(notices: list[Notice]) -> list[Notice]:
        """The local rules' notices that hold for the cluster: their pause (the limit is
        Redis')."""
        return [n for n in notices if isinstance(n, Paused)]

    def _forget_waiting(self, key: K) -> None:
        self._scopes.pop(key, None)
        self._waiting_since.pop(key, None)
        self._started_under.pop(key, None)
        self._refused.pop(key, None)
        lease = self._admitted.pop(key, None)
        if lease is not None:
            self._released.add(lease)

    def _budgets(self, principal: str | None, label: str | None) -> list[BudgetFigures]:
        """The budgets an open of ``principal`` and ``label`` is in, with what is spent."""
        config = self.config
        scopes: list[tuple[Scope, str | None, float]] = []
        if config.budget_usd is not None:
            scopes.append(("fleet", None, config.budget_usd))
        if principal is not None and principal in config.principal_budgets_usd:
            scopes.append(("principal", principal, config.principal_budgets_usd[principal]))
        if label is not None and label in config.label_budgets_usd:
            scopes.append(("label", label, config.label_budgets_usd[label]))
        return [self._figures(scope, name, budget) for scope, name, budget in scopes]

    def _all_budgets(self) -> list[BudgetFigures]:
        config = self.config
        out = [] if config.budget_usd is None else self._budgets(None, None)
        out += [self._figures("principal", p, b) for p, b in config.principal_budgets_usd.items()]
        out += [self._figures("label", name, b) for name, b in config.label_budgets_usd.items()]
        return out

    def _figures(self, scope: Scope, name: str | None, budget: float) -> BudgetFigures:
        def inside(key: K) -> bool:
            principal, label = self._scopes.get(key, (None, None))
            return scope == "fleet" or name == (principal if scope == "principal" else label)

        return BudgetFigures(
            scope=scope,
            name=name,
            budget_usd=budget,
            spent_usd=self._spent.get(_field(scope, name), 0.0),
            running=sum(1 for key in self._leases if inside(key)),
        )

    def _exhausted(self, principal: str | None, label: str | None) -> BudgetFigures | None:
        for figures in self._budgets(principal, label):
            if figures.spent_usd >= figures.budget_usd:
                return figures
        return None
