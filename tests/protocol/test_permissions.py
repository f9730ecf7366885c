from __future__ import annotations

from typing import Any, get_args

import pytest

from claude_trio.protocol.config.permissions import (
    PERMISSION_MODES,
    PermissionMode,
    check_permission_mode,
)
from claude_trio.protocol.errors import InvalidParamsError


def test_the_modes_are_the_sdks() -> None:
    from claude_agent_sdk.types import PermissionMode as SDKPermissionMode

    assert set(PERMISSION_MODES) == set(get_args(SDKPermissionMode))
    assert set(PERMISSION_MODES) == set(get_args(PermissionMode))


@pytest.mark.parametrize("mode", PERMISSION_MODES)
def test_every_mode_is_accepted(mode: str) -> None:
    assert check_permission_mode("permission_mode", mode) == mode


@pytest.mark.parametrize("value", ["Default", "bypass", "", None, 1, ["plan"]])
def test_anything_else_is_refused_naming_the_modes(value: Any) -> None:
    with pytest.raises(InvalidParamsError, match=r"permission_mode.*'acceptEdits'"):
        check_permission_mode("permission_mode", value)
