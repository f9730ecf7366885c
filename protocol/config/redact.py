"""``redact_secrets``: a copy of any configuration with its secrets masked (pure).

Used for ``adapter_ready`` (the resolved configuration every execution reports) and anything
else that shows a configuration: a log line, a remote client. Rules:

1. A value under a key that looks like a secret (it contains ``key``, ``token``, ``secret``,
   ``password``/``passwd``, ``credential``, ``auth``, ``cookie`` or ``signature``,
   in any case and spelling: ``ANTHROPIC_API_KEY``, ``apiKey``, ``x-api-key``) is replaced by
   :data:`MASK`, whatever its type.
2. Any string (keys, values, lists) has its credentials masked: the userinfo of a URL
   (``https://user:pass@host`` -> ``https://***@host``), ``Bearer``/``Basic`` authorization
   values, and ``sk-...``-style API keys.
3. Mappings, lists and tuples are copied recursively; other values are returned as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "***"

_SECRET_KEY = re.compile(
    r"key|token|secret|passw(or)?d|credential|auth|cookie|signature", re.IGNORECASE
)
# The scheme is bounded: unbounded, every start in a long run of letters scanned to its end,
# which took a minute on one 128 KiB environment value (quadratic). A longer scheme still
# matches, by its last 32 characters.
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]{0,31}://)[^/\s@]+@")
_AUTH_VALUE = re.compile(r"\b(?P<kind>Bearer|Basic|Token)\s+[^\s,;]+", re.IGNORECASE)
_API_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")
# What each pattern needs to match at all: a URL's userinfo an "@", an API key "sk-", an
# authorization value one of these words.
_AUTH_HINT = re.compile(r"bearer|basic|token", re.IGNORECASE)


def is_secret_key(key: object) -> bool:
    """Whether a value stored under ``key`` is taken for a secret (rule 1)."""
    return isinstance(key, str) and _SECRET_KEY.search(key) is not None


def redact_text(text: str) -> str:
    """``text`` with credentials in URLs, authorization values and API keys masked (rule 2)."""
    if "@" not in text and "sk-" not in text and _AUTH_HINT.search(text) is None:
        return text  # none of the three can match: most strings, at a fraction of the cost
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    text = _AUTH_VALUE.sub(lambda m: f"{m.group('kind')} {MASK}", text)
    return _API_KEY.sub(MASK, text)


def redact_secrets(value: Any) -> Any:
    """A copy of ``value`` with every secret masked (see the module rules)."""
    if isinstance(value, Mapping):
        return {
            (redact_text(k) if isinstance(k, str) else k): (
                MASK if is_secret_key(k) else redact_secrets(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_secrets(item) for item in value)
    if isinstance(value, str):
        return redact_text(value)
    return value
