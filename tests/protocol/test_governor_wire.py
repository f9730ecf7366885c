"""What the governor reads survives the wire: a rate-limit warning keeps its status, reset
time and type as fields, so a warning decoded from a gateway's stream still pauses a governor;
a retry keeps its status and delay."""

from __future__ import annotations

from claude_agent_sdk import types as sdk

from claude_trio.protocol.fanout.codec import event_from_json, event_to_json
from claude_trio.protocol.fanout.governor import (
    RateLimitNotice,
    RetryNotice,
    signal_of,
)
from claude_trio.protocol.session.events import Retry, WarningEvent
from claude_trio.protocol.session.mapper_system import rate_limit


def test_a_rate_limit_warning_round_trips_with_what_the_governor_reads() -> None:
    info = sdk.RateLimitInfo(
        status="rejected", resets_at=1_800_000_100, rate_limit_type="five_hour"
    )
    warning = rate_limit(sdk.RateLimitEvent(rate_limit_info=info, uuid="u", session_id="s"))
    assert isinstance(warning, WarningEvent)
    assert (warning.rate_limit_status, warning.resets_at, warning.rate_limit_type) == (
        "rejected",
        1_800_000_100.0,
        "five_hour",
    )
    decoded = event_from_json(event_to_json(warning))
    assert decoded.raw is None  # the frame itself does not travel
    assert decoded == warning
    assert signal_of(decoded) == RateLimitNotice(
        status="rejected", resets_at=1_800_000_100.0, rate_limit_type="five_hour"
    )


def test_a_retry_round_trips_with_its_status_and_delay() -> None:
    retry = Retry(attempt=1, max_retries=10, delay_ms=2500.0, error_status=529, seq=3)
    decoded = event_from_json(event_to_json(retry))
    assert signal_of(decoded) == RetryNotice(error_status=529, delay_ms=2500.0, error=None)
