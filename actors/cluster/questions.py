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
from claude_trio.protocol.cluster.records import (
    decode_event_text,
    entry_texts,
    event_id,
    is_final,
    last_stored,
)
from claude_trio.protocol.fanout.codec import text_kind
from claude_trio.protocol.fanout.pending import still_pending
from claude_trio.protocol.session.events import (
    Aborted,
    Error,
    Event,
    Result,
    UserInputRequest,
    UserInputResolved,
)

__all__ = ["QUESTION_KINDS", "pending_questions"]

_FINAL_KINDS = frozenset({Result.kind, Aborted.kind, Error.kind})

#: The kinds of stored event that can change what is pending or end an execution (the rest
#: need not be decoded to know the questions).
QUESTION_KINDS = frozenset(
    {
        UserInputRequest.kind,
        UserInputResolved.kind,
        *_FINAL_KINDS,
    }
)


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
    ``limit`` entries, the replay bound). When the stream's last event ends the execution
    nothing is pending and nothing more is read; otherwise only the events whose kind can
    change what is pending are decoded."""
    stream = keys.events(sid)
    last = last_stored(await redis.xrevrange(stream, "+", "-", count=1))
    if last is not None:
        seq, text = last
        if (
            seq >= first_seq
            and text_kind(text) in _FINAL_KINDS
            and is_final(decode_event_text(text))
        ):
            return []
    entries = await redis.xrange(stream, event_id(first_seq), "+", count=limit)
    events: list[Event] = []
    for entry in entries:
        for seq, text in entry_texts(str(entry.identifier), entry.field_values):
            kind = text_kind(text)
            if seq >= first_seq and (kind is None or kind in QUESTION_KINDS):
                events.append(decode_event_text(text))
    return still_pending(events, lambda event: event, through=through)
