"""The fleet governor through the real CLI: a batch of 40 items at ``max_live=8`` against an
account that takes 3 model requests at once completes 40/40."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from helpers import assert_no_child_processes, params

from claude_trio import DriverConfig
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.batch import BatchItem, RetryPolicy, run_batch
from claude_trio.protocol.fanout.governor import GovernorConfig
from claude_trio.testing.model_double import ModelDouble, RateLimits, Reply, Rule, Script

pytestmark = pytest.mark.e2e


async def test_forty_items_at_max_live_8_against_3_requests_at_once_all_complete(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    # The quickest turns (one text reply, no delay) and short waits: the cost is the 40 CLI
    # starts, which warm up while the governor holds their prompts.
    model_double.responder = Script([Rule(reply=Reply.text("done"), times=None)])
    model_double.rate_limits = RateLimits(max_concurrent=3, retry_after=0.2)
    env = {**hermetic, "CLAUDE_CODE_MAX_RETRIES": "10"}
    items = [BatchItem(key=f"k{i}", params=params(tmp_path, f"item {i}")) for i in range(40)]
    governor = GovernorConfig(
        max_live=8, resume_jitter=0.1, default_retry_after=0.2, starts_per_second=20.0
    )
    with trio.fail_after(240):
        # A loaded machine can take long to start eight CLIs at once: a generous connect time.
        async with open_fleet(
            max_live=8, env=env, governor=governor, config=DriverConfig(connect_timeout=90.0)
        ) as fleet:
            report = await run_batch(
                items, fleet, max_live=8, retry=RetryPolicy(retries=4, base=0.2)
            )
            figures = fleet.statistics().governor
    assert_no_child_processes()
    assert report.progress.done == 40, [r.error for r in report.results if not r.ok]
    assert report.progress.failed == 0
    stats = model_double.rate_limit_statistics()
    assert stats.max_in_flight <= 3
    assert figures is not None
    assert figures.starts >= 40
    # every 429 the CLIs met came back as a retry the governor read
    assert figures.rejections >= stats.rejected_429
    print(
        f"40 items: {stats.admitted} requests answered, {stats.rejected_429} 429s, "
        f"governor limit {figures.limit}/{figures.max_live}, {figures.rejections} rejections seen"
    )
