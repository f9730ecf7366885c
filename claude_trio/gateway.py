"""Serve sessions to websocket clients: the gateway (``claude-trio serve`` runs one).

:func:`serve_gateway` serves a fleet (``claude_trio.fleet``) or a Redis cluster
(``claude_trio.cluster``) over websockets, to the :class:`Principal` s its tokens name, within
its :class:`GatewayLimits`. Clients connect with ``claude_trio.client.connect_gateway``; the
wire format is ``claude_trio.protocol.fanout.wire``. :func:`freeze_startup_heap`, called once a
server has started, keeps the objects of its start-up out of the garbage collector's later
walks (full collections otherwise pause every client's frames for tens of milliseconds).
"""

from claude_trio.actors.fanout.gateway import GatewayLimits, serve_gateway
from claude_trio.actors.heap import freeze_startup_heap
from claude_trio.protocol.fanout.remote import Principal

__all__ = ["GatewayLimits", "Principal", "freeze_startup_heap", "serve_gateway"]
