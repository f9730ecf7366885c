"""claude-trio: trio-native Claude Code agent sessions as one stream of unified events.

The names here are what a user of sessions, fleets, the gateway client and the stream helpers
needs. Everything else public is in a named module, each a thin face over the implementation
(whose layout may change underneath):

=========================  =================================================================
``claude_trio.session``    one session: controls, answers, approvals, hooks, tools, CLI pools
``claude_trio.params``     what a session is told, and the checks to run before it starts
``claude_trio.events``     every event, the values they carry, usage, transcripts
``claude_trio.errors``     every exception, drawn as one tree under ``ClaudeTrioError``
``claude_trio.streams``    helpers for consuming a stream: collect, filter, wait, observe, tee
``claude_trio.fleet``      many sessions in one process, and subscriptions to them
``claude_trio.gateway``    serving sessions to websocket clients
``claude_trio.client``     the gateway client: remote sessions
``claude_trio.cluster``    sessions across machines, on Redis
``claude_trio.batch``      many prompts, with retries, a budget and a results file
``claude_trio.skills``     the skills on disk a session would load
``claude_trio.offline``    the built-in offline model: sessions with no key and no network
``claude_trio.testing``    the testing kit: a fake CLI, cassettes, the contract, fixtures
=========================  =================================================================

The list below is written once. Type checkers read the imports under ``TYPE_CHECKING``; at run
time the same block, read from this file the first time a name is asked for, tells which
module holds each name, which is imported then (PEP 562). So ``import claude_trio.protocol`` -
the sans-I/O layer, also used by websocket clients - imports neither trio nor the SDK's
runtime, and ``__all__`` is that list.
"""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # The public names, by what they are for. isort would regroup them by module.
    # isort: off
    # -- one session
    from claude_trio.session import (
        open_session as open_session,
        Session as Session,
        SessionUsage as SessionUsage,
        DriverConfig as DriverConfig,
        Accepted as Accepted,
        Rejected as Rejected,
        AnswerAccepted as AnswerAccepted,
        AnswerRejected as AnswerRejected,
        allow_tool as allow_tool,
        always_allow_tool as always_allow_tool,
        deny_tool as deny_tool,
        custom_tool as custom_tool,
        hook as hook,
        HookInput as HookInput,
        HookDecision as HookDecision,
        open_cli_pool as open_cli_pool,
        ClaudeCodeAdapter as ClaudeCodeAdapter,
    )
    # -- what a session is told
    from claude_trio.params import (
        ExecuteParams as ExecuteParams,
        ArchitectureConfig as ArchitectureConfig,
        ImageInput as ImageInput,
        SubagentDefinition as SubagentDefinition,
        InlineSkill as InlineSkill,
        find_resume_violations as find_resume_violations,
        redact_secrets as redact_secrets,
    )
    # -- what it reports
    from claude_trio.events import (
        Event as Event,
        is_terminal as is_terminal,
        AdapterReady as AdapterReady,
        TextDelta as TextDelta,
        ThinkingDelta as ThinkingDelta,
        ToolUse as ToolUse,
        ToolResult as ToolResult,
        UserInputRequest as UserInputRequest,
        UserInputResolved as UserInputResolved,
        Result as Result,
        Aborted as Aborted,
        Error as Error,
        Outcome as Outcome,
        Usage as Usage,
        Transcript as Transcript,
    )
    # -- consuming a stream
    from claude_trio.streams import (
        collect as collect,
        observe as observe,
        console_observer as console_observer,
        filter_events as filter_events,
        wait_for as wait_for,
        open_tee as open_tee,
        open_subagent_split as open_subagent_split,
    )
    # -- many sessions
    from claude_trio.fleet import (
        open_fleet as open_fleet,
        Fleet as Fleet,
        FleetSession as FleetSession,
        SessionHost as SessionHost,
        SessionHandle as SessionHandle,
    )
    from claude_trio.batch import (
        run_batch as run_batch,
        BatchItem as BatchItem,
        BatchReport as BatchReport,
    )
    # -- serving them, and reaching them from elsewhere
    from claude_trio.gateway import (
        serve_gateway as serve_gateway,
    )
    from claude_trio.client import (
        connect_gateway as connect_gateway,
        GatewayClient as GatewayClient,
        RemoteSession as RemoteSession,
    )
    from claude_trio.cluster import (
        open_redis_fleet as open_redis_fleet,
        RedisFleet as RedisFleet,
        serve_worker as serve_worker,
    )
    # -- helpers
    from claude_trio.skills import (
        list_skills as list_skills,
    )
    from claude_trio.offline import (
        open_offline_model as open_offline_model,
    )
    # -- errors (all of them: claude_trio.errors)
    from claude_trio.errors import (
        ClaudeTrioError as ClaudeTrioError,
        InvalidParamsError as InvalidParamsError,
        CLIError as CLIError,
        GatewayError as GatewayError,
    )
    # isort: on


@functools.cache
def _homes() -> dict[str, str]:
    """Each public name -> the module it is imported from: the ``TYPE_CHECKING`` block above."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    homes: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module is not None:
                    homes.update((alias.name, statement.module) for alias in statement.names)
    return homes


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = list(_homes())
        elif name in _homes():
            value = getattr(importlib.import_module(_homes()[name]), name)
        else:
            raise AttributeError(f"module 'claude_trio' has no attribute {name!r}")
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(_homes())
