"""Tool approvals over the gateway: real websockets on 127.0.0.1, FakeCLI sessions.

Every client attached to a session sees the approval request (with its fields, through the
wire codec) and may answer it with the ``answer`` op; the first answer wins and the others are
told why not. Ordering is forced by waiting for each reply; bounds are ``trio.fail_after``.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from gateway_kit import Client, client, gateway, text_of

from claude_trio import ExecuteParams
from claude_trio.protocol.fanout.wire import EventFrame, ReplyFrame
from claude_trio.protocol.session.events import UserInputRequest, UserInputResolved
from claude_trio.testing import FakeCLI, FakeTurn

BASH = {"command": "make clean"}
SUGGESTION = {
    "type": "addRules",
    "rules": [{"toolName": "Bash", "ruleContent": "make clean"}],
    "behavior": "allow",
    "destination": "session",
}
ASKING = ExecuteParams(prompt="clean up", permission_mode="default")


def approver(replies: list[dict[str, Any]]) -> Any:
    async def script(turn: FakeTurn) -> None:
        replies.append(
            await turn.ask_permission(
                "Bash",
                BASH,
                tool_use_id="toolu_make",
                permission_suggestions=[SUGGESTION],
                blocked_path="/srv/build",
                title="Claude wants to run make clean",
            )
        )
        await turn.text("over")

    return script


async def wait_request(c: Client) -> UserInputRequest:
    frames = await c.receive_until(
        lambda f: isinstance(f, EventFrame) and isinstance(f.event, UserInputRequest)
    )
    event = frames[-1].event  # type: ignore[union-attr]
    assert isinstance(event, UserInputRequest)
    return event


async def answer(c: Client, op_id: str, sid: str, request_id: str, value: Any) -> ReplyFrame:
    await c.send("answer", id=op_id, session=sid, request=request_id, answer=value)
    frames = await c.receive_until(lambda f: isinstance(f, ReplyFrame) and f.id == op_id)
    reply = frames[-1]
    assert isinstance(reply, ReplyFrame)
    return reply


@pytest.mark.parametrize("first", ["opener", "attached"])
async def test_first_answer_wins_over_two_clients(first: str) -> None:
    replies: list[dict[str, Any]] = []
    with trio.fail_after(20):
        async with (
            gateway(FakeCLI(approver(replies))) as (_, port),
            client(port) as a,
            client(port) as b,
        ):
            sid = await a.open(ASKING)
            await b.send("attach", id="att", session=sid, last_seq=None)
            await b.receive_until(lambda f: isinstance(f, ReplyFrame) and f.id == "att")
            seen_a, seen_b = await wait_request(a), await wait_request(b)
            assert seen_a == seen_b
            winner, loser = (a, b) if first == "opener" else (b, a)
            rid = seen_a.request_id
            deny = {"decision": "deny", "message": f"{first} says no"}
            assert await answer(winner, "w", sid, rid, deny) == ReplyFrame(id="w", ok=True)
            late = await answer(loser, "l", sid, rid, {"decision": "allow"})
            assert late == ReplyFrame(
                id="l", ok=False, reason=f"request {rid!r} is already answered"
            )
            events_a = await a.events_until_final()
            await b.events_until_final()
    # The request, as a remote client decodes it, carries the call and the CLI's words.
    assert seen_a.source == "tool_permission"
    assert (seen_a.tool_name, seen_a.tool_input, seen_a.tool_use_id) == ("Bash", BASH, "toolu_make")
    assert seen_a.suggestions == (SUGGESTION,)
    assert seen_a.blocked_path == "/srv/build"
    assert seen_a.title == "Claude wants to run make clean"
    # The CLI got the winner's answer, once.
    assert replies == [{"behavior": "deny", "message": f"{first} says no"}]
    resolved = [e for e in a.received_events(sid) if isinstance(e, UserInputResolved)]
    assert [(r.outcome, r.answer) for r in resolved] == [("answered", deny)]
    assert text_of(events_a) == "over"


async def test_answers_sent_at_once_by_two_clients_get_exactly_one_yes() -> None:
    replies: list[dict[str, Any]] = []
    with trio.fail_after(20):
        async with (
            gateway(FakeCLI(approver(replies))) as (_, port),
            client(port) as a,
            client(port) as b,
        ):
            sid = await a.open(ASKING)
            await b.send("attach", id="att", session=sid, last_seq=None)
            await b.receive_until(lambda f: isinstance(f, ReplyFrame) and f.id == "att")
            rid = (await wait_request(a)).request_id
            await wait_request(b)
            got: dict[str, ReplyFrame] = {}

            async def give(c: Client, name: str, value: Any) -> None:
                got[name] = await answer(c, name, sid, rid, value)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(give, a, "a", {"decision": "allow"})
                nursery.start_soon(give, b, "b", "always")
            await a.events_until_final()
    winners = [name for name, reply in got.items() if reply.ok]
    assert len(winners) == 1
    (loser,) = set(got) - set(winners)
    assert got[loser].reason == f"request {rid!r} is already answered"
    (reply,) = replies
    if winners == ["a"]:
        assert reply == {"behavior": "allow", "updatedInput": BASH}
    else:
        assert reply == {
            "behavior": "allow",
            "updatedInput": BASH,
            "updatedPermissions": [SUGGESTION],
        }


async def test_a_malformed_remote_answer_is_refused_with_the_reason() -> None:
    replies: list[dict[str, Any]] = []
    with trio.fail_after(20):
        async with gateway(FakeCLI(approver(replies))) as (_, port), client(port) as c:
            sid = await c.open(ASKING)
            rid = (await wait_request(c)).request_id
            bad = await answer(c, "bad", sid, rid, {"decision": "allow", "message": "hm"})
            assert bad.ok is False
            assert "no message or interrupt" in (bad.reason or "")
            assert replies == []
            assert await answer(c, "ok", sid, rid, "allow") == ReplyFrame(id="ok", ok=True)
            await c.events_until_final()
    assert replies == [{"behavior": "allow", "updatedInput": BASH}]
