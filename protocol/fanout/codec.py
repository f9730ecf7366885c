"""The JSON codec for unified events: ``--json`` output and the websocket gateway's wire format.

Rules:

1. ``event_to_json(event)`` is ``{"kind": event.kind, <every field but raw>}``. Nested values
   become JSON-safe: attrs values (``Usage``, ``NormalizedMessage``, content blocks, ``TodoItem``,
   ``Question``) become dicts, content blocks carry their ``"type"``, tuples become lists, an
   enum (``Outcome``) becomes its value, and a ``Usage`` also carries its derived
   ``"context_size"`` (consumers should not recompute it).
2. Encoding never fails, for any value. ``Any`` fields (tool inputs and results, passthrough
   data, answers) can hold whatever the SDK produced: dataclasses and attrs values become dicts,
   mappings get string keys, non-finite floats and anything else non-JSON become their ``repr``
   string, a cycle becomes the string ``"<cycle>"``, a value nested deeper than ``MAX_DEPTH``
   becomes ``"<nested too deeply>"`` (so the encoder and ``json.dumps`` never recurse without
   bound), and an int too long to print in decimal becomes ``"<int of N bits>"``. Such values
   do not round-trip; JSON values do. :func:`dumps` turns the result into JSON text that is
   always valid UTF-8: a string holding a lone surrogate (a ``\\ud800`` escape in what the CLI
   or a caller produced) is sent as a JSON ``\\u`` escape rather than failing the send.
   :func:`event_text` is ``dumps(event_to_json(event))``, written directly (no dict first) for
   the events whose fields are all JSON scalars: the deltas, the bulk of any stream.
3. ``event_from_json(obj)`` is the exact inverse for every event built from JSON-safe values:
   ``event_from_json(event_to_json(e)) == e`` (``raw`` is not sent and decodes to ``None``).
4. Decoding is driven by the events' own type annotations, so a field added to ``events.py`` is
   covered without touching this module. It checks every value against its annotation and
   raises :class:`RemoteProtocolError` naming the path of the bad value (``message.content[1]``),
   for an unknown ``kind`` or block ``type``, a missing required field, or a wrong type. An
   enum field (``outcome``) takes one of its values; a string it does not know (a value a
   newer peer added) is read as if the field were absent, so its default applies (the
   event's own rule: ``outcomes.py``, rule 2), as rule 5 does for unknown keys.
5. Keys the annotations do not know (``context_size``, fields a newer peer added) are ignored, so
   an older client keeps reading a newer server's stream; a field with a default may be omitted.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union

import attrs

from claude_trio.protocol.checks import is_int, is_number
from claude_trio.protocol.errors import RemoteProtocolError
from claude_trio.protocol.session.events import EVENT_KINDS, Event, EventBase
from claude_trio.protocol.session.usage import Usage

_OMITTED_FIELDS = frozenset({"raw"})
_T = TypeVar("_T")

MAX_DEPTH = 64
"""Containers nested deeper than this inside an event are encoded as ``"<nested too deeply>"``."""

_MAX_INT_BITS = 10_000  # about 3,000 decimal digits, under Python's int -> str limit of 4,300

# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------


def event_to_json(event: Event) -> dict[str, Any]:
    """The JSON object (a dict of JSON-safe values) for ``event``; never raises."""
    return _encode_attrs(event, frozenset())


def to_json_safe(value: Any) -> Any:
    """``value`` as plain JSON data, with the encoder's fallbacks (rule 2); never raises."""
    return _to_json_safe(value, frozenset())


def dumps(obj: Any) -> str:
    """Compact JSON text for JSON-safe data (``to_json_safe``'s output); always valid UTF-8.

    Non-ASCII characters are written as themselves, except when the text would hold a lone
    surrogate (which no UTF-8 encoder accepts): then the whole text is written with ``\\u``
    escapes, which every JSON reader decodes to the same strings.
    """
    text = _COMPACT.encode(obj)
    if not text.isascii() and not _is_utf8(text):
        text = _COMPACT_ASCII.encode(obj)
    return text


