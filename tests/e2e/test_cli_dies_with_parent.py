"""A session's CLI dies with the process that runs the session, however that process dies,
and takes the tool it runs with it: nothing the session started goes on after a SIGKILL of
its owner (a CI timeout, an out-of-memory kill). Real CLI, real Bash tool, the Messages API
double served by the parent itself."""

from __future__ import annotations

import select
import subprocess
import sys
from pathlib import Path

import psutil

# A program that runs one session whose model asks for a Bash call that would write a file
# after 300 s; trio's idle worker threads end at once (a CLI forked in one of them would be
# killed with it: it must not be), and the tool is still running well after that. It prints
# its pid once the tool runs and waits to be killed.
PARENT = """
import os, sys, trio
from pathlib import Path
import trio._core._thread_cache as thread_cache
from claude_trio import ExecuteParams, open_session
from claude_trio.offline import Reply, hermetic_env, open_model_double, turns

thread_cache.IDLE_TIMEOUT = 0.01
folder = Path(sys.argv[1])

async def main():
    command = 'python3 -c "import select; select.select([], [], [], 300)" && touch late'
    script = turns(Reply.tool_use("Bash", {"command": command}, id="toolu_1"), Reply.text("ok"))
    async with open_model_double(script) as double:
        env = {**hermetic_env(double.base_url, folder / "home"), "IS_SANDBOX": "1"}
        params = ExecuteParams(
            prompt="go", cwd=str(folder / "work"), permission_mode="bypassPermissions"
        )
        async with open_session(params, env=env) as session:
            async for event in session.events:
                if event.kind == "tool_use":
                    await trio.to_thread.run_sync(lambda: None)
                    await trio.sleep(1.0)  # every worker thread has ended by now
                    print(os.getpid(), flush=True)

trio.run(main)
"""


def cli_and_tool(parent: int) -> tuple[psutil.Process, list[psutil.Process]]:
    children = psutil.Process(parent).children(recursive=True)
    (cli,) = [p for p in children if "_bundled" in " ".join(p.cmdline())]
    tools = [p for p in cli.children(recursive=True) if "select.select" in " ".join(p.cmdline())]
    return cli, tools


def test_a_killed_owner_takes_its_cli_and_the_running_tool_with_it(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        ready, _, _ = select.select([parent.stdout], [], [], 90)
        assert ready, "the session's tool did not start"
        cli, tools = cli_and_tool(int(parent.stdout.readline()))
        assert tools, "the Bash tool is not running"
        parent.kill()  # SIGKILL: no finally, no async with, nothing runs in the parent
        parent.wait()
        # Other processes' ends: nothing to wait on but their exit, bounded.
        _, left = psutil.wait_procs([cli, *tools], timeout=20)
        assert not left, f"outlived their owner: {[p.cmdline()[:2] for p in left]}"
    finally:
        parent.kill()
        parent.wait()
    assert not (tmp_path / "work" / "late").exists()
