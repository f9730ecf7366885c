"""A gateway with its console whose model asks: the real CLI against the Messages API double,
scripted so that a prompt with ``#ask`` makes the model ask an AskUserQuestion question
(``#askmany``: one that takes several options), a prompt with ``#elicit`` makes it call the MCP
server of ``claude_trio.testing.mcp_elicit_server`` (whose tool asks for a form by MCP
elicitation), and one with ``#subagent`` makes it start a subagent (which says ``Nothing to
add.``), and ``#edit PATH`` makes it read PATH and then edit its line ``colour = blue`` into
``colour = orange``. After the tool, the model answers ``the tool said: <its result>``, so the
page shows what the session was told.

Run by the browser tests: ``python asking_server.py TOKEN WORKDIR``. It prints
``console: URL`` once it listens, then reads lines from stdin: ``elicit`` opens a session
that elicits (MCP servers never come from a remote client, so the operator opens it here).
It stops at the end of its input.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import trio

from claude_trio import ExecuteParams, open_fleet
from claude_trio.actors.fanout.gateway import serve_gateway
from claude_trio.offline.hermetic import hermetic_env
from claude_trio.offline.model import OFFLINE_ENV
from claude_trio.testing.mcp_elicit_server import (
    SERVER_NAME,
    TOOL_NAME,
    mcp_elicit_server_config,
)
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, Response

QUESTION = "Which colour should the button be?"
ASK_INPUT = {
    "questions": [
        {
            "question": QUESTION,
            "header": "Colour",
            "options": [
                {"label": "Blue", "description": "calm"},
                {"label": "Orange", "description": "loud"},
            ],
            "multiSelect": False,
        }
    ]
}
MANY_QUESTION = "Which toppings?"
ASK_MANY_INPUT = {
    "questions": [
        {
            "question": MANY_QUESTION,
            "header": "Toppings",
            "options": [
                {"label": "Cheese", "description": "melted"},
                {"label": "Olives", "description": "black"},
                {"label": "Basil", "description": "fresh"},
            ],
            "multiSelect": True,
        }
    ]
}
ELICIT_QUESTION = "favourite colour?"
AGENT_INPUT = {
    "description": "count files",
    "prompt": "count the files",
    "subagent_type": "general-purpose",
    "run_in_background": False,
}
TOOL_ID = "toolu_asking_1"
READ_ID = "toolu_asking_read"
EDIT_MARK = "#edit "
EDIT = {"old_string": "colour = blue", "new_string": "colour = orange"}


def respond(request: ModelRequest) -> Response | None:
    if request.is_tool_use_summary or request.pending_tool_use_ids:
        return None
    if request.is_subagent:
        return Reply.text("Nothing to add.")
    said = request.tool_result_text(TOOL_ID)
    if said is not None:
        return Reply.text(f"the tool said: {said}")
    prompt = request.user_texts[-1] if request.user_texts else ""
    if EDIT_MARK in prompt:
        # The CLI edits only a file the session has read: Read first, then Edit.
        path = prompt.split(EDIT_MARK, 1)[1].split()[0]
        if request.tool_result_text(READ_ID) is None:
            return Reply.tool_use("Read", {"file_path": path}, id=READ_ID)
        return Reply.tool_use("Edit", {"file_path": path, **EDIT}, id=TOOL_ID)
    if "#askmany" in prompt:
        return Reply.tool_use("AskUserQuestion", ASK_MANY_INPUT, id=TOOL_ID)
    if "#ask" in prompt:
        return Reply.tool_use("AskUserQuestion", ASK_INPUT, id=TOOL_ID)
    if "#subagent" in prompt:
        return Reply.tool_use("Agent", AGENT_INPUT, id=TOOL_ID)
    if "#elicit" in prompt:
        return Reply.tool_use(TOOL_NAME, {"question": ELICIT_QUESTION}, id=TOOL_ID)
    return Reply.text("Nothing to ask.")


async def main(token: str, work: str) -> None:
    double = ModelDouble(respond, max_unscripted=2**62, keep_requests=64)
    with tempfile.TemporaryDirectory(prefix="console-asking-") as tmp:
        async with trio.open_nursery() as nursery:
            await nursery.start(double.serve)
            env = {**hermetic_env(double.base_url, Path(tmp) / "cli", sandbox=True), **OFFLINE_ENV}
            async with open_fleet(env=env) as fleet:
                port = await nursery.start(
                    lambda task_status: serve_gateway(
                        fleet,
                        token=token,
                        allowed_origins=(),
                        remote_tools="all",
                        cwd_root=work,
                        console=True,
                        task_status=task_status,
                    )
                )
                print(f"console: http://127.0.0.1:{port}/", flush=True)
                stdin = trio.wrap_file(sys.stdin)
                while line := await stdin.readline():
                    if line.strip() == "elicit":
                        await fleet.start(
                            ExecuteParams(
                                prompt="#elicit",
                                cwd=work,
                                mcp_servers={SERVER_NAME: mcp_elicit_server_config()},
                            ),
                            label="elicits",
                        )
                nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
