"""Tool approvals, the pure part: the request a tool call raises, the answer, the reply.

Under an asking permission mode (``default``, ``acceptEdits``: :data:`ASKING_MODES`) the CLI asks
``can_use_tool`` before a tool call that no rule allows. The session turns that into a
``user_input_request`` event with ``source="tool_permission"`` (:func:`approval_request`), the
user-input broker waits for an answer exactly as it does for AskUserQuestion, and
:func:`approval_reply` turns the outcome into the SDK's permission result:

==============  ============================================================================
outcome         reply to the CLI (what the model then sees as the tool's result)
==============  ============================================================================
answered        :class:`ApprovalAnswer`: ``allow`` (the input, or the edited one), ``always``
                (allow + the permission update), ``deny`` (the message; ``interrupt`` stops
                the turn)
expired         deny: :func:`no_answer_message` ("no one answered ... within N s"; at once,
                without the time, when the ``on_user_input`` handler returned ``None``)
cancelled       deny with ``interrupt``: the session was aborted or ended
failed          error reply (the ``on_user_input`` handler raised)
withdrawn       none: the CLI cancelled the request
==============  ============================================================================

An answer is a small value, checked by :func:`check_approval_answer` before it is accepted: an
:class:`ApprovalAnswer` (build one with :func:`allow`, :func:`deny`, :func:`always`), its JSON
form ``{"decision": "allow"|"deny"|"always", "input": {...}, "message": "...", "interrupt":
bool, "rules": ["Bash(npm test:*)"]}``, or the bare strings ``"allow"``, ``"deny"``,
``"always"``. A malformed answer is refused with the reason and never reaches the CLI.

``always`` allows this call and adds permission rules for the rest of the session: the
``rules`` of the answer, or else the allow rules among the CLI's own suggestions (never a
change of mode or an added directory). Every update is kept for the
session only (``destination="session"``): an answer never writes the user's or the project's
settings files, whatever the CLI suggested. When that leaves the CLI no rule to keep (for a
Write or an Edit the CLI suggests only a change of mode), the session itself remembers the tool
(:func:`remembered_tool`): every later call of that tool the CLI asks about in the session is
allowed without asking (no ``user_input_request``), so ``always`` always means always. The CLI
still checks its own rules (a path scope, deny rules) before it asks, so nothing it refuses is
allowed this way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs
from claude_agent_sdk import PermissionResult, PermissionResultAllow, PermissionResultDeny
from claude_agent_sdk.types import PermissionRuleValue, PermissionUpdate

from claude_trio.protocol.checks import check_bool
from claude_trio.protocol.config.permissions import PermissionMode
from claude_trio.protocol.config.tools import check_tool_name
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.session.events import UserInputRequest

__all__ = [
    "ASKING_MODES",
    "DEFAULT_DENY_MESSAGE",
    "NO_ANSWER_FROM_HANDLER",
    "TOOL_PERMISSION",
    "ApprovalAnswer",
    "Decision",
    "allow",
    "allow_tool",
    "always",
    "always_allow_tool",
    "approval_reply",
    "approval_request",
    "check_approval_answer",
    "deny",
    "deny_tool",
    "no_answer_message",
    "remembered_tool",
]

Decision: TypeAlias = Literal["allow", "deny", "always"]
DECISIONS: tuple[Decision, ...] = ("allow", "deny", "always")

TOOL_PERMISSION: Literal["tool_permission"] = "tool_permission"
"""The ``source`` of a tool approval's ``user_input_request``."""

ASKING_MODES: tuple[PermissionMode, ...] = ("default", "acceptEdits")
"""The permission modes under which the CLI asks before tool calls (checked against the real
CLI: ``plan``, ``auto``, ``dontAsk`` and ``bypassPermissions`` never ask). A session in one of
them needs an ``on_user_input`` handler (or ``"manual"``): without one the CLI denies every call
that needs approval, and nobody would ever see why."""

DEFAULT_DENY_MESSAGE = "The user denied this tool call."
CANCELLED_MESSAGE = "No one answered the permission request: the session was aborted."

_KEYS = ("decision", "input", "message", "interrupt", "rules")


NO_ANSWER_FROM_HANDLER = "no answer from the handler"
"""The value of an ``expired`` outcome that came before the deadline: the user-input handler
returned ``None`` (it gave no answer)."""


def no_answer_message(tool_name: str, timeout: float | None) -> str:
    """What the model is told when nobody answered an approval: by its deadline (``timeout``
    seconds), or at all (``None``: the handler gave no answer)."""
    within = "" if timeout is None else f" within {timeout:g} s"
    return (
        f"No one answered the permission request for {tool_name}{within}, "
        "so the tool call was denied."
    )


