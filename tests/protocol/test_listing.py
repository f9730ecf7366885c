"""Pages of the wire ``list`` op (``protocol/fanout/listing.py``): read page by page while
sessions are opened and forgotten, every session listed through all the reads is shown once,
in order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.protocol.fanout.listing import check_cursor, cursor_of, page
from claude_trio.protocol.fanout.wire_frames import SessionInfo
from claude_trio.protocol.session.usage import ZERO_USAGE


def info(n: int) -> SessionInfo:
    return SessionInfo(
        session=f"s{n:04d}",
        label=None,
        owner=None,
        state="ended",
        executions=1,
        first_seq=1,
        last_seq=3,
        usage=ZERO_USAGE,
        created_at=1_700_000_000.0 + n / 8,
        ended_at=None,
    )


def test_pages_of_a_listing_hold_it_once_in_order() -> None:
    listing = [info(n) for n in range(25)]
    shown, cursor = page(listing, None, 10)
    assert [s.session for s in shown] == [f"s{n:04d}" for n in range(10)]
    assert cursor == cursor_of(listing[9])
    second, cursor = page(listing, cursor, 10)
    third, last = page(listing, cursor, 10)
    assert [*shown, *second, *third] == listing
    assert last is None
    assert page(listing, None, None) == (tuple(listing), None)


def test_the_next_page_starts_after_a_session_no_longer_listed() -> None:
    listing = [info(n) for n in range(10)]
    _, cursor = page(listing, None, 4)  # ends at s0003
    forgotten = [s for s in listing if s.session not in ("s0002", "s0003")]
    rest, _ = page(forgotten, cursor, 10)
    assert [s.session for s in rest] == [f"s{n:04d}" for n in range(4, 10)]


@given(
    st.lists(st.tuples(st.integers(0, 5), st.sets(st.integers(0, 59))), min_size=1, max_size=12),
    st.integers(1, 7),
)
def test_every_session_listed_through_all_reads_is_shown_once(
    changes: list[tuple[int, set[int]]], limit: int
) -> None:
    """Between two pages, some sessions are opened (newest, at the end) and some forgotten."""
    alive = list(range(20))
    opened = 20
    shown: list[str] = []
    cursor: str | None = None
    steps = iter(changes)
    while True:
        got, cursor = page([info(n) for n in alive], cursor, limit)
        shown += [s.session for s in got]
        if cursor is None:
            break
        new, gone = next(steps, (0, set()))
        alive = [n for n in alive if n not in gone] + list(range(opened, opened + new))
        opened += new
    always = [f"s{n:04d}" for n in alive if n < 20]  # listed from the first read to the last
    assert len(shown) == len(set(shown))
    assert shown == sorted(shown)
    assert set(always) <= set(shown)


@pytest.mark.parametrize("cursor", ["", "x", "nan s1", "1.5", "inf s1"])
def test_a_cursor_not_made_by_the_server_is_refused(cursor: str) -> None:
    with pytest.raises(ValueError, match="next_cursor"):
        check_cursor(cursor)
