"""Token usage in the unified convention, and the arithmetic over it.

Rules (the seed's "UsageStats" contract):

* ``input_tokens`` is the TOTAL input posted to the model: Anthropic's fresh ``input_tokens``
  + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``.
* ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are informational SUBSETS of
  ``input_tokens`` (they overlap it, they are not added again).
* ``context_size`` = ``input_tokens`` + ``output_tokens``.
* fresh input = ``input_tokens`` - cache read - cache creation.
* Missing fields count as zero.
"""

from __future__ import annotations

import attrs


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
