"""Benchmark: the fleet governor against a rate-limited account, side by side in one run.

The real ``claude`` CLI against the Messages API double with ``RateLimits(max_concurrent=K)``
(a request above K at once is answered 429 with ``retry-after``), ``run_batch`` of ``items``
items at ``max_live`` through ``open_fleet``: with its governor (the default) and without
(``governor=None``: every session backs off on its own, as before). Each turn streams for
about ``turn`` seconds. Per side: wall time, the model requests answered and the 429s served
(the double's statistics), CPU seconds (this process and the CLIs, reaped children), and the
ratio to the ideal: ``items x turn / K`` plus the CLI's start-up (one session alone, minus its
turn), the time an account taking K requests at once needs at best. A third run, the same
batch against an account with no limit, gives the machine's own floor: ``items`` CLIs cost CPU
seconds no governor can save, and on a machine with few cores that can take longer than the
ideal; the ratio to ``max(ideal, floor)`` is printed too.

Handoff across workers: two nodes sharing one governor in a ``redis-server`` started here
(``RedisGovernorState``, as two ``claude-trio worker`` processes share one), a limit of one;
``handoff_rounds`` times the node holding the place ends its execution while the other has an
open waiting, and the time until the waiting open is admitted is measured, with the freed
stream (the default) and with polling alone (every ``poll_interval``, 0.2 s).

Budget: ``budget_runs`` batches (6 items, 3 at once, turns of varied length, no rate limit)
with a fleet budget of 2.5 turns' cost: per run what was spent past the budget against its
bound, the cost of the turns still running when the budget was reached (the governor's
``budget_reached`` notice says how many; each costs at most the dearest turn of the run).
"""

from __future__ import annotations

import collections
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from claude_trio import ExecuteParams
from claude_trio.actors.cluster.governor import RedisGovernorState, SharedGovernorConfig
from claude_trio.actors.fanout.fleet import DEFAULT_GOVERNOR, open_fleet
from claude_trio.batch import BatchItem, RetryPolicy, run_batch
from claude_trio.protocol.fanout.governor import GovernorConfig
from claude_trio.redis_url import open_redis
from claude_trio.testing import open_redis_server
from claude_trio.testing.hermetic import hermetic_env
from claude_trio.testing.model_double import ModelDouble, RateLimits, Reply, Rule, Script

TARGET_429_SHARE = 0.10
TARGET_WALL_RATIO = 1.25


def _reply(turn: float) -> Reply:
    # N deltas plus about five other SSE events, each after event_delay: ~turn seconds.
    deltas = 15
    return Reply.text("x" * deltas, chunk_size=1, event_delay=turn / (deltas + 5))


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


async def _side(
    *, governed: bool, items: int, max_live: int, k: int | None, turn: float, root: Path
) -> dict[str, Any]:
    """One batch; ``k=None``: against an account with no limit."""
    async with trio.open_nursery() as nursery:
        double = ModelDouble(
            Script([Rule(reply=_reply(turn), times=None)]),
            rate_limits=RateLimits(max_concurrent=k, retry_after=1.0),
        )
        await nursery.start(double.serve)
        work = root / ("unlimited" if k is None else "governed" if governed else "ungoverned")
        work.mkdir()
        env = hermetic_env(double.base_url, work / "cli", sandbox=True)
        batch = [
            BatchItem(key=f"k{i}", params=ExecuteParams(prompt=f"item {i}", cwd=str(work)))
            for i in range(items)
        ]
        start, cpu = time.perf_counter(), _cpu()
        async with open_fleet(
            max_live=max_live, env=env, governor=DEFAULT_GOVERNOR if governed else None
        ) as fleet:
            report = await run_batch(batch, fleet, max_live=max_live, retry=RetryPolicy())
            figures = fleet.statistics().governor
        wall, cpu = time.perf_counter() - start, _cpu() - cpu
        stats = double.rate_limit_statistics()
        nursery.cancel_scope.cancel()
    return {
        "wall": wall,
        "cpu": cpu,
        "ok": report.progress.done,
        "answered": stats.admitted,
        "rejected": stats.rejected_429,
        "limit": None if figures is None else figures.limit,
        "failures": collections.Counter(
            (r.error or "?").split(":")[0] for r in report.results if not r.ok
        ),
    }


