"""``redact_secrets``: a copy of any configuration with its secrets masked (pure).

Used for ``adapter_ready`` (the resolved configuration every execution reports) and anything
else that shows a configuration: a log line, a remote client. Rules:

1. A value under a key that names a secret is replaced by :data:`MASK`, whatever its type.
   The key is cut into words (``ANTHROPIC_API_KEY``, ``apiKey``, ``x-api-key``); it names a
   secret when a word is ``key``, ``token``, ``secret``, ``password``, ``passwd``, ``pass``,
   ``passphrase``, ``credential(s)``, ``creds``, ``auth``, ``authorization``,
   ``authentication``, ``cookie``, ``signature`` or ``pat`` (a GitHub personal access token),
   or a word ends with ``token`` or contains ``password``/``passwd``/``secret``/
   ``credential`` (``accesstoken``, ``dbpassword``), or is a run-together ``...key`` of a
   known kind (``apikey``, ``privatekey``). Counts and ordinary words are not secrets:
   ``MAX_THINKING_TOKENS``, ``GIT_AUTHOR_NAME``, ``KEYBOARD``, ``PWD``.
2. Any string (keys, values, lists) has its credentials masked:

   * the userinfo of a URL (``https://user:pass@host`` -> ``https://***@host``);
   * tokens by their shape: API keys (``sk-...``, Stripe's ``sk_live_...``), Slack
     (``xoxb-...``, ``xapp-...``), AWS access key ids (``AKIA...``, ``ASIA...``), Google API
     keys (``AIza...``), GitHub (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``,
     ``github_pat_``), GitLab (``glpat-...`` and its other kinds), Hugging Face (``hf_``),
     npm (``npm_``), JSON Web Tokens (three base64url parts, the first ``eyJ...``) and PEM
     private key blocks;
   * ``NAME=value`` (an environment line, a flag, a query string) and ``NAME: value`` /
     ``"NAME": "value"`` whose name names a secret (rule 1). A ``NAME: value`` under a
     one-word name that is also an ordinary word (``key``, ``token``, ``auth``, ...) is
     masked only when the value looks like a credential (a digit, mixed case or
     punctuation in it, or 16 characters), so prose such as ``sort key: name`` stays;
   * ``Bearer``/``Basic``/``Token`` authorization values, when they look like a credential
     (``a basic example`` and ``the token count`` stay as they are).

   The shapes need their prefix at the start of a run of token characters, and every pattern
   is bounded or anchored that way: masking takes time linear in the length of the string.
3. Mappings, lists and tuples are copied recursively; other values are returned as they are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret_key", "redact_secrets", "redact_text"]

MASK = "***"

# -- rule 1: key names ------------------------------------------------------------------------

# Words of a key: runs of capitals (an acronym), a capitalised or lower-case word, digits.
_KEY_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_SECRET_WORDS = frozenset(
    {
        "key", "keys", "token", "secret", "secrets", "password", "passwords", "passwd",
        "pass", "passphrase", "credential", "credentials", "creds", "auth",
        "authorization", "authentication", "cookie", "cookies", "signature", "pat",
    }
)  # fmt: skip
# One-word names that are ordinary words too: ``sort key: name`` is prose, not a secret.
_WEAK_WORDS = frozenset({"key", "keys", "token", "auth", "pass", "cookie", "signature", "pat"})
_SECRET_PART = re.compile(
    r"passw(?:or)?d|secret|credential|passphrase|token$"
    r"|^(?:x?api|access|private|auth|signing|master|encryption|license|ssh|gpg|session|client"
    r"|app|service|account)keys?$"
)


def _key_words(key: str) -> list[str]:
    return [word.lower() for word in _KEY_WORDS.findall(key)]


def is_secret_key(key: object) -> bool:
    """Whether a value stored under ``key`` is taken for a secret (rule 1)."""
    return isinstance(key, str) and _is_secret_name(key)


@functools.lru_cache(maxsize=1024)  # the same few names, over and over
def _is_secret_name(key: str) -> bool:
    return any(
        word in _SECRET_WORDS or _SECRET_PART.search(word) is not None for word in _key_words(key)
    )


def _weak_name(name: str) -> bool:
    words = _key_words(name)
    return len(words) == 1 and words[0] in _WEAK_WORDS


# -- rule 2: credentials in text --------------------------------------------------------------

# A shape's prefix must start a run of token characters: otherwise every prefix inside one
# long run ("sk-sk-sk-...") would be scanned to the run's end, quadratic in its length.
_START = r"(?<![A-Za-z0-9_-])"
_SHAPES = re.compile(
    _START
    + r"(?:"
    + r"sk-[A-Za-z0-9_-]{8,}"
    + r"|[rs]k_(?:live|test)_[A-Za-z0-9]{10,}"
    + r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    + r"|xapp-[A-Za-z0-9-]{10,}"
    + r"|(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    + r"|AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"
    + r"|gh[pousr]_[A-Za-z0-9]{30,}"
    + r"|github_pat_[A-Za-z0-9_]{20,}"
    + r"|gl(?:pat|dt|rt|ptt|cbt|soat|ft|imt|oas)-[A-Za-z0-9_-]{20,}"
    + r"|hf_[A-Za-z0-9]{30,}"
    + r"|npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"
    + r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*"
    + r")"
)
# Base64 holds no "-": the body ends at the END line, or at the end of the text.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z ]{0,40} PRIVATE KEY-----[^-]*(?:-----END[A-Z ]{0,40} PRIVATE KEY-----)?"
)
# The scheme is bounded: unbounded, every start in a long run of letters scanned to its end,
# which took a minute on one 128 KiB environment value (quadratic). A longer scheme still
# matches, by its last 32 characters.
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]{0,31}://)[^/\s@]+@")
# NAME=value, NAME: value, "NAME": "value", --name=value. The name is bounded and must start
# a word, so a long run of letters is tried once.
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])(?P<name>-{0,2}[A-Za-z_][\w.-]{0,63})"
    r"(?P<sep>[\"']?[ \t]{0,8}(?P<op>[:=])[ \t]{0,8}[\"']?)"
    r"(?P<kind>(?:Bearer|Basic|Token|Digest)[ \t]+)?"
    r"(?P<value>[^\s\"',;&:=]+)"
)
_VALUE_REST = re.compile(r"[^\s\"',;&]*")
_AUTH_VALUE = re.compile(
    r"\b(?P<kind>Bearer|Basic|Token)[ \t]+(?P<value>[^\s,;\"']+)", re.IGNORECASE
)
_CREDENTIAL_LIKE = re.compile(r"[0-9._~+/=-]|[a-z][A-Z]")
# What any rule needs to match at all; most strings have none of these and are returned as
# they are, at a fraction of the cost.
_HINT = re.compile(
    r"[@=:]|sk-|[rs]k_|xox|xapp|AKIA|ASIA|AIza|gh[pousr]_|github_pat_|gl[a-z]{2,4}-|hf_|npm_"
    r"|eyJ|PRIVATE KEY|bearer|basic|token",
    re.IGNORECASE,
)


def _looks_like_credential(value: str) -> bool:
    """A digit, mixed case or punctuation in it, or long: not an ordinary word or a path."""
    if value.startswith(("/", ".", "~", MASK)):
        return False
    return len(value) >= 16 or _CREDENTIAL_LIKE.search(value) is not None


def _secret_assignment(match: re.Match[str]) -> bool:
    name, value = match.group("name"), match.group("value")
    if value.startswith(MASK) or not is_secret_key(name):
        return False
    return match.group("op") == "=" or not _weak_name(name) or _looks_like_credential(value)


def _mask_assignments(text: str) -> str:
    """Secret ``NAME=value`` / ``NAME: value`` values masked (to the end of the value, ``:``
    and ``=`` included). Another assignment may start inside a value that is not masked
    (``https://host/?token=...``): the search goes on right after its ``=`` or ``:``. A value
    stops at ``:`` and ``=`` for the match, so no text is scanned more than twice."""
    parts: list[str] = []
    done = pos = 0
    while (match := _ASSIGNMENT.search(text, pos)) is not None:
        if _secret_assignment(match):
            end = _VALUE_REST.match(text, match.end()).end()  # type: ignore[union-attr]
            parts += [text[done : match.start("value")], MASK]
            done = pos = end
        else:
            pos = match.end("sep")
    parts.append(text[done:])
    return "".join(parts)


def _auth_value(match: re.Match[str]) -> str:
    if not _looks_like_credential(match.group("value")):
        return match.group(0)
    return f"{match.group('kind')} {MASK}"


def redact_text(text: str) -> str:
    """``text`` with credentials in URLs, tokens of known shapes, secret assignments and
    authorization values masked (rule 2)."""
    if _HINT.search(text) is None:
        return text
    text = _PRIVATE_KEY.sub(MASK, text)
    text = _SHAPES.sub(MASK, text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    text = _mask_assignments(text)
    return _AUTH_VALUE.sub(_auth_value, text)


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