def _check_input(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not (
        isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
    ):
        raise InvalidParamsError(
            "answer.input", value, "None or a mapping of the tool's input fields (str keys)"
        )


def _check_message(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidParamsError("answer.message", value, "None or a non-empty string")


def _check_interrupt(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_bool("answer.interrupt", value, allowed="true or false")


def _check_decision(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in DECISIONS:
        raise InvalidParamsError("answer.decision", value, "'allow', 'deny' or 'always'")


def _rules(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidParamsError(
            "answer.rules", value, "a list of permission rules such as 'Bash(npm test:*)'"
        )
    return tuple(value)


def _check_rules(_inst: object, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    for i, rule in enumerate(value):
        check_tool_name(f"answer.rules[{i}]", rule)


def _freeze_input(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


@attrs.frozen(kw_only=True)
class ApprovalAnswer:
    """The answer to a tool approval. Build one with :func:`allow`, :func:`deny` or
    :func:`always`; every field is checked here, so a built answer is always well formed.

    ``input``: the tool input to run with instead of the model's (``allow`` / ``always``).
    ``message``: what the model is told (``deny``). ``interrupt``: also stop the turn
    (``deny``). ``rules``: the permission rules ``always`` adds for the session (empty: the
    CLI's suggestions).
    """

    decision: Decision = attrs.field(validator=_check_decision)
    input: Mapping[str, Any] | None = attrs.field(
        default=None, converter=_freeze_input, validator=_check_input
    )
    message: str | None = attrs.field(default=None, validator=_check_message)
    interrupt: bool = attrs.field(default=False, validator=_check_interrupt)
    rules: tuple[str, ...] = attrs.field(default=(), converter=_rules, validator=_check_rules)

    def __attrs_post_init__(self) -> None:
        if self.decision == "deny":
            if self.input is not None or self.rules:
                raise InvalidParamsError(
                    "answer", self.to_json(), "a deny takes only a message and interrupt"
                )
        elif self.message is not None or self.interrupt:
            raise InvalidParamsError(
                "answer",
                self.to_json(),
                f"an {self.decision!r} takes no message or interrupt (those are for 'deny')",
            )
        if self.decision == "allow" and self.rules:
            raise InvalidParamsError(
                "answer.rules", list(self.rules), "only with 'always' (rules for the session)"
            )

    def to_json(self) -> dict[str, Any]:
        """The JSON form (what travels over the gateway and shows in ``user_input_resolved``)."""
        out: dict[str, Any] = {"decision": self.decision}
        if self.input is not None:
            out["input"] = dict(self.input)
        if self.message is not None:
            out["message"] = self.message
        if self.interrupt:
            out["interrupt"] = True
        if self.rules:
            out["rules"] = list(self.rules)
        return out


def allow(input: Mapping[str, Any] | None = None) -> ApprovalAnswer:
    """Let the tool run, with ``input`` instead of the model's when given."""
    return ApprovalAnswer(decision="allow", input=input)


def deny(message: str = DEFAULT_DENY_MESSAGE, *, interrupt: bool = False) -> ApprovalAnswer:
    """Refuse the tool call; the model gets ``message`` as the tool's result. ``interrupt``:
    also stop the turn."""
    return ApprovalAnswer(decision="deny", message=message, interrupt=interrupt)


def always(
    input: Mapping[str, Any] | None = None, *, rules: Sequence[str] = ()
) -> ApprovalAnswer:
    """Let the tool run and stop asking for calls like it for the rest of the session: the
    ``rules`` given (``"Bash(npm test:*)"``), or else the rules the CLI suggested."""
    return ApprovalAnswer(decision="always", input=input, rules=tuple(rules))


# The front door's names (``from claude_trio import allow_tool``): plain ``allow`` / ``deny``
# would say nothing next to a user's own names.
allow_tool = allow
deny_tool = deny
always_allow_tool = always


def check_approval_answer(answer: Any) -> ApprovalAnswer:
    """``answer`` as an :class:`ApprovalAnswer`, or ``InvalidParamsError`` saying what is wrong
    and what an answer looks like."""
    if isinstance(answer, ApprovalAnswer):
        return answer
    if isinstance(answer, str):
        if answer in DECISIONS:
            return ApprovalAnswer(
                decision=answer, message=DEFAULT_DENY_MESSAGE if answer == "deny" else None
            )
    elif isinstance(answer, Mapping):
        unknown = [key for key in answer if key not in _KEYS]
        if unknown:
            raise InvalidParamsError(
                "answer", unknown[0], f"not a key of a tool approval answer ({', '.join(_KEYS)})"
            )
        if "decision" not in answer:
            raise InvalidParamsError(
                "answer.decision", None, "required: 'allow', 'deny' or 'always'"
            )
        fields = dict(answer)
        if fields["decision"] == "deny":
            fields.setdefault("message", DEFAULT_DENY_MESSAGE)
        return ApprovalAnswer(**fields)
    raise InvalidParamsError(
        "answer",
        answer,
        'a tool approval takes {"decision": "allow"|"deny"|"always", "input": {...}, '
        '"message": "...", "interrupt": bool, "rules": [...]}, an ApprovalAnswer '
        "(allow(), deny(message), always()), or 'allow' / 'deny' / 'always'",
    )


def _suggestion_json(update: Any) -> dict[str, Any] | None:
    to_dict = getattr(update, "to_dict", None)
    if to_dict is None:
        return dict(update) if isinstance(update, Mapping) else None
    try:
        wire: dict[str, Any] = to_dict()
    except ValueError:  # an update this SDK cannot send: not offered
        return None
    return wire


def approval_request(
    request_id: str,
    tool_name: str,
    tool_input: Mapping[str, Any],
    *,
    suggestions: Sequence[Any] = (),
    tool_use_id: str | None = None,
    agent_id: str | None = None,
    blocked_path: str | None = None,
    decision_reason: str | None = None,
    title: str | None = None,
    display_name: str | None = None,
    description: str | None = None,
) -> UserInputRequest:
    """The ``user_input_request`` event for the CLI's ``can_use_tool`` request. ``suggestions``
    are the SDK's ``PermissionUpdate`` objects (or their JSON), shown in the CLI's wire form."""
    shown = tuple(s for s in (_suggestion_json(u) for u in suggestions) if s is not None)
    return UserInputRequest(
        request_id=request_id,
        source=TOOL_PERMISSION,
        tool_name=tool_name,
        tool_input=dict(tool_input),
        tool_use_id=tool_use_id,
        agent_id=agent_id,
        suggestions=shown,
        blocked_path=blocked_path,
        decision_reason=decision_reason,
        title=title,
        display_name=display_name,
        description=description,
    )


def _rule_value(rule: str) -> PermissionRuleValue:
    name, paren, content = rule.partition("(")
    if paren and content.endswith(")"):
        return PermissionRuleValue(tool_name=name, rule_content=content[:-1] or None)
    return PermissionRuleValue(tool_name=rule)


def permission_updates(
    answer: ApprovalAnswer, suggestions: Sequence[Mapping[str, Any]]
) -> list[PermissionUpdate]:
    """The updates an ``always`` adds: its rules, else the suggestions' allow rules; all for
    the session. A suggestion to change the permission mode or to add a directory is left
    out: it would widen what runs without asking, or the path scope, behind the caller's back
    (``Session.set_permission_mode`` and the path scope say those things explicitly)."""
    if answer.rules:
        return [
            PermissionUpdate(
                type="addRules",
                rules=[_rule_value(rule) for rule in answer.rules],
                behavior="allow",
                destination="session",
            )
        ]
    updates = []
    for suggestion in suggestions:
        update = PermissionUpdate.from_dict(dict(suggestion))
        if update.type != "addRules" or update.behavior != "allow":
            continue
        update.destination = "session"
        updates.append(update)
    return updates


def _run_input(answer: ApprovalAnswer, request: UserInputRequest) -> dict[str, Any]:
    if answer.input is not None:
        return dict(answer.input)
    return dict(request.tool_input or {})


def approval_reply(
    outcome: Literal["answered", "expired", "cancelled", "withdrawn", "failed"],
    value: Any,
    request: UserInputRequest,
    *,
    timeout: float,
) -> PermissionResult:
    """What ``can_use_tool`` answers for an approval that ended with ``outcome`` (``value``:
    the answer for ``answered``). See the table in the module docstring; ``failed`` has no
    permission result (the caller raises, which the SDK turns into an error reply)."""
    tool_name = request.tool_name or "the tool"
    match outcome:
        case "answered":
            answer = check_approval_answer(value)
            match answer.decision:
                case "deny":
                    return PermissionResultDeny(
                        message=answer.message or DEFAULT_DENY_MESSAGE,
                        interrupt=answer.interrupt,
                    )
                case "allow":
                    return PermissionResultAllow(
                        updated_input=_run_input(answer, request)
                    )
                case "always":
                    return PermissionResultAllow(
                        updated_input=_run_input(answer, request),
                        updated_permissions=permission_updates(answer, request.suggestions),
                    )
        case "expired":
            waited = None if value == NO_ANSWER_FROM_HANDLER else timeout
            return PermissionResultDeny(message=no_answer_message(tool_name, waited))
        case "cancelled" | "withdrawn":
            return PermissionResultDeny(message=CANCELLED_MESSAGE, interrupt=True)
    raise InvalidParamsError("outcome", outcome, "a failed request is answered with an error reply")


def remembered_tool(
    outcome: Literal["answered", "expired", "cancelled", "withdrawn", "failed"],
    value: Any,
    request: UserInputRequest,
) -> str | None:
    """The tool the session allows from now on without asking, after an approval that ended
    with ``outcome``: the request's tool when the answer was ``always`` and it gives the CLI
    no rule to keep (no ``rules``, and no allow rule among the CLI's suggestions); else
    ``None`` (the CLI's session rules, or nothing, carry the answer)."""
    if outcome != "answered" or request.tool_name is None:
        return None
    answer = check_approval_answer(value)
    if answer.decision != "always" or permission_updates(answer, request.suggestions):
        return None
    return request.tool_name
