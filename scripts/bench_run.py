"""``scripts/bench``: the benchmarks of claude-trio, printed as ratios measured side by side.

Sections (all by default; pick with ``--only``):

* ``hot``: CPU per SDK message, bare ``ClaudeSDKClient`` loop vs ``open_session``, on a replay
  of a recorded real stream (no CLI in the measured path).
* ``traced``: the hot path with OpenTelemetry spans and metrics through an SDK (in-memory
  exporter and reader) and with the API alone, against tracing off.
* ``memory``: memory per parked session, bare SDK vs ``open_session``, 1,000 at once.
* ``cli``: the real CLI against the Messages API double: time to first event, cold (raw SDK vs
  ours) and warm vs cold (``open_cli_pool``), and abort -> terminal event -> CLI reaped.
* ``stop``: stop means stop, through the real CLI: from abort / a deadline / a ``break`` at
  several moments to the CLI reaped, and whether a tool's side effect happened after the stop,
  against the raw SDK's ``disconnect()``.
* ``gateway``: one session fanned out to 50 websocket clients, ``serve_gateway`` vs a bare
  trio-websocket server sending the same frames: frames/s and server CPU per 1,000 frames.
* ``soak``: about 200 clients (reading, slow, never-reading, silent, flooding) against one
  gateway: server RSS and descriptors over time, the reading clients' latency with and
  without the others, every close code.
* ``fleet``: 10 real CLI sessions at once through ``open_fleet`` against the raw SDK in one
  nursery with the same options: wall time to all results, peak memory of the process tree.
* ``sweep``: ``open_fleet(max_live=N)`` for N in 1, 2, 4, 8 on the same sessions: finished
  sessions per minute (and per core).
* ``latency``: the gateway at 10,000 events/s offered: p50/p99 latency from the CLI's frame
  to a ``connect_gateway`` client.
* ``redis``: the Redis mode on a ``redis-server`` of its own: one gateway to 50 websocket
  clients in-process vs via Redis (events/s, added p50/p99), executions/min on 1, 2 and 3
  worker processes, Redis memory per session; then the gateway (as deployed) and the workers
  on a three-master Redis Cluster of its own.
* ``fleetcost``: the fleet's own cost per session: 1,000 short sessions on the fake CLI,
  ``open_fleet(max_live=10)`` against a ``trio.CapacityLimiter(10)`` over the raw SDK, each
  side in a process of its own: wall time and CPU (GC included) of the drain, and of the
  whole process measured from outside (the fleet with ``governor=None``: the governor's start
  spacing would pace the fake sessions).
* ``governor``: the real CLI against a rate-limited Messages API double (K=2 requests at once),
  40 items at ``max_live=8`` with 1 s turns (20 items, 0.5 s turns with ``--quick``), the fleet
  with its governor vs without: wall time and its ratio to the ideal (items x turn / K plus
  the CLI's start-up; and to the machine's floor, the same batch with no limit), 429s served,
  CPU; then a place freed on one worker handed to another worker's waiting open (two nodes
  of the shared governor on a ``redis-server``; 20 handoffs, 10 with ``--quick``), with the
  freed stream and with polling alone; then 20 batches (5 with ``--quick``) under a fleet
  budget: the overshoot against the cost of the turns running when the budget was reached.
* ``acp``: the editor face, ``claude-trio acp --offline`` as a subprocess: ``session/prompt`` to
  the first ``agent_message_chunk`` vs ``claude-trio run --offline`` to its first text, and
  ``session/cancel`` mid-tool to the ``cancelled`` answer vs ``abort()`` to the terminal event.
* ``console``: the web console in a headless Chromium following 20 live sessions (fake CLIs,
  50 events/s each) vs ``connect_gateway`` following the same: the gateway's and the
  follower's CPU per event, and their ratios.

The machine is noisy, so each comparison interleaves both sides in one run and prints their
ratio or difference. Nothing here fails on a number; a wrong *behaviour* (a session that does
not end with a result, a CLI left running) raises.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
from importlib.metadata import version

import trio
from bench_replay import record_stream

from claude_trio.actors.children import sigterm_interrupts, terminated

SECTIONS = (
    "hot", "traced", "memory", "cli", "stop", "gateway", "soak", "fleet", "sweep", "latency",
    "redis", "fleetcost", "governor", "acp", "console",
)  # fmt: skip


def _load() -> str:
    """The 1/5/15-minute load averages: how busy the (shared) machine was around the run."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    # A CI timeout sends SIGTERM: stop as Ctrl-C does, every server and worker stopped.
    sigterm_interrupts()
    stopped = False
    try:
        return _run(argv)
    except* KeyboardInterrupt:  # out of trio.run, it may come in a group
        stopped = True
    assert stopped
    cause = "SIGTERM" if terminated() else "Ctrl-C"
    print(f"\nscripts/bench: stopped ({cause}); what it started is stopped", file=sys.stderr)
    return 143 if terminated() else 130


