"""One agent session: open it, steer it, answer it, and give it tools and hooks.

::

    async with open_session(ExecuteParams(prompt="...", model="sonnet")) as session:
        async for event in session.events:
            ...

* :func:`open_session` yields a :class:`Session`: ``events`` (an :class:`EventStream`),
  ``push`` (:class:`Accepted` or :class:`Rejected`), ``answer`` (:class:`AnswerAccepted` or
  :class:`AnswerRejected`), ``abort``, the live controls (``context_usage`` ->
  :class:`ContextUsage`, ``mcp_status`` -> :class:`McpServerStatus`, ...), ``usage`` (a
  ``Usage``, as every host's handle has) and ``usage_by_turn`` (:class:`SessionUsage`).
  :class:`DriverConfig` sets its deadlines.
* ``on_user_input``: a :data:`UserInputHandler`; tool approvals answer with
  :func:`allow_tool`, :func:`deny_tool` or :func:`always_allow_tool` (an
  :class:`ApprovalAnswer`).
* ``custom_tools``: Python tools the model can call (:func:`custom_tool`, :class:`CustomTool`);
  ``hooks``: async functions the CLI calls at its hook events (:func:`hook`, :class:`Hook`,
  given a :class:`HookInput`, returning a :class:`HookDecision`).
* :func:`open_cli_pool`: CLIs started ahead of time (:class:`CLIPool`), for sessions that
  start at once.
* :class:`ClaudeCodeAdapter`: the TypeScript library's adapter interface, for ported code.
"""

from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected, UserInputHandler
from claude_trio.actors.session.adapter import ClaudeCodeAdapter
from claude_trio.actors.session.driver import DriverConfig
from claude_trio.actors.session.event_stream import EventStream
from claude_trio.actors.session.open import Session, SessionUsage, open_session
from claude_trio.actors.session.pool import CLIPool, PoolStatistics, open_cli_pool
from claude_trio.protocol.extensions.approvals import (
    ApprovalAnswer,
    allow_tool,
    always_allow_tool,
    deny_tool,
)
from claude_trio.protocol.extensions.controls import ContextUsage, McpServerStatus
from claude_trio.protocol.extensions.custom_tools import CustomTool, custom_tool
from claude_trio.protocol.extensions.hooks import Hook, HookDecision, HookInput, hook
from claude_trio.protocol.session.lifecycle import Accepted, Rejected

__all__ = [
    "Accepted",
    "AnswerAccepted",
    "AnswerRejected",
    "ApprovalAnswer",
    "CLIPool",
    "ClaudeCodeAdapter",
    "ContextUsage",
    "CustomTool",
    "DriverConfig",
    "EventStream",
    "Hook",
    "HookDecision",
    "HookInput",
    "McpServerStatus",
    "PoolStatistics",
    "Rejected",
    "Session",
    "SessionUsage",
    "UserInputHandler",
    "allow_tool",
    "always_allow_tool",
    "custom_tool",
    "deny_tool",
    "hook",
    "open_cli_pool",
    "open_session",
]
