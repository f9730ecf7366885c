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
4. Merging a run of n deltas is linear in their total text: the pieces are collected and joined
   once (:func:`compact`, and :class:`~claude_trio.protocol.fanout.replay.SubscriberQueue`, which
   joins a run only when the subscriber takes it). Never concatenate pairwise in a loop: that copies
   the text so far at every step.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from claude_trio.protocol.session.events import Event, TextDelta, ThinkingDelta


def can_merge(earlier: Event, later: Event) -> bool:
    """True when ``later`` may be merged into ``earlier`` (rule 1)."""
    return (
        isinstance(earlier, TextDelta | ThinkingDelta)
        and type(later) is type(earlier)
        and earlier.message_id == later.message_id
        and earlier.index == later.index
        and earlier.turn == later.turn
        and earlier.is_subagent == later.is_subagent
        and earlier.subagent_task_id == later.subagent_task_id
    )


def merged(first: TextDelta | ThinkingDelta, texts: Iterable[str], last_seq: int) -> Event:
    """One delta for a run that starts with ``first``: the texts joined once (rules 2-4)."""
    return attrs.evolve(first, text="".join(texts), seq=last_seq, raw=None)


def merge_deltas(earlier: Event, later: Event) -> Event | None:
    """``earlier`` and ``later`` as one delta (rules 1-3), or ``None`` if they may not merge."""
    if not can_merge(earlier, later):
        return None
    assert isinstance(earlier, TextDelta | ThinkingDelta)
    assert isinstance(later, TextDelta | ThinkingDelta)
    return merged(earlier, (earlier.text, later.text), later.seq)


def compact(events: Iterable[Event]) -> list[Event]:
    """``events`` with every run of mergeable adjacent deltas merged into one (linear)."""
    out: list[Event] = []
    run: list[Event] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            deltas = [e for e in run if isinstance(e, TextDelta | ThinkingDelta)]
            assert len(deltas) == len(run)
            out.append(merged(deltas[0], (d.text for d in deltas), deltas[-1].seq))
        run.clear()

    for event in events:
        if run and can_merge(run[0], event):
            run.append(event)
        else:
            flush()
            run.append(event)
    flush()
    return out
