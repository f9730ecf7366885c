"""Benchmarks of the Redis mode (``claude-trio worker`` / ``serve --redis``) on a real
``redis-server`` started here, with stand-in CLIs (so what is measured is the coordination).

* **gateway**: one session fanned out by one gateway to ``--clients`` (50) real websocket
  clients (raw wsproto clients, ``bench_gateway.handshake``/``attach``, that read frames off the
  socket and find each delta's timestamp in the bytes without decoding the JSON). The session's
  CLI is ``bench_fanout.PacedTransport``: each text delta carries ``time.perf_counter()`` at the
  moment it was handed to the SDK, held until every client is attached. Two sides, each a
  server process of its own, interleaved over ``--rounds``:
  **in-process** (``open_fleet`` + ``serve_gateway``) and **via Redis** (a worker, ``serve_worker``
  over its own fleet, and a gateway over ``RedisFleet``, in one process as the in-process side
  is, so they have the same CPU; every event goes worker -> ``XADD`` -> the gateway's
  ``XREAD`` -> 50 websockets). Two loads: a burst (``--deltas`` back to back: events/s
  delivered over all clients, the throughput) and a paced run (``--rate`` per second for
  ``--seconds``: latency under a moderate load). Printed: medians per side, the ratio of
  events/s (Redis / in-process), what Redis adds to p50/p99 (from the CLI's frame to the
  client's socket), and the server CPU per 1,000 frames delivered (the side's processes and
  ``redis-server``, read from ``/proc`` from the release to the last delta, in nanoseconds
  from each thread's scheduler statistics: ``bench_proc.cpu_seconds``), and as deployed that
  CPU by process (the gateway, the worker, ``redis-server``) beside the in-process server's;
  for the burst also when each side's first frame reached a client and how long the rest took
  (events/s is the frames over their sum).
* **workers**: ``--executions`` (60) executions of a ``--turn-ms`` (100 ms) turn on 1, 2 and 3
  worker *processes* (``serve_worker`` with ``max_live=2`` fake CLIs each, started from this
  script as children), submitted through a ``RedisFleet`` here: executions per minute, against
  the ideal (slots / turn) and against 1 worker.
* **memory**: Redis ``used_memory`` per finished execution after the 1-worker run, and the
  ``MEMORY USAGE`` of one session's keys (record, event stream).
* **Redis Cluster**: then the gateway's two loads (in-process against as deployed only) and the
  workers again, on a three-master Redis Cluster started here (``open_redis_cluster``: three
  ``redis-server --cluster-enabled yes``; the server CPU counts all three), through coredis's
  cluster client, as ``worker`` and ``serve --redis`` run on one with a ``redis+cluster://``
  URL.

    .venv/bin/python scripts/bench_redis.py [--clients 50] [--deltas 1000] [--rate 200]
        [--seconds 2] [--rounds 8] [--executions 60] [--turn-ms 100]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio
from bench_fanout import PacedTransport
from bench_gateway import OPEN_LIMITS, attach, fake_recording, handshake
from bench_proc import cpu_seconds
from claude_agent_sdk import ClaudeAgentOptions, Transport

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.children import run_child_process
from claude_trio.actors.cluster.fleet import open_redis_fleet
from claude_trio.actors.cluster.worker import WorkerConfig, serve_worker
from claude_trio.actors.fanout.fleet import Subscription, open_fleet
from claude_trio.gateway import freeze_startup_heap
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import stored_events
from claude_trio.redis_url import open_redis
from claude_trio.testing import FakeCLI, FakeTurn, open_redis_cluster, open_redis_server

TOKEN = "bench-redis-token-0123456789"
PARAMS = ExecuteParams(prompt="go")
CONFIG = WorkerConfig(heartbeat=0.5, dead_after=5.0, block=0.5, stream_max=100_000)
MAX_LIVE = 2
FLAT_OUT = 1e9  # a "rate" that never waits
TIMEOUT = 120.0  # a run that takes longer has lost events: a wrong behaviour, not a figure
_HERE = os.path.abspath(__file__)
# A delta's timestamp, preceded by the JSON string's quote or by the previous delta's "|" (when
# deltas were merged), so a number cut at a read's boundary is never taken for one.
# The first bytes each client received, to say what a client that got nothing got instead.
heads: dict[Any, bytes] = {}
_STAMP = re.compile(rb'["|](\d+\.\d{7})\|')


#: The sides of the gateway runs: in-process; via Redis with the worker and the gateway in one
#: process (the same CPU budget as in-process); via Redis as deployed (``serve --redis`` and
#: ``worker`` are processes of their own).
_SIDES = {"in-process": "inproc", "via Redis": "redis", "Redis, 2 procs": "split"}
_CLUSTER_SIDES = {"in-process": "inproc", "Redis Cluster": "split"}
"""On a three-master Redis Cluster: as deployed only (the gateway and the worker as processes
of their own), against the same in-process side."""
_SAID = {
    "via Redis": "one process",
    "Redis, 2 procs": "as deployed",
    "Redis Cluster": "Cluster, as deployed",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the gateway's servers (children) ---------------------------------------------------------


class HeldTransport(PacedTransport):
    """``PacedTransport`` whose turn waits for ``release`` (every client attached first)."""

    def __init__(self, recording: Any, *, count: int, rate: float, release: trio.Event):
        super().__init__(recording, count=count, rate=rate)
        self._release = release

    async def _turn(self, uuid: str | None) -> AsyncIterator[dict[str, Any]]:
        await self._release.wait()
        async for frame in super()._turn(uuid):
            yield frame


async def _wait_go() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stdin:
        await stdin.receive_some(16)


async def gateway_server(mode: str, count: int, rate: float, url: str) -> None:
    """One side's server: prints ``port session_id``, releases the turn on a line on stdin.

    ``inproc``: ``open_fleet`` + ``serve_gateway``; ``redis``: a worker and a gateway over
    ``RedisFleet`` in this one process; ``gateway``: the gateway only (its worker is another
    process, ``worker-server``, which holds the turn; nothing is released here)."""
    recording = await fake_recording(4)
    release = trio.Event()

    def factory(options: ClaudeAgentOptions) -> Transport:
        return HeldTransport(recording, count=count, rate=rate, release=release)

    if mode == "gateway":
        async with AsyncExitStack() as stack:
            redis = await stack.enter_async_context(open_redis(url))
            served = await stack.enter_async_context(open_redis_fleet(redis, block=0.5))
            nursery = await stack.enter_async_context(trio.open_nursery())
            port = await nursery.start(partial(_gateway_of(count), served))
            session = await served.open(PARAMS)
            freeze_startup_heap()  # as claude-trio serve does once started
            print(port, session.id, flush=True)
            await trio.sleep_forever()

    gateway = _gateway_of(count)
    async with AsyncExitStack() as stack:
        fleet = await stack.enter_async_context(
            open_fleet(
                transport_factory=factory, max_live=1, replay_buffer=count + 100, governor=None
            )
        )
        nursery = await stack.enter_async_context(trio.open_nursery())
        served: Any = fleet
        if mode == "redis":
            worker_redis = await stack.enter_async_context(open_redis(url))
            await nursery.start(partial(serve_worker, worker_redis, fleet, config=CONFIG))
            gateway_redis = await stack.enter_async_context(open_redis(url))
            served = await stack.enter_async_context(open_redis_fleet(gateway_redis, block=0.5))
            nursery = await stack.enter_async_context(trio.open_nursery())
        port = await nursery.start(partial(gateway, served))
        session = await served.open(PARAMS)
        freeze_startup_heap()  # as claude-trio serve does once started
        print(port, session.id, flush=True)
        await _wait_go()
        release.set()
        await trio.sleep_forever()


def _gateway_of(count: int) -> Any:
    return partial(
        serve_gateway,
        token=TOKEN,
        allowed_origins=None,
        client_queue=10 * count,
        limits=OPEN_LIMITS,
    )


async def worker_server(count: int, rate: float, url: str) -> None:
    """The worker of the ``gateway`` side: prints ``ready``, releases its turn on stdin."""
    recording = await fake_recording(4)
    release = trio.Event()

    def factory(options: ClaudeAgentOptions) -> Transport:
        return HeldTransport(recording, count=count, rate=rate, release=release)

    async with AsyncExitStack() as stack:
        fleet = await stack.enter_async_context(
            open_fleet(
                transport_factory=factory, max_live=1, replay_buffer=count + 100, governor=None
            )
        )
        redis = await stack.enter_async_context(open_redis(url))
        nursery = await stack.enter_async_context(trio.open_nursery())
        await nursery.start(partial(serve_worker, redis, fleet, config=CONFIG))
        freeze_startup_heap()  # as claude-trio worker does once started
        print("ready", flush=True)
        await _wait_go()
        release.set()
        await trio.sleep_forever()


# -- the clients (this process) ---------------------------------------------------------------


async def _reader(
    port: int,
    session_id: str,
    count: int,
    remaining: list[int],
    all_attached: trio.Event,
    received: list[dict[float, float]],
) -> None:
    """One websocket client: attach, then note when each delta's timestamp first arrives."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    heads[stream] = b""
    async with stream:
        ws = await handshake(stream, TOKEN)
        await attach(stream, ws, session_id)
        remaining[0] -= 1
        if remaining[0] == 0:
            all_attached.set()
        seen: dict[float, float] = {}
        received.append(seen)
        tail = b""
        while len(seen) < count:
            data = await stream.receive_some(1 << 18)
            if not data:
                raise RuntimeError(f"the gateway closed the connection after {len(seen)} deltas")
            now = time.perf_counter()
            if len(heads[stream]) < 600:
                heads[stream] += data[:600]
            chunk = tail + data
            for match in _STAMP.finditer(chunk):
                seen.setdefault(float(match[1]), now)
            tail = chunk[-32:]


