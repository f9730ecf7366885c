"""A gateway's ``governor`` op: the host's fleet governor figures, and their changes pushed to
the connections that follow them (``protocol/fanout/wire.py``).

The gateway holds one :class:`GovernorWatch` (``serve_gateway`` runs it in its nursery). While
at least one connection follows the figures, it reads them from the host every
:data:`GOVERNOR_FOLLOW_INTERVAL` (``ServedHost.describe``: a local fleet's governor, or the
figures a cluster's workers share in Redis) and offers them to every follower whose last figures
differ. A :class:`GovernorFollower` keeps only the latest figures not yet sent (a client that is
behind skips to the newest, never queues them) and wakes its connection's writer, which asks
:meth:`GovernorFollower.next_frame` after the replies, before the sessions' events.

Channels: none; each follower is a slot of one. Cancellation: ``run`` waits for a follower,
for the host and for the next round; it ends with the gateway's nursery. Error handling: a
round whose read fails (a cluster's Redis down) is logged once and skipped; the followers keep
the figures they have until a read succeeds.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from claude_trio.actors.fanout.hosts import ServedHost
from claude_trio.protocol.fanout.governor import GovernorFigures
from claude_trio.protocol.fanout.wire import GovernorFrame, encode_frame

__all__ = ["GOVERNOR_FOLLOW_INTERVAL", "GovernorFollower", "GovernorWatch", "host_governor"]

log = logging.getLogger("claude_trio.actors.fanout.gateway")

GOVERNOR_FOLLOW_INTERVAL = 0.5
"""Seconds between two reads of the host's governor figures while a connection follows them:
a change reaches the clients within about this long."""

_UNSENT = object()


async def host_governor(host: ServedHost) -> GovernorFigures | None:
    """The figures of ``host``'s governor now, as its ``hello`` says them."""
    return (await host.describe()).governor


class GovernorFollower:
    """One connection's following of the figures: the latest not yet sent, if any."""

    def __init__(
        self, watch: GovernorWatch, shown: GovernorFigures | None, notify: Callable[[], None]
    ) -> None:
        self._watch = watch
        #: The figures the client was last sent (the op's answer, then each change).
        self.shown = shown
        self._pending: object = _UNSENT
        self._notify = notify

    def offer(self, figures: GovernorFigures | None) -> None:
        """The watch read ``figures``: send them unless the client has them already."""
        if figures == self.shown:
            self._pending = _UNSENT
        elif self._pending is _UNSENT or figures != self._pending:
            self._pending = figures
            self._notify()  # once per change: the writer reads the latest

    def next_frame(self) -> str | None:
        """The ``governor`` frame to send now (a null ``id``), encoded; None when none."""
        figures = self._pending
        if figures is _UNSENT:
            return None
        assert figures is None or isinstance(figures, GovernorFigures)
        self._pending = _UNSENT
        self.shown = figures
        return encode_frame(GovernorFrame(id=None, governor=figures))

    def close(self) -> None:
        """Stop following (the client said ``"follow": false``, or the connection ended)."""
        self._watch.leave(self)


class GovernorWatch:
    """The gateway's one reader of its host's governor figures (see the module docstring).
    ``read``: the figures now (``(await host.describe()).governor``)."""

    def __init__(
        self,
        read: Callable[[], Awaitable[GovernorFigures | None]],
        *,
        interval: float = GOVERNOR_FOLLOW_INTERVAL,
    ) -> None:
        self._read = read
        self._interval = interval
        self._followers: dict[GovernorFollower, None] = {}
        self._wanted = trio.Event()
        self._failing = False

    async def figures(self) -> GovernorFigures | None:
        """The figures now, read from the host (the ``governor`` op's answer)."""
        return await self._read()

    def follow(self, shown: GovernorFigures | None, notify: Callable[[], None]) -> GovernorFollower:
        """A new follower, whose client was just sent ``shown``; ``notify`` wakes its writer."""
        follower = GovernorFollower(self, shown, notify)
        self._followers[follower] = None
        self._wanted.set()
        return follower

    def leave(self, follower: GovernorFollower) -> None:
        self._followers.pop(follower, None)

    @property
    def followers(self) -> int:
        """How many connections follow the figures now."""
        return len(self._followers)

    async def run(self) -> None:
        """Read and offer the figures every ``interval`` while anyone follows them."""
        while True:
            if not self._followers:
                self._wanted = trio.Event()
                await self._wanted.wait()
            await trio.sleep(self._interval)
            try:
                figures = await self._read()
            except Exception as exc:  # logged (its traceback once); the next round tries again
                if not self._failing:
                    log.warning("gateway: cannot read the governor figures: %s", exc, exc_info=True)
                self._failing = True
                continue
            if self._failing:
                log.info("gateway: the governor's figures can be read again")
                self._failing = False
            for follower in list(self._followers):
                follower.offer(figures)
