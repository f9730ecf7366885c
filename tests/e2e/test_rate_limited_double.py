"""The rate-limited Messages API double: raw HTTP against each limit, then the real CLI
retrying through it."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from helpers import (
    assert_no_child_processes,
    assert_single_final_terminal,
    dump,
    of_type,
    params,
)
from test_model_double import connect, messages_body, streamed_text

from claude_trio import open_session
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.session.events import Event, Result, Retry
from claude_trio.testing.model_double import (
    ModelDouble,
    RateLimits,
    RateLimitStatistics,
    Reply,
    Rule,
    Script,
    is_main_agent,
    open_model_double,
    turns,
)

pytestmark = pytest.mark.e2e


async def test_above_k_requests_at_once_the_next_gets_429_with_retry_after() -> None:
    gate = trio.Event()
    script = Script(
        [
            Rule(reply=Reply.text("one", gate=gate)),
            Rule(reply=Reply.text("two", gate=gate)),
            Rule(reply=Reply.text("three")),
        ]
    )
    limits = RateLimits(max_concurrent=2, retry_after=3)
    async with open_model_double(script, rate_limits=limits) as double:
        texts: list[str] = []

        async def held() -> None:
            reply = await (await connect(double)).request("POST", "/v1/messages", messages_body())
            texts.append(streamed_text(reply))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(held)
            nursery.start_soon(held)
            while double.rate_limit_statistics().in_flight < 2:  # noqa: ASYNC110 (the server's count)
                await trio.sleep(0.001)
            client = await connect(double)
            refused = await client.request("POST", "/v1/messages", messages_body())
            assert refused.status == 429
            assert refused.headers["retry-after"] == "3"
            assert refused.json()["error"]["type"] == "rate_limit_error"
            gate.set()
        # Once the two are answered there is room; the refused request used no rule.
        again = await client.request("POST", "/v1/messages", messages_body())
        assert (again.status, streamed_text(again)) == (200, "three")
        assert sorted(texts) == ["one", "two"]
        assert double.rate_limit_statistics() == RateLimitStatistics(
            admitted=3, rejected_429=1, rejected_529=0, in_flight=0, max_in_flight=2
        )
        assert len(double.requests) == 4  # every request is recorded, refused ones too


async def test_after_n_requests_a_minute_429_says_when_the_window_frees(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limits = RateLimits(per_minute=2)
    async with open_model_double(
        Script([Rule(reply=Reply.text("ok"), times=None)]), rate_limits=limits
    ) as double:
        client = await connect(double)
        statuses = []
        for _ in range(2):
            statuses.append((await client.request("POST", "/v1/messages", messages_body())).status)
            await trio.sleep(10)
        refused = await client.request("POST", "/v1/messages", messages_body())  # at t=20
        assert statuses == [200, 200]
        assert (refused.status, refused.headers["retry-after"]) == (429, "40")
        await trio.sleep(39)
        assert (await client.request("POST", "/v1/messages", messages_body())).status == 429
        await trio.sleep(1)  # t=60: the first request left the window
        assert (await client.request("POST", "/v1/messages", messages_body())).status == 200
        assert double.rate_limit_statistics().rejected_429 == 2


async def test_529_bursts_come_at_the_end_of_every_window_of_requests() -> None:
    limits = RateLimits(overload_every=4, overload_burst=2, retry_after=0.5)
    async with open_model_double(
        Script([Rule(reply=Reply.text("ok"), times=None)]), rate_limits=limits
    ) as double:
        client = await connect(double)
        replies = [await client.request("POST", "/v1/messages", messages_body()) for _ in range(8)]
        # count_tokens is not a model call: never limited, not counted.
        tokens = await client.request("POST", "/v1/messages/count_tokens", messages_body())
    assert [r.status for r in replies] == [200, 200, 529, 529, 200, 200, 529, 529]
    assert replies[2].json()["error"]["type"] == "overloaded_error"
    assert replies[2].headers["retry-after"] == "0.5"
    assert tokens.status == 200
    assert double.rate_limit_statistics().rejected_529 == 4


async def test_a_client_that_hangs_up_mid_stream_frees_its_place() -> None:
    gate = trio.Event()
    limits = RateLimits(max_concurrent=1)
    script = Script([Rule(reply=Reply.text("held", gate=gate)), Rule(reply=Reply.text("next"))])
    async with open_model_double(script, rate_limits=limits) as double:
        assert double.port is not None
        stream = await trio.open_tcp_stream("127.0.0.1", double.port)
        body = b'{"model":"m","stream":true,"messages":[]}'
        await stream.send_all(
            b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s"
            % (len(body), body)
        )
        while double.rate_limit_statistics().in_flight < 1:  # noqa: ASYNC110 (the server's count)
            await trio.sleep(0.001)
        await stream.aclose()
        gate.set()
        while double.rate_limit_statistics().in_flight:  # noqa: ASYNC110 (the server's count)
            await trio.sleep(0.001)
        reply = await (await connect(double)).request("POST", "/v1/messages", messages_body())
        assert (reply.status, streamed_text(reply)) == (200, "next")


def test_bad_limits_name_the_field() -> None:
    with pytest.raises(InvalidParamsError, match="max_concurrent"):
        RateLimits(max_concurrent=0)
    with pytest.raises(InvalidParamsError, match=r"overload_burst.*overload_every \(2\)"):
        RateLimits(overload_every=2, overload_burst=3)
    with pytest.raises(InvalidParamsError, match="retry_after"):
        RateLimits(retry_after=-1)


async def test_the_real_cli_retries_a_429_and_both_sessions_complete(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    """Two sessions against an account that takes one request at a time: the first model call
    is held until the second has been refused, so the CLI must retry it, and both finish."""
    gate = trio.Event()
    model_double.responder = Script(
        [
            Rule(reply=Reply.text("first answer", gate=gate), when=is_main_agent),
            Rule(reply=Reply.text("second answer"), when=is_main_agent),
        ]
    )
    model_double.rate_limits = RateLimits(max_concurrent=1, retry_after=1)
    env = {**hermetic, "CLAUDE_CODE_MAX_RETRIES": "3"}
    streams: dict[str, list[Event]] = {"a": [], "b": []}

    async def run(name: str) -> None:
        folder = tmp_path / name
        folder.mkdir()
        async with open_session(params(folder, f"hello from {name}"), env=env) as session:
            async for event in session.events:
                streams[name].append(event)

    async def open_gate_after_a_refusal() -> None:
        while model_double.rate_limit_statistics().rejected_429 < 1:  # noqa: ASYNC110 (a CLI's request)
            await trio.sleep(0.05)
        gate.set()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(open_gate_after_a_refusal)
            nursery.start_soon(run, "a")
            nursery.start_soon(run, "b")
    assert_no_child_processes()

    stats = model_double.rate_limit_statistics()
    assert stats.rejected_429 >= 1
    assert stats.max_in_flight == 1
    answers = set()
    retries = []
    for events in streams.values():
        assert_single_final_terminal(events)
        [result] = of_type(events, Result)
        assert (result.is_error, result.final) == (False, True), dump(events)
        answers.add(result.text)
        retries += of_type(events, Retry)
    assert answers == {"first answer", "second answer"}
    # The refused session's CLI said it retried after a 429, once per refusal.
    assert [r.error_status for r in retries] == [429] * stats.rejected_429
    assert len(model_double.message_requests) == 2 + stats.rejected_429


def test_turns_scripts_work_unchanged_without_limits() -> None:
    # rate_limits defaults to None: the double answers as before and counts nothing.
    double = ModelDouble(turns(Reply.text("x")))
    assert double.rate_limits is None
    assert double.rate_limit_statistics().admitted == 0
