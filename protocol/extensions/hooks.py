"""Hooks: async Python callbacks the CLI calls at fixed points of its loop (pure).

A :class:`Hook` is a hook event, an optional matcher and an async function. The function gets a
:class:`HookInput` and returns a :class:`HookDecision` (or ``None``: no opinion).
``open_session(params, hooks=[...])`` registers every hook with the CLI through the SDK's hook
machinery (``ClaudeAgentOptions.hooks``); ``actors/extensions/hooks.py`` runs the calls as trio code
in the session's nursery. Rules:

1. The events are :data:`HOOK_EVENTS`, the CLI's ten: ``PreToolUse``, ``PostToolUse``,
   ``PostToolUseFailure`` (a tool call failed: ``error`` says how), ``PermissionRequest``
   (the CLI is about to ask for permission to run a tool: a hook may answer for the user),
   ``UserPromptSubmit``, ``Stop``, ``SubagentStart``, ``SubagentStop``, ``PreCompact``,
   ``Notification``. ``matcher`` is the CLI's pattern over the tool name (``"Bash"``,
   ``"Write|Edit"``, a regular expression; ``None`` matches every tool) for ``PreToolUse``,
   ``PostToolUse``, ``PostToolUseFailure`` and ``PermissionRequest``; for ``SubagentStart``
   it matches the agent type (``"Explore"``, a subagent's name); for ``PreCompact`` the
   trigger (``"manual"``, ``"auto"``); the other events take no matcher.
2. What a decision may say depends on the event (:func:`hook_output` refuses the rest, naming
   it): ``permission`` (``allow`` / ``deny`` / ``ask``, with ``reason``) and ``updated_input``
   (with ``allow`` or ``ask``) for ``PreToolUse``; ``permission`` ``allow`` (with
   ``updated_input``) or ``deny`` (the ``reason`` is what the model is told) for
   ``PermissionRequest``, whose no-opinion lets the usual approval ask (the CLI asks the
   session's approval, ``on_user_input``, at the same time: the first answer decides and the
   CLI withdraws the other request); ``block`` (with a
   ``reason`` the model is shown) for ``PostToolUse``, ``UserPromptSubmit``, ``Stop`` and
   ``SubagentStop``; ``additional_context`` for every event but ``PreCompact`` and
   ``PermissionRequest``; ``stop`` (the CLI ends the turn, ``stop_reason`` saying why) and
   ``system_message`` for every event.
3. A hook that raises, returns something else than a decision or ``None``, returns a decision
   its event does not take, or runs past its timeout (its own, else
   ``ExecuteParams.hook_timeout``) fails: the session emits a non-fatal ``error`` event
   (``code="callback"``) naming the hook, and the CLI gets the safe answer
   (:func:`failure_output`): ``PreToolUse`` denies the tool (a guard that could not decide
   does not let the tool run), every other event gets no opinion (for ``PermissionRequest``:
   the usual approval asks, as if the hook were not there).
4. The session's stop gate always wins: once the execution is stopping, every ``PreToolUse``
   and ``PermissionRequest`` call is denied whatever a hook answers
   (:func:`stopped_output`), and a hook still running is cancelled.
5. Each call is reported as one ``hook_invoked`` event (:func:`decision_name` says what it
   decided).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, get_args

import attrs

from claude_trio.protocol.checks import check_number
from claude_trio.protocol.errors import HookDecisionError, InvalidParamsError

__all__ = [
    "HOOK_EVENTS",
    "MAX_HOOKS",
    "Hook",
    "HookDecision",
    "HookEventName",
    "HookFunction",
    "HookInput",
    "check_hooks",
    "decision_name",
    "failure_output",
    "hook",
    "hook_input",
    "hook_output",
    "stopped_output",
]

HookEventName: TypeAlias = Literal[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "UserPromptSubmit",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "Notification",
]
HOOK_EVENTS: tuple[str, ...] = get_args(HookEventName)

MATCHED_EVENTS = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PermissionRequest",
        "SubagentStart",
        "PreCompact",
    }
)
BLOCKING_EVENTS = frozenset({"PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop"})
CONTEXT_EVENTS = frozenset(HOOK_EVENTS) - {"PreCompact", "PermissionRequest"}
PERMISSION_EVENTS = frozenset({"PreToolUse", "PermissionRequest"})
"""The events whose hooks decide whether a tool runs (and which the stop gate answers)."""

MAX_HOOKS = 64
"""Hooks one session may have."""
MAX_TIMEOUT = 3600.0

Permission: TypeAlias = Literal["allow", "deny", "ask"]


@attrs.frozen(kw_only=True)
class HookInput:
    """What the CLI says about the point it reached. Fields that do not apply to the event
    are ``None``; ``data`` is the CLI's whole input as it sent it."""

    event: HookEventName
    session_id: str | None = None
    cwd: str | None = None
    permission_mode: str | None = None
    tool_name: str | None = None
    """``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure``, ``PermissionRequest``: the
    tool (``Bash``, ``mcp__trio__lookup``, ...)."""
    tool_input: Mapping[str, Any] | None = None
    tool_use_id: str | None = None
    tool_response: Any = None
    """``PostToolUse``: the tool's output as the CLI has it (for Bash: stdout, stderr, ...)."""
    error: str | None = None
    """``PostToolUseFailure``: what went wrong, as the model is told it."""
    is_interrupt: bool | None = None
    """``PostToolUseFailure``: True when the tool failed because the turn was interrupted."""
    permission_suggestions: tuple[Mapping[str, Any], ...] | None = None
    """``PermissionRequest``: the permission updates the CLI would offer the user ("always
    allow ..."), in its wire form."""
    prompt: str | None = None
    """``UserPromptSubmit``: the user's message."""
    message: str | None = None
    """``Notification``: the notification's text (``notification_type`` says which)."""
    notification_type: str | None = None
    trigger: str | None = None
    """``PreCompact``: ``manual`` or ``auto``."""
    custom_instructions: str | None = None
    stop_hook_active: bool | None = None
    """``Stop``, ``SubagentStop``: True when the CLI already continues because of a stop hook
    (a hook that always blocks would loop)."""
    last_assistant_message: str | None = None
    agent_id: str | None = None
    """The subagent a call comes from (``SubagentStart``, ``SubagentStop``, and a tool call
    made inside a subagent)."""
    agent_type: str | None = None
    data: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


