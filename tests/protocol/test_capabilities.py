"""The claude-code architecture's capabilities (protocol/config/capabilities.py)."""

from __future__ import annotations

import json

import attrs
import pytest

from claude_trio.protocol.config.capabilities import (
    ArchitectureCapabilities,
    architecture_capabilities,
)
from claude_trio.protocol.config.models import ADAPTIVE_THINKING_ONLY
from claude_trio.protocol.config.resume import RESUME_IMMUTABLE


def test_capabilities_are_one_frozen_value() -> None:
    caps = architecture_capabilities()
    assert caps is architecture_capabilities()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        caps.mid_turn_push = False  # type: ignore[misc]


def test_mid_turn_push_is_supported() -> None:
    assert architecture_capabilities().mid_turn_push is True


def test_the_typescript_librarys_claims_are_all_true() -> None:
    caps = architecture_capabilities()
    assert caps.architecture == "claude-code"
    for flag in (
        "resume",
        "subagents",
        "todo_lists",
        "thinking",
        "flush",
        "skills",
        "plan_mode",
        "partial_messages",
        "abort",
    ):
        assert getattr(caps, flag) is True, flag


def test_user_input_comes_from_the_model_tool_mcp_elicitation_and_tool_approvals() -> None:
    assert architecture_capabilities().user_input_sources == {
        "model-tool",
        "mcp-elicitation",
        "tool_permission",
    }


def test_permission_modes_and_the_ones_that_ask() -> None:
    caps = architecture_capabilities()
    assert set(caps.permission_modes) == {
        "default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"
    }  # fmt: skip
    assert caps.asking_permission_modes == ("default", "acceptEdits")
    assert caps.tool_approval_decisions == ("allow", "deny", "always")


def test_all_four_mcp_server_types_are_supported() -> None:
    assert architecture_capabilities().mcp_server_types == {"stdio", "sse", "http", "sdk"}


def test_plan_mode_is_tool_visibility_not_permission_mode_plan() -> None:
    assert architecture_capabilities().plan_mode_strategy == "tool-visibility"


def test_thinking_capabilities_match_the_model_table_and_params() -> None:
    caps = architecture_capabilities()
    assert caps.thinking_modes == ("adaptive", "enabled")
    assert caps.thinking_displays == ("summarized", "omitted")
    assert {"low", "medium", "high"} <= set(caps.effort_levels)
    assert caps.adaptive_thinking_only_models == ADAPTIVE_THINKING_ONLY
    assert caps.resume_immutable == RESUME_IMMUTABLE
    assert caps.system_prompt_presets == {"claude_code"}


def test_to_mapping_is_json_ready_and_complete() -> None:
    caps = architecture_capabilities()
    mapping = caps.to_mapping()
    assert set(mapping) == {a.name for a in attrs.fields(ArchitectureCapabilities)}
    decoded = json.loads(json.dumps(mapping))
    assert decoded["mid_turn_push"] is True
    assert decoded["mcp_server_types"] == ["http", "sdk", "sse", "stdio"]
    assert decoded["thinking_modes"] == ["adaptive", "enabled"]


def test_the_session_surface_is_listed_as_it_is() -> None:
    from claude_trio.protocol.config.images import sniff_media_type
    from claude_trio.protocol.config.providers import PROVIDERS

    caps = architecture_capabilities()
    assert caps.adapter_ready
    assert caps.structured_output
    assert caps.max_budget_usd
    assert caps.providers == frozenset(PROVIDERS) == {"ollama", "openrouter", "minimax"}
    assert caps.timeouts == {"run_timeout", "idle_timeout"}
    magic = {
        "image/png": b"\x89PNG\r\n\x1a\n",
        "image/jpeg": b"\xff\xd8\xff\xe0",
        "image/gif": b"GIF89a",
        "image/webp": b"RIFF\0\0\0\0WEBP",
    }
    assert caps.image_input == set(magic)
    assert {sniff_media_type(data) for data in magic.values()} == caps.image_input
    assert caps.to_mapping()["tool_lists"] == ["allowed_tools", "disallowed_tools", "tools"]


def test_custom_tools_and_inline_skills_say_the_names_the_model_sees() -> None:
    from claude_trio.protocol.extensions.custom_tools import CustomTool
    from claude_trio.protocol.extensions.skills import InlineSkill

    async def tool(args: object) -> str:
        return ""

    caps = architecture_capabilities()
    made = CustomTool(name="t", description="d", function=tool)
    assert made.full_name == f"mcp__{caps.custom_tools}__t"
    skill = InlineSkill(name="s", description="d", body="b")
    assert skill.qualified_name == f"{caps.inline_skills}:s"


def test_hooks_and_live_controls_name_what_the_session_and_the_wire_take() -> None:
    from claude_trio.actors.session.open import Session
    from claude_trio.protocol.extensions.hooks import HOOK_EVENTS, Hook
    from claude_trio.protocol.fanout.wire import OP_NAMES

    caps = architecture_capabilities()
    assert caps.hooks == frozenset(HOOK_EVENTS)
    for event in caps.hooks:  # every event named is one a Hook can be made for

        async def f(call: object) -> None:
            return None

        assert Hook(event=event, callback=f).event == event  # type: ignore[arg-type]
    assert all(callable(getattr(Session, name)) for name in caps.live_controls)
    assert caps.remote_controls <= caps.live_controls
    assert caps.remote_controls <= set(OP_NAMES)
    assert caps.to_mapping()["remote_controls"] == ["set_model", "set_permission_mode"]
