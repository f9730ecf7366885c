"""The ``claude-trio`` command as a user runs it: a subprocess, the real bundled CLI.

``demo`` serves its own model double; ``run`` is pointed at the test's double (``model_double``
fixture) through ``ANTHROPIC_BASE_URL`` and the hermetic env. Each CLI costs ~0.3 CPU-s, plus
~1.5 s of Python imports per command (mostly ``claude_agent_sdk`` importing ``mcp``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
import trio
from helpers_proc import children

from claude_trio.cli import demo
from claude_trio.cli.runner import UNATTENDED_DENIAL
from claude_trio.events import Result
from claude_trio.params import ExecuteParams
from claude_trio.session import open_session
from claude_trio.testing import replay
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, turns

pytestmark = pytest.mark.e2e

COMMAND = (sys.executable, "-m", "claude_trio.cli")

# Every kind the demo promises to show (see claude_trio/cli/demo.py).
DEMO_KINDS = {
    "thinking",
    "text_delta",
    "assistant_message",
    "tool_use",
    "tool_result",
    "todo_list_updated",
    "subagent_started",
    "subagent_progress",
    "subagent_completed",
    "user_input_request",
    "user_input_resolved",
    "result",
}


def command_env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """This process's environment without any credential, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ANTHROPIC_") and key != "CLAUDE_CODE_OAUTH_TOKEN"
    }
    env.update(extra)
    return env


async def claude_trio(*argv: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process(
            [*COMMAND, *argv],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


def _show(done: subprocess.CompletedProcess[bytes]) -> str:
    out, err = done.stdout.decode(), done.stderr.decode()
    return f"exit {done.returncode}\nstdout:\n{out}\nstderr:\n{err}"


async def test_demo_renders_every_kind_of_event() -> None:
    done = await claude_trio("demo", env=command_env())
    out = done.stdout.decode()
    assert done.returncode == 0, _show(done)
    lines = out.splitlines()
    # thinking, then the text it leads to
    assert any(line.startswith("The user wants an overview") for line in lines), out
    assert "I'll start with a plan." in lines
    # the todo checklist, as planned and as finished
    assert "Todos (0/4 done)" in lines
    assert "  [>] Reading the README" in lines
    assert "Todos (4/4 done)" in lines
    assert "  [x] Write the summary" in lines
    # a built-in tool call and its result
    assert any(line.startswith("→ Read(") and "README.md" in line for line in lines), out
    assert "  ✓ Read: 1 # Weather station" in lines
    # the subagent, with its own tool call nested under it
    assert "  ↳ subagent [local_agent]: Survey the project files" in lines
    assert "  → Bash(ls)" in lines
    assert "    ✓ Bash: README.md" in lines
    assert "  ✓ subagent completed" in lines
    # the question, answered automatically, and the model using the answer
    assert f"? {demo.FOCUS_QUESTION}" in lines
    assert "  Sensors / Storage" in lines
    assert "? request ask-1: answered" in lines
    assert "You picked Sensors." in out
    # the usage and cost line; no --resume for a session whose folder is gone
    [usage] = [line for line in lines if line.startswith("─ in ")]
    assert "out 420 tok · $0." in usage
    assert not any("--resume" in line for line in lines)
    assert done.stderr == b"", done.stderr.decode()


async def test_demo_json_prints_one_event_per_line_of_every_kind() -> None:
    done = await claude_trio("demo", "--json", env=command_env())
    assert done.returncode == 0, _show(done)
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    kinds = {e["kind"] for e in events}
    assert kinds >= DEMO_KINDS, sorted(DEMO_KINDS - kinds)
    assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})
    [resolved] = [e for e in events if e["kind"] == "user_input_resolved"]
    assert resolved["outcome"] == "answered"
    assert resolved["answer"] == {demo.FOCUS_QUESTION: "Sensors"}
    subagent_tools = [e for e in events if e["kind"] == "tool_use" and e["is_subagent"]]
    assert [e["name"] for e in subagent_tools] == ["Bash"]
    final = events[-1]
    assert final["kind"] == "result"
    assert final["final"] is True
    assert final["is_error"] is False
    assert final["usage"]["cost_usd"] > 0
    assert final["usage"]["output_tokens"] == 7 * 60  # the main agent's seven replies


async def test_run_without_credentials_says_how_to_get_a_key() -> None:
    done = await claude_trio("run", "hi", env=command_env())
    assert done.returncode == 2, _show(done)
    err = done.stderr.decode()
    assert "no credentials" in err
    assert "export ANTHROPIC_API_KEY=" in err
    assert "claude-trio demo" in err
    assert done.stdout == b""


