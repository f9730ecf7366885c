"""Idempotency keys of ``open`` and ``continue`` (pure, no trio, no I/O).

A client that sends ``open`` and loses the reply (the connection dropped after the server
received it) cannot know whether a session was started. Sending it again must not start a
second one. So ``open`` and ``continue`` may carry an *idempotency key*, and the host records,
atomically with the session's creation, which session the key created:

1. **One key, one session.** A request whose key the host has recorded returns the session
   the first request created (the local fleet, its in-process :class:`IdempotencyRecords`;
   a cluster, its key in Redis, written in the script that creates the session, so any gateway
   of the cluster finds it). Nothing is started again.
2. **One key, one request.** The host keeps a digest of the request with the key
   (:func:`open_digest`, :func:`continue_digest`); the same key with another request is
   refused with :class:`~claude_trio.protocol.errors.IdempotencyConflictError`, never answered
   with the first request's session.
3. **Scoped by principal.** Keys of different principals (a gateway's tokens) never meet: the
   same key from two principals names two requests.
4. **Bounded.** A key is kept for ``ttl`` seconds (default :data:`DEFAULT_IDEMPOTENCY_TTL`, a
   day); in process at most ``max_keys`` keys are kept, the oldest forgotten first. A request
   after its key was forgotten is a new request.
5. **Valid keys** (:func:`check_idempotency_key`): a non-empty string of at most
   :data:`MAX_KEY_CHARS` printable characters.
"""

from __future__ import annotations

import collections
import hashlib
import json
from collections.abc import Hashable, Mapping
from typing import Any

import attrs

from claude_trio.protocol.config.resume import ContinueOptions
from claude_trio.protocol.errors import IdempotencyConflictError, InvalidParamsError

__all__ = [
    "DEFAULT_IDEMPOTENCY_TTL",
    "DEFAULT_MAX_KEYS",
    "MAX_KEY_CHARS",
    "IdempotencyRecords",
    "check_idempotency_key",
    "continue_digest",
    "open_digest",
]

DEFAULT_IDEMPOTENCY_TTL = 24 * 3600.0
"""How long a host keeps an idempotency key, in seconds (rule 4)."""
DEFAULT_MAX_KEYS = 100_000
"""How many keys a local fleet keeps at most (rule 4)."""
MAX_KEY_CHARS = 256
"""The longest idempotency key (it travels in every retry)."""


def check_idempotency_key(key: object) -> str:
    """``key`` if it is a valid idempotency key (rule 5), else ``InvalidParamsError``."""
    if not (isinstance(key, str) and key.strip() and key.isprintable()):
        raise InvalidParamsError(
            "idempotency_key", key, "a non-empty string of printable characters"
        )
    if len(key) > MAX_KEY_CHARS:
        raise InvalidParamsError(
            "idempotency_key", key[:80], f"at most {MAX_KEY_CHARS} characters ({len(key)})"
        )
    return key


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def open_digest(params: Mapping[str, Any], label: str | None) -> str:
    """The digest of an ``open`` request: its params (``wire.params_to_json``) and label."""
    return _digest({"op": "open", "params": params, "label": label})


def continue_digest(session_id: str, prompt: str, options: ContinueOptions | None = None) -> str:
    """The digest of a ``continue`` request: the session, the prompt and the options it set
    (model, permission mode, the images' bytes): a retry with other ones is another request.
    Without options it is the digest of a plain continue, as before options existed."""
    request: dict[str, Any] = {"op": "continue", "session": session_id, "prompt": prompt}
    if options is not None:
        if options.model is not None:
            request["model"] = options.model
        if options.permission_mode is not None:
            request["permission_mode"] = options.permission_mode
        if options.images:
            request["images"] = [hashlib.sha256(i.data).hexdigest() for i in options.images]
    return _digest(request)


@attrs.frozen(kw_only=True)
class _Record:
    session: str
    digest: str
    op: str
    expires: float


class IdempotencyRecords:
    """The keys a local fleet has seen (rules 1-4), on the clock the caller passes (``now``).

    Call :meth:`find` first; when it returns ``None``, create the session and :meth:`record`
    it with no checkpoint in between (so two requests with one key cannot both create one).
    """

    def __init__(
        self, *, ttl: float = DEFAULT_IDEMPOTENCY_TTL, max_keys: int = DEFAULT_MAX_KEYS
    ) -> None:
        self.ttl = ttl
        self.max_keys = max_keys
        # Insertion order is expiry order (one ttl for all): the oldest is first.
        self._records: collections.OrderedDict[tuple[Hashable, str], _Record] = (
            collections.OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._records)

    def _expire(self, now: float) -> None:
        while self._records:
            first = next(iter(self._records.values()))
            if first.expires > now:
                break
            self._records.popitem(last=False)

    def find(self, scope: Hashable, key: str, digest: str, op: str, now: float) -> str | None:
        """The session ``key`` created for ``scope``, or ``None`` (a new request);
        ``IdempotencyConflictError`` when the key was used for another request (rule 2)."""
        self._expire(now)
        record = self._records.get((scope, key))
        if record is None:
            return None
        if record.digest != digest or record.op != op:
            raise IdempotencyConflictError(key, op)
        return record.session

    def record(
        self, scope: Hashable, key: str, session: str, digest: str, op: str, now: float
    ) -> None:
        """Remember that ``key`` created (or continued) ``session``."""
        self._expire(now)
        self._records[(scope, key)] = _Record(
            session=session, digest=digest, op=op, expires=now + self.ttl
        )
        self._records.move_to_end((scope, key))
        while len(self._records) > self.max_keys:
            self._records.popitem(last=False)
