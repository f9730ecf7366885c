"""Pages of the wire ``list`` op (pure): a listing of sessions, oldest first, cut into pages of
at most ``limit`` with a cursor to ask for the next one.

The cursor is the creation time and id of the last session a page held
(``"<created_at> <session>"``): the next page starts right after that session in the listing
of the moment, so sessions opened meanwhile (newer: at the end) are reached and none is shown
twice; when that session is no longer listed (forgotten, or past the cluster's listing bound),
the next page starts at the first session created after it.

Rule: a listing read in pages holds every session that was listed through all of the reads,
once, in order (``tests/protocol/test_listing.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from claude_trio.protocol.fanout.wire_frames import SessionInfo

__all__ = ["LIST_PAGE_MAX", "check_cursor", "cursor_of", "list_request_problem", "page"]

LIST_PAGE_MAX = 1000
"""The most sessions one ``list`` reply holds when the op asks for a page (its ``limit``)."""


def cursor_of(info: SessionInfo) -> str:
    """The cursor that asks for the sessions after ``info``."""
    return f"{info.created_at!r} {info.session}"


def check_cursor(cursor: str) -> tuple[float, str]:
    """The creation time and session id a cursor names; ``ValueError`` saying what is wrong."""
    created, _, session = cursor.partition(" ")
    try:
        at = float(created)
    except ValueError:
        at = math.nan
    if not session or not math.isfinite(at):
        raise ValueError(
            "not a cursor of this server: send the next_cursor of the previous sessions frame"
        )
    return at, session


def list_request_problem(cursor: object, limit: object) -> str | None:
    """What is wrong with a ``list`` op's ``cursor`` and ``limit`` (None: nothing)."""
    if limit is not None and not (type(limit) is int and 1 <= limit <= LIST_PAGE_MAX):
        return f"limit={limit!r}: expected a whole number, 1 to {LIST_PAGE_MAX}"
    if cursor is None:
        return None
    if not isinstance(cursor, str) or len(cursor) > 400:
        return f"cursor={cursor!r:.80}: expected a string (a next_cursor) of at most 400 characters"
    try:
        check_cursor(cursor)
    except ValueError as exc:
        return f"cursor={cursor!r:.80}: {exc}"
    return None


def page(
    listing: Sequence[SessionInfo], cursor: str | None, limit: int | None
) -> tuple[tuple[SessionInfo, ...], str | None]:
    """The page of ``listing`` after ``cursor`` (from the start for None) of at most ``limit``
    sessions (all for None), and the cursor of the next page (None when none is left)."""
    start = 0
    if cursor is not None:
        at, session = check_cursor(cursor)
        start = next(
            (i + 1 for i, info in enumerate(listing) if info.session == session),
            next((i for i, info in enumerate(listing) if info.created_at > at), len(listing)),
        )
    rest = listing[start:]
    if limit is None or len(rest) <= limit:
        return tuple(rest), None
    shown = tuple(rest[:limit])
    return shown, cursor_of(shown[-1])
