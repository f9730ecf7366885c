"""The ``inbox`` op over a real gateway: the raw frames, and ``GatewayClient.inbox()``; a
principal sees and answers only its own sessions' requests (real sockets, real time, short)."""

from __future__ import annotations

from typing import Any

import trio
from gateway_kit import ORIGIN, TOKEN, client, gateway

from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout.inbox import InboxChannel
from claude_trio.client import connect_gateway
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.fanout.inbox import (
    InboxArrived,
    InboxChange,
    InboxResolved,
    InboxSnapshot,
)
from claude_trio.protocol.fanout.remote import Principal
from claude_trio.protocol.fanout.wire import (
    ErrorFrame,
    InboxArrivedFrame,
    InboxFrame,
    InboxResolvedFrame,
    OpenedFrame,
)
from claude_trio.testing import FakeCLI, FakeTurn

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef00"
ROOT = "root-token-0123456789abcdef0"
TOKENS = {
    ALICE: Principal(name="alice"),
    BOB: Principal(name="bob"),
    ROOT: Principal(name="ops", admin=True),
}
REPLIES: dict[str, dict[str, Any]] = {}


async def bash_asker(turn: FakeTurn) -> None:
    reply = await turn.ask_permission("Bash", {"command": turn.prompt}, tool_use_id="toolu_1")
    REPLIES[turn.prompt] = reply
    await turn.text(reply["behavior"])


def asking(command: str) -> ExecuteParams:
    return ExecuteParams(prompt=command, permission_mode="default")


async def changes(inbox: InboxChannel, count: int) -> list[InboxChange]:
    return [await inbox.receive() for _ in range(count)]


async def test_the_inbox_op_answers_the_list_and_follows_its_changes() -> None:
    with trio.fail_after(20):
        async with (
            gateway(FakeCLI(bash_asker)) as (_, port),
            client(port) as c,
        ):
            await c.send("inbox", id="bad", follow="yes")
            refused = await c.receive()
            assert isinstance(refused, ErrorFrame)
            assert (refused.id, refused.code) == ("bad", "invalid_field")
            await c.send("inbox", id="i1")
            first = await c.receive()
            assert first == InboxFrame(id="i1", items=())
            sid = await c.open(asking("ls"))
            frames = await c.receive_until(lambda f: isinstance(f, InboxArrivedFrame))
            arrived = frames[-1]
            assert isinstance(arrived, InboxArrivedFrame)
            assert (arrived.item.session, arrived.item.tool) == (sid, "Bash")
            assert arrived.item.input == {"command": "ls"}
            rid = arrived.item.request_id
            await c.send("answer", id="a", session=sid, request=rid, answer="allow")
            frames = await c.receive_until(lambda f: isinstance(f, InboxResolvedFrame))
            assert frames[-1] == InboxResolvedFrame(session=sid, request=rid, outcome="answered")
            # "follow": false answers the list and stops following.
            await c.send("inbox", id="i2", follow=False)
            frames = await c.receive_until(lambda f: isinstance(f, InboxFrame))
            assert frames[-1] == InboxFrame(id="i2", items=())
            await c.send("open", id="o2", params={"prompt": "pwd", "permission_mode": "default"})
            await c.receive_until(lambda f: isinstance(f, OpenedFrame))
            await c.send("list", id="l")
            frames = await c.receive_until(lambda f: getattr(f, "id", None) == "l")
            # the second session's request arrived after the list op: no inbox frame came.
            assert not any(isinstance(f, InboxArrivedFrame) for f in frames)
    assert REPLIES["ls"]["behavior"] == "allow"


