"""Fair slot grants: who gets the next of a fleet's ``max_live`` CLI slots (pure, no trio).

Rules:

1. At most ``max_live`` slots are held at once. A request is granted at once when a slot is
   free; otherwise it waits.
2. Waiting requests are grouped by **owner** (whoever asked: a gateway client, or ``None`` for
   the fleet's own caller). A freed slot goes to the owners in turn (round robin), and within
   one owner to its oldest request. So an owner with one request waits behind at most one
   request of each other owner, however many those others queued; with a single owner the
   order is simply the order of the requests.
3. A freed slot is handed straight to the next request (the count of held slots does not
   drop and rise again), so nobody can take it in between.
4. A waiting request can be withdrawn (an abort before it started); a granted one is released.
"""

from __future__ import annotations

import collections
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class SlotQueue(Generic[K]):
    """Slots granted to requests ``K`` (any hashable key), fairly between owners."""

    def __init__(self, max_live: int) -> None:
        self.max_live = max_live
        self._held: dict[K, Hashable] = {}  # granted request -> its owner
        self._waiting: dict[Hashable, collections.OrderedDict[K, None]] = {}
        self._turns: collections.deque[Hashable] = collections.deque()  # owners, next first
        self._held_by: collections.Counter[Hashable] = collections.Counter()
        self._waiting_count = 0

    # -- counts -------------------------------------------------------------------------------

    @property
    def live(self) -> int:
        return len(self._held)

    @property
    def waiting(self) -> int:
        return self._waiting_count

    def live_of(self, owner: Hashable) -> int:
        return self._held_by[owner]

    def waiting_of(self, owner: Hashable) -> int:
        queue = self._waiting.get(owner)
        return len(queue) if queue else 0

    # -- transitions --------------------------------------------------------------------------

    def request(self, key: K, owner: Hashable) -> bool:
        """Ask for a slot: ``True`` when granted now, ``False`` when ``key`` waits (rule 1)."""
        if key in self._held or any(key in q for q in self._waiting.values()):
            raise ValueError(f"{key!r} already asked for a slot")
        if len(self._held) < self.max_live:
            self._grant(key, owner)
            return True
        queue = self._waiting.get(owner)
        if queue is None:
            queue = self._waiting[owner] = collections.OrderedDict()
            self._turns.append(owner)
        queue[key] = None
        self._waiting_count += 1
        return False

    def release(self, key: K) -> K | None:
        """``key`` gives its slot back; returns the request it is handed to, if any (rule 3)."""
        owner = self._held.pop(key)
        self._held_by[owner] -= 1
        if not self._held_by[owner]:
            del self._held_by[owner]
        if not self._turns:
            return None
        next_owner = self._turns.popleft()
        queue = self._waiting[next_owner]
        granted, _ = queue.popitem(last=False)
        self._waiting_count -= 1
        if queue:
            self._turns.append(next_owner)  # its next request waits for the others' turns
        else:
            del self._waiting[next_owner]
        self._grant(granted, next_owner)
        return granted

    def withdraw(self, key: K, owner: Hashable) -> None:
        """A waiting ``key`` gives up (rule 4)."""
        queue = self._waiting[owner]
        del queue[key]
        self._waiting_count -= 1
        if not queue:
            del self._waiting[owner]
            self._turns.remove(owner)

    def _grant(self, key: K, owner: Hashable) -> None:
        self._held[key] = owner
        self._held_by[owner] += 1
