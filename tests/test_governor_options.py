"""The fleet governor's options of ``serve``, ``batch`` and ``worker``."""

from __future__ import annotations

from claude_trio.cli.args import build_parser
from claude_trio.cli.number_args import governor_config
from claude_trio.protocol.fanout.governor import GovernorConfig


def test_the_governor_options_of_serve_and_batch() -> None:
    parser = build_parser()
    serve = parser.parse_args(
        ["serve", "--max-live", "6", "--fleet-budget", "2.5", "--on-budget", "abort"]
    )
    assert governor_config(serve) == GovernorConfig(
        max_live=6, initial_limit=2, budget_usd=2.5, on_budget="abort", starts_per_second=4.0
    )
    batch = parser.parse_args(["batch", "items.jsonl", "--no-governor"])
    assert governor_config(batch) is None
    spaced = parser.parse_args(["batch", "items.jsonl", "--starts-per-second", "1"])
    config = governor_config(spaced)
    assert config is not None
    assert (config.starts_per_second, config.budget_usd) == (1.0, None)


def test_the_governor_options_of_worker() -> None:
    parser = build_parser()
    worker = parser.parse_args(
        ["worker", "--redis", "redis://h:6379/0", "--max-live", "3", "--fleet-budget", "1"]
    )
    assert governor_config(worker) == GovernorConfig(
        max_live=3, initial_limit=2, budget_usd=1.0, starts_per_second=4.0
    )
    assert worker.local_governor is False  # shared in Redis by default
    alone = parser.parse_args(["worker", "--redis", "redis://h/0", "--local-governor"])
    assert alone.local_governor is True
    off = parser.parse_args(["worker", "--redis", "redis://h/0", "--no-governor"])
    assert governor_config(off) is None
