"""Many sessions in one process: a fleet with a cap on live CLIs, and subscriptions to them.

::

    async with open_fleet(max_live=4) as fleet:
        session = await fleet.start(ExecuteParams(prompt="..."))
        with session.subscribe(None, max_queue=1000) as events:
            async for event in events:
                ...

:func:`open_fleet` yields a :class:`Fleet`; each session it runs is a :class:`FleetSession`,
whose events any number of :class:`Subscription` s follow: from a ``last_seq``, replayed
exactly, or a :class:`ResyncRequired` when the replay buffer no longer holds them.
:class:`FleetStatistics` is what ``fleet.statistics()`` returns. Serve a fleet to websocket
clients with ``claude_trio.gateway``; run one across machines with ``claude_trio.cluster``.
"""

from claude_trio.actors.fleet import (
    Fleet,
    FleetSession,
    FleetStatistics,
    ResyncRequired,
    Subscription,
    open_fleet,
)

__all__ = [
    "Fleet",
    "FleetSession",
    "FleetStatistics",
    "ResyncRequired",
    "Subscription",
    "open_fleet",
]
