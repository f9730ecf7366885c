"""Serve sessions to websocket clients: the gateway (``claude-trio serve`` runs one).

:func:`serve_gateway` serves a fleet (``claude_trio.fleet``) or a Redis cluster
(``claude_trio.cluster``) over websockets, to the :class:`Principal` s its tokens name, within
its :class:`GatewayLimits`. Clients connect with ``claude_trio.client.connect_gateway``; the
wire format is ``claude_trio.protocol.fanout.wire``.
"""

from claude_trio.actors.fanout.gateway import GatewayLimits, serve_gateway
from claude_trio.protocol.fanout.remote import Principal

__all__ = ["GatewayLimits", "Principal", "serve_gateway"]
