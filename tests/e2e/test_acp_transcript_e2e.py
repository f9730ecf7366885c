"""``session/load`` of a session the local fleet forgot, through the real CLI and the offline
model: the conversation comes from the transcript the CLI wrote, and the next prompt resumes
it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import trio
import trio.testing

from claude_trio.actors.editor.agent import serve_editor
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.cli.acp import session_params
from claude_trio.offline import open_offline_model
from claude_trio.protocol.editor.history import config_dir


async def test_a_forgotten_session_loads_from_its_transcript_and_resumes(tmp_path: Path) -> None:
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    buffer = bytearray()

    async def send(message: dict[str, Any]) -> None:
        await to_agent.send_all((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())

    async def receive() -> dict[str, Any]:
        while b"\n" not in buffer:
            buffer.extend(await from_agent.receive_some(65536))
        line, _, rest = bytes(buffer).partition(b"\n")
        buffer[:] = rest
        message: dict[str, Any] = json.loads(line)
        return message

    async def answer(id_: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The response to request ``id_``, and the updates sent before it."""
        updates = []
        while "id" not in (message := await receive()) or message["id"] != id_:
            if message.get("method") == "session/update":
                updates.append(message["params"]["update"])
        return message, updates

    def prompt(id_: int, session_id: str, text: str) -> dict[str, Any]:
        return {
            "id": id_,
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        }

    with trio.fail_after(180):
        async with (
            open_offline_model() as offline,
            open_fleet(max_live=1, env=offline.env, keep_finished=0) as fleet,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(
                lambda: serve_editor(
                    fleet,
                    agent_in,
                    agent_out,
                    make_params=session_params,
                    transcripts=config_dir(offline.env, os.environ),
                )
            )
            cwd = str(tmp_path)
            await send({"id": 1, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})
            session_id = (await answer(1))[0]["result"]["sessionId"]
            await send(prompt(2, session_id, "remember me"))
            assert (await answer(2))[0]["result"] == {"stopReason": "end_turn"}
            # the fleet forgets the session once its CLI has exited (keep_finished=0); the
            # fleet's public listing is all there is to watch
            with trio.fail_after(30):
                while await fleet.list():  # noqa: ASYNC110
                    await trio.sleep(0.05)

            load = {"cwd": cwd, "mcpServers": [], "sessionId": session_id}
            await send({"id": 3, "method": "session/load", "params": load})
            loaded, updates = await answer(3)
            assert "result" in loaded
            sides = [
                (u["sessionUpdate"], u["content"]["text"])
                for u in updates
                if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
            ]
            assert sides[0] == ("user_message_chunk", "remember me")
            assert sides[-1][0] == "agent_message_chunk"
            assert "You said: remember me" in "".join(text for _, text in sides[1:])

            # the next prompt resumes the conversation the transcript holds
            await send(prompt(4, session_id, "and me"))
            done, updates = await answer(4)
            assert done["result"] == {"stopReason": "end_turn"}
            reply = "".join(
                u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
            )
            assert "(earlier in this conversation: remember me)" in reply
            await to_agent.aclose()