async def test_run_prints_the_models_answer(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(Reply.text("Hello from the double!"))
    done = await claude_trio("run", "hi", "--cwd", str(tmp_path), env=command_env(hermetic))
    assert done.returncode == 0, _show(done)
    assert "Hello from the double!" in done.stdout.decode().splitlines()
    [request] = model_double.message_requests
    assert request.last_user_text == "hi"


async def test_run_offline_answers_with_the_built_in_model_and_no_credentials(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "offline.jsonl"
    done = await claude_trio(
        "run", "what is trio?", "--offline", "--json", "--cwd", str(tmp_path),
        "--record", str(cassette), env=command_env(),
    )  # fmt: skip
    assert done.returncode == 0, _show(done)
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    # the offline model's turn: it thinks, plans a todo list, and echoes the prompt
    assert {"thinking", "todo_list_updated", "result"} <= {e["kind"] for e in events}
    final = events[-1]
    assert (final["kind"], final["is_error"]) == ("result", False)
    assert final["text"] == "You said: what is trio?"
    assert f"cassette written to {cassette}" in done.stderr.decode()
    assert cassette.stat().st_size > 0


async def test_record_offline_is_one_command_and_its_cassette_replays(tmp_path: Path) -> None:
    cassette = tmp_path / "mine.jsonl"
    done = await claude_trio(
        "record", "summarize trio", "--offline", "--out", str(cassette), "--cwd", str(tmp_path),
        env=command_env(),
    )  # fmt: skip
    assert done.returncode == 0, _show(done)
    assert "You said: summarize trio" in done.stdout.decode()
    assert f"cassette written to {cassette}" in done.stderr.decode()
    # What was recorded plays back as the same session, with no CLI and no model.
    params = ExecuteParams(prompt="summarize trio", cwd=str(tmp_path))
    async with open_session(params, transport_factory=replay(cassette, timing="asap")) as session:
        events = [event async for event in session.events]
    final = events[-1]
    assert isinstance(final, Result)
    assert (final.is_error, final.text) == (False, "You said: summarize trio")


async def test_run_with_a_skill_folder_offers_it_as_an_inline_skill(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    skill = tmp_path / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Write RELEASE NOTES from a log\n---\nGroup.\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    model_double.responder = turns(Reply.text("noted"))
    done = await claude_trio(
        "run", "hi", "--cwd", str(work), "--skill", str(skill), env=command_env(hermetic)
    )
    assert done.returncode == 0, _show(done)
    [request] = model_double.message_requests
    assert "- inline:release-notes: Write RELEASE NOTES from a log" in json.dumps(request.body)
    assert not list(work.iterdir())  # nothing written into the project


async def test_run_with_an_asking_mode_and_no_terminal_denies_tool_calls_saying_why(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "out.txt"
    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": f"echo hi > {target}"}, id="toolu_b1"),
        Reply.text("understood"),
    )
    done = await claude_trio(
        "run", "write it", "--cwd", str(work), "--permission-mode", "default",
        env=command_env(hermetic),
    )  # fmt: skip
    assert done.returncode == 0, _show(done)
    assert not target.exists()
    sent = model_double.message_requests[-1]
    assert sent.tool_result_text("toolu_b1") == UNATTENDED_DENIAL
    assert "understood" in done.stdout.decode().splitlines()


def _cli_children(pid: int) -> list[int]:
    return [c.pid for c in children(pid) if "claude" in c.cmdline.split(" ")[0]]


async def test_ctrl_c_aborts_the_run_and_leaves_no_claude_behind(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    asked = trio.Event()
    hold = trio.Event()  # never set: the double keeps the stream open after message_start

    def never_finish(request: ModelRequest) -> Reply:
        asked.set()
        return Reply.text("never finished", gate=hold)

    model_double.responder = turns(never_finish)
    process = await trio.lowlevel.open_process(
        [*COMMAND, "run", "hi", "--cwd", str(tmp_path)],
        env=command_env(hermetic),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        with trio.fail_after(60):
            await asked.wait()
        clis = _cli_children(process.pid)
        assert len(clis) == 1, children(process.pid)
        process.send_signal(signal.SIGINT)
        with trio.fail_after(30):
            code = await process.wait()
            assert process.stdout is not None
            out = b""
            while chunk := await process.stdout.receive_some():
                out += chunk
        assert code == 130, out.decode()
        assert "aborted" in out.decode()
        # The CLI was reaped by the command before it exited, not left to init.
        assert not await trio.Path(f"/proc/{clis[0]}").exists()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(10, shield=True):
                await process.wait()
