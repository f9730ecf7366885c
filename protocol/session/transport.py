"""The type of a transport factory: what builds the SDK transport a session's CLI talks over.

``open_session(transport_factory=...)``, a fleet's option of the same name, ``open_cli_pool``
and the cassette recorder all take one: a function of the session's ``ClaudeAgentOptions``
returning a ``claude_agent_sdk.Transport`` (the real subprocess, a recording wrapper, a fake
CLI). Defined here once, with no trio, so that any layer can name it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from claude_agent_sdk import ClaudeAgentOptions, Transport

TransportFactory: TypeAlias = Callable[[ClaudeAgentOptions], Transport]
"""Builds the transport of one CLI from the session's options."""

__all__ = ["TransportFactory"]
