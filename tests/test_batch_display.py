"""The batch command's progress: a live table on a terminal, plain lines otherwise."""

from __future__ import annotations

import contextlib
import datetime
import io
import os

import pytest
from rich.console import Console

from claude_trio import batch as batch_module
from claude_trio.actors.fanout.governor import GovernorFigures
from claude_trio.batch import LiveProgress, PlainProgress
from claude_trio.protocol.fanout.batch import BatchProgress, BatchResult
from claude_trio.protocol.session.usage import Usage


def progress(**fields: int | float) -> BatchProgress:
    base: dict[str, int | float] = {
        "total": 10,
        "done": 3,
        "failed": 1,
        "running": 2,
        "retrying": 1,
        "queued": 2,
        "skipped": 1,
        "not_started": 0,
        "input_tokens": 12_345,
        "output_tokens": 678,
        "cost_usd": 0.1234,
        "spent": 0.2,
    }
    return BatchProgress(**{**base, **fields})  # type: ignore[arg-type]


def test_the_live_table_shows_done_running_queued_failed_tokens_cost_and_eta() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=140, color_system=None)
    with LiveProgress(console) as live:
        live.update(progress())
        live.result(BatchResult(key="k9", ok=False, error="api_error (HTTP 400): bad"))
    text = out.getvalue()
    for shown in ("done", "running", "queued", "failed", "tokens in/out", "cost", "ETA",
                  "4/10", "3 (1 retrying)", "12,345/678", "$0.1234"):  # fmt: skip
        assert shown in text, shown
    assert "✗ k9: api_error (HTTP 400): bad" in text


def test_plain_lines_say_each_item_as_it_finishes() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    with PlainProgress(console) as plain:
        plain.update(progress(done=0, failed=0, skipped=1, total=4))
        plain.result(BatchResult(key="a", ok=True, cost_usd=0.0035, usage=Usage()))
        # two items finished together: the snapshot already counts both
        plain.update(progress(done=2, failed=1, skipped=1, total=4))
        plain.result(BatchResult(key="b", ok=False, error="aborted: x", attempts=3))
        plain.result(BatchResult(key="c", ok=True))
    assert out.getvalue().splitlines() == [
        "[2/4] a ok $0.0035",
        "[3/4] b failed: aborted: x $0.0000 (3 attempts)",
        "[4/4] c ok $0.0000",
    ]


def test_a_closed_output_silences_the_display_and_the_batch_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    silenced: list[bool] = []
    monkeypatch.setattr(batch_module, "_silence_stdout", lambda: silenced.append(True))
    read, write = os.pipe()
    os.close(read)  # nobody reads: `claude-trio batch ... | head -1` after head is gone
    stream = os.fdopen(write, "w")
    try:
        shown = batch_module._Shown(PlainProgress(Console(file=stream, color_system=None)))
        with shown:
            shown.update(progress(done=0, failed=0, skipped=0, total=3))
            for key in "abc":  # the first one meets the broken pipe; no exception escapes
                shown.result(BatchResult(key=key, ok=True))
    finally:
        with contextlib.suppress(BrokenPipeError):
            stream.close()
    assert silenced == [True]


def governor(**fields: object) -> GovernorFigures:
    base: dict[str, object] = {
        "limit": 8,
        "max_live": 8,
        "running": 0,
        "waiting": 0,
        "paused": False,
        "resumes_at": None,
        "starts": 0,
        "refusals": 0,
        "rejections": 0,
        "spent_usd": 0.0,
        "budget_usd": None,
        "overshoot_usd": 0.0,
    }
    return GovernorFigures(**{**base, **fields})  # type: ignore[arg-type]


def test_plain_lines_say_when_the_governor_pauses_and_the_effective_concurrency() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    resumes = datetime.datetime(2026, 12, 3, 12, 3, 10).timestamp()
    with PlainProgress(console) as plain:
        plain.governor(governor())  # running freely: nothing to say
        paused = governor(limit=4, paused=True, resumes_at=resumes)
        plain.governor(paused)
        plain.governor(paused)  # unchanged: said once
        plain.governor(governor(limit=4))
        plain.governor(governor(limit=5))
    assert out.getvalue().splitlines() == [
        "paused: rate limit, resumes 12:03:10 · concurrency 4/8",
        "concurrency 4/8",
        "concurrency 5/8",
    ]


def test_the_live_table_shows_the_governors_pause_and_concurrency() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=140, color_system=None)
    resumes = datetime.datetime(2026, 12, 3, 12, 3, 10).timestamp()
    with LiveProgress(console) as live:
        live.update(progress())
        live.governor(governor(limit=3, paused=True, resumes_at=resumes))
    assert "paused: rate limit, resumes 12:03:10 · concurrency 3/8" in out.getvalue()
