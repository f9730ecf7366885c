"""Many sessions in one process: a fleet with a cap on live CLIs, and subscriptions to them.

::

    async with open_fleet(max_live=4) as fleet:
        session = await fleet.open(ExecuteParams(prompt="..."))
        async with session.subscribe() as events:
            async for event in events:
                ...
        transcript = await session.result()

:func:`open_fleet` yields a :class:`Fleet`; each session it runs is a :class:`FleetSession`,
whose events any number of :class:`Subscription` s follow: from a ``last_seq``, replayed
exactly, or a :class:`ResyncRequired` when the replay buffer no longer holds them.
:class:`FleetStatistics` is what ``fleet.statistics()`` returns. Serve a fleet to websocket
clients with ``claude_trio.gateway``; run one across machines with ``claude_trio.cluster``.

:class:`SessionHost` and :class:`SessionHandle` are the interface every host of sessions
implements (the local fleet, the Redis fleet, the gateway client): code written against them
runs on any of the three; ``claude_trio.testing.run_host_conformance`` checks a host of your own.
"""

from claude_trio.actors.fanout.fleet import (
    Fleet,
    FleetSession,
    FleetStatistics,
    ResyncRequired,
    Subscription,
    open_fleet,
)
from claude_trio.actors.fanout.hosts import SessionHandle, SessionHost

__all__ = [
    "Fleet",
    "FleetSession",
    "FleetStatistics",
    "ResyncRequired",
    "SessionHandle",
    "SessionHost",
    "Subscription",
    "open_fleet",
]
