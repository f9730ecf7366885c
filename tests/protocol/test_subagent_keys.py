"""Every key of the SDK's ``AgentDefinition`` a subagent definition can carry: checked at the
edge with errors naming the subagent and the field, and handed on in the SDK's spelling
(``protocol/config/subagents.py``); the gateway's and the remote policy's limits on them."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import attrs
import pytest
from claude_agent_sdk.types import AgentDefinition

from claude_trio.errors import WireError
from claude_trio.protocol.config.options import build_options
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.subagents import SubagentDefinition, subagent_from_mapping
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.remote import RemotePolicy, open_refusal
from claude_trio.protocol.fanout.wire import decode_op, params_to_json

STDIO = {"type": "stdio", "command": "uvx", "args": ["some-mcp"]}


def full() -> SubagentDefinition:
    return SubagentDefinition(
        description="Reviews diffs",
        prompt="You review.",
        tools=["Read", "Grep"],
        disallowed_tools=["Bash"],
        model="inherit",
        max_turns=3,
        background=True,
        permission_mode="plan",
        effort="high",
        skills=["lint-rules"],
        memory="project",
        mcp_servers=["github", {"tracker": STDIO}],
        initial_prompt="Start with the diff.",
    )


def test_every_agent_definition_key_reaches_the_sdk_s_agents() -> None:
    options = build_options(ExecuteParams(prompt="hi", subagents={"reviewer": full()}))
    assert options.agents is not None
    agent = options.agents["reviewer"]
    sent = {k: v for k, v in dataclasses.asdict(agent).items() if v is not None}
    assert sent == {
        "description": "Reviews diffs",
        "prompt": "You review.",
        "tools": ["Read", "Grep"],
        "disallowedTools": ["Bash"],
        "model": "inherit",
        "maxTurns": 3,
        "background": True,
        "permissionMode": "plan",
        "effort": "high",
        "skills": ["lint-rules"],
        "memory": "project",
        "mcpServers": ["github", {"tracker": STDIO}],
        "initialPrompt": "Start with the diff.",
    }
    # All thirteen: nothing the SDK's AgentDefinition takes is left without a field.
    assert set(sent) == {field.name for field in dataclasses.fields(AgentDefinition)}


def test_the_sdk_s_camel_case_keys_are_read_from_json() -> None:
    raw = {
        "description": "d",
        "prompt": "p",
        "permissionMode": "dontAsk",
        "mcpServers": ["github"],
        "initialPrompt": "go",
        "effort": 3,
        "skills": ["a"],
        "memory": "user",
    }
    made = subagent_from_mapping("x", raw)
    assert (made.permission_mode, made.mcp_servers, made.initial_prompt) == (
        "dontAsk",
        ("github",),
        "go",
    )
    assert (made.effort, made.skills, made.memory) == (3, ("a",), "user")
    assert made.to_sdk()["effort"] == 3


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"permission_mode": "yolo"}, r"subagents\['x'\]\.permission_mode"),
        ({"effort": "extreme"}, r"subagents\['x'\]\.effort.*low, medium"),
        ({"effort": 0}, r"\.effort"),
        ({"effort": True}, r"\.effort"),
        ({"skills": ["ok", ""]}, r"subagents\['x'\]\.skills\[1\]"),
        ({"skills": "lint"}, r"\.skills"),
        ({"memory": "cloud"}, r"subagents\['x'\]\.memory.*user, project, local"),
        ({"initial_prompt": " "}, r"\.initial_prompt"),
        ({"mcp_servers": [""]}, r"\.mcp_servers\[0\]"),
        ({"mcp_servers": [{"a": STDIO, "b": STDIO}]}, r"\.mcp_servers\[0\].*one server"),
        ({"mcp_servers": [{"a": {"type": "stdio"}}]}, r"\.mcp_servers\[0\]\['a'\]\.command"),
        ({"mcp_servers": [{"a": {"type": "ws"}}]}, r"\.mcp_servers\[0\]\['a'\]\.type"),
        (
            {"mcp_servers": [{"a": {"type": "sdk", "name": "a", "instance": object()}}]},
            r"\['a'\]\.type.*ExecuteParams\.mcp_servers",
        ),
    ],
)
def test_a_bad_value_names_the_subagent_and_the_field(
    changes: dict[str, Any], match: str
) -> None:
    definition = SubagentDefinition(description="d", prompt="p", **changes)
    with pytest.raises(InvalidParamsError, match=match):
        ExecuteParams(prompt="hi", subagents={"x": definition})


def test_an_asking_subagent_mode_needs_someone_to_answer() -> None:
    asking = SubagentDefinition(description="d", prompt="p", permission_mode="default")
    params = ExecuteParams(prompt="hi", subagents={"x": asking})
    with pytest.raises(InvalidParamsError, match=r"subagents\['x'\]\.permission_mode.*on_user"):
        build_options(params)

    async def answer(*args: Any) -> Any:
        return None

    options = build_options(params, can_use_tool=answer)
    assert options.agents is not None
    assert options.agents["x"].permissionMode == "default"


def _open(subagent: dict[str, Any]) -> Any:
    text = json.dumps(
        {"op": "open", "id": "o", "params": {"prompt": "x", "subagents": {"a": subagent}}}
    )
    return decode_op(text)


def test_over_the_wire_a_subagent_may_name_servers_but_not_configure_one() -> None:
    op = _open({"description": "d", "prompt": "p", "mcpServers": ["github"]})
    assert op.params.subagents["a"].mcp_servers == ("github",)
    with pytest.raises(WireError) as caught:
        _open({"description": "d", "prompt": "p", "mcpServers": [{"evil": STDIO}]})
    assert caught.value.code == "invalid_params"
    assert "params.subagents['a'].mcp_servers[0]" in caught.value.message
    assert "start a process" in caught.value.message


def test_the_new_keys_travel_through_the_wire_and_back() -> None:
    definition = attrs.evolve(full(), mcp_servers=("github",))
    params = ExecuteParams(prompt="hi", subagents={"reviewer": definition})
    text = json.dumps({"op": "open", "id": "o", "params": params_to_json(params)})
    assert decode_op(text).params.subagents["reviewer"] == definition


def test_a_read_only_server_refuses_a_subagent_that_runs_tools_without_asking() -> None:
    policy = RemotePolicy()
    for mode in ("bypassPermissions", "acceptEdits", "auto"):
        subagent = SubagentDefinition(description="d", prompt="p", permission_mode=mode)
        refusal = open_refusal(ExecuteParams(prompt="x", subagents={"a": subagent}), policy)
        assert refusal is not None
        assert refusal.startswith("params.subagents['a'].permission_mode: ")
        assert "read-only" in refusal
    calm = SubagentDefinition(description="d", prompt="p", permission_mode="plan")
    assert open_refusal(ExecuteParams(prompt="x", subagents={"a": calm}), policy) is None
    assert open_refusal(
        ExecuteParams(prompt="x", subagents={"a": calm}), RemotePolicy(tools="all")
    ) is None
