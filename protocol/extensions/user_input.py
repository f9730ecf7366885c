"""User input, the pure part: requests read from the CLI, answers checked, replies built.

The user-input broker (``actors/extensions/broker.py``) waits; everything it decides is here (tool
approvals:
``approvals.py``, with their own table of replies). Every request
ends in exactly one outcome, and each outcome has exactly one reply to the CLI:

==============  ==========================================  ===================================
outcome         AskUserQuestion reply                        elicitation reply
==============  ==========================================  ===================================
answered        allow, ``updated_input["answers"]``          ``{"action": "accept"|..., ...}``
expired         allow with no answers ("did not answer")     ``{"action": "cancel"}``
cancelled       deny with ``interrupt`` (the session ends)   ``{"action": "cancel"}``
failed          error reply (the handler raised)             error reply
withdrawn       none: the CLI cancelled the request          none
==============  ==========================================  ===================================

Never a made-up ``decline``: only the user declines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
from claude_agent_sdk import PermissionResult, PermissionResultAllow, PermissionResultDeny

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.approvals import check_approval_answer
from claude_trio.protocol.session.events import Question, UserInputRequest

Outcome = Literal["answered", "expired", "cancelled", "withdrawn", "failed"]

ASK_USER_TOOL = "AskUserQuestion"

CANCELLED_MESSAGE = "The user did not answer: the session was aborted."


@attrs.frozen(kw_only=True)
class ControlReply:
    """A ``control_response`` to write to the CLI: ``response`` on success, else ``error``."""

    request_id: str
    response: Mapping[str, Any] | None = None
    error: str | None = None

    def frame(self) -> dict[str, Any]:
        body: dict[str, Any]
        if self.error is not None:
            body = {"subtype": "error", "request_id": self.request_id, "error": self.error}
        else:
            body = {
                "subtype": "success",
                "request_id": self.request_id,
                "response": dict(self.response or {}),
            }
        return {"type": "control_response", "response": body}


def questions_from_input(tool_input: Mapping[str, Any]) -> tuple[Question, ...]:
    """The questions of an ``AskUserQuestion`` call (malformed entries are skipped)."""
    questions = tool_input.get("questions")
    if not isinstance(questions, list):
        return ()
    out = []
    for q in questions:
        if not isinstance(q, Mapping):
            continue
        labels = tuple(
            str(o.get("label", "")) if isinstance(o, Mapping) else str(o)
            for o in q.get("options") or ()
        )
        out.append(
            Question(
                question=str(q.get("question", "")),
                header=q.get("header") if isinstance(q.get("header"), str) else None,
                options=labels,
                multi_select=bool(q.get("multiSelect", False)),
            )
        )
    return tuple(out)


def elicitation_request(request_id: str, request: Mapping[str, Any]) -> UserInputRequest:
    """The ``user_input_request`` event for the CLI's ``elicitation`` control request."""
    schema = request.get("requested_schema")
    server = request.get("mcp_server_name")
    return UserInputRequest(
        request_id=request_id,
        source="mcp-elicitation",
        message=str(request.get("message", "")),
        server_name=server if isinstance(server, str) else None,
        requested_schema=schema if isinstance(schema, Mapping) else None,
    )


def ask_user_answers(answer: Any, questions: tuple[Question, ...]) -> dict[str, str]:
    """Normalize a user's answer to AskUserQuestion into ``{question_text: label}``.

    Accepts a mapping ``{question: label | [labels]}`` or, when there is exactly one question, a
    bare string. Anything else is the caller's mistake: a clear ``InvalidParamsError``.
    """
    if isinstance(answer, str) and len(questions) == 1:
        return {questions[0].question: answer}
    if not isinstance(answer, Mapping):
        raise InvalidParamsError(
            "answer",
            answer,
            "AskUserQuestion takes a mapping {question text: chosen label (or list of labels)}"
            " (or a plain string when there is one question)",
        )
    known = {q.question for q in questions}
    out: dict[str, str] = {}
    for key, value in answer.items():
        if known and key not in known:
            raise InvalidParamsError(
                "answer", key, f"not one of the questions asked: {sorted(known)!r}"
            )
        if isinstance(value, list | tuple):
            out[str(key)] = ", ".join(str(v) for v in value)
        else:
            out[str(key)] = str(value)
    return out


def elicitation_reply(answer: Any) -> dict[str, Any]:
    """Normalize an answer to an MCP elicitation into the CLI's ``{"action", "content"}``."""
    if isinstance(answer, Mapping) and "action" in answer:
        action = answer["action"]
        if action not in ("accept", "decline", "cancel"):
            raise InvalidParamsError("answer.action", action, "one of accept, decline, cancel")
        reply: dict[str, Any] = {"action": action}
        if action == "accept":
            content = answer.get("content", {})
            if not isinstance(content, Mapping):
                raise InvalidParamsError("answer.content", content, "a mapping of field values")
            reply["content"] = dict(content)
        return reply
    if isinstance(answer, Mapping):
        return {"action": "accept", "content": dict(answer)}
    raise InvalidParamsError(
        "answer",
        answer,
        'an elicitation takes {"action": "accept", "content": {...}} | {"action": "decline"} |'
        ' {"action": "cancel"}, or a mapping of field values (accept)',
    )


def normalize_answer(request: UserInputRequest, answer: Any) -> Any:
    """Check and normalize ``answer`` for ``request``; raises ``InvalidParamsError``."""
    if request.source == "model-tool":
        return ask_user_answers(answer, request.questions)
    if request.source == "tool_permission":
        # The JSON form: what user_input_resolved shows, and what approval_reply reads back.
        return check_approval_answer(answer).to_json()
    return elicitation_reply(answer)


def ask_user_reply(
    outcome: Outcome, value: Any, tool_input: Mapping[str, Any]
) -> PermissionResult:
    """What ``can_use_tool`` answers for an AskUserQuestion call that ended with ``outcome``.

    ``failed`` has no permission result: the caller raises, which the SDK turns into an error
    reply (see the table in the module docstring).
    """
    match outcome:
        case "answered":
            return PermissionResultAllow(updated_input={**tool_input, "answers": value})
        case "expired":
            return PermissionResultAllow(updated_input=dict(tool_input))
        case "cancelled" | "withdrawn":
            return PermissionResultDeny(message=CANCELLED_MESSAGE, interrupt=True)
        case "failed":
            raise InvalidParamsError(
                "outcome", outcome, "a failed request is answered with an error reply"
            )


def elicitation_control_reply(
    cli_request_id: str, outcome: Outcome, value: Any
) -> ControlReply | None:
    """The reply to the CLI's elicitation request for ``outcome`` (None: withdrawn, no reply)."""
    match outcome:
        case "withdrawn":
            return None
        case "answered":
            return ControlReply(request_id=cli_request_id, response=value)
        case "failed":
            return ControlReply(request_id=cli_request_id, error=str(value))
        case "expired" | "cancelled":  # an explicit no-answer, never a made-up decline
            return ControlReply(request_id=cli_request_id, response={"action": "cancel"})
