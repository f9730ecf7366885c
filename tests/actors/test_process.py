"""actors/session/process.py: killing the CLI reaches what it started, even in sessions of their
own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import trio

from claude_trio.actors.session.process import freeze_tree, kill_process_tree

# A stand-in for the CLI: it starts a "tool" the way the CLI starts Bash (a new session, so
# neither its process group nor its parent's death reaches it), which would leave a file behind
# after a while, and prints the tool's pid; then it waits to be killed.
SCRIPT = """
import signal, subprocess, sys
tool = subprocess.Popen(
    ["bash", "-c", "sleep 2; touch " + sys.argv[1]], start_new_session=True
)
print(tool.pid, flush=True)
signal.pause()
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def _until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``condition`` (another process's state: nothing to wait on) for ``seconds``."""
    with trio.move_on_after(seconds):
        await trio.lowlevel.checkpoint()
        while not condition():  # noqa: ASYNC110 (the state of other processes)
            await trio.sleep(0.01)
    assert condition(), what


async def _start(mark: Path) -> tuple[trio.Process, int]:
    cli = await trio.lowlevel.open_process(
        [sys.executable, "-c", SCRIPT, str(mark)], stdout=subprocess.PIPE
    )
    assert cli.stdout is not None
    printed = b""
    while not printed.endswith(b"\n"):
        chunk = await cli.stdout.receive_some()
        assert chunk, "the stand-in CLI ended before printing its tool's pid"
        printed += chunk
    return cli, int(printed)


async def test_killing_the_tree_kills_a_tool_in_a_session_of_its_own(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    cli, tool = await _start(mark)
    try:
        assert os.getsid(tool) != os.getsid(cli.pid)
        killed = kill_process_tree(cli.pid)
        assert set(killed) >= {cli.pid, tool}
        with trio.fail_after(5):
            assert await cli.wait() == -signal.SIGKILL
        await _until(lambda: not _alive(tool), 5, "the tool outlived the kill")
        await trio.sleep(2.5)  # past the tool's own sleep: it never ran its side effect
        assert not mark.exists()
    finally:
        cli.kill()
        with trio.CancelScope(shield=True):
            await cli.wait()


async def test_a_plain_sigkill_of_the_cli_leaves_its_tool_running(tmp_path: Path) -> None:
    """Why the tree is walked: the naive kill would let the tool finish its work."""
    mark = tmp_path / "mark"
    cli, tool = await _start(mark)
    try:
        cli.kill()
        await cli.wait()
        assert _alive(tool)
        await _until(mark.exists, 10, "the orphaned tool never did its work")
    finally:
        if _alive(tool):
            os.kill(tool, signal.SIGKILL)


async def test_a_process_that_is_gone_is_not_an_error() -> None:
    cli = await trio.lowlevel.open_process([sys.executable, "-c", "pass"])
    await cli.wait()
    assert kill_process_tree(cli.pid) == []


async def test_every_level_of_a_chain_of_descendants_is_caught(tmp_path: Path) -> None:
    depth = 3
    script = tmp_path / "chain.sh"
    # Each level starts the next one in a session of its own, then waits.
    script.write_text('if [ "$1" -gt 0 ]; then setsid bash "$0" $(($1 - 1)) & fi\nsleep 60\n')
    root = await trio.lowlevel.open_process(["bash", str(script), str(depth)])
    try:
        tree = psutil.Process(root.pid)
        await _until(
            lambda: len(tree.children(recursive=True)) >= 2 * depth, 5, "the chain did not start"
        )
        descendants = [p.pid for p in tree.children(recursive=True)]
        kill_process_tree(root.pid)
        with trio.fail_after(5):
            await root.wait()
        await _until(
            lambda: not any(_alive(pid) for pid in descendants), 5, "a descendant outlived it"
        )
    finally:
        root.kill()
        with trio.CancelScope(shield=True):
            await root.wait()


# A stand-in CLI with a tool (a session of its own, as the CLI starts Bash) and a helper of its
# own (its session, as the CLI's ``ps`` or MCP servers), each printing its pid.
TOOL_AND_HELPER = """
import signal, subprocess, sys
tool = subprocess.Popen(["bash", "-c", "sleep 60"], start_new_session=True)
helper = subprocess.Popen(["sleep", "60"])
print(tool.pid, helper.pid, flush=True)
signal.pause()
"""


async def test_a_tools_only_walk_takes_the_tools_and_leaves_the_cli_s_helpers() -> None:
    cli = await trio.lowlevel.open_process(
        [sys.executable, "-c", TOOL_AND_HELPER], stdout=subprocess.PIPE
    )
    assert cli.stdout is not None
    printed = b""
    while not printed.endswith(b"\n"):
        chunk = await cli.stdout.receive_some()
        assert chunk, "the stand-in CLI ended before printing its children's pids"
        printed += chunk
    tool, helper = (int(pid) for pid in printed.split())
    try:
        frozen = freeze_tree(cli.pid, include_root=False, tools_only=True)
        assert tool in frozen
        assert helper not in frozen
        assert psutil.Process(helper).status() != psutil.STATUS_STOPPED
        assert set(freeze_tree(cli.pid, include_root=False)) >= {tool, helper}  # everything
    finally:
        kill_process_tree(cli.pid)
        with trio.CancelScope(shield=True):
            await cli.wait()
