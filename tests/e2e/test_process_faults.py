"""Real subprocesses that misbehave where the claude CLI would be: what the user sees, and that
nothing is left behind. The stand-in CLIs are tiny Python scripts given as ``cli_path``."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest
import trio

from claude_trio import DriverConfig, Error, ExecuteParams, open_session
from claude_trio.testing.model_double import ModelDouble, Reply, Rule, Script

pytestmark = pytest.mark.e2e


def stand_in(tmp_path: Path, body: str) -> str:
    script = tmp_path / "claude"
    script.write_text(f"#!{sys.executable}\n{body}\n")
    script.chmod(0o755)
    return str(script)


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def run(cli_path: str, config: DriverConfig, env: dict[str, str]) -> list[Error]:
    events = []
    async with open_session(
        ExecuteParams(prompt="hi"), cli_path=cli_path, config=config, env=env
    ) as session:
        events = [event async for event in session.events]
    assert len(events) == 1
    assert isinstance(events[0], Error)
    return [events[0]]


async def test_a_cli_that_ignores_sigterm_and_never_answers_is_killed(
    tmp_path: Path, hermetic: dict[str, str]
) -> None:
    pid_file = tmp_path / "pid"
    cli = stand_in(
        tmp_path,
        "import os, signal\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "while True:\n"
        "    signal.pause()\n",
    )
    config = DriverConfig(connect_timeout=1.0)
    with trio.fail_after(60):
        (error,) = await run(cli, config, hermetic)
    assert error.code == "cli_timeout"
    assert "initialize" in error.message
    pid = int(pid_file.read_text())
    assert not pid_alive(pid), "the CLI that ignored SIGTERM is still running"


async def test_a_cli_that_exits_at_once_names_its_exit_code_and_stderr(
    tmp_path: Path, hermetic: dict[str, str]
) -> None:
    cli = stand_in(
        tmp_path,
        "import sys\nsys.stderr.write('claude: settings file is corrupt\\n')\nsys.exit(7)\n",
    )
    with trio.fail_after(60):
        (error,) = await run(cli, DriverConfig(connect_timeout=10.0), hermetic)
    assert error.code == "cli_exited"
    assert "7" in error.message
    assert "settings file is corrupt" in error.message
    assert error.fatal


async def test_a_cli_path_that_is_not_executable_says_which_path_and_what_to_do(
    tmp_path: Path, hermetic: dict[str, str]
) -> None:
    cli = tmp_path / "claude"
    cli.write_text("not a program")
    os.chmod(cli, 0o644)
    with trio.fail_after(60):
        (error,) = await run(str(cli), DriverConfig(connect_timeout=10.0), hermetic)
    assert error.code == "cli_not_found"
    assert str(cli) in error.message
    assert f"chmod +x {cli}" in error.message
    assert (error.phase, error.path) == ("init", str(cli))
    assert error.errno == errno.EACCES  # not executable (mode 644)


async def test_file_descriptors_return_to_their_baseline_after_sessions(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = Script(
        [Rule(reply=Reply.text("a slow one " * 30, event_delay=0.02, chunk_size=4), times=None)]
    )

    async def one(abort: bool) -> None:
        async with open_session(ExecuteParams(prompt="hi", cwd=str(tmp_path)), env=hermetic) as s:
            async for event in s.events:
                if abort and event.kind == "text_delta":
                    await s.abort()

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def settled_fds() -> int:
        # The double closes a connection once it reads the dead CLI's EOF: give it a moment.
        for _ in range(50):
            await trio.sleep(0.05)
            if open_fds() <= baseline:
                break
        return open_fds()

    with trio.fail_after(120):
        await one(abort=False)  # warm up: lazy imports, the SDK's own first-use state
        await trio.sleep(0.5)
        baseline = open_fds()
        await one(abort=False)
        await one(abort=True)
        assert await settled_fds() == baseline
