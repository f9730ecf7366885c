"""Who owns a session opened through a gateway (shared by the gateway and the cluster's
fleet, ``actors/cluster/fleet.py``)."""

from __future__ import annotations

from collections.abc import Hashable

import attrs

__all__ = ["GatewayOwner", "key_scope", "principal_of"]


@attrs.frozen
class GatewayOwner:
    """The ``owner`` of a session opened through a gateway (``Fleet.start(owner=...)``,
    ``FleetSession.owner``): the principal it belongs to, and the peer address its
    per-client limits and slot turns are counted under
    (``fleet.owner_statistics(GatewayOwner("alice", "10.0.0.7"))``)."""

    principal: str
    host: str


def principal_of(owner: object) -> str | None:
    """The principal a session belongs to: its owner's, when a gateway opened it (a
    :class:`GatewayOwner`); ``None`` otherwise."""
    return owner.principal if isinstance(owner, GatewayOwner) else None


def key_scope(owner: Hashable) -> Hashable:
    """Whose idempotency keys a request's are (``protocol/fanout/idempotency.py`` rule 3):
    the principal's for a gateway's client (any of its connections), else the owner's."""
    return owner.principal if isinstance(owner, GatewayOwner) else owner
