"""In-process tools: Python functions the model can call, as plain values (pure).

A :class:`CustomTool` is a name, a description, the JSON Schema of its input and an async
function. ``open_session(params, custom_tools=[...])`` serves them to the CLI as one in-process
MCP server (``actors/extensions/tool_runner.py`` runs the calls). Rules:

1. A tool's ``name`` is 1-53 characters of ``A-Z a-z 0-9 _ -``: the CLI shows it to the model as
   ``mcp__trio__<name>`` (:attr:`CustomTool.full_name`), and the Messages API takes tool names
   of at most 64 such characters. Names are unique within a session.
2. ``input_schema`` is a JSON Schema (draft 2020-12) of an object; ``{}`` or ``None`` means no
   input. A schema without ``properties`` gets an empty one (the SDK would otherwise read the
   mapping as ``{argument: python type}``). The SDK checks every call's arguments against it
   before the function runs; a call that does not match is an error result the model sees.
3. What the function returns becomes the tool's result: a string as is; anything else that JSON
   can hold as its JSON text. A value JSON cannot hold, or more than :data:`MAX_RESULT_CHARS`
   characters, is an error result saying so. An exception is an error result with the
   exception's type and message (:func:`failure_text`), never a crash of the session.
4. Every call ends within ``timeout`` seconds (the tool's own, else
   ``ExecuteParams.tool_timeout``): the function is cancelled (it sees ``trio.Cancelled``) and
   the model gets an error result saying the tool timed out.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeAlias

import attrs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from claude_trio.protocol.checks import check_number
from claude_trio.protocol.errors import InvalidParamsError

__all__ = [
    "MAX_CUSTOM_TOOLS",
    "MAX_RESULT_CHARS",
    "SERVER_NAME",
    "CustomTool",
    "ToolFunction",
    "check_custom_tools",
    "custom_tool",
    "failure_text",
    "mcp_result",
    "timeout_text",
    "tool_output",
]

ToolFunction: TypeAlias = Callable[[dict[str, Any]], Awaitable[Any]]
"""``async def f(args: dict) -> str | <anything JSON can hold>``."""

SERVER_NAME = "trio"
"""The in-process MCP server's name: the CLI calls a tool ``mcp__trio__<name>``."""

_PREFIX = f"mcp__{SERVER_NAME}__"
MAX_TOOL_NAME = 64 - len(_PREFIX)
"""The longest tool name: the full name ``mcp__trio__<name>`` is at most 64 characters."""
_NAME = re.compile(r"[A-Za-z0-9_-]+")

MAX_DESCRIPTION_CHARS = 10_000
MAX_CUSTOM_TOOLS = 128
"""Tools one session may have (each is described to the model in every request)."""
MAX_RESULT_CHARS = 4 * 1024 * 1024
"""The longest result text; the CLI keeps results this big in a file and shows the model a
preview, so more is a runaway."""
MAX_TIMEOUT = 30 * 86_400.0