def _str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def hook_input(
    event: HookEventName, data: Any, tool_use_id: str | None = None
) -> HookInput:
    """The typed input for what the CLI sent (``data``: its hook input mapping)."""
    raw: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
    tool_input = raw.get("tool_input")
    stop_active = raw.get("stop_hook_active")
    interrupt = raw.get("is_interrupt")
    suggestions = raw.get("permission_suggestions")
    return HookInput(
        event=event,
        session_id=_str(raw, "session_id"),
        cwd=_str(raw, "cwd"),
        permission_mode=_str(raw, "permission_mode"),
        tool_name=_str(raw, "tool_name"),
        tool_input=MappingProxyType(dict(tool_input)) if isinstance(tool_input, Mapping) else None,
        tool_use_id=_str(raw, "tool_use_id") or tool_use_id,
        tool_response=raw.get("tool_response"),
        error=_str(raw, "error"),
        is_interrupt=interrupt if isinstance(interrupt, bool) else None,
        permission_suggestions=(
            tuple(MappingProxyType(dict(s)) for s in suggestions if isinstance(s, Mapping))
            if isinstance(suggestions, list)
            else None
        ),
        prompt=_str(raw, "prompt"),
        message=_str(raw, "message"),
        notification_type=_str(raw, "notification_type"),
        trigger=_str(raw, "trigger"),
        custom_instructions=_str(raw, "custom_instructions"),
        stop_hook_active=stop_active if isinstance(stop_active, bool) else None,
        last_assistant_message=_str(raw, "last_assistant_message"),
        agent_id=_str(raw, "agent_id"),
        agent_type=_str(raw, "agent_type"),
        data=MappingProxyType(dict(raw)),
    )


