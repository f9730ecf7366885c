"""README's table of every ``ClaudeAgentOptions`` field: a field the installed SDK has and the
table does not list fails here, so a new SDK option cannot go unnoticed; every ``ExecuteParams``
field the table names exists."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import attrs
from claude_agent_sdk import ClaudeAgentOptions

from claude_trio.protocol.config.architecture import CONFIG_KEYS
from claude_trio.protocol.config.params import ExecuteParams

README = Path(__file__).resolve().parent.parent / "README.md"
HEADING = "#### Every `ClaudeAgentOptions` field"


def table() -> dict[str, str]:
    """The table's rows: SDK field -> how to set it."""
    text = README.read_text()
    assert HEADING in text, f"README has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("|---|---|", 1)[1]  # the rows, after the header
    rows: dict[str, str] = {}
    for line in section.splitlines():
        if line.startswith("#"):
            break
        match = re.fullmatch(r"\| `(\w+)` \| (.+) \|", line)
        if match:
            assert match[1] not in rows, f"{match[1]} is listed twice"
            rows[match[1]] = match[2]
    return rows


def test_every_sdk_option_is_in_the_readme_table() -> None:
    fields = [field.name for field in dataclasses.fields(ClaudeAgentOptions)]
    rows = table()
    missing = [name for name in fields if name not in rows]
    assert not missing, f"README's option table does not list {missing}: add a row for each"
    unknown = [name for name in rows if name not in fields]
    assert not unknown, f"README's option table lists {unknown}, which the SDK does not have"
    assert list(rows) == fields  # in the SDK's order, so a new field is easy to place


def test_every_params_field_the_table_names_exists() -> None:
    params_fields = {field.name for field in attrs.fields(ExecuteParams)}
    for sdk_field, how in table().items():
        for name in re.findall(r"`(\w+)=`", how):
            assert name in params_fields, f"row {sdk_field}: ExecuteParams has no field {name}"
        for name in re.findall(r"`(claude_\w+)`", how):
            assert name in CONFIG_KEYS, f"row {sdk_field}: no architecture_config key {name}"


def test_an_option_that_is_not_offered_says_why() -> None:
    for sdk_field, how in table().items():
        if how.startswith("not offered"):
            assert len(how) > len("not offered: ") + 20, f"row {sdk_field} gives no reason"
