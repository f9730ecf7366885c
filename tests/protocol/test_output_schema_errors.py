"""An invalid output schema is refused naming the JSON path of the fault and what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from claude_trio.errors import InvalidParamsError
from claude_trio.params import ExecuteParams


@pytest.mark.parametrize(
    ("schema", "field", "problem"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "strin"}}},
            "output_schema.properties.a.type",
            "'strin' is not one of ['array', 'boolean', 'integer', 'null', 'number', 'object', "
            "'string']",
        ),
        ({"type": "object", "required": "a"}, "output_schema.required", "'a' is not of type"),
        (
            {"type": "object", "properties": {"n": {"minLength": -1}}},
            "output_schema.properties.n.minLength",
            "-1 is less than the minimum of 0",
        ),
        ({"type": "object", "properties": 3}, "output_schema.properties", "3 is not of type"),
    ],
)
def test_the_error_names_the_json_path_and_the_problem(
    schema: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        ExecuteParams(prompt="hi", output_schema=schema)
    assert caught.value.field == field
    assert problem in str(caught.value)
    assert str(caught.value).startswith(f"invalid {field}=")
