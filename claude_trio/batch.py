"""Many prompts, one call: :func:`run_batch` on any session host (a fleet, a gateway client,
a Redis cluster's fleet, one of your own: ``actors/fanout/hosts.py``), and the ``claude-trio batch``
command around it.

::

    async with open_fleet(max_live=4) as fleet:
        report = await run_batch(items, fleet, max_live=4, budget=2.0, on_result=save)

    async with connect_gateway(url, token=token) as gw:
        report = await run_batch(items, gw, max_live=4)

At most ``max_live`` items run at once. Each item is one session; an attempt that fails on an
overloaded or rate-limited model API (429, 529, ``overloaded``) is tried again after a backoff
that honours ``retry-after`` (``protocol/fanout/batch.py``, rule 3), up to ``retry.retries`` times.
``budget`` (USD): once the cost spent (``spent`` before, plus every attempt so far) reaches it,
no new item starts; the ones running finish. ``on_result`` is awaited with each item's
:class:`~claude_trio.protocol.fanout.batch.BatchResult` as soon as it is final (the command writes
and syncs its line there); ``on_progress`` is called with a
:class:`~claude_trio.protocol.fanout.batch.BatchProgress` at every change.

Cancellation: cancelling ``run_batch`` aborts the items' sessions through their handle's
``abort`` (a host's session does not stop with whoever follows it), then re-raises;
results already passed to ``on_result`` stay. Error handling: an item that fails for good is
a result with ``ok=False`` and its ``error``; a gateway that cannot be reached any more
(``GatewayUnavailableError``, ``GatewayRefusedError``) ends the batch with that error.

The command: ``claude-trio batch PROMPTS.jsonl [--out FILE] [--max-live N] [--remote URL]...
[--budget USD] [--retries N] [--model M] [--offline]`` (``--remote`` repeated: the gateways of
one cluster, tried in turn when a connection fails or drops; ``connect_gateway``). One JSON
result line per item in ``--out`` (default ``PROMPTS.results.jsonl``), written and synced as
each item finishes, so a crash or Ctrl-C loses no finished result; running it again with the
same ``--out`` skips the keys already done (a line cut short by a crash is dropped and its item
runs again). A live progress display on a terminal (done / running / queued / failed, tokens,
cost, elapsed, ETA), plain lines otherwise. Exit code 0 when every item is done, 1 when some
failed or were left out by the budget, 2 for bad usage, 130 after Ctrl-C (the first Ctrl-C
aborts the running items and writes nothing for them; they run again next time).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

import attrs
import trio
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from claude_trio.actors.fanout.fleet import Fleet, open_fleet
from claude_trio.actors.fanout.governor import clock_time
from claude_trio.actors.fanout.hosts import SessionHost
from claude_trio.cli.args import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SESSION_ERROR,
    EXIT_USAGE,
    NO_CREDENTIALS_MESSAGE,
    has_credentials,
)
from claude_trio.cli.number_args import governor_config
from claude_trio.client import GatewayClient, connect_gateway
from claude_trio.protocol.checks import check_int, check_number
from claude_trio.protocol.errors import (
    BatchFileError,
    ClaudeTrioError,
    ConnectionLostError,
    InvalidParamsError,
    RemoteOpError,
    ReplayGapError,
    SessionLostError,
)
from claude_trio.protocol.fanout.batch import (
    Attempt,
    BatchItem,
    BatchProgress,
    BatchResult,
    RetryPolicy,
    parse_items,
    read_results,
)
from claude_trio.protocol.fanout.codec import dumps
from claude_trio.protocol.fanout.governor import GovernorFigures
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage, add_usage

__all__ = [
    "BatchItem",
    "BatchProgress",
    "BatchReport",
    "BatchResult",
    "RetryPolicy",
    "batch_command",
    "run_batch",
]

#: How long cancelling an item may take to abort its session (shielded).
ABORT_GRACE = 30.0
#: How long writing one result line may take when the batch is being cancelled.
WRITE_GRACE = 10.0


@attrs.frozen(kw_only=True)
class BatchReport:
    """What :func:`run_batch` did: ``results`` in the order they finished, ``not_started``
    (keys left out by the budget), and the last progress snapshot."""

    results: tuple[BatchResult, ...]
    not_started: tuple[str, ...]
    progress: BatchProgress


# -- one attempt ----------------------------------------------------------------------------------


def attempt_key(run_id: str, item_key: str, generation: int) -> str:
    """The idempotency key of an item's ``open`` (``protocol/fanout/idempotency.py``): one
    per run, item and session generation (a new one only once a session of the item was
    opened and came to nothing: that retry is meant to run again)."""
    digest = hashlib.sha256(item_key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"batch:{run_id}:{digest}:{generation}"


async def _attempt(host: SessionHost, item: BatchItem, key: str) -> tuple[Attempt, bool]:
    """One session of ``item`` on ``host``, followed to its final event; and whether a
    session was opened (then a retry needs a new key)."""
    await trio.lowlevel.checkpoint()
    attempt = Attempt()
    try:
        handle = await host.open(item.params, label=item.key[:256], idempotency_key=key)
    except RemoteOpError as exc:
        attempt.start_error = str(exc)
        # the server at its limit, closing, or failing: later may work; bad params never do
        attempt.start_error_retryable = exc.code in ("limit_reached", "internal")
        return attempt, False
    except ConnectionLostError as exc:
        attempt.start_error = str(exc)
        attempt.start_error_retryable = True
        return attempt, False
    try:
        async with handle.subscribe() as events:
            async for event in events:
                attempt.feed(event)
    except (ReplayGapError, SessionLostError) as exc:
        # Followed too far behind (the host no longer holds what came next), or the host
        # forgot it: what it came to is not known here, so it runs again.
        attempt.start_error = str(exc)
        attempt.start_error_retryable = True
    except BaseException:
        # A host's session does not stop with its follower: stop it.
        with trio.move_on_after(ABORT_GRACE, shield=True):
            await handle.abort()
        raise
    return attempt, True


# -- the batch -------------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Run:
    items: collections.deque[BatchItem]
    total: int
    skipped: int
    budget: float | None
    spent_before: float
    on_progress: Callable[[BatchProgress], None] | None
    done: int = 0
    failed: int = 0
    running: int = 0
    retrying: int = 0
    cost: float = 0.0
    usage: Usage = ZERO_USAGE
    not_started: list[str] = attrs.field(factory=list)
    results: list[BatchResult] = attrs.field(factory=list)

    @property
    def spent(self) -> float:
        return self.spent_before + self.cost

    def over_budget(self) -> bool:
        return self.budget is not None and self.spent >= self.budget

    def progress(self) -> BatchProgress:
        return BatchProgress(
            total=self.total,
            done=self.done,
            failed=self.failed,
            running=self.running,
            retrying=self.retrying,
            queued=len(self.items),
            skipped=self.skipped,
            not_started=len(self.not_started),
            input_tokens=self.usage.input_tokens,
            output_tokens=self.usage.output_tokens,
            cost_usd=self.cost,
            spent=self.spent,
        )

    def changed(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress())


async def run_batch(
    items: Sequence[BatchItem],
    runner: SessionHost,
    *,
    max_live: int = 4,
    budget: float | None = None,
    spent: float = 0.0,
    skipped: int = 0,
    retry: RetryPolicy | None = None,
    on_result: Callable[[BatchResult], Awaitable[None]] | None = None,
    on_progress: Callable[[BatchProgress], None] | None = None,
    rng: random.Random | None = None,
    run_id: str | None = None,
) -> BatchReport:
    """Run ``items`` on ``runner``, any session host (``actors/fanout/hosts.py``: a fleet, a Redis
    cluster's, a gateway client); see the module docstring.

    ``spent``: cost already spent on this batch (counts toward ``budget``); ``skipped``:
    items done earlier, for the progress counts only. ``rng``: the source of the retry
    jitter (a seeded one makes the waits reproducible).

    Every item's ``open`` carries an idempotency key made of ``run_id`` (default: a fresh
    one per call), the item's key and its session generation (:func:`attempt_key`), so an
    open sent again after a lost reply, a dropped connection or a failed gateway of a cluster
    returns the item's session instead of starting another: an item runs once per
    generation. A later call with the same ``run_id`` (within the host's key lifetime) finds
    the sessions an earlier one opened.
    """
    if not isinstance(runner, SessionHost):
        raise InvalidParamsError(
            "runner",
            runner,
            "a session host (actors/fanout/hosts.py): a Fleet (open_fleet), a GatewayClient "
            "(connect_gateway), a RedisFleet, or your own",
        )
    check_int("max_live", max_live, 1)
    if budget is not None:
        check_number("budget", budget, above=0, allowed="a cost in USD > 0, or None")
    keys = [item.key for item in items]
    if len(set(keys)) != len(keys):
        raise InvalidParamsError("items", "duplicate keys", "items with unique keys")
    retry = retry or RetryPolicy()
    rng = rng or random.Random()
    run = str(uuid.uuid4()) if run_id is None else run_id
    if not (isinstance(run, str) and run.isprintable() and 0 < len(run.strip()) <= 128):
        raise InvalidParamsError("run_id", run, "a non-empty printable string (<= 128)")
    state = _Run(
        items=collections.deque(items),
        total=len(items) + skipped,
        skipped=skipped,
        budget=budget,
        spent_before=spent,
        on_progress=on_progress,
    )

    async def run_item(item: BatchItem) -> BatchResult:
        cost = 0.0
        attempts = 0
        generation = 1
        while True:
            attempts += 1
            attempt, opened = await _attempt(runner, item, attempt_key(run, item.key, generation))
            generation += opened
            cost += attempt.usage.cost_usd
            state.cost += attempt.usage.cost_usd
            state.usage = add_usage(state.usage, attempt.usage)
            if attempt.ok or not attempt.retryable or attempts > retry.retries:
                return BatchResult.of(item.key, attempt, attempts=attempts, cost_usd=cost)
            state.running -= 1
            state.retrying += 1
            state.changed()
            await trio.sleep(retry.delay(attempts, attempt.retry_after, rng))
            state.retrying -= 1
            state.running += 1
            state.changed()

    async def worker() -> None:
        await trio.lowlevel.checkpoint()
        while state.items:
            if state.over_budget():
                state.not_started.extend(item.key for item in state.items)
                state.items.clear()
                state.changed()
                return
            item = state.items.popleft()
            state.running += 1
            state.changed()
            result = await run_item(item)
            state.running -= 1
            if result.ok:
                state.done += 1
            else:
                state.failed += 1
            state.results.append(result)
            if on_result is not None:
                # Finished is finished: the result is kept even if the batch is being
                # cancelled meanwhile.
                with trio.move_on_after(WRITE_GRACE, shield=True):
                    await on_result(result)
            state.changed()

    state.changed()
    async with trio.open_nursery() as nursery:
        for _ in range(min(max_live, len(items))):
            nursery.start_soon(worker)
    return BatchReport(
        results=tuple(state.results),
        not_started=tuple(state.not_started),
        progress=state.progress(),
    )


# -- the command -----------------------------------------------------------------------------------


class ResultsFile:
    """The ``--out`` file: appended to, one synced line per result."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def prepare(self) -> tuple[frozenset[str], float]:
        """The keys already done and the cost spent, from an existing file; a last line cut
        short (a crash while writing it) is cut off, so the next line starts clean."""
        if not self.path.exists():
            return frozenset(), 0.0
        data = self.path.read_bytes()
        so_far = read_results(data)
        if so_far.whole_bytes < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(so_far.whole_bytes)
        return so_far.done, so_far.spent

    def open(self) -> None:
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, result: BatchResult) -> None:
        assert self._file is not None
        self._file.write(dumps(result.to_json()) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _eta(progress: BatchProgress, elapsed: float) -> str:
    finished = progress.finished
    left = progress.running + progress.retrying + progress.queued
    if not finished or not left:
        return "-"
    seconds = elapsed / finished * left
    return f"{seconds:.0f}s"


def governor_line(figures: GovernorFigures) -> str:
    """The fleet governor's state in one line: ``paused: rate limit, resumes 12:03:10 ·
    concurrency 2/8``, or ``concurrency 8/8`` when it runs freely."""
    concurrency = f"concurrency {figures.limit}/{figures.max_live}"
    if figures.paused and figures.resumes_at is not None:
        return f"paused: rate limit, resumes {clock_time(figures.resumes_at)} · {concurrency}"
    return concurrency


class LiveProgress:
    """The live display on a terminal (rich): one table, refreshed a few times a second."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._started = time.monotonic()
        self._progress: BatchProgress | None = None
        self._governor: GovernorFigures | None = None
        self._live = Live(console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveProgress:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.update(self._render(), refresh=True)
        self._live.__exit__(None, None, None)

    def update(self, progress: BatchProgress) -> None:
        self._progress = progress
        self._live.update(self._render())

    def governor(self, figures: GovernorFigures) -> None:
        self._governor = figures
        self._live.update(self._render())

    def result(self, result: BatchResult) -> None:
        if not result.ok:
            self._live.console.print(Text(f"✗ {result.key}: {result.error}", style="red"))

    def _render(self) -> Table:
        p = self._progress
        elapsed = time.monotonic() - self._started
        table = Table(show_header=True, header_style="bold", box=None)
        if self._governor is not None:
            table.caption = governor_line(self._governor)
        for column in ("done", "running", "queued", "failed", "tokens in/out", "cost",
                       "elapsed", "ETA"):  # fmt: skip
            table.add_column(column, justify="right")
        if p is None:
            return table
        table.add_row(
            f"{p.done + p.skipped}/{p.total}",
            str(p.running + p.retrying) + (f" ({p.retrying} retrying)" if p.retrying else ""),
            str(p.queued),
            Text(str(p.failed), style="red" if p.failed else ""),
            f"{p.input_tokens:,}/{p.output_tokens:,}",
            f"${p.cost_usd:.4f}",
            f"{elapsed:.0f}s",
            _eta(p, elapsed),
        )
        return table


class PlainProgress:
    """Plain lines (not a terminal): one per finished item."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._progress: BatchProgress | None = None
        self._shown = 0  # results shown (the snapshot may already count a later one)
        self._governor_shown: str | None = None

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, progress: BatchProgress) -> None:
        self._progress = progress

    def governor(self, figures: GovernorFigures) -> None:
        """A line when the governor's state changes (paused, resumed, limit)."""
        line = governor_line(figures)
        if (
            self._governor_shown is None
            and not figures.paused
            and figures.limit == (figures.max_live)
        ):
            self._governor_shown = line  # nothing to say while it runs freely
            return
        if line != self._governor_shown:
            self._governor_shown = line
            self._console.print(line, markup=False, highlight=False, soft_wrap=True)

    def result(self, result: BatchResult) -> None:
        p = self._progress
        self._shown += 1
        count = f"[{self._shown + p.skipped}/{p.total}] " if p is not None else ""
        status = "ok" if result.ok else f"failed: {result.error}"
        tries = f" ({result.attempts} attempts)" if result.attempts > 1 else ""
        self._console.print(
            f"{count}{result.key} {status} ${result.cost_usd:.4f}{tries}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


class _Shown:
    """The progress display, best effort: once nobody reads the output any more (``| head``:
    a broken pipe, which rich turns into ``SystemExit``), stdout goes to /dev/null and the
    batch goes on - its results are in the results file, not on the screen."""

    def __init__(self, display: LiveProgress | PlainProgress) -> None:
        self._display: LiveProgress | PlainProgress | None = display

    def _call(self, method: str, *args: object) -> None:
        if self._display is None:
            return
        try:
            getattr(self._display, method)(*args)
        except (BrokenPipeError, SystemExit):
            self._display = None
            _silence_stdout()

    def __enter__(self) -> _Shown:
        self._call("__enter__")
        return self

    def __exit__(self, *exc: object) -> None:
        self._call("__exit__", None, None, None)

    def update(self, progress: BatchProgress) -> None:
        self._call("update", progress)

    def governor(self, figures: GovernorFigures) -> None:
        self._call("governor", figures)

    def result(self, result: BatchResult) -> None:
        self._call("result", result)


def _silence_stdout() -> None:
    """Point stdout at /dev/null once its reader is gone (the recipe of the Python docs,
    "Note on SIGPIPE"), so no later write or flush fails."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


@asynccontextmanager
async def _open_runner(
    args: argparse.Namespace, token: str | None
) -> AsyncIterator[SessionHost]:
    if args.remote is not None:
        assert token is not None
        async with connect_gateway(args.remote, token=token) as client:
            yield client
        return
    env = None
    if args.offline:
        from claude_trio.offline import open_offline_model

        async with (
            open_offline_model() as offline,
            open_fleet(
                max_live=args.max_live, env=offline.env, governor=governor_config(args)
            ) as fleet,
        ):
            yield fleet
        return
    async with open_fleet(max_live=args.max_live, env=env, governor=governor_config(args)) as fleet:
        yield fleet


GOVERNOR_REFRESH = 0.5
"""Seconds between two looks at a local fleet governor's figures for the display."""


async def _watch_governor(runner: SessionHost, display: _Shown) -> None:
    """Show the governor's state while the batch runs: a local fleet's, read every
    ``GOVERNOR_REFRESH``; or the server's, which pushes them to a gateway client as they
    change (``GatewayClient.follow_governor``)."""
    if isinstance(runner, GatewayClient):
        async with runner.follow_governor() as feed:
            async for figures in feed:
                if figures is not None:
                    display.governor(figures)
        return
    while True:
        figures = await runner_governor(runner)
        if figures is not None:
            display.governor(figures)
        await trio.sleep(GOVERNOR_REFRESH)


async def runner_governor(runner: SessionHost) -> GovernorFigures | None:
    """The governor figures of a host now, where it has them (a fleet, a gateway client)."""
    if isinstance(runner, Fleet):
        await trio.lowlevel.checkpoint()
        return runner.statistics().governor
    if isinstance(runner, GatewayClient):
        return await runner.governor()
    await trio.lowlevel.checkpoint()
    return None


async def _batch(
    args: argparse.Namespace,
    items: list[BatchItem],
    results_file: ResultsFile,
    spent: float,
    skipped: int,
    token: str | None,
    console: Console,
) -> tuple[int, BatchReport | None]:
    display = _Shown(LiveProgress(console) if console.is_terminal else PlainProgress(console))

    async def save(result: BatchResult) -> None:
        # Written and synced first: what the display shows as done is on disk.
        await trio.to_thread.run_sync(results_file.write, result)
        display.result(result)

    interrupted = False
    report: BatchReport | None = None
    failure: ClaudeTrioError | None = None
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal interrupted
                async for _ in signals:  # the first stops the batch; more change nothing
                    interrupted = True
                    nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            try:
                with display:
                    async with _open_runner(args, token) as runner, trio.open_nursery() as inner:
                        inner.start_soon(_watch_governor, runner, display)
                        report = await run_batch(
                            items,
                            runner,
                            max_live=args.max_live,
                            budget=args.budget,
                            spent=spent,
                            skipped=skipped,
                            retry=RetryPolicy(retries=args.retries),
                            on_result=save,
                            on_progress=display.update,
                        )
                        inner.cancel_scope.cancel()  # the governor's watch
            except ClaudeTrioError as exc:  # the gateway cannot be reached, or refused us
                failure = exc
            nursery.cancel_scope.cancel()
    if interrupted:
        return EXIT_INTERRUPTED, report
    if failure is not None:
        errors = Console(stderr=True, highlight=False, soft_wrap=True)
        errors.print(f"claude-trio batch: {failure}", markup=False, style="red")
        return EXIT_SESSION_ERROR, None
    assert report is not None
    ok = report.progress.failed == 0 and not report.not_started
    return (EXIT_OK if ok else EXIT_SESSION_ERROR), report


def batch_command(args: argparse.Namespace) -> int:
    """``claude-trio batch``: see the module docstring for what it does and its exit codes."""
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    console = Console(highlight=False, soft_wrap=True)
    source = Path(args.prompts)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        errors.print(f"claude-trio batch: cannot read {args.prompts}: {exc}", markup=False)
        return EXIT_USAGE
    try:
        items = parse_items(lines, source=args.prompts, defaults={"model": args.model})
    except BatchFileError as exc:
        errors.print(f"claude-trio batch: {exc}", markup=False)
        return EXIT_USAGE
    if not items:
        errors.print(f"claude-trio batch: {args.prompts} holds no items", markup=False)
        return EXIT_USAGE
    out = Path(args.out) if args.out else source.with_name(source.stem + ".results.jsonl")
    token = None
    if args.remote is not None:
        token = os.environ.get("CLAUDE_TRIO_TOKEN")
        if not token:
            errors.print(
                "claude-trio batch: --remote needs the server's token in CLAUDE_TRIO_TOKEN",
                markup=False,
            )
            return EXIT_USAGE
    elif not args.offline and not has_credentials(os.environ):
        errors.print(NO_CREDENTIALS_MESSAGE, markup=False)
        errors.print("  Or try it offline: claude-trio batch --offline ...", markup=False)
        return EXIT_USAGE
    results_file = ResultsFile(out)
    try:
        done, spent = results_file.prepare()
        results_file.open()
    except OSError as exc:
        errors.print(f"claude-trio batch: cannot use --out {out}: {exc}", markup=False)
        return EXIT_USAGE
    pending = [item for item in items if item.key not in done]
    skipped = len(items) - len(pending)
    if not pending:
        results_file.close()
        console.print(f"all {len(items)} items are done already (results in {out})", markup=False)
        return EXIT_OK
    if skipped:
        console.print(
            f"{skipped} of {len(items)} items are done already (in {out}); running the other "
            f"{len(pending)}",
            markup=False,
        )
    report: BatchReport | None = None
    try:
        code, report = trio.run(_batch, args, pending, results_file, spent, skipped, token, console)
    except KeyboardInterrupt:  # a Ctrl-C while trio started or stopped
        code = EXIT_INTERRUPTED
    finally:
        results_file.close()
    if report is not None:
        p = report.progress
        line = (
            f"{p.total} items: {p.done + p.skipped} done, {p.failed} failed"
            + (f", {len(report.not_started)} not started (budget)" if report.not_started else "")
            + f" · ${p.cost_usd:.4f} this run · results in {out}"
        )
        console.print(line, markup=False)
    elif code == EXIT_INTERRUPTED:
        console.print(f"interrupted; finished results are in {out}", markup=False)
    return code
