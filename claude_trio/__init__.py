"""claude-trio: trio-native Claude Code agent sessions as one stream of unified events.

The names below load on first use (PEP 562), so that ``import claude_trio.protocol`` - the
sans-I/O layer, also used by websocket clients - does not import trio or the SDK's runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from claude_trio.actors.adapter import ClaudeCodeAdapter
    from claude_trio.actors.broker import AnswerAccepted, AnswerRejected, UserInputHandler
    from claude_trio.actors.driver import DriverConfig
    from claude_trio.actors.event_stream import EventStream
    from claude_trio.actors.fleet import (
        Fleet,
        FleetSession,
        FleetStatistics,
        ResyncRequired,
        SlowSubscriberError,
        Subscription,
        UnknownSessionError,
        open_fleet,
    )
    from claude_trio.actors.gateway import GatewayLimits, Principal, serve_gateway
    from claude_trio.actors.pool import CLIPool, PoolStatistics, open_cli_pool
    from claude_trio.actors.session import Session, SessionUsage, open_session
    from claude_trio.batch import BatchItem, BatchReport, BatchResult, RetryPolicy, run_batch
    from claude_trio.client import (
        ClientConfig,
        GatewayClient,
        GatewayError,
        RemoteSession,
        connect_gateway,
    )
    from claude_trio.offline import open_offline_model
    from claude_trio.protocol.capabilities import (
        ArchitectureCapabilities,
        architecture_capabilities,
    )
    from claude_trio.protocol.custom_tools import CustomTool, custom_tool
    from claude_trio.protocol.errors import (
        ClaudeTrioError,
        CLIError,
        InvalidParamsError,
        LocalProtocolError,
        RemoteProtocolError,
    )
    from claude_trio.protocol.events import (
        Aborted,
        AssistantMessage,
        Error,
        Event,
        Flush,
        NormalizedMessage,
        Passthrough,
        Question,
        Result,
        Retry,
        SkillInvoked,
        SubagentCompleted,
        SubagentProgress,
        SubagentStarted,
        TextDelta,
        ThinkingDelta,
        TodoItem,
        TodoListUpdated,
        ToolResult,
        ToolUse,
        TurnStarted,
        UserInputRequest,
        UserInputResolved,
        UserMessage,
        WarningEvent,
        is_terminal,
    )
    from claude_trio.protocol.lifecycle import Accepted, Rejected
    from claude_trio.protocol.models import ADAPTIVE_THINKING_ONLY, UnknownModelError, resolve_model
    from claude_trio.protocol.params import ArchitectureConfig, ExecuteParams
    from claude_trio.protocol.resume import (
        ResumeViolation,
        find_resume_violations,
        get_session_resume_constraints,
    )
    from claude_trio.protocol.skills import InlineSkill, SkillInfo
    from claude_trio.protocol.usage import Usage, add_usage, normalize_usage, sum_usage
    from claude_trio.protocol.wire import WireError
    from claude_trio.skills import list_skills

_LAZY: dict[str, str] = {
    "ADAPTIVE_THINKING_ONLY": "claude_trio.protocol.models",
    "Aborted": "claude_trio.protocol.events",
    "Accepted": "claude_trio.protocol.lifecycle",
    "AnswerAccepted": "claude_trio.actors.broker",
    "AnswerRejected": "claude_trio.actors.broker",
    "ArchitectureCapabilities": "claude_trio.protocol.capabilities",
    "ArchitectureConfig": "claude_trio.protocol.params",
    "AssistantMessage": "claude_trio.protocol.events",
    "CLIError": "claude_trio.protocol.errors",
    "CustomTool": "claude_trio.protocol.custom_tools",
    "custom_tool": "claude_trio.protocol.custom_tools",
    "InlineSkill": "claude_trio.protocol.skills",
    "SkillInfo": "claude_trio.protocol.skills",
    "list_skills": "claude_trio.skills",
    "ClaudeCodeAdapter": "claude_trio.actors.adapter",
    "ClaudeTrioError": "claude_trio.protocol.errors",
    "DriverConfig": "claude_trio.actors.driver",
    "Error": "claude_trio.protocol.events",
    "Event": "claude_trio.protocol.events",
    "EventStream": "claude_trio.actors.event_stream",
    "Fleet": "claude_trio.actors.fleet",
    "FleetSession": "claude_trio.actors.fleet",
    "FleetStatistics": "claude_trio.actors.fleet",
    "ResyncRequired": "claude_trio.actors.fleet",
    "SlowSubscriberError": "claude_trio.actors.fleet",
    "Subscription": "claude_trio.actors.fleet",
    "WireError": "claude_trio.protocol.wire",
    "open_fleet": "claude_trio.actors.fleet",
    "UnknownSessionError": "claude_trio.actors.fleet",
    "Principal": "claude_trio.actors.gateway",
    "BatchItem": "claude_trio.batch",
    "BatchReport": "claude_trio.batch",
    "BatchResult": "claude_trio.batch",
    "RetryPolicy": "claude_trio.batch",
    "run_batch": "claude_trio.batch",
    "ClientConfig": "claude_trio.client",
    "GatewayClient": "claude_trio.client",
    "GatewayError": "claude_trio.client",
    "RemoteSession": "claude_trio.client",
    "connect_gateway": "claude_trio.client",
    "open_offline_model": "claude_trio.offline",
    "CLIPool": "claude_trio.actors.pool",
    "PoolStatistics": "claude_trio.actors.pool",
    "open_cli_pool": "claude_trio.actors.pool",
    "ExecuteParams": "claude_trio.protocol.params",
    "Flush": "claude_trio.protocol.events",
    "InvalidParamsError": "claude_trio.protocol.errors",
    "LocalProtocolError": "claude_trio.protocol.errors",
    "NormalizedMessage": "claude_trio.protocol.events",
    "Passthrough": "claude_trio.protocol.events",
    "Question": "claude_trio.protocol.events",
    "Rejected": "claude_trio.protocol.lifecycle",
    "RemoteProtocolError": "claude_trio.protocol.errors",
    "Result": "claude_trio.protocol.events",
    "ResumeViolation": "claude_trio.protocol.resume",
    "Retry": "claude_trio.protocol.events",
    "Session": "claude_trio.actors.session",
    "SessionUsage": "claude_trio.actors.session",
    "SkillInvoked": "claude_trio.protocol.events",
    "SubagentCompleted": "claude_trio.protocol.events",
    "SubagentProgress": "claude_trio.protocol.events",
    "SubagentStarted": "claude_trio.protocol.events",
    "TextDelta": "claude_trio.protocol.events",
    "ThinkingDelta": "claude_trio.protocol.events",
    "TodoItem": "claude_trio.protocol.events",
    "TodoListUpdated": "claude_trio.protocol.events",
    "ToolResult": "claude_trio.protocol.events",
    "ToolUse": "claude_trio.protocol.events",
    "TurnStarted": "claude_trio.protocol.events",
    "UnknownModelError": "claude_trio.protocol.models",
    "Usage": "claude_trio.protocol.usage",
    "UserInputHandler": "claude_trio.actors.broker",
    "UserInputRequest": "claude_trio.protocol.events",
    "UserInputResolved": "claude_trio.protocol.events",
    "UserMessage": "claude_trio.protocol.events",
    "WarningEvent": "claude_trio.protocol.events",
    "add_usage": "claude_trio.protocol.usage",
    "architecture_capabilities": "claude_trio.protocol.capabilities",
    "find_resume_violations": "claude_trio.protocol.resume",
    "get_session_resume_constraints": "claude_trio.protocol.resume",
    "is_terminal": "claude_trio.protocol.events",
    "normalize_usage": "claude_trio.protocol.usage",
    "open_session": "claude_trio.actors.session",
    "resolve_model": "claude_trio.protocol.models",
    "serve_gateway": "claude_trio.actors.gateway",
    "GatewayLimits": "claude_trio.actors.gateway",
    "sum_usage": "claude_trio.protocol.usage",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'claude_trio' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

__all__ = [
    "ADAPTIVE_THINKING_ONLY",
    "Aborted",
    "Accepted",
    "AnswerAccepted",
    "AnswerRejected",
    "ArchitectureCapabilities",
    "ArchitectureConfig",
    "AssistantMessage",
    "BatchItem",
    "BatchReport",
    "BatchResult",
    "CLIError",
    "CLIPool",
    "ClaudeCodeAdapter",
    "ClaudeTrioError",
    "ClientConfig",
    "CustomTool",
    "DriverConfig",
    "Error",
    "Event",
    "EventStream",
    "ExecuteParams",
    "Fleet",
    "FleetSession",
    "FleetStatistics",
    "Flush",
    "GatewayClient",
    "GatewayError",
    "GatewayLimits",
    "InlineSkill",
    "InvalidParamsError",
    "LocalProtocolError",
    "NormalizedMessage",
    "Passthrough",
    "PoolStatistics",
    "Principal",
    "Question",
    "Rejected",
    "RemoteProtocolError",
    "RemoteSession",
    "Result",
    "ResumeViolation",
    "ResyncRequired",
    "Retry",
    "RetryPolicy",
    "Session",
    "SessionUsage",
    "SkillInfo",
    "SkillInvoked",
    "SlowSubscriberError",
    "SubagentCompleted",
    "SubagentProgress",
    "SubagentStarted",
    "Subscription",
    "TextDelta",
    "ThinkingDelta",
    "TodoItem",
    "TodoListUpdated",
    "ToolResult",
    "ToolUse",
    "TurnStarted",
    "UnknownModelError",
    "UnknownSessionError",
    "Usage",
    "UserInputHandler",
    "UserInputRequest",
    "UserInputResolved",
    "UserMessage",
    "WarningEvent",
    "WireError",
    "add_usage",
    "architecture_capabilities",
    "connect_gateway",
    "custom_tool",
    "find_resume_violations",
    "get_session_resume_constraints",
    "is_terminal",
    "list_skills",
    "normalize_usage",
    "open_cli_pool",
    "open_fleet",
    "open_offline_model",
    "open_session",
    "resolve_model",
    "run_batch",
    "serve_gateway",
    "sum_usage",
]
