"""What an editor sends, as a session's parameters: a prompt's content blocks as the prompt's
text and images, the editor's MCP servers as the CLI's ``mcp_servers``."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from acp import schema

from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.errors import InvalidParamsError

__all__ = ["mcp_servers", "prompt_parts"]


def prompt_parts(blocks: Sequence[Any]) -> tuple[str, tuple[ImageInput, ...]]:
    """The text of a ``session/prompt`` and its images.

    Text blocks are the prompt; an embedded resource (a file the editor attached) joins it as a
    ``<context>`` section with its URI; a resource link is named by its URI; images are decoded
    (``InvalidParamsError`` for one that is not base64 of a PNG, JPEG, GIF or WebP); audio is
    refused (the capabilities do not offer it)."""
    texts: list[str] = []
    images: list[ImageInput] = []
    for block in blocks:
        match block:
            case schema.TextContentBlock(text=text):
                texts.append(text)
            case schema.ImageContentBlock(data=data):
                try:
                    raw = base64.b64decode(data, validate=True)
                except (binascii.Error, ValueError):
                    raise InvalidParamsError(
                        "prompt.image.data", data[:16], "base64 of the image"
                    ) from None
                images.append(ImageInput.from_bytes(raw))
            case schema.EmbeddedResourceContentBlock(resource=resource):
                if isinstance(resource, schema.TextResourceContents):
                    texts.append(f'<context uri="{resource.uri}">\n{resource.text}\n</context>')
                else:
                    texts.append(f"(attached: {resource.uri})")
            case schema.ResourceContentBlock(uri=uri):
                texts.append(f"(see {uri})")
            case _:
                raise InvalidParamsError(
                    "prompt",
                    getattr(block, "type", type(block).__name__),
                    "text, image, resource or resource_link blocks",
                )
    return "\n\n".join(t for t in texts if t), tuple(images)


def mcp_servers(servers: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """The editor's MCP servers in the CLI's form (by name: stdio, http, sse)."""
    out: dict[str, dict[str, Any]] = {}
    for server in servers:
        if isinstance(server, schema.McpServerStdio):
            out[server.name] = {
                "type": "stdio",
                "command": server.command,
                "args": list(server.args),
                "env": {variable.name: variable.value for variable in server.env},
            }
        elif isinstance(server, schema.HttpMcpServer | schema.SseMcpServer):
            out[server.name] = {
                "type": server.type,
                "url": server.url,
                "headers": {header.name: header.value for header in server.headers},
            }
        else:
            raise InvalidParamsError(
                "mcpServers", getattr(server, "name", "?"), "stdio, http or sse servers"
            )
    return out
