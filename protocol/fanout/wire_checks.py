"""The checks :func:`~.wire.decode_op` makes of every value a client sends (sans-I/O, no trio).

They are the wire format's rules 4 and 5 (``protocol/fanout/wire.py``): every string that
enters can be sent back out, every value is bounded, and what reaches the CLI's command line
can be passed to it. Each raises :class:`WireError` naming the path of the value.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from claude_trio.protocol.config.images import MAX_IMAGE_BYTES, ImageInput
from claude_trio.protocol.errors import InvalidParamsError, WireError, WireErrorCode

__all__ = [
    "MAX_ARGUMENT_BYTES",
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "MAX_IMAGE_BASE64",
    "MAX_INT",
    "MAX_QUOTE",
    "check_arguments",
    "check_value",
    "child_path",
    "code_at",
    "images_from_json",
    "images_to_json",
    "is_sendable_id",
    "is_traceparent",
    "no_nul",
    "quote",
]

MAX_IMAGE_BASE64 = (MAX_IMAGE_BYTES + 2) // 3 * 4
"""The longest base64 text of one image (``images.MAX_IMAGE_BYTES`` once decoded)."""
MAX_DEPTH = 16
"""How deeply arrays and objects may nest in an op (an answer to a form is a few levels)."""
MAX_INT = 2**63 - 1
"""The largest integer (in absolute value) an op may carry."""
MAX_ID_CHARS = 256
"""The longest ``id``, ``session`` or ``request`` (they are echoed in replies)."""
MAX_ARGUMENT_BYTES = 128 * 1024
"""Linux refuses a command-line argument or environment entry of this many bytes or more
(``MAX_ARG_STRLEN``); a ``system_prompt`` is one argument of the CLI."""
MAX_QUOTE = 80
"""Error messages quote at most this many characters of a client's value."""


def quote(value: Any) -> str:
    """``repr(value)`` cut to ``MAX_QUOTE`` characters, for error messages (rule 5)."""
    text = repr(value)
    return text if len(text) <= MAX_QUOTE else text[: MAX_QUOTE - 1] + "\u2026"


def check_value(value: Any, where: str, depth: int, op_id: str | None) -> int:
    """Refuse what could not be sent back out (rule 4); the value's size in characters."""
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise WireError(
                    "invalid_field",
                    f"{where or 'the message'}: a lone UTF-16 surrogate at character "
                    f"{exc.start} (an unpaired \\ud800-\\udfff escape is not a character); "
                    "send text as UTF-8, or characters beyond U+FFFF as surrogate pairs",
                    op_id,
                ) from None
        return len(value) + 2
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        if not -MAX_INT <= value <= MAX_INT:
            raise WireError(
                code_at(where), f"{where}: an integer beyond +-{MAX_INT} is not accepted", op_id
            )
        return 20
    if isinstance(value, float):
        if not math.isfinite(value):
            raise WireError(
                code_at(where), f"{where}: a number too large for a double is not accepted", op_id
            )
        return 24
    if depth >= MAX_DEPTH:
        raise WireError(
            "invalid_field",
            f"{where or 'the message'}: nested deeper than {MAX_DEPTH} levels",
            op_id,
        )
    size = 2
    if isinstance(value, dict):
        for key, item in value.items():
            size += check_value(key, f"{where or 'the message'} (a key)", depth + 1, op_id)
            size += 1 + check_value(item, child_path(where, key), depth + 1, op_id)
    else:
        for i, item in enumerate(value):
            size += 1 + check_value(item, f"{where}[{i}]", depth + 1, op_id)
    return size


def code_at(where: str) -> WireErrorCode:
    """A bad number inside ``params`` is a bad parameter (as ``ExecuteParams`` would say)."""
    return "invalid_params" if where.startswith("params") else "invalid_field"


def child_path(where: str, key: str) -> str:
    name = key if key.isidentifier() and len(key) <= 40 else f"[{quote(key)}]"
    if not where:
        return name
    return f"{where}{name}" if name.startswith("[") else f"{where}.{name}"


def is_sendable_id(value: object) -> bool:
    if not isinstance(value, str) or len(value) > MAX_ID_CHARS:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def is_traceparent(value: object) -> bool:
    """A W3C ``traceparent`` of version 00 with a valid trace and span id (the form
    ``opentelemetry.propagate.inject`` writes): what ``open`` / ``continue`` and the cluster's
    jobs carry to join the caller's trace."""
    return isinstance(value, str) and _TRACEPARENT.fullmatch(value) is not None


def check_arguments(params: Mapping[str, Any], op_id: str | None) -> None:
    """What reaches the CLI's command line and environment (rule 5)."""
    for key, value in params.items():
        if key != "prompt":
            no_nul(value, f"params.{key}", op_id)
    system_prompt = params.get("system_prompt")
    if isinstance(system_prompt, str):
        size = len(system_prompt.encode("utf-8"))
        if size >= MAX_ARGUMENT_BYTES:
            raise WireError(
                "invalid_params",
                f"params.system_prompt: {size} bytes; the CLI takes it as one command-line "
                f"argument, which must be under {MAX_ARGUMENT_BYTES} bytes",
                op_id,
            )
    # The environment's entries are checked by ArchitectureConfig (checks.check_env).


def no_nul(value: Any, where: str, op_id: str | None) -> None:
    if isinstance(value, str):
        if "\x00" in value:
            raise WireError(
                "invalid_params",
                f"{where}: contains a NUL character, which cannot be passed to the CLI",
                op_id,
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            no_nul(key, f"{where} (a key)", op_id)
            no_nul(item, child_path(where, key), op_id)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            no_nul(item, f"{where}[{i}]", op_id)


def images_from_json(raw: Any, op_id: str | None, where: str) -> list[ImageInput]:
    """``[{"data": "<base64>"}]`` -> images (type read from the bytes, size checked);
    ``where`` names the field in errors (``params.images``, ``images``)."""
    if not isinstance(raw, list):
        raise WireError("invalid_field", f"{where}: expected a list", op_id)
    images = []
    for i, item in enumerate(raw):
        data = item.get("data") if isinstance(item, dict) else None
        if not isinstance(data, str) or len(data) > MAX_IMAGE_BASE64:
            raise WireError(
                "invalid_field",
                f'{where}[{i}]: expected {{"data": base64 of at most {MAX_IMAGE_BYTES} bytes}}',
                op_id,
            )
        try:
            decoded = base64.b64decode(data, validate=True)
        except ValueError:
            raise WireError("invalid_field", f"{where}[{i}].data: not base64", op_id) from None
        try:
            images.append(ImageInput.from_bytes(decoded))
        except InvalidParamsError as exc:
            raise WireError("invalid_params", f"{where}[{i}]: {exc.allowed}", op_id) from None
    return images


def images_to_json(images: Sequence[ImageInput]) -> list[dict[str, str]]:
    """Images as the wire carries them: ``[{"data": "<base64>"}]``."""
    return [{"data": base64.b64encode(image.data).decode("ascii")} for image in images]
