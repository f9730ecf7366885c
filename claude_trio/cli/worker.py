"""``claude-trio worker``: a node that runs the sessions of a Redis cluster.

    claude-trio worker --redis redis://127.0.0.1:6379/0 --offline --max-live 4

It claims executions from the cluster's jobs stream while its fleet has a free slot, runs them,
stores their events in Redis for the gateways (``claude-trio serve --redis``), and mirrors the
CLIs' transcripts to Redis (``RedisSessionStore``), so a conversation can continue on any
worker. ``--offline`` runs every session against the built-in offline model, as for ``serve``.
The fleet governor (``--no-governor``, ``--starts-per-second``, ``--fleet-budget``,
``--on-budget``) is shared by every worker in Redis (``actors/cluster/governor.py``): they
pause together on a rate limit, share one concurrency limit and one budget;
``--local-governor`` governs this worker alone.
Ctrl-C (or SIGTERM) stops claiming and gives running executions ``--drain-grace`` seconds;
a second one stops at once. Jobs a worker claimed and never finished stay pending in the
consumer group.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import uuid
from typing import TextIO

import trio

from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.actors.heap import freeze_startup_heap
from claude_trio.cli.args import (
    EXIT_OK,
    EXIT_SESSION_ERROR,
    EXIT_USAGE,
    NO_CREDENTIALS_MESSAGE,
    has_credentials,
)
from claude_trio.cli.logs import configure_logging
from claude_trio.cli.number_args import governor_config
from claude_trio.cli.serve import _sessions_env
from claude_trio.protocol.errors import RedisUnavailableError, RedisUsageError
from claude_trio.redis_url import check_redis_url, open_redis, persistence_warning

log = logging.getLogger(__name__)


async def run_worker(args: argparse.Namespace, out: TextIO) -> int:
    from claude_trio.actors.cluster.governor import SharedGovernorConfig, shared_governor
    from claude_trio.actors.cluster.move import WatchedStore
    from claude_trio.actors.cluster.store import RedisSessionStore
    from claude_trio.actors.cluster.worker import WorkerConfig, serve_worker
    from claude_trio.actors.session.config import DriverConfig

    worker_id = args.worker_id or f"worker-{uuid.uuid4().hex[:12]}"
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with (
            open_redis(args.redis) as redis,
            _sessions_env(args.offline) as env,
            open_fleet(
                max_live=args.max_live,
                replay_buffer=args.replay_buffer,
                governor=governor_config(args),
                governor_state=None
                if args.local_governor
                else shared_governor(redis, SharedGovernorConfig(node=worker_id)),
                env=env,
                # Each transcript write is mirrored at once (and watched), so a turn moved
                # to another worker continues after its last tool result.
                session_store=(store := WatchedStore(RedisSessionStore(redis))),
                config=DriverConfig(store_flush="eager"),
            ) as fleet,
            trio.open_nursery() as nursery,
        ):
            worker = await nursery.start(
                lambda task_status: serve_worker(
                    redis,
                    fleet,
                    worker_id=worker_id,
                    config=WorkerConfig(
                        stream_max=args.replay_buffer,
                        dead_after=args.dead_after,
                        heartbeat=min(1.0, args.dead_after / 4),
                    ),
                    store=store,
                    task_status=task_status,
                )
            )
            print(f"claude-trio worker {worker.id}: running up to {args.max_live} CLIs", file=out)
            if warning := await persistence_warning(redis, args.redis):
                log.warning(warning, extra={"event": "no_persistence"})
            out.flush()
            frozen = freeze_startup_heap()
            log.info(
                "worker %s: %d objects of the start-up frozen",
                worker.id,
                frozen,
                extra={"event": "heap_frozen", "objects": frozen},
            )
            log.info(
                "worker %s: started",
                worker.id,
                extra={"event": "started", "worker": worker.id, "max_live": args.max_live},
            )
            async for _ in signals:
                break
            worker.stop_claiming()
            async with trio.open_nursery() as stopping:

                async def second_signal() -> None:
                    async for _ in signals:
                        stopping.cancel_scope.cancel()
                        return

                stopping.start_soon(second_signal)
                await worker.wait_idle(trio.current_time() + args.drain_grace)
                stopping.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
    log.info("worker: stopped", extra={"event": "stopped"})
    return EXIT_OK


def worker_command(args: argparse.Namespace) -> int:
    """``claude-trio worker``: the exit code (0; 1 when the Redis cannot be used at start, e.g.
    a TLS certificate that does not verify or a refused password; 2 for a usage error)."""
    errors = sys.stderr
    try:
        check_redis_url(args.redis)
    except RedisUsageError as exc:
        print(f"claude-trio worker: {exc}", file=errors)
        return EXIT_USAGE
    if not args.offline and not has_credentials(os.environ):
        print(NO_CREDENTIALS_MESSAGE, file=errors)
        print("  Or run the built-in offline model:\n      claude-trio worker --offline ...",
              file=errors)  # fmt: skip
        return EXIT_USAGE
    configure_logging(errors, json_lines=args.log_json)
    with contextlib.suppress(KeyboardInterrupt):
        try:
            return trio.run(run_worker, args, sys.stdout)
        except RedisUnavailableError as exc:
            print(f"claude-trio worker: {exc}", file=errors)
            return EXIT_SESSION_ERROR
    return EXIT_OK