def _run(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (about a minute)")
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}"
    )
    parser.add_argument(
        "--profile", action="store_true", help="print the hot path's and the fleet's profiles"
    )
    parser.add_argument("--rounds", type=int, help="hot-path rounds (A B pairs)")
    parser.add_argument("--sessions", type=int, help="sessions parked in the memory benchmark")
    parser.add_argument(
        "--cli-rounds", type=int, help="time-to-first-event rounds (raw vs ours, warm vs cold)"
    )
    parser.add_argument("--aborts", type=int, help="aborts in the abort benchmark")
    parser.add_argument("--stop-rounds", type=int, help="rounds of the stop benchmark")
    parser.add_argument("--clients", type=int, help="soak clients (all kinds together)")
    parser.add_argument("--soak-seconds", type=float, help="length of the soak's second phase")
    parser.add_argument("--fleet-rounds", type=int, help="rounds of the fleet fan-out")
    parser.add_argument(
        "--sweep-sessions", type=int, help="sessions per max_live in the sweep"
    )
    parser.add_argument(
        "--redis-rounds", type=int, help="rounds of the Redis gateway comparison (each side)"
    )
    parser.add_argument("--executions", type=int, help="executions per worker count (Redis)")
    parser.add_argument(
        "--cost-sessions", type=int, help="short sessions per side in the fleet's own cost"
    )
    parser.add_argument("--acp-rounds", type=int, help="rounds of the editor face's bench")
    parser.add_argument("--cost-rounds", type=int, help="rounds of the fleet's own cost")
    parser.add_argument("--console-rounds", type=int, help="rounds of the console's bench")
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        parser.error(f"--only: unknown section(s) {unknown}; choose from {SECTIONS}")
    quick = args.quick
    rounds = args.rounds or (5 if quick else 20)
    sessions = args.sessions or (200 if quick else 1000)
    cli_rounds = args.cli_rounds or (3 if quick else 10)
    aborts = args.aborts or (10 if quick else 50)
    stop_rounds = args.stop_rounds or (3 if quick else 10)

    started = time.perf_counter()
    print(
        f"claude-trio benchmarks, {datetime.date.today()}, {platform.python_implementation()} "
        f"{platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"claude-agent-sdk {version('claude-agent-sdk')}, trio {version('trio')}, "
        f"anyio {version('anyio')}{' (quick)' if quick else ''}"
    )
    print(f"load average before: {_load()}")
    recording = None
    if "hot" in only or "traced" in only or "memory" in only:
        recording = trio.run(record_stream)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(recording.kinds().items()))
        print(
            f"recorded stream: CLI {recording.cli_version}, {len(recording.turn)} frames "
            f"({kinds})"
        )
    if "hot" in only:
        import bench_hot

        assert recording is not None
        print("\n[1] hot path: CPU per SDK message (replay transport, no CLI)")
        bench_hot.run(recording, rounds=rounds, profile=args.profile)
    if "traced" in only:
        import bench_traced

        assert recording is not None
        print("\n[1b] traced hot path: CPU per frame, spans and metrics through an SDK vs off")
        bench_traced.run(recording, rounds=rounds)
    if "memory" in only:
        import bench_memory

        assert recording is not None
        print("\n[2] memory per session (replay transport, no CLI)")
        bench_memory.run(recording, sessions=sessions, stalled_sessions=10 if quick else 50)
    if "cli" in only:
        import bench_cli

        print("\n[3] real CLI against the Messages API double (127.0.0.1), wall clock")
        bench_cli.run(rounds=cli_rounds, aborts=aborts)
    if "stop" in only:
        import bench_stop

        print("\n[4] stop means stop: the real CLI, a tool that would act after the stop")
        bench_stop.run(rounds=stop_rounds)
    if "gateway" in only:
        import bench_gateway

        print("\n[5] gateway fan-out vs a bare trio-websocket server (50 clients, 127.0.0.1)")
        bench_gateway.run(rounds=2 if quick else 5, deltas=2000, clients=50)
    if "soak" in only:
        import bench_soak

        print("\n[6] soak: hostile and well-behaved clients against one gateway")
        bench_soak.run(
            clients=args.clients or 200, seconds=args.soak_seconds or (10.0 if quick else 30.0)
        )
    if "fleet" in only:
        import bench_fanout

        print("\n[7] fleet fan-out: 10 real CLI sessions, open_fleet vs the raw SDK")
        bench_fanout.run_fleet(rounds=args.fleet_rounds or (1 if quick else 3), sessions=10)
    if "sweep" in only:
        import bench_fanout

        print("\n[8] max_live sweep: finished sessions per minute (real CLIs)")
        bench_fanout.run_sweep(sessions=args.sweep_sessions or (8 if quick else 16))
    if "latency" in only:
        import bench_fanout

        print("\n[9] gateway latency at 10,000 events/s offered (CLI frame -> client)")
        bench_fanout.run_latency(seconds=1.0 if quick else 3.0)
    if "redis" in only:
        import bench_redis

        print("\n[10] Redis mode (one server, a Redis Cluster) vs in-process; workers")
        bench_redis.run(
            rounds=args.redis_rounds or (2 if quick else 8),
            executions=args.executions or (30 if quick else 60),
        )
    if "fleetcost" in only:
        import bench_fleet_cost

        print("\n[13] the fleet's own cost per session: open_fleet vs a CapacityLimiter + raw SDK")
        bench_fleet_cost.run(
            rounds=args.cost_rounds or (2 if quick else 5),
            sessions=args.cost_sessions or (300 if quick else 1000),
            profile=args.profile,
        )
    if "governor" in only:
        import bench_governor

        print("\n[14] the fleet governor against a rate-limited account: with vs without")
        bench_governor.run(
            items=20 if quick else 40,
            turn=0.5 if quick else 1.0,
            budget_runs=5 if quick else 20,
            handoff_rounds=10 if quick else 20,
        )
    if "acp" in only:
        import bench_acp

        print("\n[15] the editor face: claude-trio acp --offline vs claude-trio run --offline")
        bench_acp.run(rounds=args.acp_rounds or (3 if quick else 10))
    if "console" in only:
        import bench_console

        print("\n[16] the web console following 20 live sessions vs the Python client")
        bench_console.run(rounds=args.console_rounds or (1 if quick else 3))
    print(f"\ndone in {time.perf_counter() - started:.0f} s; load average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
