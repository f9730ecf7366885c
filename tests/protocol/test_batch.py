"""Batches, the pure part (``protocol/fanout/batch.py``): items, attempts, retries, results
files."""

from __future__ import annotations

import json
import random

import pytest

from claude_trio.errors import BatchFileError
from claude_trio.protocol.fanout.batch import (
    PARAMS_FIELDS,
    Attempt,
    BatchResult,
    RetryPolicy,
    parse_items,
    read_results,
)
from claude_trio.protocol.session.events import Aborted, Error, Result, Retry, TextDelta
from claude_trio.protocol.session.usage import Usage

USAGE = Usage(input_tokens=10, output_tokens=5, cost_usd=0.25)


def result(**fields: object) -> Result:
    base: dict[str, object] = {
        "subtype": "success",
        "is_error": False,
        "session_id": "cli-1",
        "usage": USAGE,
        "execution_usage": USAGE,
        "session_usage": USAGE,
        "final": True,
        "text": "the answer",
    }
    return Result(**{**base, **fields})  # type: ignore[arg-type]


# -- items (rule 1) ------------------------------------------------------------------------------


def test_items_are_prompts_or_objects_keyed_by_line_unless_they_say() -> None:
    lines = [
        json.dumps("first"),
        "",
        json.dumps({"key": "mine", "prompt": "second", "max_turns": 2}),
        json.dumps({"prompt": "third", "model": "opus"}),
    ]
    items = parse_items(lines, defaults={"model": "sonnet"})
    assert [(i.key, i.params.prompt, i.params.model) for i in items] == [
        ("1", "first", "sonnet"),
        ("mine", "second", "sonnet"),
        ("4", "third", "opus"),
    ]
    assert items[1].params.max_turns == 2


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a prompt"),
        ('{"prompt": ""}', "params.prompt"),
        ('{"prompt": "x", "colour": 1}', "unknown field(s) ['colour']"),
        ('{"prompt": "x", "key": 7}', "key=7"),
        ('{"prompt": "x", "max_turns": 0}', "params.max_turns"),
    ],
)
def test_a_bad_line_is_an_error_naming_the_line(line: str, problem: str) -> None:
    with pytest.raises(BatchFileError) as caught:
        parse_items(['"fine"', line], source="jobs.jsonl")
    assert str(caught.value).startswith("jobs.jsonl, line 2: ")
    assert problem in str(caught.value)


def test_every_bad_line_is_named_with_its_number_before_anything_runs() -> None:
    lines = ['"fine"', "{not json", '"also fine"', "[1]", "", '{"prompt": "x", "colour": 1}']
    with pytest.raises(BatchFileError) as caught:
        parse_items(lines, source="jobs.jsonl")
    assert str(caught.value).splitlines() == [
        "jobs.jsonl: 3 lines are not items:",
        "jobs.jsonl, line 2: not JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1))",
        "jobs.jsonl, line 4: expected a prompt (a JSON string) or an object",
        "jobs.jsonl, line 6: unknown field(s) ['colour']; an item has key, "
        + ", ".join(PARAMS_FIELDS),
    ]


def test_keys_must_be_unique() -> None:
    lines = [json.dumps({"key": "a", "prompt": "x"}), json.dumps({"key": "a", "prompt": "y"})]
    with pytest.raises(BatchFileError, match="line 2: key 'a' is already the key of line 1"):
        parse_items(lines)


# -- attempts and retries (rules 2-3) --------------------------------------------------------------


def test_an_attempt_sums_its_turns_and_knows_its_end() -> None:
    attempt = Attempt()
    for event in (
        TextDelta(text="hi"),
        result(final=False),
        Aborted(usage=USAGE, session_id="cli-1"),
    ):
        attempt.feed(event)
    assert attempt.usage == Usage(input_tokens=20, output_tokens=10, cost_usd=0.5)
    assert not attempt.ok
    assert attempt.error == "aborted: aborted"
    assert not attempt.retryable
    assert attempt.session_id == "cli-1"
    done = Attempt()
    done.feed(result())
    assert (done.ok, done.error, done.retryable) == (True, None, False)


