"""The governor's values: its settings (:class:`GovernorConfig`), what it reads from the CLI
(:func:`signal_of`), and what its rules decide and report (:class:`Start`, :class:`Wait`,
:class:`Paused`, ..., :class:`GovernorFigures`). The rules themselves, numbered, are in
:mod:`claude_trio.protocol.fanout.governor`, which exports every name here too.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping
from typing import Any, Generic, Literal, TypeAlias, TypeVar

import attrs
from claude_agent_sdk import types as sdk

from claude_trio.protocol.checks import check_number, optional, positive_int, validator
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.session.events import Event, Passthrough, Retry, WarningEvent

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
    "signal_of",
]

K = TypeVar("K", bound=Hashable)

#: The first concurrency limit of the governor a fleet, ``serve`` and ``batch`` get by default
#: (slow start, rule 1, raises it turn by turn until the API pushes back).
DEFAULT_START_LIMIT = 2

#: How many times ``increase_after`` successful turns a raise waits for at most after failed
#: probes (rule 1).
PROBE_BACKOFF_MAX = 16

#: API statuses that mean "slow down": rate limited, overloaded.
REJECTED_STATUSES = frozenset({429, 529})


class DefaultGovernor(enum.Enum):
    """The type of :data:`DEFAULT_GOVERNOR`."""

    DEFAULT = "default"


DEFAULT_GOVERNOR = DefaultGovernor.DEFAULT
"""``open_fleet(governor=DEFAULT_GOVERNOR)`` (the default): a governor with the settings of
:class:`GovernorConfig`, which suit one API key, starting at a concurrency limit of
:data:`DEFAULT_START_LIMIT` (slow start raises it turn by turn until the API pushes back)."""


def _budget(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_number(attribute.name, value, minimum=0, allowed="a number of US dollars >= 0")


def _budgets(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Mapping):
        raise InvalidParamsError(attribute.name, value, "a mapping of name -> US dollars >= 0")
    for name, amount in value.items():
        check_number(f"{attribute.name}[{name!r}]", amount, minimum=0, allowed="US dollars >= 0")


def _fraction(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_number(attribute.name, value, above=0, maximum=0.99, allowed="a number in (0, 0.99]")


@attrs.frozen(kw_only=True)
class GovernorConfig:
    """The governor's settings (rules 1-4 of :mod:`claude_trio.protocol.fanout.governor`)."""

    max_live: int = attrs.field(validator=positive_int)
    initial_limit: int | None = attrs.field(default=None, validator=optional(positive_int))
    increase_after: int = attrs.field(default=10, validator=positive_int)
    decrease_factor: float = attrs.field(default=0.7, validator=_fraction)
    decrease_interval: float = attrs.field(
        default=1.0, validator=validator(check_number, minimum=0)
    )
    starts_per_second: float = attrs.field(default=4.0, validator=validator(check_number, above=0))
    start_burst: int = attrs.field(default=4, validator=positive_int)
    default_retry_after: float = attrs.field(
        default=1.0, validator=validator(check_number, minimum=0)
    )
    max_pause: float = attrs.field(default=300.0, validator=validator(check_number, minimum=0))
    resume_jitter: float = attrs.field(default=0.5, validator=validator(check_number, minimum=0))
    budget_usd: float | None = attrs.field(default=None, validator=optional(_budget))
    principal_budgets_usd: Mapping[str, float] = attrs.field(factory=dict, validator=_budgets)
    label_budgets_usd: Mapping[str, float] = attrs.field(factory=dict, validator=_budgets)
    on_budget: Literal["finish", "abort"] = attrs.field(default="finish")

    @on_budget.validator
    def _check_on_budget(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in ("finish", "abort"):
            raise InvalidParamsError("on_budget", value, "'finish' or 'abort'")

    def __attrs_post_init__(self) -> None:
        if self.initial_limit is not None and self.initial_limit > self.max_live:
            raise InvalidParamsError(
                "initial_limit", self.initial_limit, f"at most max_live ({self.max_live})"
            )


# ---------------------------------------------------------------------------------------------
# Inputs: what the CLI reported


@attrs.frozen(kw_only=True)
class RateLimitNotice:
    """A ``rate_limit_event``: ``status`` (``allowed``, ``allowed_warning``, ``rejected``),
    ``resets_at`` (seconds since the epoch), ``rate_limit_type`` (``five_hour``, ...)."""

    status: str
    resets_at: float | None = None
    rate_limit_type: str | None = None


@attrs.frozen(kw_only=True)
class RetryNotice:
    """An ``api_retry`` (our :class:`~claude_trio.events.Retry`): the CLI retries a call
    that failed with ``error_status`` after ``delay_ms``."""

    error_status: int | None = None
    delay_ms: float | None = None
    error: str | None = None


Signal: TypeAlias = RateLimitNotice | RetryNotice


def signal_of(event: Event) -> Signal | None:
    """What the rules read from a session's event (None: nothing for them).

    ``Retry`` -> :class:`RetryNotice`; a ``rate_limit`` warning or a ``rate_limit_event``
    passthrough -> :class:`RateLimitNotice`, from the warning's ``rate_limit_status``,
    ``resets_at`` and ``rate_limit_type`` (they survive the wire) or the CLI's frame it
    keeps. A turn's ``Result`` goes to :meth:`GovernorRules.turn_ended` instead (its cost
    and ``api_error_status``).
    """
    match event:
        case Retry():
            return RetryNotice(
                error_status=event.error_status, delay_ms=event.delay_ms, error=event.error
            )
        case WarningEvent(code="rate_limit") if event.rate_limit_status is not None:
            return RateLimitNotice(
                status=event.rate_limit_status,
                resets_at=event.resets_at,
                rate_limit_type=event.rate_limit_type,
            )
        case WarningEvent(code="rate_limit") if isinstance(event.raw, sdk.RateLimitEvent):
            info = event.raw.rate_limit_info
            return RateLimitNotice(
                status=info.status, resets_at=info.resets_at, rate_limit_type=info.rate_limit_type
            )
        case Passthrough(frame_type="rate_limit_event") if isinstance(event.data, Mapping):
            status = event.data.get("status")
            resets = event.data.get("resetsAt")
            kind = event.data.get("rateLimitType")
            return RateLimitNotice(
                status=status if isinstance(status, str) else "allowed",
                resets_at=float(resets) if isinstance(resets, int | float) else None,
                rate_limit_type=kind if isinstance(kind, str) else None,
            )
        case _:
            return None


# ---------------------------------------------------------------------------------------------
# Outputs


@attrs.frozen(kw_only=True)
class BudgetFigures:
    """A budget's figures: which scope (``fleet``, ``principal``, ``label``; ``name`` is the
    principal or the label), the budget, what is spent, how many of its executions run."""

    scope: Literal["fleet", "principal", "label"]
    name: str | None
    budget_usd: float
    spent_usd: float
    running: int

    @property
    def overshoot_usd(self) -> float:
        return max(0.0, self.spent_usd - self.budget_usd)


@attrs.frozen(kw_only=True)
class Start(Generic[K]):
    """Start this open's execution now (rules 1-3 allow it)."""

    key: K


@attrs.frozen(kw_only=True)
class Refuse(Generic[K]):
    """Never start this open: ``reason`` (``budget_exhausted``) with the budget's figures."""

    key: K
    reason: Literal["budget_exhausted"]
    figures: BudgetFigures


@attrs.frozen(kw_only=True)
class Abort(Generic[K]):
    """Abort this running execution: its budget is exhausted and ``on_budget="abort"``."""

    key: K
    reason: Literal["budget_exhausted"]
    figures: BudgetFigures


@attrs.frozen(kw_only=True)
class Resumed:
    """The pause is over at ``at``; starts resume one token apart (rule 3)."""

    at: float


@attrs.frozen(kw_only=True)
class Wait:
    """Opens wait: for ``until`` (``paused``, ``spacing``) or, with ``until=None``, for an
    execution to end or to wait for a person (``concurrency``). Call ``poll`` again then, or on
    any input."""

    until: float | None
    reason: Literal["paused", "spacing", "concurrency"]


@attrs.frozen(kw_only=True)
class Idle:
    """No open waits."""


Decision: TypeAlias = "Start[K] | Refuse[K] | Abort[K] | Resumed | Wait | Idle"


@attrs.frozen(kw_only=True)
class Paused:
    """Starts are paused until ``until`` (rule 2); ``cause`` says which report did it."""

    until: float
    cause: str


@attrs.frozen(kw_only=True)
class LimitChanged:
    """The concurrency limit moved from ``old`` to ``new`` (rule 1)."""

    old: int
    new: int
    cause: Literal["rejected", "succeeded"]


@attrs.frozen(kw_only=True)
class BudgetReached:
    """A budget is spent (rule 4): nothing more starts in its scope."""

    figures: BudgetFigures


@attrs.frozen(kw_only=True)
class SharedStateOutage:
    """The store a cluster's governor shares (Redis) could not be reached (``cause``: the
    error) while ``unavailable``, or can again once not: meanwhile no new start is admitted
    (new starts wait) and running executions go on."""

    unavailable: bool
    cause: str = ""


Notice: TypeAlias = Paused | LimitChanged | BudgetReached | SharedStateOutage


@attrs.frozen(kw_only=True)
class GovernorStatistics:
    """The governor's figures at one moment (for ``statistics()`` and displays)."""

    limit: int
    max_live: int
    running: int
    waiting: int
    paused_until: float | None
    starts: int
    refusals: int
    rejections: int
    spent_usd: float
    budget_usd: float | None
    overshoot_usd: float
    asking: int = 0
    #: Shared by a cluster's nodes: executions counted on all; shared state unreachable.
    cluster_running: int | None = None
    degraded: bool = False


@attrs.frozen(kw_only=True)
class GovernorFigures:
    """A governor's figures for people and peers (``Fleet.statistics().governor``, the
    gateway's ``hello``, in wall-clock time): the effective concurrency
    ``limit`` (at most ``max_live``), executions ``running`` under it and ``waiting`` for a
    start, whether starts are ``paused`` and until when (``resumes_at``, seconds since the
    epoch), counts of starts, refusals and rejections seen, the fleet's spend and budget, the
    overshoot past it, the latest notice, and how many running executions wait for a person
    (``asking``, rule 7)."""

    limit: int
    max_live: int
    running: int
    waiting: int
    paused: bool
    resumes_at: float | None
    starts: int
    refusals: int
    rejections: int
    spent_usd: float
    budget_usd: float | None
    overshoot_usd: float
    last_notice: str | None = None
    asking: int = 0
    """Of ``running``, those waiting for a person, not counted against ``limit``."""
    cluster_running: int | None = None
    """With a governor shared by a cluster's nodes (``worker --redis``): the executions
    counted against ``limit`` on every node (``running`` is this node's); None otherwise."""
    degraded: bool = False
    """The shared governor's Redis cannot be reached: new starts wait until it can."""