def _check_name(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not (isinstance(value, str) and _NAME.fullmatch(value) and len(value) <= MAX_TOOL_NAME):
        raise InvalidParamsError(
            "custom tool name",
            value,
            f"1-{MAX_TOOL_NAME} characters of A-Z, a-z, 0-9, '_' and '-' (the model sees it "
            f"as {_PREFIX}<name>, and tool names are at most 64 such characters)",
        )


def _check_description(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not (isinstance(value, str) and value.strip()):
        raise InvalidParamsError(
            "custom tool description", value, "a non-empty string: it tells the model what the "
            "tool does (or give the function a docstring)"
        )
    if len(value) > MAX_DESCRIPTION_CHARS:
        raise InvalidParamsError(
            "custom tool description",
            f"{len(value)} characters",
            f"at most {MAX_DESCRIPTION_CHARS} characters",
        )


def _schema(value: Any) -> Any:
    """``None`` / ``{}`` -> an object with no properties; a schema without ``properties`` gets
    an empty one; anything else is left for the validator."""
    if value is None or (isinstance(value, Mapping) and not value):
        return MappingProxyType({"type": "object", "properties": {}})
    if isinstance(value, Mapping):
        schema = dict(value)
        schema.setdefault("properties", {})
        return MappingProxyType(schema)
    return value


def _check_schema(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    name = getattr(inst, "name", "?")
    field = f"custom tool {name!r} input_schema"
    if not isinstance(value, Mapping):
        raise InvalidParamsError(field, value, "a JSON Schema of an object (a mapping), or None")
    try:
        Draft202012Validator.check_schema(dict(value))
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "the top level"
        raise InvalidParamsError(
            field, exc.message, f"a valid JSON Schema (the problem is at {where})"
        ) from None
    if value.get("type") != "object":
        raise InvalidParamsError(
            f"{field}.type", value.get("type"), "'object' (a tool's input is an object)"
        )
    if not isinstance(value.get("properties"), Mapping):
        raise InvalidParamsError(
            f"{field}.properties", value.get("properties"), "a mapping of argument -> schema"
        )
    try:
        json.dumps(dict(value), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidParamsError(field, str(exc), "JSON values only") from None


def _check_function(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not (inspect.iscoroutinefunction(value) or _is_async_callable(value)):
        raise InvalidParamsError(
            f"custom tool {getattr(inst, 'name', '?')!r} function",
            value,
            "an async function taking the arguments (a dict)",
        )


def _is_async_callable(value: object) -> bool:
    call = getattr(value, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _check_timeout(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_number(
            f"custom tool {getattr(inst, 'name', '?')!r} timeout",
            value,
            above=0,
            maximum=MAX_TIMEOUT,
            allowed="seconds > 0 (at most 30 days), or None for the session's tool_timeout",
        )


@attrs.frozen(kw_only=True)
class CustomTool:
    """A tool the model can call, run as trio code in the session (see the module rules).

    Make one with :func:`custom_tool` as a decorator, or directly::

        CustomTool(name="lookup", description="Find a customer by id",
                   input_schema={"type": "object", "properties": {"id": {"type": "string"}},
                                 "required": ["id"]},
                   function=lookup)
    """

    name: str = attrs.field(validator=_check_name)
    description: str = attrs.field(validator=_check_description)
    function: ToolFunction = attrs.field(validator=_check_function)
    input_schema: Mapping[str, Any] = attrs.field(
        default=None, converter=_schema, validator=_check_schema
    )
    timeout: float | None = attrs.field(default=None, validator=_check_timeout)
    """Seconds a call may take; ``None``: the session's ``ExecuteParams.tool_timeout``."""

    @property
    def full_name(self) -> str:
        """The name the model and the CLI use: ``mcp__trio__<name>``."""
        return _PREFIX + self.name

    async def __call__(self, args: dict[str, Any]) -> Any:
        """Call the function directly (a decorated function stays callable)."""
        return await self.function(args)


def custom_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    timeout: float | None = None,
) -> Callable[[ToolFunction], CustomTool]:
    """Make an async function a :class:`CustomTool`::

        @custom_tool(description="Add two numbers",
                     input_schema={"type": "object",
                                   "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                                   "required": ["a", "b"]})
        async def add(args):
            return str(args["a"] + args["b"])

    ``name`` defaults to the function's name, ``description`` to its docstring.
    """

    def decorate(function: ToolFunction) -> CustomTool:
        return CustomTool(
            name=name if name is not None else getattr(function, "__name__", ""),
            description=description
            if description is not None
            else inspect.getdoc(function) or "",
            input_schema=input_schema,
            function=function,
            timeout=timeout,
        )

    return decorate


def check_custom_tools(value: object) -> tuple[CustomTool, ...]:
    """``value`` as a tuple of tools with unique names; ``InvalidParamsError`` naming the
    problem otherwise."""
    if isinstance(value, CustomTool) or not isinstance(value, Sequence) or isinstance(value, str):
        raise InvalidParamsError(
            "custom_tools", value, "a list of CustomTool (made with @custom_tool)"
        )
    tools = tuple(value)
    for i, tool in enumerate(tools):
        if not isinstance(tool, CustomTool):
            raise InvalidParamsError(
                f"custom_tools[{i}]",
                tool,
                "a CustomTool (decorate the async function with @custom_tool(...))",
            )
    if len(tools) > MAX_CUSTOM_TOOLS:
        raise InvalidParamsError(
            "custom_tools", f"{len(tools)} tools", f"at most {MAX_CUSTOM_TOOLS}"
        )
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise InvalidParamsError(
                "custom_tools", tool.name, "unique names (two tools have this one)"
            )
        seen.add(tool.name)
    return tools


def tool_output(value: Any) -> tuple[str, bool]:
    """``(text, is_error)`` for what a tool's function returned (rule 3)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return (
                f"the tool returned a {type(value).__name__}, which is neither a string nor "
                f"a JSON value ({exc})",
                True,
            )
    if len(text) > MAX_RESULT_CHARS:
        return (
            f"the tool returned {len(text)} characters, more than the {MAX_RESULT_CHARS} a "
            "result may have",
            True,
        )
    return text, False


def failure_text(exc: BaseException) -> str:
    """The error result for a tool that raised: the exception's type and message."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def timeout_text(tool: CustomTool, seconds: float) -> str:
    """The error result for a call that ran out of time."""
    return f"the tool {tool.name!r} did not finish within {seconds:g} s and was cancelled"


def mcp_result(text: str, is_error: bool) -> dict[str, Any]:
    """The SDK's tool result shape (``{"content": [...], "is_error": ...}``)."""
    return {"content": [{"type": "text", "text": text}], "is_error": is_error}
