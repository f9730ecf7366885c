"""One error hierarchy; invalid input names the field, the value and what is allowed."""

from __future__ import annotations

import pytest

from claude_trio.protocol import errors


def test_invalid_params_names_field_value_and_what_is_allowed() -> None:
    exc = errors.InvalidParamsError("max_turns", -1, "a positive whole number")
    assert str(exc) == "invalid max_turns=-1: a positive whole number"
    assert (exc.field, exc.value, exc.allowed) == ("max_turns", -1, "a positive whole number")


@pytest.mark.parametrize(
    "cls",
    [
        errors.InvalidParamsError,
        errors.LocalProtocolError,
        errors.RemoteProtocolError,
        errors.CLIError,
    ],
)
def test_every_error_is_a_claude_trio_error(cls: type[Exception]) -> None:
    assert issubclass(cls, errors.ClaudeTrioError)


def test_invalid_params_is_also_a_value_error_for_callers_that_catch_those() -> None:
    assert issubclass(errors.InvalidParamsError, ValueError)
