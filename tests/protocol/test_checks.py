"""The validator kit (protocol/checks.py): the one place option checks are built from."""

from __future__ import annotations

import enum
import math
from typing import Any

import attrs
import pytest

from claude_trio.protocol.checks import (
    MAX_ARGUMENT_BYTES,
    check_bool,
    check_env,
    check_int,
    check_number,
    check_text,
    finite_float,
    is_int,
    is_number,
    optional,
    positive_int,
    seconds,
    validator,
)
from claude_trio.protocol.errors import InvalidParamsError


class Level(enum.IntEnum):
    LOW = 1


@pytest.mark.parametrize(
    ("value", "int_", "number"),
    [
        (0, True, True),
        (-3, True, True),
        (10**400, True, True),
        (Level.LOW, True, True),
        (1.5, False, True),
        (math.nan, False, True),
        (True, False, False),
        (False, False, False),
        ("1", False, False),
        (None, False, False),
    ],
)
def test_a_bool_is_neither_an_int_nor_a_number(value: object, int_: bool, number: bool) -> None:
    assert is_int(value) is int_
    assert is_number(value) is number


@pytest.mark.parametrize(
    ("value", "expected"),
    [(2, 2.0), (0.5, 0.5), (True, None), (math.inf, None), (math.nan, None), (10**400, None)],
)
def test_finite_float_never_overflows(value: object, expected: float | None) -> None:
    assert finite_float(value) == expected


def test_check_int_returns_the_value_within_its_bounds() -> None:
    assert check_int("n", 5, 1, 5) == 5
    assert check_int("n", 10**400, 0) == 10**400  # no float conversion: no OverflowError


@pytest.mark.parametrize(
    ("value", "minimum", "maximum", "allowed"),
    [
        (True, None, None, "an int"),
        (0, 1, None, "an int >= 1"),
        (2.0, 1, None, "an int >= 1"),
        (70000, 0, 65535, "an int from 0 to 65535"),
        (6, None, 5, "an int <= 5"),
    ],
)
def test_check_int_names_the_field_the_value_and_the_range(
    value: object, minimum: int | None, maximum: int | None, allowed: str
) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        check_int("count", value, minimum, maximum)
    assert (caught.value.field, caught.value.value, caught.value.allowed) == (
        "count",
        value,
        allowed,
    )


def test_check_int_takes_a_description_of_its_own() -> None:
    with pytest.raises(InvalidParamsError, match="a whole number of CLIs"):
        check_int("size", 0, 1, allowed="a whole number of CLIs")


def test_check_number_bounds_and_its_default_description() -> None:
    assert check_number("x", 0, minimum=0) == 0.0  # non-negative
    assert check_number("x", 3, above=0, maximum=3) == 3.0
    for bad in (0, -1.0, True, "1", math.nan, math.inf, 10**400):
        with pytest.raises(InvalidParamsError) as caught:
            check_number("x", bad, above=0, maximum=10)
        assert caught.value.allowed == "a finite number > 0 and <= 10"
    with pytest.raises(InvalidParamsError) as caught:
        check_number("x", math.nan)
    assert caught.value.allowed == "a finite number"


def test_check_bool_refuses_truthy_values() -> None:
    assert check_bool("flag", False) is False
    for bad in (1, 0, "yes", None):
        with pytest.raises(InvalidParamsError, match="True or False"):
            check_bool("flag", bad)


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b", 3, None])
def test_check_text_refuses_empty_blank_nul_and_non_strings(bad: object) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        check_text("label", bad)
    assert caught.value.field == "label"


# -- the one rule for an environment -----------------------------------------------------------


def test_check_env_accepts_names_and_str_values() -> None:
    env = {"PATH": "/bin", "EMPTY": "", "WITH_EQUALS": "a=b", "ÜNICODE": "é"}
    assert check_env("env", env) is env


@pytest.mark.parametrize(
    ("env", "field", "fragment"),
    [
        ("A=1", "env", "mapping"),
        ({"": "x"}, "env['']", "variable name"),
        ({"A=B": "1"}, "env['A=B']", "without '='"),
        ({1: "x"}, "env[1]", "variable name"),
        ({"A": 1}, "env['A']", "str value"),
        ({"A": None}, "env['A']", "str value"),
        ({"A\x00": "1"}, "env['A\\x00']", "NUL"),
        ({"A": "x\x00y"}, "env['A']", "NUL"),
        ({"B": "v" * MAX_ARGUMENT_BYTES}, "env['B']", "at most"),
    ],
)
def test_check_env_refuses_what_the_kernel_cannot_take_naming_the_entry(
    env: Any, field: str, fragment: str
) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        check_env("env", env)
    assert caught.value.field == field
    assert fragment in caught.value.allowed


def test_an_env_entry_is_measured_as_name_equals_value_in_utf8() -> None:
    fits = MAX_ARGUMENT_BYTES - len("K=")
    check_env("env", {"K": "v" * fits})
    with pytest.raises(InvalidParamsError) as caught:
        check_env("env", {"K": "é" * (fits // 2 + 1)})  # two bytes each
    assert caught.value.value == f"{MAX_ARGUMENT_BYTES + 1} bytes"  # the size, not the value


# -- attrs validators --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Config:
    wait: float = attrs.field(default=1.0, validator=seconds)
    count: int = attrs.field(default=1, validator=positive_int)
    retries: int = attrs.field(default=0, validator=validator(check_int, minimum=0))
    limit: float | None = attrs.field(
        default=None, validator=optional(validator(check_number, above=0, allowed="a limit > 0"))
    )


def test_attrs_validators_name_the_attribute() -> None:
    assert Config(limit=None).limit is None
    assert Config(limit=2).limit == 2
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"wait": 0}, "wait", "a number of seconds > 0 (at most a day)"),
        ({"wait": 86_401}, "wait", "a number of seconds > 0 (at most a day)"),
        ({"count": True}, "count", "a positive int"),
        ({"count": 2**40 + 1}, "count", "a positive int"),
        ({"retries": -1}, "retries", "an int >= 0"),
        ({"limit": 0}, "limit", "a limit > 0, or None"),
    ]
    for kwargs, field, allowed in cases:
        with pytest.raises(InvalidParamsError) as caught:
            Config(**kwargs)
        assert (caught.value.field, caught.value.allowed) == (field, allowed)
