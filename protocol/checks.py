"""The validator kit: every option check of claude-trio is built from these (pure).

Each check refuses a wrong value with ``InvalidParamsError`` naming the field, the value and
what is allowed. The rules they share, written once here:

* ``bool`` is not a number: ``True`` is not ``1`` (:func:`is_int`, :func:`is_number`).
* Huge or non-finite numbers are refused where a number is converted, never an
  ``OverflowError`` later (:func:`finite_float`).
* An environment is the one rule of :func:`check_env`, whoever takes it (``custom_env``,
  ``open_session(env=...)``, a fleet's or a pool's ``env``, a gateway's ``open``).

Three shapes, for three kinds of caller:

* predicates (:func:`is_int`, :func:`is_number`, :func:`finite_float`) for reading a peer's
  data leniently (a frame field that is not an int is read as ``None``, not refused);
* checks (``check_*(name, value, ...)``) for a function's options: they raise, or return the
  value;
* attrs validators (:func:`seconds`, :func:`positive_int`, :func:`validator`,
  :func:`optional`) for the frozen configuration objects.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, TypeGuard

import attrs

from claude_trio.protocol.errors import InvalidParamsError

MAX_SECONDS = 86_400.0

MAX_ARGUMENT_BYTES = 128 * 1024 - 1
"""The longest single command-line argument or environment entry (``NAME=value``) Linux
takes (``MAX_ARG_STRLEN``, with its NUL)."""

AttrsValidator: TypeAlias = Callable[[Any, "attrs.Attribute[Any]", Any], None]

# ---------------------------------------------------------------------------------------------
# Predicates
# ---------------------------------------------------------------------------------------------


def is_int(value: object) -> TypeGuard[int]:
    """An int, and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """An int or a float, and not a bool (finite or not: see :func:`finite_float`)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite_float(value: object) -> float | None:
    """``value`` as a finite float, or ``None`` when it is not a number, not finite, or an int
    too large for a float (never ``OverflowError``: a huge int is just an invalid value)."""
    if not is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


# ---------------------------------------------------------------------------------------------
# Checks: (name, value, ...) -> the value, or InvalidParamsError
# ---------------------------------------------------------------------------------------------


def _int_range(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an int from {minimum} to {maximum}"
    if minimum is not None:
        return f"an int >= {minimum}"
    if maximum is not None:
        return f"an int <= {maximum}"
    return "an int"


def check_int(
    name: str,
    value: object,
    minimum: int | None = None,
    maximum: int | None = None,
    *,
    allowed: str | None = None,
) -> int:
    """An int (not a bool) within ``[minimum, maximum]``; ``allowed`` replaces the default
    description (``"an int >= 1"``, ``"an int from 0 to 65535"``) in the error."""
    if (
        is_int(value)
        and (minimum is None or value >= minimum)
        and (maximum is None or value <= maximum)
    ):
        return value
    raise InvalidParamsError(name, value, allowed or _int_range(minimum, maximum))


def check_number(
    name: str,
    value: object,
    *,
    above: float | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    allowed: str | None = None,
) -> float:
    """A finite number (not a bool) ``> above``, ``>= minimum`` and ``<= maximum``, as a float.
    ``check_number(name, x, minimum=0)`` is a non-negative number, ``above=0`` a positive one.
    """
    number = finite_float(value)
    if (
        number is not None
        and (above is None or number > above)
        and (minimum is None or number >= minimum)
        and (maximum is None or number <= maximum)
    ):
        return number
    if allowed is None:
        bounds = [f"> {above:g}"] if above is not None else []
        bounds += [f">= {minimum:g}"] if minimum is not None else []
        bounds += [f"<= {maximum:g}"] if maximum is not None else []
        allowed = " ".join(["a finite number", " and ".join(bounds)]).strip()
    raise InvalidParamsError(name, value, allowed)


def check_bool(name: str, value: object, *, allowed: str = "True or False") -> bool:
    """``True`` or ``False`` (not ``1``, not ``"yes"``)."""
    if isinstance(value, bool):
        return value
    raise InvalidParamsError(name, value, allowed)


def check_text(
    name: str,
    value: object,
    *,
    allowed: str = "a non-empty string without NUL characters",
) -> str:
    """A ``str`` that is not empty or blank and holds no NUL character (a path, a label, a
    host)."""
    if isinstance(value, str) and value.strip() and "\x00" not in value:
        return value
    raise InvalidParamsError(name, value, allowed)


ENV_ALLOWED = "a mapping of non-empty str -> str (variable names without '=')"


def check_env(name: str, value: object) -> Mapping[str, str]:
    """An environment for the CLI: the one rule wherever one is taken.

    A mapping whose keys are variable names (a non-empty ``str`` with no ``=``: the kernel
    splits an entry at its first ``=``) and whose values are ``str``; neither may hold a NUL
    (the kernel ends an entry at the first one), and each ``NAME=value`` entry must fit in
    ``MAX_ARGUMENT_BYTES`` (the kernel refuses to start the CLI otherwise). An entry is
    named ``name[key]`` in the error.
    """
    if not isinstance(value, Mapping):
        raise InvalidParamsError(name, value, ENV_ALLOWED)
    for key, item in value.items():
        where = f"{name}[{key!r}]"
        if not (isinstance(key, str) and key and "=" not in key):
            raise InvalidParamsError(where, key, "a variable name: " + ENV_ALLOWED)
        if not isinstance(item, str):
            raise InvalidParamsError(where, item, "a str value: " + ENV_ALLOWED)
        if "\x00" in key or "\x00" in item:
            raise InvalidParamsError(
                where, item, "no NUL character (an environment variable cannot hold one)"
            )
        size = len(key.encode("utf-8", "surrogatepass")) + 1
        size += len(item.encode("utf-8", "surrogatepass"))
        if size > MAX_ARGUMENT_BYTES:
            raise InvalidParamsError(
                where,
                f"{size} bytes",
                f"at most {MAX_ARGUMENT_BYTES} bytes for NAME=value (the system's limit for "
                "one environment entry; pass large data in a file instead)",
            )
    return value


# ---------------------------------------------------------------------------------------------
# attrs validators
# ---------------------------------------------------------------------------------------------


def seconds(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A duration: a number of seconds above 0, at most a day."""
    check_number(
        attribute.name,
        value,
        above=0,
        maximum=MAX_SECONDS,
        allowed="a number of seconds > 0 (at most a day)",
    )


def positive_int(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A count: an int above 0 (at most 2**40)."""
    check_int(attribute.name, value, 1, 2**40, allowed="a positive int")


def validator(check: Callable[..., object], **options: Any) -> AttrsValidator:
    """An attrs validator running ``check(attribute.name, value, **options)``::

        size: int = attrs.field(validator=validator(check_int, minimum=1))
    """

    def run(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        check(attribute.name, value, **options)

    return run


def optional(inner: AttrsValidator) -> AttrsValidator:
    """``None``, or what ``inner`` accepts; the error says ``..., or None``."""

    def run(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None:
            return
        try:
            inner(inst, attribute, value)
        except InvalidParamsError as exc:
            raise InvalidParamsError(exc.field, exc.value, f"{exc.allowed}, or None") from None

    return run
