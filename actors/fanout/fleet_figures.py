"""What a fleet reports of itself: its statistics, one owner's, a served host's load and its
description (``Fleet.statistics``, ``owner_statistics``, ``load``, ``describe``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from claude_trio.protocol.fanout.governor import GovernorFigures

__all__ = ["FleetStatistics", "HostDescription", "HostLoad", "OwnerStatistics"]


@attrs.frozen(kw_only=True)
class FleetStatistics:
    """``live``: sessions holding a slot (their CLI exists); ``waiting``: for a slot;
    ``finished``: executions whose task is done (their CLI gone; remembered or not);
    ``waiting`` counts the executions waiting for the governor's start too."""

    live: int
    waiting: int
    finished: int
    #: The governor's figures (None when the fleet has no governor).
    governor: GovernorFigures | None = None


@attrs.frozen(kw_only=True)
class OwnerStatistics:
    """One owner's sessions: ``live`` (holding a slot), ``waiting`` (for one), and ``active``
    (started and not ended yet: live, waiting, or between the two)."""

    live: int
    waiting: int
    active: int
    #: Of the live ones, those whose first turn waits for the fleet's governor.
    governor_waiting: int = 0


@attrs.frozen(kw_only=True)
class HostLoad:
    """How busy a served host is, overall (``total``) and for one owner (``owner``): what a
    gateway's per-client and server limits count."""

    total: FleetStatistics
    owner: OwnerStatistics


@attrs.frozen(kw_only=True)
class HostDescription:
    """What a gateway's ``hello`` says of the host it serves: its bounds by name (``limits``)
    and, for a cluster, the summary of its workers (``cluster``; ``None`` for one process)."""

    limits: Mapping[str, int]
    cluster: Mapping[str, Any] | None = None
    governor: GovernorFigures | None = None
