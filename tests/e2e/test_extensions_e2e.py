"""Custom tools and inline skills through the real CLI against the Messages API double.

Custom tools: the double calls the tool (``mcp__trio__<name>``), which runs as trio code in the
session; its result, or its exception as an error result, is in the model's next request; an
abort during a slow tool cancels it before its side effect. Inline skills: the CLI offers them to
the model, ``skill_invoked`` fires when the model opens one and the model gets its instructions,
and the private folder is gone afterwards. ``list_skills`` lists what the CLI loads from disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import dump, of_type, params, run_session

from claude_trio import list_skills
from claude_trio.actors.session.open import Session
from claude_trio.protocol.extensions.custom_tools import CustomTool, custom_tool
from claude_trio.protocol.extensions.skills import InlineSkill
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    Error,
    Event,
    Result,
    SkillInvoked,
    ToolResult,
    ToolUse,
    TurnStarted,
)
from claude_trio.testing.model_double import (
    ModelDouble,
    ModelRequest,
    Reply,
    Rule,
    Script,
    is_main_agent,
)

pytestmark = pytest.mark.e2e

LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"customer": {"type": "string", "description": "the customer's id"}},
    "required": ["customer"],
}


def all_text(request: ModelRequest) -> str:
    """Every text the request carries: the system prompt and the messages' text blocks (where
    the CLI lists skills and puts an opened skill's instructions)."""
    texts = [request.system_text]
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(b.get("text", "")) for b in content if isinstance(b, dict)]
            texts += [
                json.dumps(b.get("content"), ensure_ascii=False)
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
    return "\n".join(texts)


def offered_tools(request: ModelRequest) -> dict[str, Any]:
    return {str(tool.get("name")): tool for tool in request.body.get("tools") or []}


def call_then_answer(tool: str, arguments: dict[str, Any], answer: Any) -> Script:
    """The model calls ``tool`` once, then answers ``answer(request)`` once it has the result."""
    return Script(
        [
            Rule(
                reply=Reply.tool_use(tool, arguments, id="toolu_custom"),
                when=lambda r: is_main_agent(r) and not r.tool_results,
            ),
            Rule(reply=answer, when=is_main_agent),
        ]
    )


async def test_the_model_calls_a_custom_tool_and_gets_its_result(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    test_task = trio.lowlevel.current_task()
    calls: list[Any] = []

    @custom_tool(input_schema=LOOKUP_SCHEMA)
    async def lookup(args: dict[str, Any]) -> Any:
        """Find a customer by id."""
        task = trio.lowlevel.current_task()
        chain = []
        nursery = task.parent_nursery
        while nursery is not None:
            chain.append(nursery.parent_task)
            nursery = nursery.parent_task.parent_nursery
        calls.append((args, test_task in chain))
        await trio.sleep(0.2)
        return {"customer": args["customer"], "name": "Ada Lovelace", "plan": "gold"}

    model_double.responder = call_then_answer(
        "mcp__trio__lookup",
        {"customer": "c-42"},
        lambda r: Reply.text(f"found: {r.tool_result_text('toolu_custom')}"),
    )
    events = await run_session(params(tmp_path, "who is c-42?"), hermetic, custom_tools=[lookup])
    assert calls == [({"customer": "c-42"}, True)]  # run by the session, not by the SDK
    first, second = model_double.message_requests
    tool = offered_tools(first)["mcp__trio__lookup"]  # offered with its schema, not deferred
    assert tool["description"] == "Find a customer by id."
    assert tool["input_schema"]["required"] == ["customer"]
    expected = '{"customer": "c-42", "name": "Ada Lovelace", "plan": "gold"}'
    assert second.tool_result_text("toolu_custom") == expected
    assert not second.tool_results["toolu_custom"].get("is_error")
    [use] = [e for e in of_type(events, ToolUse) if e.name == "mcp__trio__lookup"]
    assert use.input == {"customer": "c-42"}
    [result] = [e for e in of_type(events, ToolResult) if e.tool_use_id == "toolu_custom"]
    assert not result.is_error
    ready = of_type(events, AdapterReady)[0]
    assert ready.custom_tools == ("mcp__trio__lookup",)
    final = events[-1]
    assert isinstance(final, Result), dump(events)
    assert final.text == f"found: {expected}"


async def test_a_tool_that_raises_gives_the_model_an_error_result_with_the_message(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    @custom_tool(input_schema=LOOKUP_SCHEMA)
    async def lookup(args: dict[str, Any]) -> str:
        """Find a customer by id."""
        raise LookupError(f"no customer {args['customer']}")

    model_double.responder = call_then_answer(
        "mcp__trio__lookup", {"customer": "c-7"}, Reply.text("sorry, no such customer")
    )
    events = await run_session(params(tmp_path, "who is c-7?"), hermetic, custom_tools=[lookup])
    second = model_double.message_requests[1]
    assert second.tool_results["toolu_custom"]["is_error"] is True
    assert second.tool_result_text("toolu_custom") == "LookupError: no customer c-7"
    [error] = of_type(events, Error)
    assert (error.code, error.fatal) == ("callback", False)
    assert "no customer c-7" in error.message
    final = events[-1]
    assert isinstance(final, Result), dump(events)
    assert final.final


async def test_an_abort_during_a_slow_tool_cancels_it_before_its_side_effect(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    started = trio.Event()
    outcome: list[str] = []
    side_effect = tmp_path / "money-moved"

    async def transfer(args: dict[str, Any]) -> str:
        started.set()
        try:
            await trio.sleep(20)
        except trio.Cancelled:
            outcome.append("cancelled")
            raise
        side_effect.write_text("moved")  # never reached: the point of the test
        outcome.append("finished")
        return "moved"

    tool = CustomTool(name="transfer", description="Moves money", function=transfer)
    model_double.responder = call_then_answer(
        "mcp__trio__transfer", {}, Reply.text("never asked for")
    )

    async def on_event(session: Session, event: Event) -> None:
        if isinstance(event, ToolUse) and event.name == "mcp__trio__transfer":
            await started.wait()
            await session.abort()

    events = await run_session(
        params(tmp_path, "move it"), hermetic, on_event=on_event, custom_tools=[tool]
    )
    assert isinstance(events[-1], Aborted), dump(events)
    assert outcome == ["cancelled"]
    assert not side_effect.exists()
    assert len(model_double.message_requests) == 1  # the model was never asked again


async def test_an_inline_skill_is_offered_opened_and_its_folder_removed(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    skill = InlineSkill(
        name="house-style",
        description='Our naming rules: "snake_case", ünïcode & colons: yes',
        body="HOUSE-RULE-7: every name is snake_case. See examples/good.py.",
        files={"examples/good.py": "answer_value = 42\n"},
    )
    model_double.responder = Script(
        [
            Rule(
                reply=Reply.tool_use("Skill", {"skill": "inline:house-style"}, id="toolu_skill"),
                when=lambda r: is_main_agent(r) and not r.tool_results,
            ),
            Rule(reply=Reply.text("following the house style"), when=is_main_agent),
        ]
    )
    folders: list[Path] = []

    async def on_event(session: Session, event: Event) -> None:
        if isinstance(event, TurnStarted):
            # The CLI's init lists the plugins it loaded; the inline skills' folder is one.
            plugins = event.raw.data["plugins"]
            [inline] = [p for p in plugins if p["name"] == "inline"]
            folders.append(Path(inline["path"]))
            assert (folders[0] / "skills" / "house-style" / "examples" / "good.py").is_file()

    execute = params(tmp_path, "name this variable", inline_skills=[skill])
    events = await run_session(execute, hermetic, on_event=on_event)
    first, second = model_double.message_requests
    assert f"- inline:house-style: {skill.description}" in all_text(first)
    [invoked] = of_type(events, SkillInvoked)
    assert (invoked.skill, invoked.tool_use_id) == ("inline:house-style", "toolu_skill")
    # The model got the instructions, and where the skill's files are.
    opened = all_text(second)
    assert "HOUSE-RULE-7: every name is snake_case." in opened
    assert str(folders[0] / "skills" / "house-style") in opened
    ready = of_type(events, AdapterReady)[0]
    assert ready.inline_skills == ("inline:house-style",)
    assert isinstance(events[-1], Result), dump(events)
    [folder] = folders
    assert not folder.exists()


def write_skill(folder: Path, name: str, description: str) -> None:
    path = folder / name
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody.\n")


async def test_list_skills_lists_what_the_cli_loads_from_disk(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    execute = params(tmp_path, "hi")
    assert execute.cwd is not None
    work = Path(execute.cwd)
    config = Path(hermetic["CLAUDE_CONFIG_DIR"])
    write_skill(config / "skills", "user-one", "The user's own skill")
    write_skill(config / "skills", "shared", "USER wins")
    write_skill(work / ".claude" / "skills", "shared", "the project's loses")
    write_skill(work / ".claude" / "skills", "project-one", "The project's skill")
    write_skill(tmp_path / ".claude" / "skills", "from-parent", "A parent folder's skill")
    model_double.responder = Script([Rule(reply=Reply.text("ok"), when=is_main_agent)])
    events = await run_session(execute, hermetic)
    init = of_type(events, TurnStarted)[0].raw.data
    listing = all_text(model_double.message_requests[0])
    found = await list_skills(work, env=hermetic)
    names = [skill.name for skill in found]
    assert set(names[:2]) == {"user-one", "shared"}  # the user's first
    assert set(names) == {"user-one", "shared", "project-one", "from-parent"}
    on_disk = [name for name in init["skills"] if name in names]
    assert on_disk == names  # the same skills, in the CLI's order
    for skill in found:
        assert f"- {skill.name}: {skill.description}" in listing
    assert [s.source for s in found if s.name == "shared"] == ["user"]


async def test_the_stop_gate_is_asked_before_a_custom_tool_and_its_deny_stops_it(
    model_double: ModelDouble,
    hermetic: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once a session stops, its stop gate denies every tool call, custom tools included, and
    stops the turn there. The gate is made to answer as it does after a stop, for the custom
    tool only."""
    from types import SimpleNamespace

    from claude_trio.actors.session import open as session_module
    from claude_trio.actors.session.core import STOPPED, stop_gate

    asked: list[str] = []
    stopped = stop_gate(SimpleNamespace(may_write_user_messages=False))  # type: ignore[arg-type]

    def gate_of(lifecycle: Any) -> Any:
        running = stop_gate(lifecycle)

        async def gate(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
            name = str(hook_input.get("tool_name"))
            asked.append(name)
            chosen = stopped if name.startswith("mcp__trio__") else running
            return await chosen(hook_input, tool_use_id, context)

        return gate

    monkeypatch.setattr(session_module, "stop_gate", gate_of)
    ran: list[Any] = []

    @custom_tool(input_schema=LOOKUP_SCHEMA)
    async def lookup(args: dict[str, Any]) -> str:
        """Find a customer by id."""
        ran.append(args)
        return "found"

    model_double.responder = call_then_answer(
        "mcp__trio__lookup", {"customer": "c-1"}, Reply.text("it was denied")
    )
    events = await run_session(params(tmp_path, "who?"), hermetic, custom_tools=[lookup])
    assert asked == ["mcp__trio__lookup"]
    assert ran == []
    [denied] = [r for r in events if isinstance(r, ToolResult) and r.tool_use_id == "toolu_custom"]
    assert denied.is_error
    assert STOPPED in str(denied.content)
    assert len(model_double.message_requests) == 1  # the denial is not handed to the model
    last = events[-1]
    assert isinstance(last, Result), dump(events)
    assert last.terminal_reason == "hook_stopped"
