"""``claude-trio acp --offline`` driven as an editor drives it: a subprocess on stdio, through the
``agent-client-protocol`` package's own client connection (``acp_editor.py``), the real bundled
CLI against the built-in offline model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, schema, text_block
from acp.exceptions import RequestError
from acp_editor import COMMAND, TOKEN, Editor, agent_env, open_agent, open_server

pytestmark = pytest.mark.e2e

TURN = 120.0


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout=240))


async def _prompt(conn: Any, session_id: str, text: str) -> schema.PromptResponse:
    return await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=[text_block(text)]), TURN
    )


def test_a_prompt_streams_thinking_text_and_the_plan_and_ends_the_turn(tmp_path: Path) -> None:
    editor = Editor()

    async def scenario() -> None:
        async with open_agent(editor, "--offline") as (conn, init):
            assert init.protocol_version == PROTOCOL_VERSION
            capabilities = init.agent_capabilities
            assert capabilities.load_session
            assert capabilities.prompt_capabilities.image
            assert capabilities.prompt_capabilities.embedded_context
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            assert new.modes.current_mode_id == "default"
            assert "bypassPermissions" in {mode.id for mode in new.modes.available_modes}
            (model,) = new.config_options or []
            assert (model.category, model.current_value) == ("model", "default")
            chosen = await conn.set_config_option(
                config_id="model", session_id=new.session_id, value="haiku"
            )
            assert chosen.config_options[0].current_value == "haiku"
            done = await _prompt(conn, new.session_id, "what is trio?")
            assert done.stop_reason == "end_turn"

    run(scenario)
    kinds = editor.kinds()
    assert kinds.index("agent_thought_chunk") < kinds.index("plan")
    assert editor.text("agent_thought_chunk") == "The user asks: what is trio?. A short plan first."
    assert editor.text() == "Let me plan this first.You said: what is trio?"
    plans = [u for _s, u in editor.updates if isinstance(u, schema.AgentPlanUpdate)]
    assert [(e.content, e.status) for e in plans[-1].entries] == [
        ("Answer the question", "completed")
    ]


@pytest.mark.parametrize(("option", "written"), [("allow", True), ("reject", False)])
def test_a_tool_approval_is_the_editors_choice_and_the_model_sees_it(
    tmp_path: Path, option: str, written: bool
) -> None:
    target = tmp_path / "note.txt"
    editor = Editor(choose=lambda _request: option)

    async def scenario() -> None:
        async with open_agent(editor, "--offline") as (conn, _init):
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            done = await _prompt(conn, new.session_id, f"#write {target}")
            assert done.stop_reason == "end_turn"
            # the same ACP session goes on with the conversation
            again = await _prompt(conn, new.session_id, "and then?")
            assert again.stop_reason == "end_turn"

    run(scenario)
    (request,) = editor.permissions
    assert [o.kind for o in request.options] == ["allow_once", "allow_always", "reject_once"]
    call = request.tool_call
    assert call.kind == "edit"
    assert call.title == f"Write {target}"
    (diff,) = call.content or []
    assert isinstance(diff, schema.FileEditToolCallContent)
    assert (diff.path, diff.old_text, diff.new_text) == (
        str(target),
        None,
        "written by the offline model\n",
    )
    assert target.exists() is written
    updates = [u for _s, u in editor.updates if isinstance(u, schema.ToolCallProgress)]
    assert [u.status for u in updates] == ["completed" if written else "failed"]
    said = editor.text()
    if written:
        assert f"(the tool said: File created successfully at: {target}" in said
    else:
        assert "(the tool said: error: The user rejected this tool call in the editor.)" in said
    assert "You said: and then? (earlier in this conversation: #write /" in said


def test_cancel_mid_tool_answers_cancelled_and_nothing_runs_after(tmp_path: Path) -> None:
    started, after = tmp_path / "started", tmp_path / "after"
    editor = Editor(choose=lambda _request: "allow")

    async def scenario() -> None:
        async with open_agent(editor, "--offline") as (conn, _init):
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            prompt = asyncio.create_task(
                _prompt(conn, new.session_id, f"#bash touch {started}; sleep 3; touch {after}")
            )
            while not started.exists():  # noqa: ASYNC110 (a file another process makes)
                await asyncio.sleep(0.02)
            await conn.cancel(session_id=new.session_id)
            done = await prompt
            assert done.stop_reason == "cancelled"
            await asyncio.sleep(4)  # past the command's own end: it must not have run on
            assert not after.exists()
            more = await _prompt(conn, new.session_id, "still there?")
            assert more.stop_reason == "end_turn"

    run(scenario)
    assert "You said: still there?" in editor.text()


def test_cancel_while_the_editor_is_asked_denies_and_ends_the_turn(tmp_path: Path) -> None:
    target = tmp_path / "never.txt"
    editor = Editor(choose=lambda _request: None)  # never answers

    async def scenario() -> None:
        async with open_agent(editor, "--offline") as (conn, _init):
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            prompt = asyncio.create_task(_prompt(conn, new.session_id, f"#write {target}"))
            await asyncio.wait_for(editor.asked.wait(), TURN)
            began = time.monotonic()
            await conn.cancel(session_id=new.session_id)
            done = await prompt
            assert done.stop_reason == "cancelled"
            assert time.monotonic() - began < 5  # generous: the bound is 1 s

    run(scenario)
    assert not target.exists()


def test_load_replays_a_finished_session(tmp_path: Path) -> None:
    first = Editor()

    async def scenario() -> None:
        async with open_agent(first, "--offline") as (conn, _init):
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await _prompt(conn, new.session_id, "remember me")
            # the editor reopens the thread (a local fleet's sessions live in this agent
            # process; across restarts of the agent, see --remote)
            first.updates.clear()
            loaded = await conn.load_session(
                cwd=str(tmp_path), session_id=new.session_id, mcp_servers=[]
            )
            assert loaded is not None
            unknown = conn.load_session(cwd=str(tmp_path), session_id="nope", mcp_servers=[])
            with pytest.raises(Exception, match="no session 'nope'"):
                await unknown

    run(scenario)
    assert first.text() == "Let me plan this first.You said: remember me"
    assert "plan" in first.kinds()


def test_remote_sessions_outlive_the_editor_killed_mid_turn(tmp_path: Path) -> None:
    started, gate, after = tmp_path / "started", tmp_path / "gate", tmp_path / "after"
    first, second = Editor(), Editor()
    env = agent_env({"CLAUDE_TRIO_TOKEN": TOKEN})
    # the tool call runs until the test opens the gate (a few minutes at most)
    command = (
        f"#bash touch {started}; for i in $(seq 3000); do [ -e {gate} ] && break; "
        f"sleep 0.05; done; touch {after}"
    )

    async def scenario() -> None:
        async with open_server("--remote-tools", "all") as url:
            async with open_agent(
                first, "--remote", url, "--permission-mode", "default", env=env
            ) as (conn, _init):
                new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                prompt = asyncio.create_task(
                    conn.prompt(session_id=new.session_id, prompt=[text_block(command)])
                )
                await asyncio.wait_for(_until(started), TURN)
                # the editor (and its agent process) go away in the middle of the tool call
            prompt.cancel()
            async with open_agent(second, "--remote", url, env=env) as (conn, _init):
                await asyncio.wait_for(
                    conn.load_session(cwd=str(tmp_path), session_id=new.session_id, mcp_servers=[]),
                    TURN,
                )
                # the load found the turn still running (the command waits for the gate) ...
                assert not after.exists()
                at_load, text_at_load = second.kinds(), second.text()
                gate.touch()
                # ... and it goes on streaming to the new editor, to its end
                while "(the tool said:" not in second.text():  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
                assert after.exists()
                loaded = second.kinds()
                # The answer's text may arrive before the turn's end does: until then the
                # agent refuses a new prompt ("a prompt is already running"), as it says.
                async with asyncio.timeout(TURN):
                    while True:
                        try:
                            again = await _prompt(conn, new.session_id, "and now?")
                            break
                        except RequestError as exc:
                            if "already running" not in str(exc):
                                raise
                            await asyncio.sleep(0.05)
                assert again.stop_reason == "end_turn"

        # the load shows the turn so far exactly as the first editor saw it, the rest comes
        # after it: each event once, in order
        assert (at_load, text_at_load) == (first.kinds(), first.text())
        assert at_load[-1] == "tool_call"
        assert text_at_load == "Running Bash as asked."
        rest = loaded[len(at_load) :]
        assert rest[0] == "tool_call_update"
        assert set(rest[1:]) == {"agent_message_chunk"}
        # the approval the first editor gave is not asked again
        assert len(first.permissions) == 1
        assert second.permissions == []
        updates = [u for _s, u in second.updates if isinstance(u, schema.ToolCallProgress)]
        assert [u.status for u in updates] == ["completed"]
        assert second.text().startswith("Running Bash as asked.")

    run(scenario)


async def _until(path: Path) -> None:
    while not path.exists():  # noqa: ASYNC110, ASYNC240 (a file another process makes)
        await asyncio.sleep(0.02)


@pytest.mark.parametrize(("option", "written"), [("allow", True), ("reject", False)])
def test_a_remote_approval_through_the_server_is_the_editors_choice(
    tmp_path: Path, option: str, written: bool
) -> None:
    target = tmp_path / "remote-note.txt"
    editor = Editor(choose=lambda _request: option)
    env = agent_env({"CLAUDE_TRIO_TOKEN": TOKEN})

    async def scenario() -> None:
        async with (
            open_server("--remote-tools", "all") as url,
            open_agent(editor, "--remote", url, "--permission-mode", "default", env=env) as (
                conn,
                _init,
            ),
        ):
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            done = await _prompt(conn, new.session_id, f"#write {target}")
            assert done.stop_reason == "end_turn"

    run(scenario)
    (request,) = editor.permissions
    assert request.tool_call.title == f"Write {target}"
    assert target.exists() is written
    said = editor.text()
    if written:
        assert f"(the tool said: File created successfully at: {target}" in said
    else:
        assert "(the tool said: error: The user rejected this tool call in the editor.)" in said


def test_an_approval_answered_in_the_inbox_resolves_the_editors_request(tmp_path: Path) -> None:
    target = tmp_path / "inbox-note.txt"
    release = asyncio.Event()
    late: list[str] = []

    async def hold(_request: schema.RequestPermissionRequest) -> str:
        await release.wait()  # the editor's user answers only after the inbox did
        late.append("allow")
        return "allow"

    editor = Editor(choose_async=hold)
    env = agent_env({"CLAUDE_TRIO_TOKEN": TOKEN})

    async def scenario() -> None:
        async with (
            open_server("--remote-tools", "all") as url,
            open_agent(editor, "--remote", url, "--permission-mode", "default", env=env) as (
                conn,
                _init,
            ),
        ):
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            prompt = asyncio.create_task(_prompt(conn, new.session_id, f"#write {target}"))
            await asyncio.wait_for(editor.asked.wait(), TURN)
            # the same request, answered first at a terminal: `claude-trio inbox` says no
            inbox = await asyncio.create_subprocess_exec(
                *COMMAND[:-1], "inbox", url, "--count", "1",
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            shown, errors = await asyncio.wait_for(
                inbox.communicate(b"n\nnot from the editor\n"), TURN
            )
            assert inbox.returncode == 0, (shown, errors)
            done = await prompt
            assert done.stop_reason == "end_turn"
            # the editor's own answer, late: dropped, the turn already went on without it
            release.set()
            await asyncio.sleep(0.5)
            again = await _prompt(conn, new.session_id, "and then?")
            assert again.stop_reason == "end_turn"
            assert late == ["allow"]

    run(scenario)
    assert len(editor.permissions) == 1
    assert not target.exists()
    said = editor.text()
    assert "(the tool said: error: not from the editor)" in said
    updates = [u for _s, u in editor.updates if isinstance(u, schema.ToolCallProgress)]
    assert [u.status for u in updates] == ["failed"]
