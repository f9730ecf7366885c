"""A server's start-up objects leave the garbage collector's walks (``actors/heap.py``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from claude_trio.gateway import freeze_startup_heap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_every_object_alive_at_the_call_is_frozen_and_later_ones_are_not(
    unfrozen: None,
) -> None:
    gc.collect()  # what an earlier test left for the collector is not "alive at the call"
    before = {id(o) for o in gc.get_objects()}
    frozen = freeze_startup_heap()
    assert frozen == gc.get_freeze_count() >= len(before) // 2
    # What a full collection walks from now on: only what was made since.
    made_after = [[i] for i in range(1000)]
    walked = gc.get_objects()
    assert len(walked) < len(before) // 2
    ids = {id(o) for o in walked}
    assert all(id(item) in ids for item in made_after)
