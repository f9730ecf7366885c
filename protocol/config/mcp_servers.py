"""What an MCP server's configuration must look like (pure).

A session's ``ExecuteParams.mcp_servers`` and a subagent's own ``mcp_servers`` take the SDK's
config shapes, as dicts: ``stdio`` (a ``command``), ``sse`` / ``http`` (an ``http(s)://``
``url``), and ``sdk`` (an in-process server made with ``create_sdk_mcp_server()``).
:func:`check_mcp_server` refuses anything else, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from claude_trio.protocol.errors import InvalidParamsError

__all__ = ["MCP_SERVER_TYPES", "check_mcp_server"]

MCP_SERVER_TYPES: tuple[str, ...] = ("stdio", "sse", "http", "sdk")


def check_mcp_server(name: str, config: object, *, field: str | None = None) -> None:
    """Validate one server's config (the SDK's four shapes, as dicts); errors name ``field``
    (``mcp_servers[name]`` by default)."""
    field = field or f"mcp_servers[{name!r}]"
    if not isinstance(config, Mapping):
        raise InvalidParamsError(field, config, "a config dict (stdio, sse, http or sdk)")
    kind = config.get("type", "stdio")
    match kind:
        case "stdio":
            if not (isinstance(config.get("command"), str) and config["command"]):
                raise InvalidParamsError(
                    f"{field}.command", config.get("command"), "a non-empty command string"
                )
        case "sse" | "http":
            url = config.get("url")
            if not (isinstance(url, str) and urlsplit(url).scheme in ("http", "https")):
                raise InvalidParamsError(f"{field}.url", url, "an http:// or https:// URL")
        case "sdk":
            if "instance" not in config or not isinstance(config.get("name"), str):
                raise InvalidParamsError(
                    field,
                    config,
                    "an in-process server from claude_agent_sdk.create_sdk_mcp_server() "
                    "(keys 'name' and 'instance')",
                )
        case _:
            choices = "one of " + ", ".join(repr(c) for c in MCP_SERVER_TYPES)
            raise InvalidParamsError(f"{field}.type", kind, choices)