@pytest.mark.parametrize(
    ("events", "retryable"),
    [
        ([Error(message="x", code="api_error", status=529, fatal=False),
          result(is_error=True, api_error_status=529)], True),
        ([result(is_error=True, api_error_status=429)], True),
        ([result(is_error=True, api_error_status=None, text="API Error: Overloaded")], True),
        ([result(is_error=True, api_error_status=400, text="bad request")], False),
        ([result(is_error=True, subtype="error_max_turns", text=None)], False),
        ([Error(message="the CLI died", code="cli_exited")], False),
    ],
)  # fmt: skip
def test_only_overloaded_and_rate_limited_attempts_are_retried(
    events: list[object], retryable: bool
) -> None:
    attempt = Attempt()
    for event in events:
        attempt.feed(event)  # type: ignore[arg-type]
    assert attempt.retryable is retryable
    assert not attempt.ok


def test_a_start_error_is_the_error_and_says_whether_to_retry() -> None:
    attempt = Attempt(start_error="open: limit_reached: busy", start_error_retryable=True)
    assert (attempt.error, attempt.retryable) == ("open: limit_reached: busy", True)


def test_the_cli_s_last_retry_delay_is_the_retry_after() -> None:
    attempt = Attempt()
    attempt.feed(Retry(attempt=1, delay_ms=500.0, error_status=429))
    attempt.feed(Retry(attempt=2, delay_ms=7000.0, error_status=429))
    assert attempt.retry_after == 7.0


def test_the_backoff_doubles_to_its_cap_and_never_undercuts_retry_after() -> None:
    policy = RetryPolicy(base=2.0, cap=10.0, jitter=False)
    rng = random.Random(1)
    assert [policy.delay(n, None, rng) for n in (1, 2, 3, 4, 5)] == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert policy.delay(1, 30.0, rng) == 30.0
    jittered = RetryPolicy(base=2.0, cap=10.0)
    delays = [jittered.delay(3, None, rng) for _ in range(200)]
    assert all(4.0 <= d <= 8.0 for d in delays)
    assert len(set(delays)) > 100
    assert jittered.delay(1, 5.0, rng) == 5.0


# -- result lines (rule 4) -------------------------------------------------------------------------


def test_a_result_line_round_trips_through_the_results_file() -> None:
    attempt = Attempt()
    attempt.feed(result())
    line = json.dumps(BatchResult.of("k", attempt, attempts=2, cost_usd=0.3).to_json())
    obj = json.loads(line)
    assert obj == {
        "key": "k",
        "ok": True,
        "text": "the answer",
        "structured_output": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cost_usd": 0.25,
            "context_size": 15,
        },
        "cost_usd": 0.3,
        "error": None,
        "attempts": 2,
        "session": "cli-1",
    }


def test_reading_results_skips_a_cut_line_and_the_last_line_of_a_key_counts() -> None:
    lines = [
        {"key": "a", "ok": True, "cost_usd": 0.5},
        {"key": "b", "ok": False, "cost_usd": 0.25},
        {"key": "c", "ok": False, "cost_usd": 0},
        {"key": "c", "ok": True, "cost_usd": 0.25},
    ]
    whole = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    data = whole + b"garbage that is not json\n" + b'{"key": "d", "ok": tr'
    so_far = read_results(data)
    assert so_far.done == {"a", "c"}
    assert so_far.spent == 1.0
    assert so_far.whole_bytes == len(data) - len(b'{"key": "d", "ok": tr')
    assert so_far.lines == 4
    assert read_results(b"").done == frozenset()
    assert read_results(b'{"key": "x", "ok": true}').whole_bytes == 0  # no whole line yet


def test_an_item_asking_for_structured_output_gets_it_on_its_result_line() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    (item,) = parse_items([json.dumps({"prompt": "count", "output_schema": schema})])
    assert item.params.output_schema == schema
    attempt = Attempt()
    attempt.feed(result(structured_output={"n": 3}))
    line = BatchResult.of("k", attempt, attempts=1, cost_usd=0.25).to_json()
    assert line["structured_output"] == {"n": 3}
