"""Token usage in the unified convention, and the arithmetic over it.

Rules (the TypeScript library's "UsageStats" contract):

* ``input_tokens`` is the TOTAL input posted to the model: Anthropic's fresh ``input_tokens``
  + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``.
* ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are informational SUBSETS of
  ``input_tokens`` (they overlap it, they are not added again).
* ``context_size`` = ``input_tokens`` + ``output_tokens``.
* fresh input = ``input_tokens`` - cache read - cache creation.
* Missing fields count as zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from claude_trio.protocol.checks import finite_float


@attrs.frozen(kw_only=True)
class Usage:
    """Token counts (and cost, when known) in the unified convention."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def context_size(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def fresh_input_tokens(self) -> int:
        return self.input_tokens - self.cache_read_input_tokens - self.cache_creation_input_tokens


ZERO_USAGE = Usage()


def _int(raw: Mapping[str, Any], key: str) -> int:
    number = finite_float(raw.get(key))
    return 0 if number is None else int(number)


def normalize_usage(raw: Mapping[str, Any] | None, *, cost_usd: float = 0.0) -> Usage:
    """Anthropic usage (three additive input buckets) -> the unified convention.

    ``raw`` is a Messages API / CLI ``usage`` mapping; missing or non-numeric fields are zeros.
    """
    if not raw:
        return Usage(cost_usd=cost_usd)
    fresh = _int(raw, "input_tokens")
    cache_read = _int(raw, "cache_read_input_tokens")
    cache_creation = _int(raw, "cache_creation_input_tokens")
    return Usage(
        input_tokens=fresh + cache_read + cache_creation,
        output_tokens=_int(raw, "output_tokens"),
        cache_read_input_tokens=cache_read,
        cache_creation_input_tokens=cache_creation,
        cost_usd=cost_usd,
    )


def add_usage(a: Usage, b: Usage) -> Usage:
    """Field-wise ``a + b``: two turns' (or two executions') usage combined.

    Because ``input_tokens`` already includes the cache subsets, adding field by field keeps the
    subset rule (cache read + creation <= input) true for the sum.
    """
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_read_input_tokens=a.cache_read_input_tokens + b.cache_read_input_tokens,
        cache_creation_input_tokens=a.cache_creation_input_tokens + b.cache_creation_input_tokens,
        cost_usd=a.cost_usd + b.cost_usd,
    )


def sum_usage(items: Iterable[Usage]) -> Usage:
    """:func:`add_usage` over ``items``; :data:`ZERO_USAGE` for none. Use it across the
    executions of one resumed session: each result reports only its own call's usage."""
    total = ZERO_USAGE
    for item in items:
        total = add_usage(total, item)
    return total


def usage_difference(later: Usage, earlier: Usage) -> Usage:
    """``later - earlier`` for two cumulative snapshots, clamped at zero per field.

    Clamping matters when the cumulative source restarted (a new CLI process after a resume):
    a counter that went down means "new epoch", and the difference is then ``later`` itself.
    """
    if (
        later.input_tokens < earlier.input_tokens
        or later.output_tokens < earlier.output_tokens
        or later.cost_usd < earlier.cost_usd
    ):
        return later
    return Usage(
        input_tokens=later.input_tokens - earlier.input_tokens,
        output_tokens=later.output_tokens - earlier.output_tokens,
        cache_read_input_tokens=max(
            0, later.cache_read_input_tokens - earlier.cache_read_input_tokens
        ),
        cache_creation_input_tokens=max(
            0, later.cache_creation_input_tokens - earlier.cache_creation_input_tokens
        ),
        cost_usd=later.cost_usd - earlier.cost_usd,
    )