@attrs.frozen(kw_only=True)
class HookDecision:
    """What a hook tells the CLI (rule 2 says which fields each event takes). Build one with
    the class methods: ``HookDecision.deny("no rm here")``, ``HookDecision.allow()``,
    ``HookDecision.block("the tests fail")``, ``HookDecision.stop("budget spent")``,
    ``HookDecision.context("the repo uses tabs")``."""

    permission: Permission | None = None
    reason: str | None = None
    updated_input: Mapping[str, Any] | None = None
    additional_context: str | None = None
    block: bool = False
    stop: bool = False
    stop_reason: str | None = None
    system_message: str | None = None

    @classmethod
    def allow(
        cls, reason: str | None = None, *, updated_input: Mapping[str, Any] | None = None
    ) -> HookDecision:
        """``PreToolUse``, ``PermissionRequest``: run the tool without asking (with
        ``updated_input`` instead of the model's input, if given)."""
        return cls(permission="allow", reason=reason, updated_input=updated_input)

    @classmethod
    def deny(cls, reason: str) -> HookDecision:
        """``PreToolUse``, ``PermissionRequest``: do not run the tool; the model gets
        ``reason`` as the tool's result."""
        return cls(permission="deny", reason=reason)

    @classmethod
    def ask(cls, reason: str | None = None) -> HookDecision:
        """``PreToolUse``: ask the permission callback (or the user) as the mode says."""
        return cls(permission="ask", reason=reason)

    @classmethod
    def blocked(cls, reason: str) -> HookDecision:
        """``PostToolUse``, ``UserPromptSubmit``, ``Stop``, ``SubagentStop``: block, and tell
        the model why (a blocked ``Stop`` makes the model go on)."""
        return cls(block=True, reason=reason)

    @classmethod
    def halt(cls, reason: str) -> HookDecision:
        """Any event: the CLI stops the turn (``continue: false``), saying ``reason``."""
        return cls(stop=True, stop_reason=reason)

    @classmethod
    def context(cls, text: str) -> HookDecision:
        """Add ``text`` to what the model sees (every event but ``PreCompact``)."""
        return cls(additional_context=text)


HookFunction: TypeAlias = Callable[[HookInput], Awaitable[HookDecision | None]]
"""``async def f(input: HookInput) -> HookDecision | None``."""


