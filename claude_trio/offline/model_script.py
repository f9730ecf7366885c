"""What the model double answers: its requests, replies and scripts (pure values).

A *responder* decides each ``/v1/messages`` answer of the Messages API double
(:mod:`claude_trio.offline.model_double`): ``Callable[[ModelRequest], Response | None]``. It gets
the parsed request (:class:`ModelRequest`, with helpers to key a script on) and returns a
:class:`Reply` (built of :class:`ReplyText`, :class:`ReplyThinking` and :class:`ReplyToolUse`
blocks, with :class:`ReplyUsage`), an :class:`HttpError` or a :class:`StreamError`; ``None`` means
"not in my script". :class:`Script` and :func:`turns` build responders from :class:`Rule` values;
:func:`is_main_agent` and :func:`is_subagent` are the usual rule conditions.

Nothing here does I/O: the HTTP server that encodes these answers is ``model_double.py``, which
re-exports every name of this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs
import trio

from claude_trio.protocol.errors import InvalidParamsError

__all__ = [
    "HttpError",
    "ModelRequest",
    "Reply",
    "ReplyBlock",
    "ReplyText",
    "ReplyThinking",
    "ReplyToolUse",
    "ReplyUsage",
    "Responder",
    "Response",
    "Rule",
    "Script",
    "StreamError",
    "default_stop_reason",
    "is_main_agent",
    "is_subagent",
    "prompt_too_long",
    "turns",
]

# The CLI folds context (environment, date, skills, tokens left, ...) into user messages and tool
# results as ``<system-reminder>`` sections; they are not what the user typed or the tool printed.
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)

# The system prompt of the side request the CLI 2.1.332 makes for a tool-use summary label when
# CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES=true (no tools, thinking disabled, stream: true).
_SUMMARY_PROMPT = "Write a short summary label describing what these tool calls accomplished"


# --------------------------------------------------------------------------------------------
# What a request looks like


def _text_of(content: object, *, skip_reminders: bool = False) -> str:
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        ]
    else:
        return ""
    if skip_reminders:
        parts = [_REMINDER.sub("", p).strip() for p in parts]
    return "\n".join(p for p in parts if p)


@attrs.frozen(kw_only=True)
class ModelRequest:
    """One HTTP request the double received, parsed, with helpers to key a script on.

    ``body`` is the parsed JSON body (``{}`` for a request without one); ``headers`` are
    ``(lowercased name, value)`` pairs in arrival order; ``index`` counts requests from 0.
    """

    index: int
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: Mapping[str, Any]

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        for key, value in self.headers:
            if key == wanted:
                return value
        return None

    @property
    def route(self) -> str:
        """The path without its query string (``/v1/messages?beta=true`` -> ``/v1/messages``)."""
        return self.path.partition("?")[0]

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True

    @property
    def model(self) -> str:
        model = self.body.get("model")
        return model if isinstance(model, str) else ""

    @property
    def messages(self) -> list[Mapping[str, Any]]:
        messages = self.body.get("messages")
        if not isinstance(messages, list):
            return []
        return [m for m in messages if isinstance(m, Mapping)]

    @property
    def system_text(self) -> str:
        """All system prompt text, joined by newlines (the API allows a string or blocks)."""
        return _text_of(self.body.get("system"))

    @property
    def is_subagent(self) -> bool:
        """A subagent's request: the CLI puts ``cc_is_subagent=true`` in ``system[0].text``."""
        system = self.body.get("system")
        if isinstance(system, list) and system and isinstance(system[0], Mapping):
            return "cc_is_subagent=true" in str(system[0].get("text", ""))
        return False

    @property
    def is_tool_use_summary(self) -> bool:
        """The CLI's side request for a tool-use summary label (not a turn of the conversation)."""
        return _SUMMARY_PROMPT in self.system_text

    @property
    def last_user_text(self) -> str:
        """The text of the last ``user`` message that has any, blocks joined by newlines.

        ``messages[]`` can hold ``role: "system"`` entries after the user's turn, and a tool round
        trip's last user message holds only ``tool_result`` blocks: neither is the prompt, so
        never key a script on ``messages[-1]``. ``<system-reminder>`` sections (context the CLI
        folds into the user's message) are left out.
        """
        for message in reversed(self.messages):
            if message.get("role") != "user":
                continue
            text = _text_of(message.get("content"), skip_reminders=True)
            if text:
                return text
        return ""

    @property
    def user_texts(self) -> list[str]:
        """The text of every ``user`` message with text, oldest first, without reminders."""
        texts = [
            _text_of(m.get("content"), skip_reminders=True)
            for m in self.messages
            if m.get("role") == "user"
        ]
        return [t for t in texts if t]

    @property
    def tool_uses(self) -> dict[str, Mapping[str, Any]]:
        """Every ``tool_use`` block the assistant sent so far, by id."""
        return {
            block["id"]: block
            for block in self._blocks("assistant")
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str)
        }

    @property
    def tool_results(self) -> dict[str, Mapping[str, Any]]:
        """Every ``tool_result`` block sent back so far, by ``tool_use_id``."""
        return {
            block["tool_use_id"]: block
            for block in self._blocks("user")
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str)
        }

    def tool_result_text(self, tool_use_id: str) -> str | None:
        """The text of the ``tool_result`` for ``tool_use_id``, or None if there is none yet.

        The CLI appends ``<system-reminder>`` sections to tool output; they are left out.
        """
        block = self.tool_results.get(tool_use_id)
        return None if block is None else _text_of(block.get("content"), skip_reminders=True)

    @property
    def pending_tool_use_ids(self) -> set[str]:
        """``tool_use`` ids the assistant sent that have no ``tool_result`` yet."""
        return set(self.tool_uses) - set(self.tool_results)

    def _blocks(self, role: str) -> list[Mapping[str, Any]]:
        blocks: list[Mapping[str, Any]] = []
        for message in self.messages:
            content = message.get("content")
            if message.get("role") == role and isinstance(content, list):
                blocks.extend(b for b in content if isinstance(b, Mapping))
        return blocks


