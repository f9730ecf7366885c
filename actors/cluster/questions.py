"""The user-input questions of a cluster session still pending, re-shown to a client that
attaches past them (as a local fleet's subscription does, ``actors/fanout/subscription.py``).

A gateway holds no session state, so it reads them from the session's stream: the current
execution's ``user_input_request`` events with no ``user_input_resolved`` (or final event)
stored after them.
Those at or before the seq the client attached after come ahead of its replay; later ones are
in the replay anyway.

Channels: none. Cancellation: one ``XRANGE``. Error handling: the caller's (a Redis error
drops the subscription, as any follower read does).
"""

from __future__ import annotations

import coredis

from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import decode_event, event_id, is_final
from claude_trio.protocol.session.events import Event, UserInputRequest, UserInputResolved

__all__ = ["pending_questions"]


async def pending_questions(
    redis: coredis.Redis[str],
    keys: RedisKeys,
    sid: str,
    *,
    first_seq: int,
    through: int,
    limit: int,
) -> list[Event]:
    """The session's questions pending now, asked in its current execution (from
    ``first_seq``) at or before ``through``, oldest first (the stream read holds at most
    ``limit`` entries, the replay bound)."""
    entries = await redis.xrange(keys.events(sid), event_id(first_seq), "+", count=limit)
    pending: dict[str, Event] = {}
    for entry in entries:
        event = decode_event({str(k): str(v) for k, v in entry.field_values.items()})
        if isinstance(event, UserInputRequest):
            pending[event.request_id] = event
        elif isinstance(event, UserInputResolved):
            pending.pop(event.request_id, None)
        elif is_final(event):  # the execution ended: nothing is pending any more
            pending.clear()
    return [event for event in pending.values() if event.seq <= through]
