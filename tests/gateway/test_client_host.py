"""The gateway client is a session host: the conformance suite through a real
``serve_gateway`` over real websockets on 127.0.0.1, its fleet running FakeCLI sessions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from gateway_kit import TOKEN, gateway

from claude_trio.client import ClientConfig, GatewayClient, connect_gateway
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import GatewayError, ReplayGapError, ResyncRequiredError
from claude_trio.testing import conformance_cli, run_host_conformance

CONFIG = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)


async def test_the_gateway_client_keeps_every_host_contract() -> None:
    with trio.fail_after(120):
        async with gateway(conformance_cli()) as (_, port):

            @asynccontextmanager
            async def client() -> AsyncIterator[GatewayClient]:
                url = f"ws://127.0.0.1:{port}/"
                async with connect_gateway(url, token=TOKEN, config=CONFIG) as gw:
                    yield gw

            await run_host_conformance(client)


async def test_subscribe_after_open_reads_what_the_client_queued() -> None:
    """Right after ``open`` the client already follows the session from its first event:
    ``subscribe()`` and ``result()`` read that, they do not attach again (one attach, the
    open's, for the whole execution)."""
    with trio.fail_after(20):
        async with (
            gateway(conformance_cli()) as (_, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CONFIG) as gw,
        ):
            sent: list[str] = []
            submit = gw._submit

            def record(pending: Any) -> None:
                sent.append(pending.op.op)
                submit(pending)

            gw._submit = record  # type: ignore[method-assign]
            session = await gw.open(ExecuteParams(prompt="say:queued"))
            transcript = await session.result()
            assert transcript.text == "queued"
            seqs = [e.seq for e in transcript.events]
            assert seqs == list(range(1, seqs[-1] + 1))
            assert sent == ["open"]
            # Once read, a subscription from the start replays it: the server sends it again.
            async with session.subscribe(0) as events:
                again = [event async for event in events]
            assert [e.seq for e in again] == [e.seq for e in transcript.events]
            # And one from the end ends at once: nothing comes after the final event.
            async with session.subscribe(again[-1].seq) as events:
                assert [event async for event in events] == []
            assert sent == ["open", "list", "attach", "list"]


async def test_a_session_found_with_get_is_followed_from_subscribe_on() -> None:
    """Another client's handle (``get``) follows nothing until asked: then its result, its
    usage and a continue are the same as the opener's."""
    with trio.fail_after(20):
        async with (
            gateway(conformance_cli()) as (_, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CONFIG) as a,
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=CONFIG) as b,
        ):
            opened = await a.open(ExecuteParams(prompt="say:shared"))
            first = await opened.result()
            found = await b.get(opened.id)
            assert found is not opened
            assert found.id == opened.id
            assert found.usage == opened.usage == first.usage
            assert (await found.result()).text == "shared"
            continued = await b.continue_(opened.id, "say:by b")
            assert continued is found
            assert (await continued.result()).text == "by b"
            (info,) = await a.list()
            assert info.executions == 2
            assert continued.usage == info.usage
            assert await b.get(opened.id) is found


def test_a_gateway_resync_is_the_replay_gap_every_host_raises() -> None:
    error = ResyncRequiredError("s-1", 7, 12)
    assert isinstance(error, ReplayGapError)
    assert isinstance(error, GatewayError)
    assert (error.session_id, error.last_seq, error.oldest_seq) == ("s-1", 7, 12)
    assert "the server no longer holds the events after seq 7" in str(error)
