"""A tiny stdio MCP server whose one tool asks the user a question by MCP elicitation.

Run it as an MCP server of the CLI (``mcp_elicit_server_config()`` gives the stdio config) and
script the model double to call ``mcp__elicit__ask_user`` with ``{"question": ...}``. The tool
calls ``ctx.elicit(...)``, so the CLI sends an ``elicitation`` control request to the SDK host;
whatever the host answers comes back as the tool's result text, which then reaches the model
double as the ``tool_result``:

* accept  -> ``accept: <answer>``
* decline -> ``decline``
* cancel  -> ``cancel``

Why a real MCP server: the elicitation round trip goes CLI -> host -> CLI -> MCP server, and
only a real server shows what the server was actually told (``cancel`` when the Python SDK
rejects the request, see ``docs/sdk-facts.md``).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio.lowlevel
from mcp.server.elicitation import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    render_elicitation_schema,
)
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

__all__ = ["SERVER_NAME", "TOOL_NAME", "main", "mcp_elicit_server_config"]

SERVER_NAME = "elicit"
TOOL_NAME = f"mcp__{SERVER_NAME}__ask_user"
_INPUT_KEY = "answer"


class Answer(BaseModel):
    """The form the user fills in: one free-text answer."""

    answer: str


server: MCPServer[Any] = MCPServer(SERVER_NAME)


@server.tool(structured_output=False)  # plain text, so the tool_result is the answer itself
async def ask_user(question: str, ctx: Context) -> str | InputRequiredResult:
    """Ask the user ``question`` and return what they did."""
    await anyio.lowlevel.checkpoint()  # the MCP server runs on anyio (asyncio), not trio
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        # The handshake era: a server-initiated elicitation/create request.
        result = await ctx.elicit(message=question, schema=Answer)
        match result:
            case AcceptedElicitation():
                return f"accept: {result.data.answer}"
            case DeclinedElicitation():
                return "decline"
            case CancelledElicitation():
                return "cancel"
    # CLI 2.1.332 speaks MCP 2026-07-28 (it opens with server/discover), where a server may not
    # send requests: the tool returns InputRequiredResult, the client elicits, then calls again
    # with the answer in input_responses.
    response = (ctx.input_responses or {}).get(_INPUT_KEY)
    if response is None:
        params = ElicitRequestFormParams(
            message=question, requested_schema=render_elicitation_schema(Answer)
        )
        return InputRequiredResult(input_requests={_INPUT_KEY: ElicitRequest(params=params)})
    if not isinstance(response, ElicitResult):
        return f"error: expected an elicitation result, got {type(response).__name__}"
    if response.action == "accept":
        return f"accept: {(response.content or {}).get('answer', '')}"
    return response.action


def mcp_elicit_server_config() -> dict[str, Any]:
    """The ``ClaudeAgentOptions.mcp_servers`` entry value (stdio, this interpreter)."""
    return {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "claude_trio.testing.mcp_elicit_server"],
    }


def main() -> None:
    server.run("stdio")


if __name__ == "__main__":
    main()
