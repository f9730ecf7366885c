"""Coalescing deltas: how a slow subscriber's full queue makes room without losing text.

Rules:

1. Only two *adjacent* deltas of the same kind (``text_delta`` with ``text_delta``, ``thinking``
   with ``thinking``) merge, and only when they belong to the same block of the same message: equal
   ``message_id``, ``index``, ``turn``, ``is_subagent`` and ``subagent_task_id``. Adjacent means
   nothing else came between them, so the order of every other event is untouched.
2. The merged delta's ``text`` is the concatenation, and it carries the *later* delta's ``seq``:
   a consumer that remembers the last ``seq`` it saw resumes after everything it received. Seqs
   therefore skip over merged deltas; they still strictly increase.
3. ``raw`` is dropped from a merged delta (it came from two frames).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from .events import Event, TextDelta, ThinkingDelta


def merge_deltas(earlier: Event, later: Event) -> Event | None:
    """``earlier`` and ``later`` as one delta (rules 1-3), or ``None`` if they may not merge."""
    if not (
        isinstance(earlier, TextDelta | ThinkingDelta)
        and type(later) is type(earlier)
        and earlier.message_id == later.message_id
        and earlier.index == later.index
        and earlier.turn == later.turn
        and earlier.is_subagent == later.is_subagent
        and earlier.subagent_task_id == later.subagent_task_id
    ):
        return None
    text = earlier.text + later.text
    return attrs.evolve(earlier, text=text, seq=later.seq, raw=None)


def compact(events: Iterable[Event]) -> list[Event]:
    """``events`` with every run of mergeable adjacent deltas merged into one."""
    out: list[Event] = []
    for event in events:
        merged = merge_deltas(out[-1], event) if out else None
        if merged is None:
            out.append(event)
        else:
            out[-1] = merged
    return out