def is_subagent(request: ModelRequest) -> bool:
    """A subagent's ``/v1/messages`` request."""
    return request.route == "/v1/messages" and request.is_subagent


def is_main_agent(request: ModelRequest) -> bool:
    """A main-agent ``/v1/messages`` turn request (not a subagent's, not a summary label's)."""
    return (
        request.route == "/v1/messages"
        and not request.is_subagent
        and not request.is_tool_use_summary
    )


# --------------------------------------------------------------------------------------------
# What an answer looks like


@attrs.frozen(kw_only=True)
class ReplyText:
    text: str


@attrs.frozen(kw_only=True)
class ReplyThinking:
    thinking: str
    signature: str = "double-signature"


@attrs.frozen(kw_only=True)
class ReplyToolUse:
    id: str
    name: str
    input: Mapping[str, Any] = attrs.field(factory=dict)


ReplyBlock: TypeAlias = ReplyText | ReplyThinking | ReplyToolUse


@attrs.frozen(kw_only=True)
class ReplyUsage:
    """What the double reports; the CLI prices the turn from it, so cost can be asserted.

    ``message_start`` carries the input buckets with ``output_tokens=1`` (as the API does);
    ``message_delta`` carries all four final numbers.
    """

    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def as_json(self, *, output_tokens: int | None = None) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "output_tokens": self.output_tokens if output_tokens is None else output_tokens,
        }


def default_stop_reason(blocks: Sequence[ReplyBlock]) -> str:
    """``tool_use`` when a block is a tool use, else ``end_turn``."""
    return "tool_use" if any(isinstance(b, ReplyToolUse) for b in blocks) else "end_turn"


