"""What a session can be told, through the real CLI against the Messages API double: each test
shows the effect in the request the double receives, or in how the CLI behaves.

adapter_ready, run and idle timeouts, images, subagent definitions, structured output, tool
lists, the default todo and tool-use summary events, a provider preset, the budget stop and the
version gate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import MODEL, dump, kinds, of_type, params, run_session

from claude_trio.protocol.config import versions
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.redact import MASK
from claude_trio.protocol.config.subagents import SubagentDefinition
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    Result,
    SubagentStarted,
    TodoListUpdated,
    ToolUse,
    ToolUseSummary,
    WarningEvent,
)
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.testing.model_double import (
    ModelDouble,
    ModelRequest,
    Reply,
    ReplyUsage,
    Rule,
    Script,
    is_main_agent,
    is_subagent,
    turns,
)

pytestmark = pytest.mark.e2e

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99"
    b"=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
)


def tool_names(request: ModelRequest) -> list[str]:
    return [str(tool.get("name")) for tool in request.body.get("tools") or []]


async def test_adapter_ready_comes_first_with_the_resolved_configuration_and_no_secret(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(Reply.text("ready"))
    execute = params(tmp_path, "hi", max_budget_usd=5.0, run_timeout=60.0, plan_mode=True)
    events = await run_session(execute, hermetic)
    ready = events[0]
    assert isinstance(ready, AdapterReady), dump(events)
    assert kinds(events)[:2] == ["adapter_ready", "turn_started"]
    assert (ready.model, ready.provider, ready.plan_mode) == (MODEL, "anthropic", True)
    assert ready.permission_mode == "bypassPermissions"
    assert ready.tools is not None
    assert "Read" in ready.tools
    assert "Bash" not in ready.tools
    assert (ready.max_budget_usd, ready.run_timeout) == (5.0, 60.0)
    assert ready.cli_version == "2.1.332"
    assert ready.sdk_version == "0.2.189"
    assert ready.cwd == execute.cwd
    assert ready.env["ANTHROPIC_API_KEY"] == MASK  # the hermetic env's key, masked
    assert hermetic["ANTHROPIC_API_KEY"] not in json.dumps(dict(ready.env))
    assert ready.base_url == model_double.base_url


async def test_a_config_warning_and_an_untested_version_come_before_adapter_ready(
    model_double: ModelDouble,
    hermetic: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(versions, "VERIFIED_CLI", ("9.0.0", "9.9.9"))  # the real one is older
    model_double.responder = turns(Reply.text("ok"))
    execute = params(
        tmp_path,
        "hi",
        model="opus-4.6",
        architecture_config=_thinking(enabled=True, budget=2048),
    )
    events = await run_session(execute, hermetic)
    warnings = of_type(events, WarningEvent)
    ready = events.index(of_type(events, AdapterReady)[0])
    codes = [(w.code, events.index(w) < ready) for w in warnings]
    assert ("untested_version", True) in codes, dump(events)
    assert ("config_changed", True) in codes
    [version] = [w for w in warnings if w.code == "untested_version"]
    assert "the claude CLI 2.1.332" in version.message
    assert "9.0.0 to 9.9.9" in version.message
    [changed] = [w for w in warnings if w.code == "config_changed"]
    assert "becomes 'adaptive'" in changed.message


def _thinking(*, enabled: bool, budget: int) -> Any:
    from claude_trio.protocol.config.params import ArchitectureConfig

    return ArchitectureConfig(
        claude_thinking="enabled" if enabled else "adaptive", claude_thinking_budget=budget
    )


async def test_an_idle_timeout_stops_a_cli_that_went_quiet(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    # The double streams, then holds back its next event for 20 s.
    model_double.responder = turns(Reply.text("slow " * 4, chunk_size=5, event_delay=20.0))
    execute = params(tmp_path, "hi", idle_timeout=2.0)
    events = await run_session(execute, hermetic)
    aborted = events[-1]
    assert isinstance(aborted, Aborted), dump(events)
    assert aborted.reason == "idle_timeout: no event from the CLI for 2 s"


async def test_a_run_timeout_stops_the_execution(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    # 20 s of streaming; the deadline falls mid-stream even when a loaded machine takes
    # seconds to start the CLI.
    model_double.responder = turns(Reply.text("tick " * 200, chunk_size=5, event_delay=0.1))
    execute = params(tmp_path, "hi", run_timeout=8.0)
    events = await run_session(execute, hermetic)
    aborted = events[-1]
    assert isinstance(aborted, Aborted), dump(events)
    assert aborted.reason == "run_timeout: the execution ran for 8 s"
    assert any(e.kind == "text_delta" for e in events), dump(events)  # stopped mid-stream
    assert aborted.usage is not None  # with the usage so far


async def test_images_reach_the_model_as_image_blocks(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    model_double.responder = turns(Reply.text("a dot"))
    execute = params(tmp_path, "what is this?", images=[ImageInput.from_path(image)])
    events = await run_session(execute, hermetic)
    assert isinstance(events[-1], Result)
    [request] = model_double.message_requests
    blocks = [
        block
        for message in request.messages
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
    ]
    [image_block] = [b for b in blocks if b.get("type") == "image"]
    assert image_block["source"]["media_type"] == "image/png"
    assert image_block["source"]["data"] == ImageInput.from_bytes(PNG).block()["source"]["data"]
    texts = [str(b.get("text", "")).strip() for b in blocks if b.get("type") == "text"]
    assert "what is this?" in texts


async def test_a_subagent_definition_is_offered_and_runs_with_its_prompt(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    reviewer = SubagentDefinition(
        description="Reviews a diff for naming problems", prompt="You are the NAMING REVIEWER."
    )
    call = {"description": "review", "prompt": "review a.py", "subagent_type": "naming-reviewer"}
    model_double.responder = Script(
        [
            Rule(
                reply=Reply.text("names look fine"),
                when=lambda r: is_subagent(r) and "NAMING REVIEWER" in r.system_text,
            ),
            Rule(
                reply=Reply.tool_use("Agent", call, id="toolu_agent"),
                when=lambda r: is_main_agent(r) and not r.tool_results,
            ),
            Rule(reply=Reply.text("done"), when=is_main_agent),
        ]
    )
    execute = params(tmp_path, "review please", subagents={"naming-reviewer": reviewer})
    events = await run_session(execute, hermetic)
    # The CLI lists the agent types the Agent tool can start in the request it sends.
    offered = json.dumps(model_double.message_requests[0].body)
    assert "naming-reviewer: Reviews a diff for naming problems" in offered
    assert [r for r in model_double.message_requests if "NAMING REVIEWER" in r.system_text]
    assert of_type(events, SubagentStarted), dump(events)
    assert isinstance(events[-1], Result)


async def test_structured_output_rides_on_the_result(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    model_double.responder = Script(
        [
            Rule(
                reply=Reply.tool_use("StructuredOutput", {"answer": 42}),
                when=lambda r: is_main_agent(r) and not r.tool_results,
            ),
            Rule(reply=Reply.text("done"), when=is_main_agent),
        ]
    )
    events = await run_session(params(tmp_path, "6 x 7?", output_schema=schema), hermetic)
    result = events[-1]
    assert isinstance(result, Result), dump(events)
    assert result.structured_output == {"answer": 42}
    assert "StructuredOutput" in tool_names(model_double.message_requests[0])
    assert not [w for w in of_type(events, WarningEvent) if w.code == "structured_output_invalid"]


async def test_disallowed_and_scheduling_tools_are_not_offered(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(Reply.text("ok"))
    await run_session(params(tmp_path, "hi", disallowed_tools=["Bash"]), hermetic)
    offered = tool_names(model_double.message_requests[0])
    assert "Read" in offered
    assert "Bash" not in offered
    assert "ScheduleWakeup" not in offered  # a headless CLI cannot wake up later


async def test_todo_and_tool_use_summary_events_fire_with_the_defaults(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    # No environment flag of the test's own: the library's defaults turn both on.
    model_double.responder = turns(
        Reply.tool_use(
            "TaskCreate",
            {"subject": "check", "description": "d", "activeForm": "Checking"},
            id="toolu_task",
        ),
        Reply.tool_use("Bash", {"command": "echo hi", "description": "say hi"}, id="toolu_bash"),
        Reply.text("done"),
    )
    events = await run_session(params(tmp_path, "plan and run"), hermetic)
    assert of_type(events, TodoListUpdated), dump(events)
    summaries = [e for e in events if isinstance(e, ToolUseSummary)]
    assert summaries, dump(events)
    assert all(s.summary for s in summaries)
    # A summary is not a tool call: the tool uses are the model's calls, and only them.
    assert {e.name for e in events if isinstance(e, ToolUse)} <= {"TaskCreate", "Bash"}
    bash = [e for e in of_type(events, ToolUse) if e.name == "Bash"]
    assert any("toolu_bash" in s.preceding_tool_use_ids for s in summaries)
    assert bash
    assert model_double.summary_requests


async def test_a_provider_preset_pointed_at_the_double_sends_its_credential(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(Reply.text("hello from elsewhere"))
    env = {k: v for k, v in hermetic.items() if k != "ANTHROPIC_API_KEY"}
    env["OPENROUTER_API_KEY"] = "or-secret-key"  # the preset's own variable
    # ANTHROPIC_BASE_URL of the hermetic env (the caller's) wins over the preset's server.
    execute = params(tmp_path, "hi", provider="openrouter", model="qwen/qwen3-coder")
    events = await run_session(execute, env)
    [request] = model_double.message_requests
    assert request.header("authorization") == "Bearer or-secret-key"
    assert request.model == "qwen/qwen3-coder"  # any model id goes with a provider
    ready = of_type(events, AdapterReady)[0]
    assert ready.provider == "openrouter"
    assert ready.env["ANTHROPIC_AUTH_TOKEN"] == MASK
    assert isinstance(events[-1], Result)


async def test_the_budget_stops_the_execution_with_a_result_that_says_so(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    expensive = ReplyUsage(input_tokens=2000, output_tokens=2000)
    model_double.responder = turns(
        Reply.tool_use("Bash", {"command": "true", "description": "x"}, usage=expensive),
        Reply.text("never asked for"),
    )
    events = await run_session(params(tmp_path, "spend", max_budget_usd=0.001), hermetic)
    result = events[-1]
    assert isinstance(result, Result), dump(events)
    assert (result.subtype, result.final) == ("error_max_budget_usd", True)
    assert result.terminal_reason == "budget_exhausted"
    assert result.outcome is Outcome.BUDGET_EXCEEDED
    assert "maximum budget" in " ".join(result.errors)
    assert len(model_double.message_requests) == 1
