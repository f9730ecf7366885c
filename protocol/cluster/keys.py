"""The Redis key names of claude-trio (pure, no I/O).

Rules:

1. **One prefix.** Every key starts with ``prefix`` (default ``ct``), so one Redis can serve
   several deployments side by side.
2. **Hash tags by session.** Every key that belongs to one session carries the session id in
   braces (``ct:tx:{<sid>}:...``): on Redis Cluster all of a session's keys live in one slot, so
   a script may touch them together. Keys that index many sessions (a project's session list)
   are tagged by what they index instead.
3. **Quoting.** Every caller-given part (session id, project key, subpath) is percent-quoted
   with no safe characters, so ``:``, ``{``, ``}`` and ``%`` inside it never change where a key
   ends or which slot it hashes to, and two different parts never give the same key.
"""

from __future__ import annotations

import functools
from urllib.parse import quote

import attrs

__all__ = ["DEFAULT_PREFIX", "RedisKeys", "check_prefix"]

DEFAULT_PREFIX = "ct"


@functools.lru_cache(maxsize=4096)  # a worker names a session's keys for each of its writes
def _q(part: str) -> str:
    return quote(part, safe="")


def check_prefix(prefix: object) -> str:
    """The prefix, or ``ValueError`` naming what is wrong with it."""
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(f"the Redis key prefix must be a non-empty string, got {prefix!r}")
    if any(c in prefix for c in "{}:") or not prefix.isprintable() or " " in prefix:
        raise ValueError(
            f"the Redis key prefix {prefix!r} must not contain '{{', '}}', ':' or spaces"
        )
    return prefix


@attrs.frozen
class RedisKeys:
    """Key names under one prefix."""

    prefix: str = attrs.field(default=DEFAULT_PREFIX, converter=check_prefix)

    # --- transcripts (the SDK's SessionStore) ---------------------------------------------

    def transcript(self, project_key: str, session_id: str, subpath: str | None) -> str:
        """The list of a transcript's entries (JSON, in append order)."""
        return f"{self.prefix}:tx:{{{_q(session_id)}}}:{_q(project_key)}:{_q(subpath or '')}"

    def transcript_uuids(self, project_key: str, session_id: str, subpath: str | None) -> str:
        """The set of entry uuids a transcript holds (appends are idempotent by uuid)."""
        return self.transcript(project_key, session_id, subpath) + ":uuids"

    def subkeys(self, project_key: str, session_id: str) -> str:
        """The set of a session's subpaths (its subagents' transcripts)."""
        return f"{self.prefix}:txsub:{{{_q(session_id)}}}:{_q(project_key)}"

    def mtime(self, project_key: str, session_id: str) -> str:
        """The session's last storage write time (epoch ms, from the server's clock)."""
        return f"{self.prefix}:txmtime:{{{_q(session_id)}}}:{_q(project_key)}"

    def project_sessions(self, project_key: str) -> str:
        """Sorted set of a project's session ids, scored by their mtime."""
        return f"{self.prefix}:proj:{{{_q(project_key)}}}:sessions"

    def project_summaries(self, project_key: str) -> str:
        """Hash of a project's session summaries (session id -> JSON)."""
        return f"{self.prefix}:proj:{{{_q(project_key)}}}:summaries"

    # --- the cluster (protocol/cluster/records.py) ------------------------------------------------

    @property
    def jobs(self) -> str:
        """The stream of executions to run, read by the workers' consumer group."""
        return f"{self.prefix}:jobs"

    @property
    def workers_group(self) -> str:
        return "workers"

    @property
    def sessions_index(self) -> str:
        """Sorted set of every session id, scored by creation time (for listings)."""
        return f"{self.prefix}:sessions"

    @property
    def workers(self) -> str:
        """Sorted set of worker ids, scored by their last heartbeat (epoch ms)."""
        return f"{self.prefix}:workers"

    def session(self, session_id: str) -> str:
        """The session record (a hash)."""
        return f"{self.prefix}:sess:{{{_q(session_id)}}}"

    def events(self, session_id: str) -> str:
        """The session's event stream (entry id = ``<seq>-0``)."""
        return f"{self.prefix}:ev:{{{_q(session_id)}}}"

    def reply(self, session_id: str, request_id: str) -> str:
        """Where one command's outcome is put (a list popped with a deadline)."""
        return f"{self.prefix}:reply:{{{_q(session_id)}}}:{_q(request_id)}"

    def commands(self, worker_id: str) -> str:
        """A worker's command stream."""
        return f"{self.prefix}:cmd:{{{_q(worker_id)}}}"

    def alive(self, worker_id: str) -> str:
        """Set while the worker heartbeats (expires when it stops)."""
        return f"{self.prefix}:alive:{{{_q(worker_id)}}}"

    def idempotency(self, scope: str, key: str) -> str:
        """Which session an ``open`` / ``continue`` idempotency key of ``scope`` (a principal,
        ``""`` for none) created, and the request's digest (a string, set to expire)."""
        return f"{self.prefix}:idem:{{{_q(scope)}:{_q(key)}}}"

    @property
    def active(self) -> str:
        """The set of the cluster's sessions not ended when last counted: the server-wide
        session limit counts it on every gateway (as ``owned`` for a client)."""
        return f"{self.prefix}:active"

    def owned(self, principal: str, host: str) -> str:
        """The set of the sessions a client (a gateway principal from one address) opened or
        continued and that had not ended when last counted: the per-client limits count it on
        every gateway (members that ended are removed as they are counted)."""
        return f"{self.prefix}:owned:{{{_q(principal)}}}:{_q(host)}"

    def pushes(self, session_id: str) -> str:
        """The pushes accepted in the session's current execution (for a move)."""
        return f"{self.prefix}:pushes:{{{_q(session_id)}}}"

    # --- the shared fleet governor (actors/cluster/governor.py) -------------------------------

    def governor(self, part: str) -> str:
        """One of the shared governor's keys (``state``, ``leases``, ``spent``, ``nodes``,
        ``caps``, or ``seen:`` and a report id): all carry the one hash tag ``{governor}``,
        so each of its scripts touches the keys of one slot on a Redis Cluster."""
        return f"{self.prefix}:gov:{{governor}}:{_q(part)}"
