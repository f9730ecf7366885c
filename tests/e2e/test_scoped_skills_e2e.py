"""An inline skill in a path-scoped execution, through the real CLI against the Messages API
double: the skill is offered and opened, and its own files can be read, though its private
folder lies outside the scope's folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import dump, of_type, params, run_session

from claude_trio.actors.session.open import Session
from claude_trio.protocol.extensions.skills import InlineSkill
from claude_trio.protocol.session.events import (
    AdapterReady,
    Event,
    Result,
    SkillInvoked,
    ToolResult,
    TurnStarted,
)
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, turns

pytestmark = pytest.mark.e2e


def all_text(request: ModelRequest) -> str:
    return json.dumps(request.body)


async def test_an_inline_skill_is_opened_and_its_files_read_under_a_path_scope(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    skill = InlineSkill(
        name="house-style",
        description="Our naming rules",
        body="HOUSE-RULE-7: every name is snake_case. See examples/good.py.",
        files={"examples/good.py": "answer_value = 42  # GOOD-EXAMPLE\n"},
    )
    folders: list[Path] = []

    def example() -> Path:
        return folders[0] / "skills" / "house-style" / "examples" / "good.py"

    model_double.responder = turns(
        Reply.tool_use("Skill", {"skill": "inline:house-style"}, id="toolu_skill"),
        lambda _: Reply.tool_use("Read", {"file_path": str(example())}, id="toolu_read"),
        lambda _: Reply.tool_use(
            "Write", {"file_path": str(example()), "content": "bad = 1\n"}, id="toolu_write"
        ),
        Reply.text("following the house style"),
    )

    async def on_event(session: Session, event: Event) -> None:
        if isinstance(event, TurnStarted):
            [inline] = [p for p in event.raw.data["plugins"] if p["name"] == "inline"]
            folders.append(Path(inline["path"]))
            assert example().read_text().endswith("# GOOD-EXAMPLE\n")

    work = tmp_path / "work"
    execute = params(
        tmp_path,
        "name this variable",
        inline_skills=[skill],
        allowed_paths=[str(work)],
        scope_enforcement="soft",  # the file tools' confinement is the point, not Bash's
    )
    events = await run_session(execute, hermetic, on_event=on_event)

    assert isinstance(events[-1], Result), dump(events)
    [invoked] = of_type(events, SkillInvoked)
    assert invoked.skill == "inline:house-style"
    last = model_double.message_requests[-1]
    assert "HOUSE-RULE-7" in all_text(model_double.message_requests[1])
    # The skill's own files are readable inside the scope, and not writable.
    assert "GOOD-EXAMPLE" in (last.tool_result_text("toolu_read") or ""), dump(events)
    refusal = last.tool_result_text("toolu_write") or ""
    assert "GOOD-EXAMPLE" not in refusal
    [write] = [e for e in of_type(events, ToolResult) if e.tool_use_id == "toolu_write"]
    assert write.is_error, dump(events)
    # The scope itself is unchanged: the folder it added is the skills' one, and it is gone.
    [ready] = of_type(events, AdapterReady)
    assert ready.allowed_paths == (str(work),)
    assert ready.add_dirs[-1] == str(folders[0])
    assert not folders[0].exists()
