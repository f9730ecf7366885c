"""A long-running server's heap, as the garbage collector sees it.

A claude-trio process imports a lot (the SDK, MCP, pydantic, the protocol's tables): about
100,000 objects that live as long as the process. CPython's full collection walks every
tracked object, so on a small machine each one pauses the whole process (every session's
events, every client's frames) for tens to hundreds of milliseconds, and a busy gateway runs
one every few seconds. :func:`freeze_startup_heap`, called once a server has started, moves
what is alive then into the collector's permanent generation (``gc.freeze``): later full
collections walk only what was made since. ``claude-trio serve`` and ``worker`` call it; an
application that embeds a gateway or a worker may call it once its own start-up is done (it
is process-wide, so the choice is the application's).

Channels: none. Cancellation: none (synchronous, one collection). Error handling: none
raised.
"""

from __future__ import annotations

import gc

from claude_trio.protocol.fanout import codec

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> int:
    """Collect once, then keep every object alive now out of later collections' walks;
    returns how many objects are frozen (``gc.get_freeze_count()``). Objects frozen stay
    alive until the process ends, unless ``gc.unfreeze()`` is called. The event codec's
    plans (``codec.prepare``) are made first, so they are frozen with the rest and the first
    events served do not wait for them."""
    codec.prepare()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
