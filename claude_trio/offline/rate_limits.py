"""A rate-limited Messages API: when the model double answers 429 or 529 instead (pure).

Give :class:`RateLimits` to the double (``ModelDouble(responder, rate_limits=...)`` or
``open_model_double(..., rate_limits=...)``) and it behaves like an account the API pushes
back on, before the responder is asked (a refused request uses up nothing of the script):

1. ``max_concurrent=K``: a ``/v1/messages`` request that arrives while K others are being
   answered (their streams not yet done) gets ``429 rate_limit_error`` with ``retry-after:
   retry_after``.
2. ``per_minute=N``: a request beyond the N answered in the last 60 seconds (trio's clock) gets
   ``429`` with ``retry-after`` the whole seconds until the oldest of them leaves the window.
3. ``overload_every=M``, ``overload_burst=B``: of every M requests that pass rules 1 and 2, the
   last B get ``529 overloaded_error`` with ``retry-after: retry_after`` (bursts, as the API
   has them).

Requests refused by rule 1 or 2 count towards neither rule 2's window nor rule 3's count;
those answered 529 count towards both. The figures of what was answered
are :meth:`RateLimiter.statistics` (``ModelDouble.rate_limit_statistics()``): admitted requests,
429s and 529s served, the most requests answered at once.
"""

from __future__ import annotations

import collections
import math
from typing import Any

import attrs

from claude_trio.offline.model_script import HttpError
from claude_trio.protocol.checks import check_int, check_number, optional, positive_int
from claude_trio.protocol.errors import InvalidParamsError

__all__ = ["RateLimitStatistics", "RateLimiter", "RateLimits"]

_WINDOW = 60.0  # rule 2's window, seconds


def _non_negative_int(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_int(attribute.name, value, 0, 2**40, allowed="an int >= 0")


@attrs.frozen(kw_only=True)
class RateLimits:
    """How the double pushes back (the module's rules 1-3); every limit is off by default."""

    max_concurrent: int | None = attrs.field(default=None, validator=optional(positive_int))
    per_minute: int | None = attrs.field(default=None, validator=optional(positive_int))
    overload_every: int | None = attrs.field(default=None, validator=optional(positive_int))
    overload_burst: int = attrs.field(default=1, validator=_non_negative_int)
    retry_after: float = attrs.field(default=1.0)

    @retry_after.validator
    def _check_retry_after(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_number("retry_after", value, minimum=0, allowed="a number of seconds >= 0")

    def __attrs_post_init__(self) -> None:
        if self.overload_every is not None and self.overload_burst > self.overload_every:
            raise InvalidParamsError(
                "overload_burst",
                self.overload_burst,
                f"at most overload_every ({self.overload_every})",
            )


@attrs.frozen(kw_only=True)
class RateLimitStatistics:
    """What a rate-limited double served: ``admitted`` requests (passed to the responder),
    ``rejected_429`` and ``rejected_529`` answers, and ``max_in_flight``, the most requests
    answered at once."""

    admitted: int
    rejected_429: int
    rejected_529: int
    in_flight: int
    max_in_flight: int


class RateLimiter:
    """The state of :class:`RateLimits` for one double: ``admit(now)`` before answering a
    request (an :class:`HttpError` to send instead, or None), ``release()`` once an admitted
    request's answer is sent."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self._in_flight = 0
        self._max_in_flight = 0
        self._answered: collections.deque[float] = collections.deque()  # rule 2's window
        self._passed = 0  # requests past rules 1 and 2 (rule 3 counts them)
        self._admitted = 0
        self._rejected_429 = 0
        self._rejected_529 = 0

    def admit(self, now: float) -> HttpError | None:
        limits = self.limits
        if limits.max_concurrent is not None and self._in_flight >= limits.max_concurrent:
            self._rejected_429 += 1
            return _error(
                429,
                limits.retry_after,
                f"rate limited: {self._in_flight} requests in flight, at most "
                f"{limits.max_concurrent} at once",
            )
        while self._answered and self._answered[0] <= now - _WINDOW:
            self._answered.popleft()
        if limits.per_minute is not None and len(self._answered) >= limits.per_minute:
            self._rejected_429 += 1
            wait = max(1.0, math.ceil(self._answered[0] + _WINDOW - now))
            return _error(429, wait, f"rate limited: at most {limits.per_minute} requests a minute")
        self._answered.append(now)
        self._passed += 1
        every = limits.overload_every
        if every is not None and (self._passed - 1) % every >= every - limits.overload_burst:
            self._rejected_529 += 1
            return _error(529, limits.retry_after, "Overloaded")
        self._admitted += 1
        self._in_flight += 1
        self._max_in_flight = max(self._max_in_flight, self._in_flight)
        return None

    def release(self) -> None:
        if self._in_flight <= 0:
            raise RuntimeError("release() without an admitted request in flight")
        self._in_flight -= 1

    def statistics(self) -> RateLimitStatistics:
        return RateLimitStatistics(
            admitted=self._admitted,
            rejected_429=self._rejected_429,
            rejected_529=self._rejected_529,
            in_flight=self._in_flight,
            max_in_flight=self._max_in_flight,
        )


def _error(status: int, retry_after: float, message: str) -> HttpError:
    seconds = f"{retry_after:g}" if retry_after != int(retry_after) else str(int(retry_after))
    return HttpError(status=status, message=message, headers={"retry-after": seconds})
