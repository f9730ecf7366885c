"""Benchmark 13: the fleet's own cost per session against a ``trio.CapacityLimiter`` + raw SDK.

``--sessions`` (1,000) short sessions on the testing kit's ``FakeCLI`` (the real SDK drives a
scripted fake CLI in the same process: no subprocess, no model, so what is measured is the
Python work per session), ``max_live`` (10) at a time, two ways:

* **raw**: ``trio.CapacityLimiter(max_live)`` around one ``ClaudeSDKClient`` per session
  (``connect``, ``query``, read to the ``ResultMessage``, ``disconnect``), all tasks in one
  nursery, with the same options a fleet session has (``build_options`` of the same params, a
  ``can_use_tool`` and a ``PreToolUse`` hook), so the fake CLI sends the same frames;
* **fleet**: ``open_fleet(max_live=max_live, transport_factory=fake)``, every session started
  at once, then waited for until its CLI is gone (``FleetSession.wait_closed``).

Each side runs in a fresh Python process of its own (``bench_fleet_cost.py side MODE N CAP``),
the two interleaved over the rounds (the first side alternates). Measured from outside: the
child's wall time and its CPU (user + system, ``os.wait4``'s rusage), startup and imports
included (the same imports on both sides); measured inside the child around the drain only
(from the first start to the last session done): wall time and process CPU. Medians, and the
ratios fleet / raw of each (target <= 1.3).

``--profile`` also runs the fleet side once under cProfile in this process and prints where
its time goes, grouped by area.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
import warnings
from typing import Any

import trio
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    ResultMessage,
)

from claude_trio import ExecuteParams, open_session
from claude_trio.actors.fanout.fleet import FleetSession, Subscription, open_fleet
from claude_trio.protocol.config.options import build_options
from claude_trio.protocol.session.events import Result
from claude_trio.testing import FakeCLI
from claude_trio.testing.fake_cli import FakeTransport

TARGET = 1.3
PROMPT = "Say something short."
_HERE = os.path.abspath(__file__)


class LeanFakeTransport(FakeTransport):
    """One fake process that lets go of itself once closed.

    A fake process's parts point back at it (its control protocol and its turn runner), a
    cycle that only the garbage collector frees, and it holds the options it was given: for a
    session, its callbacks (the broker, the stop gate) and through them the session's mapper,
    stream and the rest. So every session would outlive its end until a collection, because of
    the fake. A real CLI is another process and keeps nothing of ours. Once closed (nothing is
    asked of it any more), this one drops the two back references.
    """

    async def close(self) -> None:
        await super().close()
        if not self.process_alive:
            self.__dict__.pop("_control", None)
            self.__dict__.pop("_runner", None)


class LeanFakeCLI(FakeCLI):
    """The kit's ``FakeCLI`` as a stand-in for a CLI process that costs this process nothing
    once it is gone: it keeps no record of the processes it started (``FakeCLI.transports``
    keeps every one for a test's asserts), and each of them is a :class:`LeanFakeTransport`.
    Both sides use it unless ``--recording-fake`` (then both use the kit's own).
    """

    def __init__(self) -> None:
        super().__init__()
        self._made = 0

    def transport_for(self, options: ClaudeAgentOptions | None = None) -> FakeTransport:
        self._made += 1
        return LeanFakeTransport(self, options or ClaudeAgentOptions(), self._made)

    __call__ = transport_for


def _fake(recording: bool) -> FakeCLI:
    return FakeCLI() if recording else LeanFakeCLI()


async def _allow(*_: Any) -> PermissionResultAllow:
    return PermissionResultAllow()


async def _no_opinion(*_: Any) -> Any:
    return {}


async def raw_side(sessions: int, max_live: int, recording: bool = False) -> dict[str, float]:
    """``sessions`` raw SDK clients over the fake CLI, ``max_live`` at a time."""
    fake = _fake(recording)
    params = ExecuteParams(prompt=PROMPT)
    options = build_options(params, can_use_tool=_allow, pre_tool_use=_no_opinion)
    limiter = trio.CapacityLimiter(max_live)
    ok = 0

    async def one() -> None:
        nonlocal ok
        async with limiter:
            client = ClaudeSDKClient(options, transport=fake.transport_for(options))
            try:
                await client.connect()
                await client.query(PROMPT)
                async for message in client.receive_messages():
                    if isinstance(message, ResultMessage):
                        ok += not message.is_error
                        break
            finally:
                await client.disconnect()

    start, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for _ in range(sessions):
            nursery.start_soon(one)
    return {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu, "ok": ok}


async def fleet_side(sessions: int, max_live: int, recording: bool = False) -> dict[str, float]:
    """``sessions`` fleet sessions over the fake CLI through ``open_fleet(max_live=...)``, all
    started at once, each handle let go once its CLI is gone (the raw side keeps nothing of a
    session either; the fleet itself keeps ``keep_finished`` of them)."""
    fake = _fake(recording)
    params = ExecuteParams(prompt=PROMPT)
    ok = 0
    start, cpu = time.perf_counter(), time.process_time()
    # The governor off: its start spacing (4 a second by default) would throttle the fake
    # sessions, and this measures the fleet's own cost, not the governor's pacing.
    async with open_fleet(max_live=max_live, transport_factory=fake, governor=None) as fleet:
        started = collections.deque([await fleet.start(params) for _ in range(sessions)])
        while started:
            session = started.popleft()
            await session.wait_closed()
            ok += _ended_well(session)
    return {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu, "ok": ok}


def _ended_well(session: FleetSession) -> bool:
    """The session's final event (replayed from its buffer) is a final, successful result."""
    subscription = session.subscribe_nowait(session.last_seq - 1, max_queue=10)
    assert isinstance(subscription, Subscription)
    with subscription:
        last = subscription.receive_nowait()
    return isinstance(last, Result) and last.final and not last.is_error


async def session_side(sessions: int, max_live: int, recording: bool = False) -> dict[str, float]:
    """``open_session`` under a ``trio.CapacityLimiter``: the session's cost without the fleet's."""
    fake = _fake(recording)
    params = ExecuteParams(prompt=PROMPT)
    limiter = trio.CapacityLimiter(max_live)
    ok = 0

    async def one() -> None:
        nonlocal ok
        async with (
            limiter,
            open_session(params, on_user_input="manual", transport_factory=fake) as session,
        ):
            async for event in session.events:
                if isinstance(event, Result) and event.final:
                    ok += not event.is_error

    start, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for _ in range(sessions):
            nursery.start_soon(one)
    return {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu, "ok": ok}


SIDES = {"raw": raw_side, "fleet": fleet_side, "session": session_side}


def _run_side(mode: str, sessions: int, max_live: int, recording: bool) -> dict[str, float]:
    """One side in a fresh process: its drain (inside) and the whole process (outside)."""
    command = [sys.executable, _HERE, "side", mode, str(sessions), str(max_live)]
    if recording:
        command.append("--recording-fake")
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{mode} side exited with {child.returncode}")
    inside = json.loads(output.decode().strip().splitlines()[-1])
    if inside["ok"] != sessions:
        raise RuntimeError(f"{mode}: only {inside['ok']} of {sessions} sessions ended well")
    return {
        "drain_wall": inside["wall"],
        "drain_cpu": inside["cpu"],
        "drain_gc": inside["gc"],
        "process_wall": wall,
        "process_cpu": usage.ru_utime + usage.ru_stime,
    }


def _side(mode: str, sessions: int, max_live: int, recording: bool) -> dict[str, float]:
    """The child's part: run one side, with the CPU its garbage collections took."""
    spent = {"gc": 0.0, "since": 0.0}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            spent["since"] = time.process_time()
        else:
            spent["gc"] += time.process_time() - spent["since"]

    gc.callbacks.append(on_gc)
    result = trio.run(SIDES[mode], sessions, max_live, recording)
    gc.callbacks.remove(on_gc)
    return {**result, "gc": spent["gc"]}


def _profile(sessions: int, max_live: int, recording: bool) -> str:
    """The fleet side once under cProfile (garbage collection off, so that its pauses are not
    charged to whatever allocated last): own time by area, then the top functions."""
    profiler = cProfile.Profile()
    gc.disable()
    profiler.enable()
    trio.run(fleet_side, sessions, max_live, recording)
    profiler.disable()
    gc.enable()
    stats = pstats.Stats(profiler)
    areas: dict[str, float] = {}
    total = 0.0
    rows = []
    for (path, line, name), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        total += own
        area = _area(path)
        areas[area] = areas.get(area, 0.0) + own
        rows.append((own, cumulative, calls, f"{_short(path)}:{line} {name}"))
    lines = [f"own time by area (profiled, so inflated; compare shares), {sessions} sessions:"]
    for area, own in sorted(areas.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {own / total:6.1%}  {area}")
    lines.append("top functions by own time (own s, cumulative s, calls):")
    for own, cumulative, calls, where in sorted(rows, reverse=True)[:25]:
        lines.append(f"  {own:7.3f} {cumulative:7.3f} {calls:8d}  {where}")
    return "\n".join(lines)


def _area(path: str) -> str:
    for marker, area in (
        ("claude_trio/testing", "fake CLI (claude_trio.testing)"),
        ("/actors/", "claude_trio actors"),
        ("/protocol/", "claude_trio protocol"),
        ("claude_trio/", "claude_trio (top level)"),
        ("claude_agent_sdk", "claude_agent_sdk"),
        ("/trio/", "trio"),
        ("/anyio/", "anyio"),
        ("/attr", "attrs"),
        ("psutil", "psutil"),
    ):
        if marker in path:
            return area
    return "other (stdlib, builtins)"


def _short(path: str) -> str:
    for marker in ("site-packages/", "claude_trio/", "lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


KEYS = ("drain_wall", "drain_cpu", "drain_gc", "process_wall", "process_cpu")


def run(
    *,
    rounds: int,
    sessions: int,
    max_live: int = 10,
    recording: bool = False,
    with_session: bool = False,
    profile: bool = False,
) -> dict[str, float]:
    """Interleave the sides over ``rounds``; print the medians and the ratios to raw."""
    modes = ("raw", "fleet", "session") if with_session else ("raw", "fleet")
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for i in range(rounds):
        for mode in modes if i % 2 == 0 else modes[::-1]:
            runs[mode].append(_run_side(mode, sessions, max_live, recording))
    fake = "the kit's recording FakeCLI" if recording else "the lean fake CLI"
    print(f"  {sessions} sessions, max_live={max_live}, {fake}; medians of {rounds} rounds")
    print("  (the fleet with governor=None: its start spacing would pace the fake sessions)")
    out: dict[str, float] = {}
    for mode, results in runs.items():
        for key in KEYS:
            out[f"{mode}_{key}"] = statistics.median(r[key] for r in results)
        print(
            f"  {mode:7s}: drain {out[f'{mode}_drain_wall']:6.2f} s wall, "
            f"{out[f'{mode}_drain_cpu']:6.2f} s CPU ({out[f'{mode}_drain_gc']:4.2f} s of it in "
            f"GC), {1e3 * out[f'{mode}_drain_cpu'] / sessions:.2f} ms CPU/session; whole process "
            f"{out[f'{mode}_process_wall']:6.2f} s wall, {out[f'{mode}_process_cpu']:6.2f} s CPU"
        )
    for mode in modes[1:]:
        for key in KEYS:
            out[f"{mode}_{key}_ratio"] = out[f"{mode}_{key}"] / max(out[f"raw_{key}"], 1e-9)
    met = out["fleet_drain_wall_ratio"] <= TARGET and out["fleet_drain_cpu_ratio"] <= TARGET
    print(
        f"  ratios fleet/raw: drain wall {out['fleet_drain_wall_ratio']:.2f}, drain CPU "
        f"{out['fleet_drain_cpu_ratio']:.2f}; whole process wall "
        f"{out['fleet_process_wall_ratio']:.2f}, CPU {out['fleet_process_cpu_ratio']:.2f} "
        f"(target <= {TARGET} for the drain: {'met' if met else 'NOT met'})"
    )
    if with_session:
        print(
            f"  open_session under a CapacityLimiter / raw: drain wall "
            f"{out['session_drain_wall_ratio']:.2f}, CPU {out['session_drain_cpu_ratio']:.2f}"
        )
    print(
        f"  the fleet's own cost: "
        f"{1e3 * (out['fleet_drain_cpu'] - out['raw_drain_cpu']) / sessions:.2f} ms CPU per session"
    )
    if profile:
        print("  " + _profile(sessions, max_live, recording).replace("\n", "\n  "))
    return out


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    if argv[:1] == ["side"]:
        result = _side(argv[1], int(argv[2]), int(argv[3]), "--recording-fake" in argv)
        print(json.dumps(result), flush=True)
        return 0
    parser = argparse.ArgumentParser(prog="bench_fleet_cost.py", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--max-live", type=int, default=10)
    parser.add_argument("--recording-fake", action="store_true", help="the kit's own FakeCLI")
    parser.add_argument("--with-session", action="store_true", help="open_session alone too")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    run(
        rounds=args.rounds,
        sessions=args.sessions,
        max_live=args.max_live,
        recording=args.recording_fake,
        with_session=args.with_session,
        profile=args.profile,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
