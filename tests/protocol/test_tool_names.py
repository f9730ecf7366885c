"""Tool names in the tool lists (protocol/config/tools.py): the CLI's names pass, a well-formed
unknown name passes with an ``UnknownToolWarning``, a malformed one is refused."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from claude_trio.params import ExecuteParams, SubagentDefinition, UnknownToolWarning
from claude_trio.protocol.config.tools import (
    CLI_TOOLS,
    CONDITIONAL_TOOLS,
    KNOWN_TOOLS,
    MUTATING_BUILTINS,
    OTHER_BUILD_TOOLS,
    READONLY_BUILTINS,
    SCHEDULING_TOOLS,
    check_tool_names,
)
from claude_trio.protocol.errors import InvalidParamsError


def make(**kwargs: Any) -> ExecuteParams:
    return ExecuteParams(prompt="hello", **kwargs)


@pytest.mark.parametrize("field", ["tools", "allowed_tools", "disallowed_tools"])
@pytest.mark.parametrize("name", ["Monitor", "EnterWorktree", "ExitWorktree", "SendMessage"])
def test_tools_the_bundled_cli_reports_pass_without_a_warning(field: str, name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made = make(**{field: [name, f"{name}(x)"]})
    assert getattr(made, field) == (name, f"{name}(x)")


def test_every_known_tool_passes_without_a_warning() -> None:
    names = sorted(KNOWN_TOOLS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_tool_names("tools", names) == tuple(names)


def test_an_unknown_name_warns_with_a_suggestion_and_is_passed_on() -> None:
    with pytest.warns(UnknownToolWarning) as caught:
        made = make(disallowed_tools=["Read", "Monitr"])
    assert made.disallowed_tools == ("Read", "Monitr")
    (warning,) = caught
    text = str(warning.message)
    assert "disallowed_tools[1]='Monitr'" in text
    assert "did you mean 'Monitor'?" in text
    # The warning points at the line that made the list, not inside the library.
    assert Path(warning.filename) == Path(__file__)


def test_a_rule_on_an_unknown_tool_warns_naming_the_tool() -> None:
    with pytest.warns(UnknownToolWarning, match=r"'Bassh' is not a tool.*did you mean 'Bash'"):
        made = make(allowed_tools=["Bassh(git status:*)"])
    assert made.allowed_tools == ("Bassh(git status:*)",)


def test_a_name_close_to_nothing_warns_without_a_suggestion() -> None:
    with pytest.warns(UnknownToolWarning) as caught:
        make(tools=["Zyzzyva"])
    assert "did you mean" not in str(caught[0].message)


def test_a_subagents_unknown_tool_warns_too() -> None:
    agent = SubagentDefinition(description="d", prompt="p", tools=("Read", "Wrte"))
    with pytest.warns(UnknownToolWarning, match=r"\['rev'\]\.tools\[1\]='Wrte'.*'Write'"):
        make(subagents={"rev": agent})


def test_the_warning_can_be_silenced_or_made_an_error_by_its_category() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=UnknownToolWarning)
        assert make(tools=["NewTool"]).tools == ("NewTool",)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=UnknownToolWarning)
        with pytest.raises(UnknownToolWarning):
            make(tools=["NewTool"])


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("", "a tool name"),
        ("   ", "a tool name"),
        (7, "a tool name"),
        ("mcp_", "mcp__<server>__<tool>"),
        ("mcp__", "mcp__<server>__<tool>"),
        ("mcp__docs__a b", "mcp__<server>__<tool>"),
        ("mcp__docs__search(q)", "mcp__<server>__<tool>"),
        ("Bash(", "a built-in tool"),
        ("Read Write", "a built-in tool"),
        ("Read,Write", "a built-in tool"),
        ("9Read", "a built-in tool"),
    ],
)
def test_malformed_names_are_refused_naming_the_field_and_the_form(bad: object, says: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused, not warned about
        with pytest.raises(InvalidParamsError, match=r"allowed_tools\[0\]") as info:
            make(allowed_tools=[bad])
    assert says in str(info.value)


def test_mcp_names_pass_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made = make(allowed_tools=["mcp__docs", "mcp__docs__search", "mcp__my-srv.v2__x_y"])
    assert len(made.allowed_tools) == 3


def test_the_decision_lists_are_disjoint_and_name_known_tools() -> None:
    readonly, mutating, scheduling = set(READONLY_BUILTINS), set(MUTATING_BUILTINS), set(
        SCHEDULING_TOOLS
    )
    assert not readonly & mutating
    assert not (readonly | mutating) & scheduling
    assert readonly | mutating | scheduling <= KNOWN_TOOLS
    # The tools the issue found missing are classified: plan mode denies them.
    assert {"Monitor", "EnterWorktree", "ExitWorktree", "SendMessage"} <= mutating
    assert set(CONDITIONAL_TOOLS) <= CLI_TOOLS
    assert not CLI_TOOLS & OTHER_BUILD_TOOLS
