"""Rule 2's stream entries (``protocol/cluster/records.py``): how a worker groups a batch of
events into entries (``entry_runs``) and how any reader takes an entry apart again
(``entry_texts``, ``entry_first_seq``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.protocol.cluster.records import (
    ENTRY_CHARS,
    entry_first_seq,
    entry_runs,
    entry_texts,
)
from claude_trio.protocol.errors import RemoteProtocolError

batches = st.lists(
    st.tuples(st.integers(1, 3), st.integers(1, ENTRY_CHARS + 10)), min_size=0, max_size=60
)


@given(batches)
def test_runs_are_consecutive_seqs_of_at_most_entry_chars(steps: list[tuple[int, int]]) -> None:
    seqs, sizes, at = [], [], 0
    for step, size in steps:  # seqs rising by 1 (mostly) or more (a gap)
        at += step
        seqs.append(at)
        sizes.append(size)
    runs = entry_runs(seqs, sizes)
    assert sum(runs) == len(seqs)
    assert all(run > 0 for run in runs)
    start = 0
    for run in runs:
        held = seqs[start : start + run]
        assert held == list(range(held[0], held[0] + run))  # consecutive
        text = sum(sizes[start : start + run]) + run - 1  # joined by newlines
        assert run == 1 or text <= ENTRY_CHARS
        following = start + run
        if following < len(seqs) and seqs[following] == held[-1] + 1:
            # The next one did not fit: as few entries as the rule allows.
            assert text + 1 + sizes[following] > ENTRY_CHARS
        start = following


def test_an_entry_is_taken_apart_into_its_events() -> None:
    assert entry_texts("7-0", {"e": "a", "t": "1"}) == [(7, "a")]
    assert entry_texts("7-0", {"e": "a\nb\nc", "t": "1", "s": "5"}) == [
        (5, "a"),
        (6, "b"),
        (7, "c"),
    ]
    assert entry_first_seq("7-0", {"e": "a\nb\nc", "s": "5"}) == 5
    assert entry_first_seq("7-0", {"e": "a"}) == 7
    with pytest.raises(RemoteProtocolError, match="2 event texts for seqs 5 to 7"):
        entry_texts("7-0", {"e": "a\nb", "s": "5"})
    with pytest.raises(RemoteProtocolError, match="bad first seq"):
        entry_texts("7-0", {"e": "a", "s": "x"})
    with pytest.raises(RemoteProtocolError, match="not an event entry id"):
        entry_texts("7-1", {"e": "a"})
    with pytest.raises(RemoteProtocolError, match="no event text"):
        entry_texts("7-0", {"t": "1"})
