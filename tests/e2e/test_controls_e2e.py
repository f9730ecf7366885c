"""Live controls of a running session through the real CLI against the Messages API double.

``set_model`` mid-turn: the model's next request carries the new model id. ``set_permission_mode``:
the CLI's next tool call runs under the new mode (a hook sees it, and ``dontAsk`` denies a
command nothing allowed). ``context_usage`` and ``mcp_status`` answer with the CLI's numbers.
File checkpointing: a Write changes a file and creates another, ``rewind_files`` restores both.
A fork resumes an old conversation under a new session id. Controls after the end are refused.

Each test holds the turn open with a Bash call that waits for a file the test writes once its
controls are done, so the controls land between two of the model's requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import of_type, params, run_session, workdir

from claude_trio import ExecuteParams
from claude_trio.actors.session.open import Session
from claude_trio.errors import ControlRefusedError
from claude_trio.protocol.extensions.hooks import HookInput, hook
from claude_trio.protocol.session.events import ControlApplied, Event, Result, ToolResult, ToolUse
from claude_trio.testing.model_double import (
    ModelDouble,
    ModelRequest,
    Reply,
    Rule,
    Script,
    is_main_agent,
)

pytestmark = pytest.mark.e2e

WAIT = {"command": "while [ ! -f go ]; do sleep 0.02; done; echo went", "description": "wait"}


def is_model_probe(request: ModelRequest) -> bool:
    """``set_model`` makes the CLI check the new model with a one-message request ("Hi")."""
    return is_main_agent(request) and len(request.messages) == 1 and request.last_user_text == "Hi"


def steps(*replies: tuple[str, Reply]) -> Script:
    """Main-agent replies keyed on which tool results the request carries: reply ``i`` once the
    tool use of reply ``i - 1`` has its result. The model probe of ``set_model`` is answered
    apart."""
    rules = [Rule(reply=Reply.text("Hi"), when=is_model_probe, times=None)]
    previous: str | None = None
    for tool_use_id, reply in replies:

        def when(r: ModelRequest, prev: str | None = previous, me: str = tool_use_id) -> bool:
            if not is_main_agent(r) or is_model_probe(r) or me in r.tool_results:
                return False
            return prev is None or prev in r.tool_results

        rules.append(Rule(reply=reply, when=when))
        previous = tool_use_id
    return Script(rules)


async def test_set_model_set_permission_mode_context_usage_and_mcp_status_mid_turn(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    go = Path(workdir(tmp_path)) / "go"
    modes: list[str | None] = []

    @hook("PreToolUse")
    async def spy(call: HookInput) -> None:
        modes.append(call.permission_mode)

    model_double.responder = steps(
        ("toolu_wait", Reply.tool_use("Bash", WAIT, id="toolu_wait")),
        ("toolu_touch", Reply.tool_use("Bash", {"command": "touch made.txt"}, id="toolu_touch")),
        ("end", Reply.text("done")),
    )
    seen: dict[str, Any] = {}

    async def on_event(session: Session, event: Event) -> None:
        if isinstance(event, ToolUse) and event.tool_use_id == "toolu_wait":
            seen["context"] = await session.context_usage()
            seen["mcp"] = await session.mcp_status()
            await session.set_model("opus-4.6")
            await session.set_permission_mode("dontAsk")
            go.write_text("")

    events = await run_session(params(tmp_path, "go"), hermetic, on_event=on_event, hooks=[spy])

    main = [r for r in model_double.message_requests if not is_model_probe(r)]
    assert [r.model for r in main] == ["claude-sonnet-4-5", "claude-opus-4-6", "claude-opus-4-6"]
    # The CLI ran the next tool call under the new mode, and dontAsk denied the command.
    assert modes == ["bypassPermissions", "dontAsk"]
    assert not (Path(workdir(tmp_path)) / "made.txt").exists()
    denial = str(main[-1].tool_result_text("toolu_touch"))
    assert "don't ask mode" in denial
    context = seen["context"]
    assert context.max_tokens == 200_000
    assert 0 < context.total_tokens < context.max_tokens
    assert context.percentage is not None
    assert context.model == "claude-sonnet-4-5"
    assert dict(context.categories)["Free space"] > 0
    assert seen["mcp"] == ()  # no MCP server in this session
    applied = [(e.control, e.value) for e in of_type(events, ControlApplied)]
    assert applied == [("set_model", "claude-opus-4-6"), ("set_permission_mode", "dontAsk")]
    assert isinstance(events[-1], Result)


async def test_rewind_files_restores_what_a_write_changed_and_created(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    work = Path(workdir(tmp_path))
    kept, created = work / "notes.txt", work / "new.txt"
    kept.write_text("version 1\n")
    model_double.responder = steps(
        ("toolu_r", Reply.tool_use("Read", {"file_path": str(kept)}, id="toolu_r")),
        (
            "toolu_w1",
            Reply.tool_use(
                "Write", {"file_path": str(kept), "content": "version 2\n"}, id="toolu_w1"
            ),
        ),
        (
            "toolu_w2",
            Reply.tool_use("Write", {"file_path": str(created), "content": "x\n"}, id="toolu_w2"),
        ),
        ("toolu_wait", Reply.tool_use("Bash", WAIT, id="toolu_wait")),
        ("end", Reply.text("done")),
    )
    seen: list[Any] = []

    async def on_event(session: Session, event: Event) -> None:
        if isinstance(event, ToolUse) and event.tool_use_id == "toolu_wait":
            seen.append((kept.read_text(), created.exists()))
            assert session.prompt_uuid is not None
            await session.rewind_files(session.prompt_uuid)
            seen.append((kept.read_text(), created.exists()))
            (work / "go").write_text("")

    execute = params(tmp_path, "edit the notes", file_checkpointing=True)
    events = await run_session(execute, hermetic, on_event=on_event)

    assert seen == [("version 2\n", True), ("version 1\n", False)]
    assert kept.read_text() == "version 1\n"
    results = {r.tool_use_id: r for r in of_type(events, ToolResult)}
    assert not any(results[i].is_error for i in ("toolu_r", "toolu_w1", "toolu_w2"))
    [applied] = of_type(events, ControlApplied)
    assert applied.control == "rewind_files"
    assert isinstance(events[-1], Result)


async def test_controls_are_refused_once_the_execution_ended_and_rewind_needs_checkpoints(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    from claude_trio import open_session

    model_double.responder = steps(("end", Reply.text("done")))
    async with open_session(params(tmp_path, "hi"), env=hermetic) as session:
        with pytest.raises(Exception, match="file_checkpointing=True"):
            await session.rewind_files(str(session.prompt_uuid))
        async for _ in session.events:
            pass
        with pytest.raises(ControlRefusedError, match="set_model: the execution has ended"):
            await session.set_model("opus")
        with pytest.raises(ControlRefusedError, match="context_usage: the execution has ended"):
            await session.context_usage()


async def test_a_fork_continues_the_history_under_a_new_session_id(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = Script(
        [
            Rule(reply=Reply.text("the word is heron"), when=lambda r: r.last_user_text == "one"),
            Rule(reply=Reply.text("forked"), when=lambda r: r.last_user_text == "two"),
            Rule(reply=Reply.text("original"), when=lambda r: r.last_user_text == "three"),
        ]
    )
    first = await run_session(params(tmp_path, "one"), hermetic)
    old_id = first[-1].session_id  # type: ignore[union-attr]
    assert old_id
    fork = await run_session(
        params(tmp_path, "two", resume_session_id=old_id, fork_session=True), hermetic
    )
    fork_result = fork[-1]
    assert isinstance(fork_result, Result)
    assert fork_result.session_id not in (None, old_id)
    # The fork saw the old history; the first turn's cost is its own.
    forked_request = model_double.message_requests[1]
    assert "the word is heron" in str(forked_request.messages)
    assert fork_result.usage.cost_usd is not None
    assert 0 < fork_result.usage.cost_usd <= first[-1].usage.cost_usd * 2  # type: ignore[union-attr]
    # The original is left as it was: resuming it does not see the fork's turn.
    again = await run_session(params(tmp_path, "three", resume_session_id=old_id), hermetic)
    assert again[-1].session_id == old_id  # type: ignore[union-attr]
    assert "forked" not in str(model_double.message_requests[2].messages)


def test_fork_session_needs_a_session_to_fork() -> None:
    with pytest.raises(Exception, match="fork_session=True: only with resume_session_id"):
        ExecuteParams(prompt="x", fork_session=True)
