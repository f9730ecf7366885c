"""actors/process.py: killing the CLI reaches what it started, even in sessions of their own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from claude_trio.actors.process import kill_process_tree

# A stand-in for the CLI: it starts a "tool" the way the CLI starts Bash (a new session, so
# neither its process group nor its parent's death reaches it), which would leave a file behind
# after a while, and prints the tool's pid.
SCRIPT = """
import os, subprocess, sys, time
tool = subprocess.Popen(
    ["bash", "-c", "sleep 2; touch " + sys.argv[1]], start_new_session=True
)
print(tool.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _start(mark: Path) -> tuple[subprocess.Popen[str], int]:
    cli = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(mark)], stdout=subprocess.PIPE, text=True
    )
    assert cli.stdout is not None
    tool = int(cli.stdout.readline())
    return cli, tool


def test_killing_the_tree_kills_a_tool_in_a_session_of_its_own(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    cli, tool = _start(mark)
    try:
        assert os.getsid(tool) != os.getsid(cli.pid)
        killed = kill_process_tree(cli.pid)
        assert set(killed) >= {cli.pid, tool}
        assert cli.wait(timeout=5) == -signal.SIGKILL
        deadline = time.monotonic() + 5
        while _alive(tool) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _alive(tool)
        time.sleep(2.5)  # past the tool's own sleep: it never ran its side effect
        assert not mark.exists()
    finally:
        cli.kill()
        cli.wait()


def test_a_plain_sigkill_of_the_cli_leaves_its_tool_running(tmp_path: Path) -> None:
    """Why the tree is walked: the naive kill would let the tool finish its work."""
    mark = tmp_path / "mark"
    cli, tool = _start(mark)
    try:
        cli.kill()
        cli.wait()
        assert _alive(tool)
        deadline = time.monotonic() + 10
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists()
    finally:
        if _alive(tool):
            os.kill(tool, signal.SIGKILL)


def test_a_process_that_is_gone_is_not_an_error() -> None:
    cli = subprocess.Popen([sys.executable, "-c", "pass"])
    cli.wait()
    assert kill_process_tree(cli.pid) == []


def test_every_level_of_a_chain_of_descendants_is_caught(tmp_path: Path) -> None:
    depth = 3
    script = tmp_path / "chain.sh"
    # Each level starts the next one in a session of its own, then waits.
    script.write_text('if [ "$1" -gt 0 ]; then setsid bash "$0" $(($1 - 1)) & fi\nsleep 60\n')
    root = subprocess.Popen(["bash", str(script), str(depth)])
    try:
        deadline = time.monotonic() + 5
        while len(psutil.Process(root.pid).children(recursive=True)) < 2 * depth:
            assert time.monotonic() < deadline, "the chain did not start"
            time.sleep(0.01)
        descendants = [p.pid for p in psutil.Process(root.pid).children(recursive=True)]
        kill_process_tree(root.pid)
        root.wait(timeout=5)
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in descendants) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(_alive(pid) for pid in descendants)
    finally:
        root.kill()
        root.wait()
