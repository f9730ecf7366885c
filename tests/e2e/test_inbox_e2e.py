"""``claude-trio inbox`` as a user runs it: ``claude-trio serve --offline --remote-tools all``
(the real bundled CLI against the offline model), a remote session whose Bash call asks for
approval, and the terminal command answering it ``y``: the command ran, and the model double
got its output as the tool result."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio
from test_fanout_e2e import ALICE, BOB, CLIENT, COMMAND, command_env, serve

from claude_trio import ExecuteParams
from claude_trio.actors.children import open_child_process
from claude_trio.client import connect_gateway
from claude_trio.offline.model import BASH_COMMAND, BASH_MARK
from claude_trio.protocol.session.events import ToolResult

pytestmark = pytest.mark.e2e


async def test_an_approval_answered_y_at_the_terminal_runs_the_tool(tmp_path: Path) -> None:
    async with (
        serve(tmp_path, "--remote-tools", "all") as server,
        connect_gateway(server.url, token=ALICE, config=CLIENT) as alice,
        connect_gateway(server.url, token=BOB, config=CLIENT) as bob,
    ):
        prompt = f"run it {BASH_MARK}{BASH_COMMAND}"
        asking = ExecuteParams(prompt=prompt, permission_mode="default")
        session = await alice.open(asking, label="needs you")
        async with bob.inbox() as bobs:
            # Bob's terminal would never see Alice's request.
            assert (await bobs.receive()).items == ()  # type: ignore[union-attr]
            process = await open_child_process(
                [*COMMAND, "inbox", server.url, "--count", "1"],
                env=command_env({"CLAUDE_TRIO_TOKEN": ALICE, "COLUMNS": "200"}),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert process.stdin is not None
            assert process.stdout is not None
            await process.stdin.send_all(b"y\n")
            shown = b""
            with trio.fail_after(120):
                while chunk := await process.stdout.receive_some():
                    shown += chunk
                code = await process.wait()
            assert process.stderr is not None
            errors = await process.stderr.receive_some()
            assert code == 0, (shown, errors)
            with trio.fail_after(120):
                transcript = await session.result()
            assert bobs.items == ()
    text = shown.decode()
    assert "needs you · approval" in text
    assert "touch offline-bash-ran" in text  # the call's input, shown before the question
    assert "answered" in text
    results = [e for e in transcript.events if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [False]
    # The model double got the command's output as the tool result, and echoed it.
    assert "(the tool said: offline bash ran)" in transcript.text
    assert (tmp_path / "work" / "offline-bash-ran").exists()  # it ran, in the server's folder