async def _first_line(process: Any, what: str) -> str:
    line = b""
    with trio.fail_after(60):
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1024)
            if not chunk:
                raise RuntimeError(f"the {what} exited before serving")
            line += chunk
    return line.decode()


async def _gateway_run(
    mode: str, count: int, rate: float, clients: int, url: str, redis_pids: list[int]
) -> list[float]:
    """One run of one side: ``[events/s delivered, p50 ms, p99 ms, server CPU ms per 1,000
    frames, the first frame's arrival and the span of the arrivals (ms: from the first delta
    handed to the SDK to the first frame at a client, and from there to the last), then that
    CPU by process]`` (the side's processes in the order started, then ``redis-server``: the
    sum of ``redis_pids``, one per node of a Redis Cluster). ``split``: a worker process (the
    one released) and a gateway process. The server CPU is that of the side's processes and
    of the Redis nodes, from the release to the last client's last delta."""
    received: list[dict[float, float]] = []
    heads.clear()
    child = partial(
        run_child_process,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        check=False,  # killed below, once measured
    )
    args = [str(count), str(rate), url]
    async with trio.open_nursery() as nursery:
        processes: list[Any] = []
        try:
            if mode == "split":
                worker = await nursery.start(
                    partial(child, [sys.executable, _HERE, "worker-server", *args])
                )
                processes.append(worker)
                await _first_line(worker, "worker")
            server_mode = "gateway" if mode == "split" else mode
            process = await nursery.start(
                partial(child, [sys.executable, _HERE, "gateway-server", server_mode, *args])
            )
            processes.append(process)
            released = processes[0]
            port_text, session_id = (await _first_line(process, f"{mode} server")).split()
            all_attached = trio.Event()
            remaining = [clients]
            with trio.move_on_after(TIMEOUT) as deadline:
                async with trio.open_nursery() as readers:
                    for _ in range(clients):
                        readers.start_soon(
                            _reader,
                            int(port_text),
                            session_id,
                            count,
                            remaining,
                            all_attached,
                            received,
                        )
                    await all_attached.wait()
                    await trio.sleep(0.3)  # let the attach replies land (not measured)
                    servers = [p.pid for p in processes] + redis_pids
                    cpu0 = [cpu_seconds(pid) for pid in servers]
                    await released.stdin.send_all(b"go\n")
                cpu = [cpu_seconds(pid) - before for pid, before in zip(servers, cpu0, strict=True)]
            if deadline.cancelled_caught:
                got = sorted(len(seen) for seen in received)
                starved = [head[:200] for head in heads.values() if _STAMP.search(head) is None]
                raise RuntimeError(
                    f"{mode}: after {TIMEOUT:g} s the clients had {got} of {count} deltas; "
                    f"what the clients without any got first: {starved}"
                )
        finally:
            for started in processes:
                started.kill()
    latencies = [(at - sent) * 1000 for seen in received for sent, at in seen.items()]
    first = min(min(seen) for seen in received)
    arrived = min(min(seen.values()) for seen in received)
    last = max(max(seen.values()) for seen in received)
    rate = len(latencies) / (last - first)
    cpu = [*cpu[: len(processes)], sum(cpu[len(processes) :])]  # the Redis nodes as one
    per_frame = [seconds * 1000 / len(latencies) * 1000 for seconds in cpu]
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    timeline = [(arrived - first) * 1000, (last - arrived) * 1000]
    return [rate, p50, p99, sum(per_frame), *timeline, *per_frame]