@attrs.frozen(kw_only=True)
class Reply:
    """A successful assistant message.

    ``stop_reason`` defaults to ``tool_use`` when a block is a tool use, else ``end_turn``.
    ``chunk_size`` splits text, thinking and tool input JSON into deltas of that many characters.
    ``event_delay`` is slept (trio clock) before every SSE event after ``message_start``, for
    slow streams; ``gate``, when given, is awaited right after ``message_start`` is sent, so a
    test can hold a stream open until it says go.
    """

    blocks: Sequence[ReplyBlock] = ()
    usage: ReplyUsage = ReplyUsage()
    stop_reason: str | None = None
    model: str | None = None
    message_id: str | None = None
    chunk_size: int = 16
    event_delay: float = 0.0
    gate: trio.Event | None = attrs.field(default=None, eq=False)

    def __attrs_post_init__(self) -> None:
        if self.chunk_size < 1:
            raise InvalidParamsError("chunk_size", self.chunk_size, "must be at least 1")
        if self.event_delay < 0:
            raise InvalidParamsError("event_delay", self.event_delay, "must be >= 0 seconds")

    @classmethod
    def text(cls, text: str, **kwargs: Any) -> Reply:
        """A reply with one text block; ``kwargs`` are the other fields."""
        return cls(blocks=(ReplyText(text=text),), **kwargs)

    @classmethod
    def tool_use(
        cls, name: str, input: Mapping[str, Any], *, id: str = "toolu_double_1", **kwargs: Any
    ) -> Reply:
        """A reply with one tool_use block (stop reason ``tool_use``)."""
        return cls(blocks=(ReplyToolUse(id=id, name=name, input=input),), **kwargs)


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@attrs.frozen(kw_only=True)
class HttpError:
    """An HTTP error with the API's JSON body ``{"type":"error","error":{"type","message"}}``.

    ``error_type`` defaults to the API's type for the status (429 ``rate_limit_error``, 529
    ``overloaded_error``, ...); ``headers`` are added to the response (e.g. ``retry-after``).
    """

    status: int
    error_type: str = ""
    message: str = ""
    headers: Mapping[str, str] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise InvalidParamsError("status", self.status, "an HTTP error status, 400..599")

    @property
    def resolved_error_type(self) -> str:
        return self.error_type or _ERROR_TYPES.get(self.status, "api_error")


def prompt_too_long(tokens: int, maximum: int) -> HttpError:
    """The 400 that makes the CLI auto-compact (usage numbers alone never do)."""
    return HttpError(
        status=400,
        error_type="invalid_request_error",
        message=f"prompt is too long: {tokens} tokens > {maximum} maximum",
    )


@attrs.frozen(kw_only=True)
class StreamError:
    """HTTP 200, the first ``after_events`` SSE events of ``reply``, then an SSE ``error`` event.

    The CLI treats it like a dropped stream and asks again with a new request.
    """

    reply: Reply = Reply()
    after_events: int = 1
    error_type: str = "overloaded_error"
    message: str = "Overloaded"

    def __attrs_post_init__(self) -> None:
        if self.after_events < 0:
            raise InvalidParamsError("after_events", self.after_events, "must be >= 0")


Response: TypeAlias = Reply | HttpError | StreamError
Responder: TypeAlias = Callable[[ModelRequest], Response | None]


# --------------------------------------------------------------------------------------------
# Scripts: responders built from rules


def _always(request: ModelRequest) -> bool:
    return True


@attrs.frozen(kw_only=True)
class Rule:
    """Answer requests matching ``when`` with ``reply`` (a response or a function of the request).

    ``times`` is how many requests the rule answers; ``None`` means any number.
    """

    reply: Response | Callable[[ModelRequest], Response]
    when: Callable[[ModelRequest], bool] = _always
    times: int | None = 1

    def __attrs_post_init__(self) -> None:
        if self.times is not None and self.times < 1:
            raise InvalidParamsError("times", self.times, "None (unlimited) or at least 1")


@attrs.define(eq=False)
class Script:
    """A responder: the first rule that matches and has uses left answers; else None.

    Rules are tried in order, so a list of once-only rules is a list of turns.
    """

    rules: Sequence[Rule]
    _used: list[int] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._used = [0] * len(self.rules)

    def __call__(self, request: ModelRequest) -> Response | None:
        for i, rule in enumerate(self.rules):
            if rule.times is not None and self._used[i] >= rule.times:
                continue
            if not rule.when(request):
                continue
            self._used[i] += 1
            reply = rule.reply
            match reply:
                case Reply() | HttpError() | StreamError():
                    return reply
                case _:
                    return reply(request)
        return None

    @property
    def exhausted(self) -> bool:
        """Every rule with a finite ``times`` has been used up."""
        return all(
            rule.times is None or used >= rule.times
            for rule, used in zip(self.rules, self._used, strict=True)
        )


def turns(*replies: Response | Callable[[ModelRequest], Response]) -> Script:
    """One reply per main-agent request, in order (subagent and summary requests are left out)."""
    return Script([Rule(reply=r, when=is_main_agent) for r in replies])