# Made once (``json.dumps`` with options builds an encoder per call).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_COMPACT_ASCII = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def event_text(event: Event) -> str:
    """``dumps(event_to_json(event))``, the same text, made faster for the events whose fields
    are all strings, ints, bools or ``None`` (deltas, most lifecycle events): each value is
    written as the encoder would write it, without building the dict first."""
    cls: type = type(event)
    plan = _flat_plan(cls)
    if plan is not None:
        parts = [plan[0]]
        for name, key in plan[1]:
            value = getattr(event, name)
            kind = type(value)
            if kind is str:
                parts.append(key + _json_string(value))
            elif value is None:
                parts.append(key + "null")
            elif kind is bool:
                parts.append(key + ("true" if value else "false"))
            elif kind is int and value.bit_length() <= _MAX_INT_BITS:
                parts.append(key + int.__repr__(value))
            else:  # a subclass (a StrEnum), a huge int: the general rules
                break
        else:
            parts.append("}")
            text = "".join(parts)
            if text.isascii() or _is_utf8(text):
                return text
    return dumps(event_to_json(event))


_json_string: Any = json.encoder.encode_basestring  # what ``_COMPACT`` writes a string as
_FLAT_SCALARS = frozenset({str, int, bool, str | None, int | None, bool | None})


@functools.cache
def _flat_plan(cls: type) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """For an event class whose every sent field is annotated with a JSON scalar: the text's
    head (its ``kind``) and ``(field, '"field":' with its comma)`` for each field; ``None``
    for any other class."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in attrs.fields(cls) if f.name not in _OMITTED_FIELDS]
    if not all(hints[name] in _FLAT_SCALARS for name in names):
        return None
    head = "{" + _json_string("kind") + ":" + _json_string(cls.kind)  # type: ignore[attr-defined]
    return head, tuple((name, "," + _json_string(name) + ":") for name in names)


def flat_kind(text: str) -> str | None:
    """The ``kind`` of ``text`` when it is exactly what :func:`event_text` writes for an event
    whose fields are all JSON scalars (each field in order, each value of its annotated type,
    nothing else), so :func:`event_from_json` of it cannot fail; ``None`` for any other text
    (decode it to know). Lets a reader that only passes the text on (a cluster gateway
    framing a delta) skip decoding it, without taking a malformed text for an event."""
    kind = text_kind(text)
    cls: type | None = None if kind is None else EVENT_KINDS.get(kind)
    shape = None if cls is None else _flat_shape(cls)
    return kind if shape is not None and shape.fullmatch(text) else None


def text_kind(text: str) -> str | None:
    """The ``kind`` an event's JSON text written by this codec starts with (every encoder here
    writes it first), read without decoding the text; ``None`` when it does not start so."""
    if not text.startswith(_KIND_HEAD):
        return None
    end = text.find('"', len(_KIND_HEAD))
    return text[len(_KIND_HEAD) : end] if end > 0 else None


_KIND_HEAD = '{"kind":"'
# What the flat encoder writes for each annotation: a JSON string as ``encode_basestring`` (or,
# with a lone surrogate, the ASCII encoder) writes it; an int of at most 10,000 bits in decimal.
_JSON_STRING = r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"'
_JSON_INT = r"-?(?:0|[1-9][0-9]{0,3010})"  # 2**10000 has 3,011 digits
_SHAPES = {str: _JSON_STRING, int: _JSON_INT, bool: "(?:true|false)"}


@functools.cache
def _flat_shape(cls: type) -> re.Pattern[str] | None:
    """The pattern of every text :func:`event_text` writes for a flat class (``None`` for
    others)."""
    plan = _flat_plan(cls)
    if plan is None:
        return None
    hints = typing.get_type_hints(cls)
    parts = [re.escape(plan[0])]
    for name, key in plan[1]:
        annotation = hints[name]
        members = typing.get_args(annotation) or (annotation,)
        values = [_SHAPES[m] if m is not type(None) else "null" for m in members]
        parts.append(re.escape(key) + "(?:" + "|".join(values) + ")")
    parts.append(r"\}")
    return re.compile("".join(parts))


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: ``dumps`` writes it as a \u escape
        return False
    return True


def _encode_attrs(obj: Any, seen: frozenset[int]) -> dict[str, Any]:
    cls = type(obj)
    out: dict[str, Any] = {}
    if isinstance(obj, EventBase):
        out["kind"] = obj.kind  # type: ignore[attr-defined]
    else:
        tag = getattr(cls, "type", None)
        if isinstance(tag, str):
            out["type"] = tag
    for field in attrs.fields(cls):
        if field.name not in _OMITTED_FIELDS:
            out[field.name] = _to_json_safe(getattr(obj, field.name), seen)
    if isinstance(obj, Usage):
        out["context_size"] = obj.context_size
    return out


def _to_json_safe(value: Any, seen: frozenset[int]) -> Any:
    """``value`` as plain JSON data (see rule 2)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value if type(value) is str else str(value)  # a StrEnum (Outcome): its value
    if isinstance(value, int):
        bits = value.bit_length()
        return value if bits <= _MAX_INT_BITS else f"<int of {bits} bits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if id(value) in seen:
        return "<cycle>"
    if len(seen) >= MAX_DEPTH:
        return "<nested too deeply>"
    if isinstance(value, enum.Enum):
        return _to_json_safe(value.value, seen)
    inner = seen | {id(value)}
    if attrs.has(type(value)):
        return _encode_attrs(value, inner)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _to_json_safe(getattr(value, f.name), inner) for f in dataclasses.fields(value)
        }
    if isinstance(value, Mapping):
        return {
            key if isinstance(key, str) else repr(key): _to_json_safe(item, inner)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_to_json_safe(item, inner) for item in value]
    try:
        return repr(value)
    except Exception:  # a broken __repr__ must not break the encoder (rule 2)
        return f"<{type(value).__name__}>"


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


