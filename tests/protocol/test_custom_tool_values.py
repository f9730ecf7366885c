"""Custom tools as values (protocol/extensions/custom_tools.py) and the options they and inline
skills add (protocol/extensions/options.py)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.protocol.config.options import build_options
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.custom_tools import (
    MAX_CUSTOM_TOOLS,
    MAX_RESULT_CHARS,
    CustomTool,
    check_custom_tools,
    custom_tool,
    failure_text,
    tool_output,
)
from claude_trio.protocol.extensions.options import with_extensions
from claude_trio.protocol.extensions.skills import InlineSkill


async def echo(args: dict[str, Any]) -> str:
    """Echo the arguments back."""
    return str(args)


def test_the_decorator_takes_the_name_and_the_description_from_the_function() -> None:
    tool = custom_tool()(echo)
    assert (tool.name, tool.description) == ("echo", "Echo the arguments back.")
    assert tool.full_name == "mcp__trio__echo"
    assert dict(tool.input_schema) == {"type": "object", "properties": {}}
    assert tool.timeout is None
    named = custom_tool(name="say", description="Say it", timeout=2.5)(echo)
    assert (named.name, named.description, named.timeout) == ("say", "Say it", 2.5)


async def test_a_decorated_function_stays_callable() -> None:
    assert await custom_tool()(echo)({"a": 1}) == "{'a': 1}"


@pytest.mark.parametrize("name", ["", "has space", "dot.name", "ünï", "x" * 54, None])
def test_a_bad_name_is_refused_with_the_rule(name: object) -> None:
    with pytest.raises(InvalidParamsError, match=r"1-53 characters of A-Z, a-z, 0-9, '_' and '-'"):
        CustomTool(name=name, description="d", function=echo)  # type: ignore[arg-type]


def test_the_longest_name_makes_a_64_character_tool_name() -> None:
    assert len(CustomTool(name="x" * 53, description="d", function=echo).full_name) == 64


def test_a_function_without_a_docstring_needs_a_description() -> None:
    async def bare(args: dict[str, Any]) -> str:
        return ""

    with pytest.raises(InvalidParamsError, match="or give the function a docstring"):
        custom_tool()(bare)


def test_the_function_must_be_async() -> None:
    def sync(args: dict[str, Any]) -> str:
        return ""

    class Callable:
        async def __call__(self, args: dict[str, Any]) -> str:
            return ""

    with pytest.raises(InvalidParamsError, match="an async function taking the arguments"):
        CustomTool(name="t", description="d", function=sync)  # type: ignore[arg-type]
    assert CustomTool(name="t", description="d", function=Callable()).name == "t"


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string"}, r"input_schema.type.*'object'"),
        ({"type": "object", "properties": {"a": {"type": "nope"}}}, "a valid JSON Schema"),
        ({"type": "object", "properties": []}, "the problem is at properties"),
        ({"type": "object", "properties": {"a": {"default": math.inf}}}, "JSON values only"),
        ("object", "a JSON Schema of an object"),
    ],
)
def test_a_bad_schema_is_refused_naming_the_tool_and_the_problem(
    schema: object, message: str
) -> None:
    with pytest.raises(InvalidParamsError, match=message) as info:
        CustomTool(name="calc", description="d", function=echo, input_schema=schema)  # type: ignore[arg-type]
    assert "custom tool 'calc' input_schema" in str(info.value)


def test_a_schema_gets_properties_and_is_frozen() -> None:
    schema = {"type": "object"}
    tool = CustomTool(name="t", description="d", function=echo, input_schema=schema)
    assert dict(tool.input_schema) == {"type": "object", "properties": {}}
    schema["extra"] = 1
    assert "extra" not in tool.input_schema


@pytest.mark.parametrize("timeout", [0, -1, math.inf, math.nan, "5", True, 31 * 86_400])
def test_a_bad_timeout_is_refused(timeout: object) -> None:
    with pytest.raises(InvalidParamsError, match="seconds > 0"):
        CustomTool(name="t", description="d", function=echo, timeout=timeout)  # type: ignore[arg-type]


def test_a_list_of_tools_is_checked() -> None:
    tool = CustomTool(name="t", description="d", function=echo)
    assert check_custom_tools([tool]) == (tool,)
    assert check_custom_tools(()) == ()
    with pytest.raises(InvalidParamsError, match="a list of CustomTool"):
        check_custom_tools(tool)
    with pytest.raises(InvalidParamsError, match=r"custom_tools\[1\].*@custom_tool"):
        check_custom_tools([tool, echo])
    with pytest.raises(InvalidParamsError, match="unique names"):
        check_custom_tools([tool, CustomTool(name="t", description="other", function=echo)])
    many = [CustomTool(name=f"t{i}", description="d", function=echo) for i in range(129)]
    with pytest.raises(InvalidParamsError, match=f"at most {MAX_CUSTOM_TOOLS}"):
        check_custom_tools(many)


def test_what_a_function_returns_becomes_the_result_text() -> None:
    assert tool_output("plain") == ("plain", False)
    data = {"a": [1, 2.5, None], "é": True}
    assert tool_output(data) == ('{"a": [1, 2.5, null], "é": true}', False)
    assert tool_output(None) == ("null", False)
    text, is_error = tool_output({1, 2})
    assert is_error
    assert text.startswith("the tool returned a set, which is neither a string nor a JSON value")
    assert tool_output(math.nan)[1] is True
    text, is_error = tool_output("x" * (MAX_RESULT_CHARS + 1))
    assert is_error
    assert text == (
        f"the tool returned {MAX_RESULT_CHARS + 1} characters, more than the "
        f"{MAX_RESULT_CHARS} a result may have"
    )


def test_a_failure_names_the_exception() -> None:
    assert failure_text(ValueError("bad id")) == "ValueError: bad id"
    assert failure_text(KeyError()) == "KeyError"


SERVER = {"type": "sdk", "name": "trio", "instance": object()}


def test_the_tool_server_is_added_always_loaded() -> None:
    tool = CustomTool(name="t", description="d", function=echo)
    other = {"type": "http", "url": "https://example.com/mcp"}
    params = ExecuteParams(prompt="hi", mcp_servers={"web": other}, allowed_tools=["Read"])
    options = with_extensions(build_options(params), tools=[tool], tool_server=SERVER)
    assert options.mcp_servers == {"web": other, "trio": {**SERVER, "alwaysLoad": True}}
    assert options.allowed_tools == ["Read"]  # the permission mode decides, as for any tool
    assert options.plugins == []


def test_a_server_named_like_the_tools_server_is_refused() -> None:
    tool = CustomTool(name="t", description="d", function=echo)
    params = ExecuteParams(prompt="hi", mcp_servers={"trio": SERVER})
    with pytest.raises(InvalidParamsError, match=r"mcp_servers\['trio'\]"):
        with_extensions(build_options(params), tools=[tool], tool_server=SERVER)


def test_inline_skills_become_a_plugin_and_join_a_skill_filter() -> None:
    skill = InlineSkill(name="house-style", description="d", body="b")
    options = with_extensions(
        build_options(ExecuteParams(prompt="hi")), skills=[skill], skills_folder="/tmp/x"
    )
    assert options.plugins == [{"type": "local", "path": "/tmp/x"}]
    assert options.skills is None  # no filter: every skill, the inline ones too
    filtered = ExecuteParams(
        prompt="hi", architecture_config=ArchitectureConfig(claude_skills=["pdf"])
    )
    options = with_extensions(build_options(filtered), skills=[skill], skills_folder="/tmp/x")
    assert options.skills == ["pdf", "inline:house-style"]
    everything = ExecuteParams(
        prompt="hi", architecture_config=ArchitectureConfig(claude_skills="all")
    )
    options = with_extensions(build_options(everything), skills=[skill], skills_folder="/tmp/x")
    assert options.skills == "all"
    untouched = build_options(ExecuteParams(prompt="hi"))
    assert with_extensions(untouched) is untouched


def test_inline_skills_stay_readable_and_read_only_in_a_confined_scope() -> None:
    skill = InlineSkill(name="house-style", description="d", body="b")
    scoped = ExecuteParams(prompt="hi", allowed_paths=["/work"], disallowed_paths=["/secret"])
    before = build_options(scoped)
    options = with_extensions(before, skills=[skill], skills_folder="/tmp/x")
    assert options.add_dirs == [*before.add_dirs, "/tmp/x"]
    deny = json.loads(options.settings or "{}")["permissions"]["deny"]
    assert deny == [
        *json.loads(before.settings or "{}")["permissions"]["deny"],
        "Edit(//tmp/x)",
        "Edit(//tmp/x/**)",
    ]
    # Only denied paths (nothing confined): the folder is readable already, nothing changes.
    denied_only = build_options(ExecuteParams(prompt="hi", disallowed_paths=["/secret"]))
    options = with_extensions(denied_only, skills=[skill], skills_folder="/tmp/x")
    assert (options.add_dirs, options.settings) == (denied_only.add_dirs, denied_only.settings)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_any_json_value_a_tool_returns_reaches_the_model_as_its_json(value: Any) -> None:
    text, is_error = tool_output(value)
    assert not is_error
    assert text == value if isinstance(value, str) else json.loads(text) == value