def _check_event(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in HOOK_EVENTS:
        raise InvalidParamsError("hook event", value, f"one of {', '.join(HOOK_EVENTS)}")


def _check_matcher(inst: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    event = getattr(inst, "event", "?")
    if event not in MATCHED_EVENTS:
        raise InvalidParamsError(
            f"hook {event} matcher",
            value,
            f"None: only {', '.join(sorted(MATCHED_EVENTS))} take a matcher",
        )
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise InvalidParamsError(
            "hook matcher", value, 'a tool name or pattern ("Bash", "Write|Edit"), or None'
        )
    try:
        re.compile(value)
    except re.error as exc:
        raise InvalidParamsError("hook matcher", value, f"a valid pattern ({exc})") from None


def _check_callback(inst: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    call = getattr(value, "__call__", None)  # noqa: B004 - an object with an async __call__
    if not (
        inspect.iscoroutinefunction(value)
        or (call is not None and inspect.iscoroutinefunction(call))
    ):
        raise InvalidParamsError(
            f"hook {getattr(inst, 'event', '?')} callback",
            value,
            "an async function taking a HookInput and returning a HookDecision or None",
        )


def _check_timeout(inst: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_number(
            "hook timeout",
            value,
            above=0,
            maximum=MAX_TIMEOUT,
            allowed=f"seconds > 0 (at most {MAX_TIMEOUT:g}), or None for "
            "ExecuteParams.hook_timeout",
        )


def _default_name(inst: Any) -> str:
    return str(getattr(inst.callback, "__name__", None) or type(inst.callback).__name__)


@attrs.frozen(kw_only=True)
class Hook:
    """An async function the CLI calls at ``event`` (see the module rules)::

        async def no_rm(call: HookInput) -> HookDecision | None:
            if "rm " in str((call.tool_input or {}).get("command", "")):
                return HookDecision.deny("rm is not allowed here")
            return None

        open_session(params, hooks=[Hook(event="PreToolUse", matcher="Bash", callback=no_rm)])
    """

    event: HookEventName = attrs.field(validator=_check_event)
    callback: HookFunction = attrs.field(validator=_check_callback)
    matcher: str | None = attrs.field(default=None, validator=_check_matcher)
    timeout: float | None = attrs.field(default=None, validator=_check_timeout)
    """Seconds a call may take; ``None``: ``ExecuteParams.hook_timeout``."""
    name: str = attrs.field(default=attrs.Factory(_default_name, takes_self=True))
    """How events and errors name the hook (the function's name by default)."""

    @property
    def label(self) -> str:
        where = f" ({self.matcher})" if self.matcher is not None else ""
        return f"{self.event} hook {self.name!r}{where}"


def hook(
    event: HookEventName,
    *,
    matcher: str | None = None,
    timeout: float | None = None,
    name: str | None = None,
) -> Callable[[HookFunction], Hook]:
    """Make an async function a :class:`Hook`::

        @hook("PostToolUse", matcher="Bash")
        async def audit(call: HookInput) -> None:
            log.info("ran %s: %s", call.tool_input, call.tool_response)
    """

    def decorate(function: HookFunction) -> Hook:
        if name is None:
            return Hook(event=event, callback=function, matcher=matcher, timeout=timeout)
        return Hook(event=event, callback=function, matcher=matcher, timeout=timeout, name=name)

    return decorate


def check_hooks(value: object) -> tuple[Hook, ...]:
    """``value`` as a tuple of hooks; ``InvalidParamsError`` naming the problem otherwise."""
    if isinstance(value, Hook) or not isinstance(value, Sequence) or isinstance(value, str):
        raise InvalidParamsError("hooks", value, "a list of Hook (made with @hook(...))")
    hooks = tuple(value)
    for i, item in enumerate(hooks):
        if not isinstance(item, Hook):
            raise InvalidParamsError(
                f"hooks[{i}]", item, "a Hook (decorate the async function with @hook(...))"
            )
    if len(hooks) > MAX_HOOKS:
        raise InvalidParamsError("hooks", f"{len(hooks)} hooks", f"at most {MAX_HOOKS}")
    return hooks


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise HookDecisionError(f"{what} must be a string, not {type(value).__name__}")
    return value


def hook_output(event: HookEventName, decision: object) -> dict[str, Any]:
    """The SDK's hook output for what a hook returned (rule 2); ``HookDecisionError`` saying
    what is wrong when its event cannot take it."""
    if decision is None:
        return {}
    if not isinstance(decision, HookDecision):
        raise HookDecisionError(
            f"a hook returns a HookDecision or None, not {type(decision).__name__}"
        )
    out: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    if event == "PermissionRequest":
        return _permission_request_output(decision)
    if decision.permission is not None:
        if event != "PreToolUse":
            raise HookDecisionError(
                f"permission is for PreToolUse and PermissionRequest hooks, not {event}"
            )
        if decision.permission not in ("allow", "deny", "ask"):
            raise HookDecisionError(
                f"permission is 'allow', 'deny' or 'ask', not {decision.permission!r}"
            )
        specific["permissionDecision"] = decision.permission
        if decision.reason is not None:
            specific["permissionDecisionReason"] = _text(decision.reason, "reason")
        elif decision.permission == "deny":
            raise HookDecisionError("a deny needs a reason: the model is shown it")
    if decision.updated_input is not None:
        if event != "PreToolUse" or decision.permission not in ("allow", "ask"):
            raise HookDecisionError("updated_input goes with a PreToolUse allow or ask")
        if not isinstance(decision.updated_input, Mapping):
            raise HookDecisionError("updated_input must be a mapping (the tool's new input)")
        specific["updatedInput"] = dict(decision.updated_input)
    if decision.block:
        if event not in BLOCKING_EVENTS:
            raise HookDecisionError(
                f"block is for {', '.join(sorted(BLOCKING_EVENTS))} hooks, not {event} "
                "(a PreToolUse hook denies)"
            )
        out["decision"] = "block"
        out["reason"] = _text(decision.reason, "a block's reason")
    if decision.additional_context is not None:
        if event not in CONTEXT_EVENTS:
            raise HookDecisionError(f"additional_context is not for {event} hooks")
        specific["additionalContext"] = _text(decision.additional_context, "additional_context")
    out.update(_common_output(decision))
    if specific:
        out["hookSpecificOutput"] = {"hookEventName": event, **specific}
    return out


def _common_output(decision: HookDecision) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if decision.stop:
        out["continue_"] = False
        if decision.stop_reason is not None:
            out["stopReason"] = _text(decision.stop_reason, "stop_reason")
    if decision.system_message is not None:
        out["systemMessage"] = _text(decision.system_message, "system_message")
    return out


def _permission_request_output(decision: HookDecision) -> dict[str, Any]:
    """A ``PermissionRequest`` hook's output: the CLI's ``decision`` object (rule 2)."""
    if decision.block:
        raise HookDecisionError("block is not for PermissionRequest hooks (deny the tool)")
    if decision.additional_context is not None:
        raise HookDecisionError("additional_context is not for PermissionRequest hooks")
    out = _common_output(decision)
    if decision.permission is None:
        if decision.updated_input is not None:
            raise HookDecisionError("updated_input goes with a PermissionRequest allow")
        return out
    verdict: dict[str, Any]
    if decision.permission == "allow":
        verdict = {"behavior": "allow"}
        if decision.updated_input is not None:
            if not isinstance(decision.updated_input, Mapping):
                raise HookDecisionError("updated_input must be a mapping (the tool's new input)")
            verdict["updatedInput"] = dict(decision.updated_input)
    elif decision.permission == "deny":
        if decision.updated_input is not None:
            raise HookDecisionError("updated_input goes with a PermissionRequest allow")
        if decision.reason is None:
            raise HookDecisionError("a deny needs a reason: the model is shown it")
        verdict = {"behavior": "deny", "message": _text(decision.reason, "reason")}
    else:
        raise HookDecisionError(
            f"a PermissionRequest hook allows or denies, not {decision.permission!r} "
            "(return None to let the usual approval ask)"
        )
    out["hookSpecificOutput"] = {"hookEventName": "PermissionRequest", "decision": verdict}
    return out


def stopped_output(event: HookEventName, why: str) -> dict[str, Any]:
    """The stop gate's answer once the execution is stopping (rule 4): a tool-gating event
    (``PreToolUse``, ``PermissionRequest``) denies, saying ``why``; the others get the safe
    answer of :func:`failure_output`."""
    if event == "PermissionRequest":
        return {
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {"behavior": "deny", "message": why},
            }
        }
    return failure_output(event, why)


def failure_output(event: HookEventName, why: str) -> dict[str, Any]:
    """The safe answer for a hook that failed or was stopped (rule 3): deny a tool, else no
    opinion."""
    if event == "PreToolUse":
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": why,
            }
        }
    return {}


def decision_name(output: Mapping[str, Any]) -> str:
    """What an SDK hook output decides, in one word: ``allow`` / ``deny`` / ``ask`` (a
    PreToolUse permission), ``block``, ``stop``, ``context`` (only additional context), or
    ``none`` (no opinion)."""
    if output.get("continue_") is False or output.get("continue") is False:
        return "stop"
    specific = output.get("hookSpecificOutput")
    specific = specific if isinstance(specific, Mapping) else {}
    permission = specific.get("permissionDecision")
    if isinstance(permission, str):
        return permission
    verdict = specific.get("decision")
    if isinstance(verdict, Mapping) and isinstance(verdict.get("behavior"), str):
        return str(verdict["behavior"])  # a PermissionRequest hook's allow or deny
    if output.get("decision") == "block":
        return "block"
    if "additionalContext" in specific:
        return "context"
    return "none"


def output_reason(output: Mapping[str, Any]) -> str | None:
    """The reason an SDK hook output gives the model or the user, if any."""
    specific = output.get("hookSpecificOutput")
    if isinstance(specific, Mapping) and isinstance(
        specific.get("permissionDecisionReason"), str
    ):
        return str(specific["permissionDecisionReason"])
    verdict = specific.get("decision") if isinstance(specific, Mapping) else None
    if isinstance(verdict, Mapping) and isinstance(verdict.get("message"), str):
        return str(verdict["message"])
    for key in ("reason", "stopReason"):
        if isinstance(output.get(key), str):
            return str(output[key])
    return None