async def _gateway(
    url: str,
    redis_pids: list[int],
    *,
    sides: dict[str, str],
    rounds: int,
    clients: int,
    deltas: int,
    rate: float,
    seconds: float,
) -> None:
    """Each of ``sides`` (name -> mode, ``in-process`` first) in turn, each load."""
    loads = {
        "burst": (deltas, FLAT_OUT, f"{deltas} deltas back to back"),
        "paced": (int(rate * seconds), rate, f"{rate:,.0f} deltas/s for {seconds:g} s"),
    }
    for load, (count, pace, said) in loads.items():
        runs: dict[str, list[list[float]]] = {side: [] for side in sides}
        for round_ in range(rounds):
            # Every other round runs the sides in reverse order, so a machine that speeds up
            # or slows down during the run favours no side.
            order = list(sides.items())
            for side, mode in order if round_ % 2 == 0 else reversed(order):
                runs[side].append(await _gateway_run(mode, count, pace, clients, url, redis_pids))
        print(f"  {load}: {said}, to {clients} websocket clients (median of {rounds})")
        medians = {
            side: [statistics.median(r[i] for r in results) for i in range(6)]
            for side, results in runs.items()
        }
        for side, (rate_, p50, p99, cpu_ms, _, _) in medians.items():
            print(
                f"    {side:<14} {rate_:>9,.0f} events/s delivered   "
                f"p50 {p50:8.2f} ms   p99 {p99:8.2f} ms   server CPU {cpu_ms:6.2f} ms "
                "per 1,000 frames"
            )
        if load == "burst":  # events/s = frames / (first frame + span): which part differs
            print(
                "    first frame at / last frame that much later: "
                + ", ".join(
                    f"{side} {first:.1f} / {span:.1f} ms"
                    for side, (*_, first, span) in medians.items()
                )
            )
        inproc = medians["in-process"]
        for side in list(sides)[1:]:
            said_side = _SAID[side]
            redis = medians[side]
            # Each round's own ratio (its runs are minutes apart at most), then their median:
            # steadier than the ratio of the medians when the machine's speed drifts.
            paired = statistics.median(
                r[0] / i[0] for r, i in zip(runs[side], runs["in-process"], strict=True)
            )
            print(
                f"    Redis ({said_side}) / in-process events/s {redis[0] / inproc[0]:.2f} "
                f"(median of each round's ratio {paired:.2f}); "
                f"Redis adds {redis[1] - inproc[1]:+.2f} ms at p50, "
                f"{redis[2] - inproc[2]:+.2f} ms at p99; "
                f"server CPU per frame {redis[3] / inproc[3]:.2f}x in-process"
            )
        split = next(side for side, mode in sides.items() if mode == "split")
        nodes = "redis-server" if len(redis_pids) == 1 else f"the {len(redis_pids)} Redis nodes"
        worker, gateway, redis_server = (
            statistics.median(r[i] for r in runs[split]) for i in (6, 7, 8)
        )
        print(
            f"    as deployed, server CPU per 1,000 frames by process: gateway {gateway:.2f} ms, "
            f"worker {worker:.2f} ms, {nodes} {redis_server:.2f} ms "
            f"(the in-process server: {statistics.median(r[6] for r in runs['in-process']):.2f} ms)"
        )


