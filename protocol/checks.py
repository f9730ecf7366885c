"""attrs validators shared by the configuration objects (pure).

Each refuses a wrong value with ``InvalidParamsError`` naming the field, the value and what is
allowed: ``bool`` is not a number, and huge or non-finite numbers are refused, never an
``OverflowError`` later.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from .errors import InvalidParamsError

MAX_SECONDS = 86_400.0


def seconds(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A duration: a number of seconds above 0, at most a day."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    # Compared before isfinite(): a huge int has no float, and NaN compares False anyway.
    if not (ok and 0 < value <= MAX_SECONDS and math.isfinite(value)):
        raise InvalidParamsError(attribute.name, value, "a number of seconds > 0 (at most a day)")


def positive_int(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A count: an int above 0 (at most 2**40)."""
    if not (isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 2**40):
        raise InvalidParamsError(attribute.name, value, "a positive int")