def event_from_json(obj: Any) -> Event:
    """The event ``obj`` (a decoded JSON object) encodes; raises :class:`RemoteProtocolError`."""
    if not isinstance(obj, Mapping):
        raise RemoteProtocolError(f"an event must be a JSON object, got {json_type(obj)}")
    kind = obj.get("kind")
    cls = EVENT_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RemoteProtocolError(
            f"unknown event kind {kind!r}; known kinds: {', '.join(sorted(EVENT_KINDS))}"
        )
    event: Event = _decode_attrs(obj, cls, kind)  # type: ignore[arg-type]
    return event


_Decoder = typing.Callable[[Any, str], Any]
"""Decodes one value against one annotation: ``(value, where) -> value``; ``where`` is the
value's path, for the error a bad value raises."""


@functools.cache
def _field_plan(cls: type) -> tuple[tuple[str, _Decoder, bool, tuple[type, ...]], ...]:
    """``(name, decoder, required, taken as is)`` for each field of attrs class ``cls``: the
    annotations are read and turned into decoders once per class, not once per event. The
    last item: the types of the values the decoder would return unchanged without looking
    further (a string for a ``str`` field, ``None`` for an optional one), so those skip it."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, _decoder(hints[f.name]), f.default is attrs.NOTHING, _as_is(hints[f.name]))
        for f in attrs.fields(cls)
        if f.name not in _OMITTED_FIELDS
    )


@functools.cache
def prepare() -> int:
    """Make every event class's encoding and decoding plans now, and those of the attrs
    values nested in them (usage, messages, content blocks, todo items, questions); returns
    how many classes were prepared. The plans are otherwise made on first use, from the
    classes' annotations: a few milliseconds that would fall on the first events a process
    encodes or decodes. Servers call it at start (``freeze_startup_heap``, a cluster gateway's
    stream followers, ``serve_worker``); it does the work once per process."""
    done: set[type] = set()
    todo: list[Any] = list(EVENT_KINDS.values())
    while todo:
        annotation = todo.pop()
        if isinstance(annotation, type) and attrs.has(annotation):
            if annotation in done:
                continue
            done.add(annotation)
            _field_plan(annotation)
            if issubclass(annotation, EventBase):
                _flat_shape(typing.cast(type, annotation))  # and its flat plan
            hints = typing.get_type_hints(annotation)
            todo.extend(hints[f.name] for f in attrs.fields(annotation))
        else:
            todo.extend(typing.get_args(annotation))
    return len(done)


def _as_is(annotation: Any) -> tuple[type, ...]:
    # Exact types: a bool is not taken for an int, an int not for a float (it is converted).
    if annotation in (str, int, bool):
        return (annotation,)
    origin = typing.get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        members = typing.get_args(annotation)
        if type(None) in members:
            rest = [m for m in members if m is not type(None)]
            return (type(None), *(_as_is(rest[0]) if len(rest) == 1 else ()))
    return ()


def attrs_from_json(obj: Any, cls: type[_T], where: str) -> _T:
    """An instance of the attrs class ``cls`` from a decoded JSON object, checked against its
    annotations as events are (rules 4-5); raises :class:`RemoteProtocolError` naming the path
    of a bad value, starting at ``where``."""
    value: _T = _decode_attrs(obj, cls, where)
    return value


def _decode_attrs(obj: Any, cls: type, where: str) -> Any:
    if not isinstance(obj, Mapping):
        raise RemoteProtocolError(f"{where}: expected a JSON object, got {json_type(obj)}")
    kwargs: dict[str, Any] = {}
    for name, decode, required, as_is in _field_plan(cls):
        if name in obj:
            value = obj[name]
            if type(value) in as_is:
                kwargs[name] = value
                continue
            value = decode(value, f"{where}.{name}")
            if value is not _UNKNOWN_MEMBER:
                kwargs[name] = value
                continue
        if required:
            raise RemoteProtocolError(f"{where}.{name}: missing required field")
    return cls(**kwargs)


def _any(value: Any, where: str) -> Any:
    return value


@functools.cache
def _decoder(annotation: Any) -> _Decoder:
    """The decoder of values annotated ``annotation`` (made once per annotation)."""
    if annotation is Any:
        return _any
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Union or origin is types.UnionType:
        return _union_decoder(args)
    if origin is Literal:
        return functools.partial(_decode_literal, args)
    if origin is tuple:
        return functools.partial(_decode_tuple, _decoder(args[0]))
    if origin is Mapping:
        return functools.partial(_decode_mapping, _decoder(args[1]))
    if attrs.has(annotation):
        return lambda value, where: _decode_attrs(value, annotation, where)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return lambda value, where: _decode_enum(value, annotation, where)
    return functools.partial(_decode_scalar, annotation)


def _decode_literal(allowed: tuple[Any, ...], value: Any, where: str) -> Any:
    if value not in allowed:
        listed = ", ".join(repr(a) for a in allowed)
        raise RemoteProtocolError(f"{where}: {value!r} is not one of {listed}")
    return value


def _decode_tuple(item: _Decoder, value: Any, where: str) -> Any:
    if not isinstance(value, list):
        raise RemoteProtocolError(f"{where}: expected a list, got {json_type(value)}")
    return tuple(item(element, f"{where}[{i}]") for i, element in enumerate(value))


def _decode_mapping(item: _Decoder, value: Any, where: str) -> Any:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise RemoteProtocolError(f"{where}: expected a JSON object, got {json_type(value)}")
    return {key: item(element, f"{where}.{key}") for key, element in value.items()}


_UNKNOWN_MEMBER: Any = object()
"""What an enum field decodes to for a value a newer peer added (rule 4): left out."""


def _decode_enum(value: Any, annotation: type[enum.Enum], where: str) -> Any:
    for member in annotation:
        if type(member.value) is type(value) and member.value == value:
            return member
    if isinstance(value, str):
        return _UNKNOWN_MEMBER
    allowed = ", ".join(repr(member.value) for member in annotation)
    raise RemoteProtocolError(f"{where}: {value!r} is not one of {allowed}")


def _union_decoder(members: tuple[Any, ...]) -> _Decoder:
    nullable = type(None) in members
    rest = [m for m in members if m is not type(None)]
    if len(rest) == 1:
        inner = _decoder(rest[0])
        if not nullable:
            return inner

        def optional(value: Any, where: str) -> Any:
            return None if value is None else inner(value, where)

        return optional
    # The only wider union in the vocabulary is ContentBlock: attrs classes tagged by "type".
    tags = {m.type: m for m in rest}

    def tagged(value: Any, where: str) -> Any:
        if value is None and nullable:
            return None
        tag = value.get("type") if isinstance(value, Mapping) else None
        if tag not in tags:
            raise RemoteProtocolError(
                f"{where}: unknown block type {tag!r}; known types: {', '.join(tags)}"
            )
        return _decode_attrs(value, tags[tag], where)

    return tagged


def _decode_scalar(annotation: Any, value: Any, where: str) -> Any:
    # bool is an int subclass: neither int nor float fields take true/false.
    if annotation is float and is_number(value):
        return float(value)
    if annotation is int and is_int(value):
        return value
    if annotation in (str, bool) and isinstance(value, annotation):
        return value
    raise RemoteProtocolError(
        f"{where}: expected {annotation.__name__}, got {json_type(value)} {value!r}"
    )


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages that say what came."""
    match value:
        case None:
            return "null"
        case bool():
            return "boolean"
        case int() | float():
            return "number"
        case str():
            return "string"
        case list() | tuple():
            return "array"
        case Mapping():
            return "object"
        case _:
            return type(value).__name__