async def test_a_principal_sees_and_answers_only_its_sessions_requests() -> None:
    url_of = "ws://127.0.0.1:{}/".format
    with trio.fail_after(20):
        async with (
            gateway(
            FakeCLI(bash_asker), tokens=TOKENS, allowed_origins={ORIGIN}
        ) as (_, port), connect_gateway(url_of(port), token=ALICE) as alice,
            connect_gateway(url_of(port), token=BOB) as bob,
            connect_gateway(url_of(port), token=ROOT) as ops,
            alice.inbox() as alice_inbox,
            ops.inbox() as ops_inbox,
        ):
            assert await alice_inbox.receive() == InboxSnapshot(items=())
            assert await ops_inbox.receive() == InboxSnapshot(items=())
            mine = await alice.open(asking("alice cmd"), label="mine")
            theirs = await bob.open(asking("bob cmd"), label="theirs")
            seen = await changes(ops_inbox, 2)
            assert all(isinstance(c, InboxArrived) for c in seen)
            assert {item.owner for item in ops_inbox.items} == {"alice", "bob"}
            arrived = await alice_inbox.receive()
            assert isinstance(arrived, InboxArrived)
            item = arrived.item
            assert (item.session, item.label, item.owner) == (mine.id, "mine", "alice")
            assert item.age(item.asked_at + 1.0) == 1.0
            (bobs,) = [i for i in ops_inbox.items if i.owner == "bob"]
            # Alice cannot answer Bob's request: for her the session does not exist.
            refused = await alice_inbox.answer(theirs.id, bobs.request_id, "allow")
            assert isinstance(refused, AnswerRejected)
            assert "unknown session" in refused.reason
            accepted = await alice_inbox.answer(mine.id, item.request_id, "deny")
            assert accepted == AnswerAccepted(request_id=item.request_id)
            resolved = InboxResolved(
                session=mine.id, request_id=item.request_id, outcome="answered"
            )
            assert await alice_inbox.receive() == resolved
            assert await ops_inbox.receive() == resolved
            # The admin answers Bob's through its own inbox; Alice hears nothing of it.
            answered = await ops_inbox.answer(theirs.id, bobs.request_id, "allow")
            assert isinstance(answered, AnswerAccepted)
            assert await ops_inbox.receive() == InboxResolved(
                session=theirs.id, request_id=bobs.request_id, outcome="answered"
            )
            await mine.result()
            await theirs.result()
            assert alice_inbox.items == ops_inbox.items == ()
            assert alice_inbox.statistics().queued == 0
    assert REPLIES["alice cmd"]["behavior"] == "deny"
    assert REPLIES["bob cmd"]["behavior"] == "allow"


async def test_after_a_reconnect_the_client_inbox_gets_the_list_again() -> None:
    from proxy_kit import cut_proxy

    from claude_trio.client import ClientConfig

    patient = ClientConfig(reconnect_attempts=1000, backoff_base=0.01, backoff_max=0.02)
    with trio.fail_after(20):
        async with (
            gateway(FakeCLI(bash_asker), allowed_origins=None) as (fleet, port),
            cut_proxy(port) as proxy,
            connect_gateway(proxy.url, token=TOKEN, config=patient) as gw,
            gw.inbox() as inbox,
            fleet.inbox() as local,
        ):
            assert await inbox.receive() == InboxSnapshot(items=())
            assert await local.receive() == InboxSnapshot(items=())
            proxy.refusing = True
            proxy.cut()
            # Asked while the client is away: it never sees this arrival as a change.
            session = await fleet.open(asking("while away"), label="away")
            arrived = await local.receive()
            assert isinstance(arrived, InboxArrived)
            proxy.refusing = False
            again = await inbox.receive()
            assert again == InboxSnapshot(items=(arrived.item,))
            assert inbox.items == (arrived.item,)
            outcome = await inbox.answer(session.id, arrived.item.request_id, "allow")
            assert outcome == AnswerAccepted(request_id=arrived.item.request_id)
            resolved = await inbox.receive()
            assert isinstance(resolved, InboxResolved)
            assert resolved.outcome == "answered"
            assert (await session.result()).text == "allow"
            assert gw.statistics().connections == 2
