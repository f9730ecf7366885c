"""Sessions across machines, on Redis (``pip install claude-trio[redis]``).

Workers (:func:`serve_worker`, configured by :class:`WorkerConfig`; ``claude-trio worker``)
claim executions from the cluster and run them; a :class:`RedisFleet`
(:func:`open_redis_fleet`) starts, follows and steers them from anywhere, and a gateway serves
it (``claude-trio serve --redis``). :class:`RedisSessionStore` keeps conversations' transcripts
in Redis, so any worker can continue one.
"""

from claude_trio.actors.cluster.fleet import RedisFleet, RedisSession, open_redis_fleet
from claude_trio.actors.cluster.store import RedisSessionStore
from claude_trio.actors.cluster.worker import WorkerConfig, WorkerStatistics, serve_worker

__all__ = [
    "RedisFleet",
    "RedisSession",
    "RedisSessionStore",
    "WorkerConfig",
    "WorkerStatistics",
    "open_redis_fleet",
    "serve_worker",
]