async def _startup(turn: float, root: Path) -> float:
    """One session alone, its wall time minus its turn: the CLI's start-up."""
    side = await _side(governed=False, items=1, max_live=1, k=1, turn=turn, root=root / "alone")
    return max(0.0, side["wall"] - turn)


async def _run(items: int, max_live: int, k: int, turn: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-governor-") as tmp:
        root = Path(tmp)
        (root / "alone").mkdir()
        alone = await _startup(turn, root)
        free = await _side(
            governed=False, items=items, max_live=max_live, k=None, turn=turn, root=root
        )
        ideal = items * turn / k + alone
        floor = max(ideal, free["wall"])
        print(
            f"  {items} items, max_live={max_live}, K={k} requests at once, {turn:g} s turns; "
            f"ideal {items} x {turn:g} / {k} + start-up {alone:.1f} s = {ideal:.1f} s"
        )
        print(
            f"  no limit (the machine's floor): {free['ok']}/{items} ok, "
            f"wall {free['wall']:.1f} s, CPU {free['cpu']:.1f} s "
            f"({free['cpu'] / items:.2f} s per item)"
        )
        for governed in (True, False):
            side = await _side(
                governed=governed, items=items, max_live=max_live, k=k, turn=turn, root=root
            )
            requests = side["answered"] + side["rejected"]
            share = side["rejected"] / requests if requests else 0.0
            name = "with governor   " if governed else "without governor"
            limit = "" if side["limit"] is None else f", limit at the end {side['limit']}"
            failed = ", ".join(f"{n} {kind}" for kind, n in side["failures"].most_common())
            limit += f"; failed: {failed}" if failed else ""
            print(
                f"  {name}: {side['ok']}/{items} ok, wall {side['wall']:.1f} s "
                f"({side['wall'] / ideal:.2f}x ideal, {side['wall'] / floor:.2f}x "
                f"max(ideal, floor)), {side['rejected']} 429s of {requests} "
                f"requests ({share:.0%}), CPU {side['cpu']:.1f} s{limit}"
            )
            if governed:
                print(
                    f"    targets: 429s <= {TARGET_429_SHARE:.0%}: "
                    f"{'met' if share <= TARGET_429_SHARE else 'NOT met'}; wall <= "
                    f"{TARGET_WALL_RATIO}x ideal: "
                    f"{'met' if side['wall'] <= TARGET_WALL_RATIO * ideal else 'NOT met'} "
                    f"(x max(ideal, floor): "
                    f"{'met' if side['wall'] <= TARGET_WALL_RATIO * floor else 'NOT met'})"
                )


async def _budget_run(budget: float, root: Path, seed: int) -> dict[str, Any]:
    """One batch of 6 items, 3 at once, under a fleet budget; turns of 0.2-1.0 s."""
    rng = random.Random(seed)
    rules = [
        Rule(
            when=lambda request, prompt=f"item {i}": prompt in request.last_user_text,
            reply=_reply(rng.uniform(0.2, 1.0)),
            times=None,
        )
        for i in range(6)
    ]
    async with trio.open_nursery() as nursery:
        double = ModelDouble(Script(rules))
        await nursery.start(double.serve)
        work = root / f"budget-{seed}"
        work.mkdir()
        env = hermetic_env(double.base_url, work / "cli", sandbox=True)
        batch = [
            BatchItem(key=f"k{i}", params=ExecuteParams(prompt=f"item {i}", cwd=str(work)))
            for i in range(6)
        ]
        config = GovernorConfig(max_live=3, budget_usd=budget)
        async with open_fleet(max_live=3, env=env, governor=config) as fleet:
            report = await run_batch(batch, fleet, max_live=3, retry=RetryPolicy(retries=0))
            assert fleet.governor is not None
            notices = fleet.governor.notices()
            figures = fleet.statistics().governor
        nursery.cancel_scope.cancel()
    assert figures is not None
    reached = [n.budget for n in notices if n.kind == "budget_reached" and n.budget]
    costs = [r.cost_usd for r in report.results if r.ok]
    running = reached[0].running if reached else 0
    return {
        "spent": figures.spent_usd,
        "overshoot": figures.overshoot_usd,
        "bound": running * max(costs, default=0.0),
        "ran": len(costs),
    }


async def _budget(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-budget-") as tmp:
        root = Path(tmp)
        first = await _budget_run(1e9, root, seed=-1)  # one unbounded run: a turn's cost
        turn_cost = first["spent"] / max(1, first["ran"])
        budget = 2.5 * turn_cost
        within = 0
        overshoots: list[float] = []
        for seed in range(runs):
            side = await _budget_run(budget, root, seed)
            overshoots.append(side["overshoot"])
            within += side["overshoot"] <= side["bound"] + 1e-9
        print(
            f"  budget ${budget:.4f} (2.5 turns), {runs} runs of 6 items, 3 at once: "
            f"overshoot ${min(overshoots):.4f}-${max(overshoots):.4f} "
            f"({max(overshoots) / budget:.0%} of the budget at most); within the running "
            f"turns' cost: {within}/{runs} ({'met' if within == runs else 'NOT met'})"
        )


class _PollingOnly(RedisGovernorState[str]):
    """A shared governor state that does not read the freed stream: it asks again only every
    ``poll_interval`` (what a worker did before the stream)."""

    async def _watch_freed(self) -> None:
        await trio.sleep_forever()


async def _handoffs(
    url: str, prefix: str, kind: type[RedisGovernorState[str]], rounds: int
) -> list[float]:
    """Milliseconds from an execution's end on one node to the other node's waiting open
    being admitted, ``rounds`` times, the place going back and forth."""
    config = GovernorConfig(
        max_live=2, initial_limit=1, starts_per_second=1000.0, resume_jitter=0.0
    )
    took: list[float] = []
    async with open_redis(url) as redis, trio.open_nursery() as nursery:
        nodes = [
            kind(
                redis,
                SharedGovernorConfig(node=name, prefix=prefix),
                config,
                now=trio.current_time(),
                random=random.Random(name).random,
            )
            for name in ("a", "b")
        ]
        for state in nodes:
            nursery.start_soon(state.sync, lambda _notices: None)
        holder, waiter = nodes
        holder.submit("k0")
        while "k0" not in holder._admitted:  # noqa: ASYNC110 (another task's state)
            await trio.sleep(0.001)
        holder.poll(trio.current_time())
        for i in range(1, rounds + 1):
            waiter.submit(f"k{i}")
            await trio.sleep(0.05)  # it asked, and waits for the limit
            start = trio.current_time()
            holder.execution_ended(f"k{i - 1}")
            while f"k{i}" not in waiter._admitted:  # noqa: ASYNC110
                await trio.sleep(0.0005)
            took.append((trio.current_time() - start) * 1000)
            waiter.poll(trio.current_time())
            holder, waiter = waiter, holder
        nursery.cancel_scope.cancel()
    return took


async def _handoff(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-handoff-") as tmp:
        async with open_redis_server(Path(tmp)) as server:
            streamed = await _handoffs(server.url, "freed", RedisGovernorState, rounds)
            polled = await _handoffs(server.url, "polled", _PollingOnly, rounds)
    print(f"  a place freed on one worker to another's waiting open ({rounds} handoffs, ms):")
    for name, took in (("freed stream", streamed), ("polling alone", polled)):
        print(f"    {name:<14} median {statistics.median(took):7.1f}   max {max(took):7.1f}")
    ratio = statistics.median(polled) / statistics.median(streamed)
    print(f"    polling alone / freed stream: {ratio:.0f}x")


def run(
    *,
    items: int = 40,
    max_live: int = 8,
    k: int = 2,
    turn: float = 1.0,
    budget_runs: int = 20,
    handoff_rounds: int = 20,
) -> None:
    trio.run(_run, items, max_live, k, turn)
    if handoff_rounds:
        trio.run(_handoff, handoff_rounds)
    if budget_runs:
        trio.run(_budget, budget_runs)


if __name__ == "__main__":
    run()