# -- workers (children) ------------------------------------------------------------------------


def _short_turn(turn_ms: int) -> Any:
    async def turn(turn: FakeTurn) -> None:
        await turn.sleep(turn_ms / 1000)
        await turn.text("done")

    return turn


async def worker_process(url: str, worker_id: str, turn_ms: int) -> None:
    """A worker node on fake CLIs: prints ``ready``, runs until its stdin closes."""
    async with (
        open_redis(url) as redis,
        open_fleet(
            max_live=MAX_LIVE, transport_factory=FakeCLI(_short_turn(turn_ms)), governor=None
        ) as fleet,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(partial(serve_worker, redis, fleet, worker_id=worker_id, config=CONFIG))
        print("ready", flush=True)
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        async with stdin:
            while await stdin.receive_some(16):
                pass
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def _workers(url: str, count: int, turn_ms: int) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        processes = []
        for i in range(count):
            command = [sys.executable, _HERE, "worker", url, f"bench-w{i}", str(turn_ms)]
            processes.append(
                await nursery.start(
                    partial(
                        run_child_process,
                        command,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        check=False,  # a worker's failure shows as "exited before ready"
                    )
                )
            )
        try:
            with trio.fail_after(60):
                for process in processes:
                    said = await process.stdout.receive_some(64)
                    if b"ready" not in said:
                        raise RuntimeError("a worker process exited before it was ready")
            yield
        finally:
            for process in processes:  # a closed stdin is a worker's signal to stop
                await process.stdin.aclose()
            with trio.move_on_after(10, shield=True):
                for process in processes:
                    await process.wait()
            for process in processes:
                if process.returncode is None:
                    process.kill()


async def _drain(sub: Subscription | Any) -> None:
    async for _ in sub:
        pass


async def _executions(url: str, workers: int, executions: int, turn_ms: int) -> float:
    async with (
        _workers(url, workers, turn_ms),
        open_redis(url) as redis,
        open_redis_fleet(redis, block=0.5) as fleet,
    ):
        started = time.perf_counter()
        sessions = [await fleet.open(ExecuteParams(prompt=f"p{i}")) for i in range(executions)]
        with trio.fail_after(300):
            async with trio.open_nursery() as nursery:
                for session in sessions:
                    sub = session.subscribe_nowait(None, max_queue=1000)
                    assert isinstance(sub, Subscription)
                    nursery.start_soon(_drain, sub)
        return executions / (time.perf_counter() - started) * 60


async def _memory_used(url: str) -> int:
    async with open_redis(url) as redis:
        return int((await redis.info("memory"))["used_memory"])


async def _flush(url: str) -> None:
    async with open_redis(url) as redis:
        await redis.flushall()


async def _one_session_keys(url: str) -> dict[str, int]:
    """``MEMORY USAGE`` of the record and the event stream of one finished session."""
    keys = RedisKeys()
    async with open_redis(url) as redis:
        sid = next(iter(await redis.zrange(keys.sessions_index, 0, 0)))
        return {
            "record": int(await redis.memory_usage(keys.session(sid)) or 0),
            "events": int(await redis.memory_usage(keys.events(sid)) or 0),
            "events_count": len(stored_events(await redis.xrange(keys.events(sid)))),
            "entries_count": int(await redis.xlen(keys.events(sid))),
        }


async def _workers_section(url: str, *, executions: int, turn_ms: int, memory: bool = True) -> None:
    """Executions per minute on 1, 2 and 3 worker processes; with ``memory``, what Redis holds
    per finished execution after the first (``used_memory``: one ``redis-server``)."""
    ideal_1 = MAX_LIVE / (turn_ms / 1000) * 60
    print(
        f"  {executions} executions of a {turn_ms} ms turn; worker processes of max_live="
        f"{MAX_LIVE} fake CLIs; ideal = slots / turn"
    )
    rates: dict[int, float] = {}
    for count in (1, 2, 3):
        await _flush(url)
        before = await _memory_used(url) if memory else 0
        rates[count] = await _executions(url, count, executions, turn_ms)
        print(
            f"    {count} worker(s) {rates[count]:8,.0f} executions/min   "
            f"{rates[count] / (ideal_1 * count):5.0%} of ideal   "
            f"x{rates[count] / rates[1]:.2f} vs 1 worker"
        )
        if count == 1 and memory:
            used = await _memory_used(url) - before
            one = await _one_session_keys(url)
    if memory:
        print(
            f"  memory: {used / executions:,.0f} bytes of Redis (used_memory) per finished "
            f"execution; one session's keys: record {one['record']:,} B, event stream "
            f"{one['events']:,} B ({one['events_count']} events in {one['entries_count']} "
            "entries)"
        )


# -- the entry points --------------------------------------------------------------------------


def run(
    *,
    rounds: int = 8,
    clients: int = 50,
    deltas: int = 1000,
    rate: float = 200.0,
    seconds: float = 2.0,
    executions: int = 60,
    turn_ms: int = 100,
) -> None:
    """The whole section, on a ``redis-server`` of its own, then on a three-master Redis
    Cluster of its own."""
    warnings.simplefilter("ignore")
    trio.run(
        partial(
            _section,
            rounds=rounds,
            clients=clients,
            deltas=deltas,
            rate=rate,
            seconds=seconds,
            executions=executions,
            turn_ms=turn_ms,
        )
    )


async def _section(
    *,
    rounds: int,
    clients: int,
    deltas: int,
    rate: float,
    seconds: float,
    executions: int,
    turn_ms: int,
) -> None:
    gateway = partial(
        _gateway, rounds=rounds, clients=clients, deltas=deltas, rate=rate, seconds=seconds
    )
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as tmp:
        async with open_redis_server(Path(tmp) / "server") as server:
            assert server.pid is not None
            print(f"  one gateway, {clients} websocket clients, one redis-server (127.0.0.1)")
            await gateway(server.url, [server.pid], sides=_SIDES)
            await _workers_section(server.url, executions=executions, turn_ms=turn_ms)
        async with open_redis_cluster(Path(tmp) / "cluster") as cluster:
            pids = [node.pid for node in cluster.nodes if node.pid is not None]
            print(
                f"  the same on a three-master Redis Cluster (127.0.0.1): one gateway, "
                f"{clients} websocket clients"
            )
            await gateway(cluster.url, pids, sides=_CLUSTER_SIDES)
            await _workers_section(
                cluster.url, executions=executions, turn_ms=turn_ms, memory=False
            )


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    if argv[:1] == ["gateway-server"]:
        trio.run(gateway_server, argv[1], int(argv[2]), float(argv[3]), argv[4])
        return 0
    if argv[:1] == ["worker-server"]:
        trio.run(worker_server, int(argv[1]), float(argv[2]), argv[3])
        return 0
    if argv[:1] == ["worker"]:
        trio.run(worker_process, argv[1], argv[2], int(argv[3]))
        return 0
    parser = argparse.ArgumentParser(prog="bench_redis.py", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--deltas", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--executions", type=int, default=60)
    parser.add_argument("--turn-ms", type=int, default=100)
    args = parser.parse_args(argv)
    run(
        rounds=args.rounds,
        clients=args.clients,
        deltas=args.deltas,
        rate=args.rate,
        seconds=args.seconds,
        executions=args.executions,
        turn_ms=args.turn_ms,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
