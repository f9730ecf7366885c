"""The gateway in front of the real bundled ``claude`` CLI, pointed at the Messages API double.

One session opened over a websocket, the model asks a question (AskUserQuestion through the
real ``can_use_tool`` path), the client answers over the wire, and every event reaches it with
usage computed from what the double reported.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import open_websocket_url

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.protocol.fanout.wire import (
    EventFrame,
    Frame,
    OpenedFrame,
    ReplyFrame,
    decode_frame,
    params_to_json,
)
from claude_trio.protocol.session.events import Event, Result, TextDelta, UserInputRequest
from claude_trio.testing import check_contract
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, ReplyUsage, turns

pytestmark = pytest.mark.e2e

TOKEN = "e2e-gateway-token-51aa"
QUESTION = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "red", "description": ""}, {"label": "blue", "description": ""}],
    "multiSelect": False,
}
FIRST = ReplyUsage(input_tokens=120, output_tokens=30)
SECOND = ReplyUsage(input_tokens=200, output_tokens=7, cache_read_input_tokens=50)


def claude_children() -> list[str]:
    """``claude`` processes (or zombies) whose parent is this test process, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        head, _, tail = stat.rpartition(")")
        state, ppid = tail.split()[:2]
        if int(ppid) == os.getpid() and ("claude" in head or state == "Z"):
            found.append(stat)
    return found


def answered(request: ModelRequest) -> Reply:
    (tool_use_id,) = request.tool_results
    seen = request.tool_result_text(tool_use_id) or ""
    return Reply.text("you chose: blue" if '"blue"' in seen else f"no answer: {seen}", usage=SECOND)


async def test_a_real_cli_session_over_the_gateway(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(
        Reply.tool_use("AskUserQuestion", {"questions": [QUESTION]}, usage=FIRST),
        answered,
    )
    workdir = tmp_path / "work"
    workdir.mkdir()
    params = ExecuteParams(prompt="pick a color", model="claude-sonnet-4-5", cwd=str(workdir))
    frames: list[Frame] = []
    with trio.fail_after(60):
        async with open_fleet(env=hermetic) as fleet, trio.open_nursery() as nursery:
            port = await nursery.start(
                partial(
                    serve_gateway,
                    fleet,
                    token=TOKEN,
                    allowed_origins=None,
                    cwd_root=str(tmp_path),
                    allow_cwd=True,
                )
            )
            url = f"ws://127.0.0.1:{port}/"
            headers = [(b"authorization", f"Bearer {TOKEN}".encode())]
            async with open_websocket_url(url, extra_headers=headers) as ws:

                async def send(**op: Any) -> None:
                    await ws.send_message(json.dumps(op))

                async def receive() -> Frame:
                    frame = decode_frame(str(await ws.get_message()))
                    frames.append(frame)
                    return frame

                await send(op="open", id="o", params=params_to_json(params))
                opened = await receive()
                assert isinstance(opened, OpenedFrame)
                while True:
                    frame = await receive()
                    if isinstance(frame, EventFrame) and isinstance(
                        frame.event, UserInputRequest
                    ):
                        break
                await send(
                    op="answer",
                    id="a",
                    session=opened.session,
                    request=frame.event.request_id,
                    answer="blue",
                )
                while True:
                    frame = await receive()
                    if isinstance(frame, EventFrame) and isinstance(frame.event, Result):
                        break
            await fleet.get_nowait(opened.session).wait_ended()
            nursery.cancel_scope.cancel()
    assert claude_children() == []
    assert ReplyFrame(id="a", ok=True) in frames
    events: list[Event] = [f.event for f in frames if isinstance(f, EventFrame)]
    check_contract(events)
    (result,) = [e for e in events if isinstance(e, Result)]
    assert result.final
    assert result is events[-1]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "you chose: blue"
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs))
    # Usage over the wire is the double's, in the library's convention (input includes cache reads).
    assert result.usage.input_tokens == 120 + 200 + 50
    assert result.usage.output_tokens == 30 + 7
    assert result.usage.cache_read_input_tokens == 50
    assert len(model_double.message_requests) == 2
