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
from acp_editor import COMMAND, TOKEN, Editor, agent_env, open_agent, open_server

pytestmark = pytest.mark.e2e

TURN = 120.0
PLAN = "Let me plan this first."


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
            await _prompt(conn, new.session_id, "and me")
            # the editor's own prompts are not sent back while it prompts
            assert "user_message_chunk" not in first.kinds()
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
    # both sides of the conversation, in order: each prompt, then the agent's reply to it
    assert _sides(first) == [
        ("user", "remember me"),
        ("agent", f"{PLAN}You said: remember me"),
        ("user", "and me"),
        ("agent", f"{PLAN}You said: and me (earlier in this conversation: remember me)"),
    ]
    assert "plan" in first.kinds()


def _sides(editor: Editor) -> list[tuple[str, str]]:
    """The conversation an editor was shown: (``user`` or ``agent``, the text), the chunks of
    one side in a row joined."""
    sides: list[tuple[str, str]] = []
    for _sid, update in editor.updates:
        side = {"user_message_chunk": "user", "agent_message_chunk": "agent"}.get(
            update.session_update
        )
        if side is None or not isinstance(update.content, schema.TextContentBlock):
            continue
        if sides and sides[-1][0] == side:
            sides[-1] = (side, sides[-1][1] + update.content.text)
        else:
            sides.append((side, update.content.text))
    return sides


def test_remote_sessions_outlive_the_editor_killed_mid_turn(tmp_path: Path) -> None:
    started, gate, after = tmp_path / "started", tmp_path / "gate", tmp_path / "after"
    first, second, third = Editor(), Editor(), Editor()
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
                # ... a prompt sent right away waits for that turn's end, then runs
                again = asyncio.create_task(_prompt(conn, new.session_id, "and now?"))
                await asyncio.sleep(0.5)
                assert not again.done()  # neither refused nor run while the turn goes on
                gate.touch()
                assert (await again).stop_reason == "end_turn"
                assert after.exists()
            # a third editor, a third agent process: the whole conversation, both sides
            async with open_agent(third, "--remote", url, env=env) as (conn, _init):
                await asyncio.wait_for(
                    conn.load_session(cwd=str(tmp_path), session_id=new.session_id, mcp_servers=[]),
                    TURN,
                )

        # the load shows the editor's prompt, then the turn so far exactly as the first editor
        # saw it, the rest comes after it: each event once, in order
        assert at_load == ["user_message_chunk", *first.kinds()]
        assert "user_message_chunk" not in first.kinds()
        assert second.text("user_message_chunk") == command
        assert text_at_load == first.text() == "Running Bash as asked."
        assert at_load[-1] == "tool_call"
        rest = second.kinds()[len(at_load) :]
        assert rest[0] == "tool_call_update"
        # the loaded turn's answer, then the prompt that waited for it streams (the editor's
        # own prompt is not sent back to it)
        assert set(rest[1:]) == {"agent_message_chunk", "agent_thought_chunk", "plan"}
        # the approval the first editor gave is not asked again
        assert len(first.permissions) == 1
        assert second.permissions == []
        updates = [u for _s, u in second.updates if isinstance(u, schema.ToolCallProgress)]
        assert [u.status for u in updates] == ["completed"]
        said = second.text()
        assert said.startswith("Running Bash as asked.")
        assert said.index("(the tool said:") < said.index("You said: and now?")
        sides = _sides(third)
        assert [side for side, _text in sides] == ["user", "agent", "user", "agent"]
        assert (sides[0][1], sides[2][1]) == (command, "and now?")
        assert sides[1][1] + sides[3][1] == said

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
