"""Masking secrets in what a CLI session exchanged (pure, no trio).

Used for cassettes (``protocol/cassettes/format.py``): a recording is masked before it is written,
and what a test writes is masked the same way before it is compared with it. Rules:

1. Every string is searched for the values of the environment's secret variables
   (:func:`is_secret_name`: ``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ...), which
   are masked wherever they appear (values under 8 characters are left: they would mask
   ordinary words).
2. Then for API keys (``sk-...``), ``Bearer``/``Basic`` credentials, ``x-api-key`` and
   ``Authorization`` values, ``NAME=value`` pairs whose name looks secret (an environment
   echoed by a tool), and passwords in URLs.
3. In mappings, a string under a key that names a secret (``apiKey``, ``access_token``,
   ``clientSecret``, ``password``) is masked whole; counts such as ``input_tokens`` are not
   secrets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "Scrubber", "is_secret_name"]

MASK = "***"

_SECRET_NAME = re.compile(
    r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH|COOKIE)(?:_|$)", re.IGNORECASE
)
_KEY_ENDINGS = (
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "authorization",
    "credential",
    "credentials",
    "cookie",
    "privatekey",
    "clientsecret",
)
_TEXT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # NAME=value with a secret-looking NAME (an environment echoed by a tool).
    (
        re.compile(
            r"\b([A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)[A-Z0-9_]*)"
            r"=(?!\*\*\*)[^\s\"'`]+"
        ),
        r"\1=" + MASK,
    ),
    # Header lines and JSON-ish pairs: x-api-key: ..., "authorization": "...".
    (
        re.compile(
            r"(?i)\b(x-api-key|api[-_]?key|authorization|proxy-authorization)"
            r"([\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?(?!\*\*\*)[^\s\"',;]+"
        ),
        r"\1\2" + MASK,
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+(?!\*\*\*)[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + MASK),
    (re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{4,}"), "sk-ant-" + MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), "sk-" + MASK),
    # Passwords in URLs: scheme://user:password@host.
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]+):[^/\s@]+@"), r"\1:" + MASK + "@"),
)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable named ``name`` holds a secret (its value is masked)."""
    return bool(_SECRET_NAME.search(name))


def _is_secret_key(key: str) -> bool:
    folded = key.lower().replace("_", "").replace("-", "")
    return folded.endswith(_KEY_ENDINGS)


class Scrubber:
    """Masks secrets in frames and lines (see the module docstring).

    ``secrets``: values to mask wherever they appear (the environment's secret variables;
    values shorter than 8 characters are ignored, they would mask ordinary words).
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = sorted({s for s in secrets if len(s) >= 8}, key=len, reverse=True)

    @classmethod
    def for_environment(cls, *environments: Mapping[str, str]) -> Scrubber:
        """A scrubber for the values of the secret variables of ``environments``."""
        return cls(
            value for env in environments for name, value in env.items() if is_secret_name(name)
        )

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        for pattern, replacement in _TEXT_RULES:
            text = pattern.sub(replacement, text)
        return text

    def value(self, value: Any) -> Any:
        """A copy of a JSON value with its secrets masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {
                key: (
                    MASK
                    if isinstance(key, str)
                    and _is_secret_key(key)
                    and isinstance(item, str)
                    and item
                    else self.value(item)
                )
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value
