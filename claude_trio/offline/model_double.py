"""A scripted Anthropic Messages API, served on 127.0.0.1, for running the real ``claude`` CLI.

Point the CLI at it with :func:`claude_trio.offline.hermetic.hermetic_env` and it needs no key and
no network. The double speaks just enough of the Messages API for the bundled CLI:

* ``POST /v1/messages`` with ``stream: true`` answers Server-Sent Events in the API's order:
  ``message_start``, per block ``content_block_start`` / ``content_block_delta`` (``text_delta``,
  ``thinking_delta`` + ``signature_delta``, ``input_json_delta``) / ``content_block_stop``, then
  ``message_delta`` (stop reason and final usage) and ``message_stop``.
* ``POST /v1/messages`` without ``stream`` answers the same reply as one JSON message.
* ``POST /v1/messages/count_tokens`` answers a rough estimate (the responder is not asked).
* Anything else answers 404 with the API's JSON error body. Every request is recorded.

A *responder* decides each ``/v1/messages`` answer: ``Callable[[ModelRequest], Response | None]``.
It gets the parsed request and returns a :class:`Reply`, an :class:`HttpError` or a
:class:`StreamError`; ``None`` means "not in my script". The CLI's tool-use summary label requests
(``CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES=true``) that the responder leaves alone get
``summary_reply``. Other unscripted requests get ``unscripted_reply`` up to ``max_unscripted``
times, then an HTTP 500, and the double flags a runaway (:meth:`ModelDouble.check` raises): a CLI
that keeps asking (a 400 makes it resend with fallbacks) would otherwise spin until the test's
deadline and fail with no clue. :class:`Script` and :func:`turns` build responders from rules.

HTTP is h11 over trio streams; keep-alive works (the CLI reuses connections). Streaming replies use
chunked transfer encoding, as the real API does.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeAlias, assert_never

import attrs
import h11
import trio

from claude_trio.protocol.errors import InvalidParamsError, ModelDoubleRunaway

__all__ = [
    "HttpError",
    "ModelDouble",
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
    "is_main_agent",
    "is_subagent",
    "open_model_double",
    "prompt_too_long",
    "turns",
]

_MAX_BODY = 64 * 1024 * 1024  # the CLI posts whole conversations; a compaction test can be large
_RECEIVE_SIZE = 64 * 1024

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


def _default_stop_reason(blocks: Sequence[ReplyBlock]) -> str:
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


# --------------------------------------------------------------------------------------------
# Encoding answers


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _message_json(reply: Reply, request: ModelRequest, message_id: str) -> dict[str, Any]:
    """The ``message`` of ``message_start``: no content yet, input usage, one output token."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.model or "claude-double",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": reply.usage.as_json(output_tokens=1),
    }


def _complete_message_json(reply: Reply, request: ModelRequest, message_id: str) -> dict[str, Any]:
    """The whole message, for a non-streaming request."""
    message = _message_json(reply, request, message_id)
    message["content"] = [_block_json(b) for b in reply.blocks]
    message["stop_reason"] = reply.stop_reason or _default_stop_reason(reply.blocks)
    message["usage"] = reply.usage.as_json()
    return message


def _block_json(block: ReplyBlock) -> dict[str, Any]:
    match block:
        case ReplyText(text=text):
            return {"type": "text", "text": text}
        case ReplyThinking(thinking=thinking, signature=signature):
            return {"type": "thinking", "thinking": thinking, "signature": signature}
        case ReplyToolUse(id=id, name=name, input=input):
            return {"type": "tool_use", "id": id, "name": name, "input": dict(input)}
        case _:
            assert_never(block)


def _block_start_and_deltas(
    block: ReplyBlock, chunk_size: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    match block:
        case ReplyText(text=text):
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(text, chunk_size)]
        case ReplyThinking(thinking=thinking, signature=signature):
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": c} for c in _chunks(thinking, chunk_size)
            ]
            deltas.append({"type": "signature_delta", "signature": signature})
        case ReplyToolUse(id=id, name=name, input=input):
            start = {"type": "tool_use", "id": id, "name": name, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": c}
                for c in _chunks(json.dumps(dict(input)), chunk_size)
            ]
        case _:
            assert_never(block)
    return start, deltas


def _stream_events(reply: Reply, request: ModelRequest, message_id: str) -> list[bytes]:
    """The SSE events of ``reply``, in the order the real API sends them."""
    message = _message_json(reply, request, message_id)
    events = [_sse("message_start", {"type": "message_start", "message": message})]
    for index, block in enumerate(reply.blocks):
        start, deltas = _block_start_and_deltas(block, reply.chunk_size)
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events.extend(
            _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        )
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop_reason = reply.stop_reason or _default_stop_reason(reply.blocks)
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": reply.usage.as_json(),
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def _error_json(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


# --------------------------------------------------------------------------------------------
# The server


_UNSCRIPTED_REPLY = Reply.text("(model double: unscripted request)")
_SUMMARY_REPLY = Reply.text("Ran tools")


@attrs.define(eq=False)
class ModelDouble:
    """The Messages API double. Start it with ``port = await nursery.start(double.serve)``.

    ``requests`` records every request in arrival order; ``unscripted`` the ``/v1/messages``
    requests the responder did not answer. After ``max_unscripted`` of those, each further one
    gets an HTTP 500 and ``runaway`` is set; :meth:`check` turns that into a test failure.
    """

    responder: Responder
    max_unscripted: int = 3
    unscripted_reply: Reply = _UNSCRIPTED_REPLY
    summary_reply: Reply = _SUMMARY_REPLY
    #: Keep only the latest this many requests in ``requests`` (None: all; a long-running
    #: double, such as the offline model of ``claude-trio serve``, must not keep them all).
    keep_requests: int | None = None
    requests: list[ModelRequest] = attrs.field(factory=list, init=False)
    #: Requests received so far (``requests`` may hold fewer: ``keep_requests``).
    received: int = attrs.field(default=0, init=False)
    unscripted: list[ModelRequest] = attrs.field(factory=list, init=False)
    runaway: bool = attrs.field(default=False, init=False)
    port: int | None = attrs.field(default=None, init=False)
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)

    def __attrs_post_init__(self) -> None:
        if self.max_unscripted < 0:
            raise InvalidParamsError("max_unscripted", self.max_unscripted, "must be >= 0")

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``, for ``ANTHROPIC_BASE_URL``; only once serving."""
        if self.port is None:
            raise RuntimeError("the model double is not serving yet: start it with nursery.start")
        return f"http://127.0.0.1:{self.port}"

    @property
    def message_requests(self) -> list[ModelRequest]:
        """The recorded ``/v1/messages`` requests of the conversation: not count_tokens, not
        unknown paths, and not the CLI's side requests for tool-use summary labels (those are
        :attr:`summary_requests`: they come whenever the label is asked for, out of turn)."""
        return [
            r for r in self.requests if r.route == "/v1/messages" and not r.is_tool_use_summary
        ]

    @property
    def summary_requests(self) -> list[ModelRequest]:
        """The CLI's side requests for tool-use summary labels."""
        return [r for r in self.requests if r.route == "/v1/messages" and r.is_tool_use_summary]

    def check(self) -> None:
        """Raise :class:`ModelDoubleRunaway` if the CLI ran past the script."""
        if not self.runaway:
            return
        lines = [
            f"  #{r.index} {r.method} {r.path} last user text: {r.last_user_text[:80]!r}"
            for r in self.unscripted
        ]
        raise ModelDoubleRunaway(
            f"the CLI sent {len(self.unscripted)} requests beyond the script "
            f"(max_unscripted={self.max_unscripted}):\n" + "\n".join(lines)
        )

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on 127.0.0.1 (a free port) and serve until cancelled; ``started(port)``."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port: int = listeners[0].socket.getsockname()[1]
        self.port = port
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._serve_connection, listeners)
            task_status.started(port)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        await trio.lowlevel.checkpoint()
        # A client that drops the connection mid-stream (an aborted turn) is normal, not an error.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with stream:
                await _HttpConnection(stream, self).serve()

    def _respond(self, request: ModelRequest) -> Response:
        response = self.responder(request)
        if response is not None:
            return response
        if request.is_tool_use_summary:
            # A side request for a UI label, not a turn: answer it unless the script wants to.
            return self.summary_reply
        self.unscripted.append(request)
        if len(self.unscripted) <= self.max_unscripted:
            return self.unscripted_reply
        self.runaway = True
        return HttpError(
            status=500,
            error_type="api_error",
            message=f"model double: runaway, {len(self.unscripted)} requests beyond the script",
        )

    def _record(self, request: ModelRequest) -> None:
        self.received += 1
        self.requests.append(request)
        keep = self.keep_requests
        if keep is not None and len(self.requests) > keep:
            del self.requests[: len(self.requests) - keep]

    def _next_message_id(self) -> str:
        return f"msg_double_{next(self._ids):04d}"


@contextlib.asynccontextmanager
async def open_model_double(
    responder: Responder, *, max_unscripted: int = 3
) -> AsyncIterator[ModelDouble]:
    """Serve a :class:`ModelDouble` for the block; when the block ends it stops and is checked."""
    double = ModelDouble(responder, max_unscripted=max_unscripted)
    async with trio.open_nursery() as nursery:
        await nursery.start(double.serve)
        yield double
        nursery.cancel_scope.cancel()
    double.check()


class _HttpConnection:
    """One keep-alive HTTP/1.1 connection: h11 parses and frames, this drives it."""

    def __init__(self, stream: trio.SocketStream, double: ModelDouble) -> None:
        self._stream = stream
        self._double = double
        self._conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_BODY)

    async def serve(self) -> None:
        while True:
            request = await self._read_request()
            if request is None:
                return
            await self._answer(request)
            if h11.MUST_CLOSE in (self._conn.our_state, self._conn.their_state):
                return
            self._conn.start_next_cycle()

    async def _next_event(self) -> Any:
        await trio.lowlevel.checkpoint()  # a client that pipelines must not starve other tasks
        while True:
            event = self._conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            self._conn.receive_data(await self._stream.receive_some(_RECEIVE_SIZE))

    async def _read_request(self) -> ModelRequest | None:
        """The next request with its whole body, or None when the client is done or broken."""
        try:
            event = await self._next_event()
            if not isinstance(event, h11.Request):
                return None  # ConnectionClosed
            body = bytearray()
            while True:
                part = await self._next_event()
                if isinstance(part, h11.Data):
                    body += part.data
                elif isinstance(part, h11.EndOfMessage):
                    break
                else:
                    return None  # the client hung up mid-body
        except h11.RemoteProtocolError as exc:
            await self._send_bad_request(exc)
            return None
        parsed: Any = {}
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = {"_unparsed": body.decode(errors="replace")}
        request = ModelRequest(
            index=self._double.received,
            method=event.method.decode(),
            path=event.target.decode(),
            headers=tuple((k.decode().lower(), v.decode()) for k, v in event.headers),
            body=parsed if isinstance(parsed, dict) else {"_body": parsed},
        )
        self._double._record(request)
        return request

    async def _send_bad_request(self, exc: h11.RemoteProtocolError) -> None:
        await trio.lowlevel.checkpoint()
        if self._conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        await self._send_json(
            exc.error_status_hint,
            _error_json("invalid_request_error", f"model double: bad HTTP: {exc}"),
            extra_headers={"connection": "close"},
        )

    async def _answer(self, request: ModelRequest) -> None:
        await trio.lowlevel.checkpoint()
        if request.method == "POST" and request.route == "/v1/messages/count_tokens":
            # Four characters a token is the API's own rule of thumb; the CLI only displays it.
            estimate = max(1, len(json.dumps(dict(request.body))) // 4)
            await self._send_json(200, {"input_tokens": estimate})
            return
        if request.method != "POST" or request.route != "/v1/messages":
            message = f"model double: no route {request.method} {request.path}"
            await self._send_json(404, _error_json("not_found_error", message))
            return
        response = self._double._respond(request)
        match response:
            case HttpError():
                message = response.message or f"HTTP {response.status}"
                await self._send_json(
                    response.status,
                    _error_json(response.resolved_error_type, message),
                    extra_headers=response.headers,
                )
            case Reply():
                message_id = response.message_id or self._double._next_message_id()
                if request.stream:
                    await self._send_stream(_stream_events(response, request, message_id), response)
                else:
                    message_json = _complete_message_json(response, request, message_id)
                    await self._send_json(200, message_json)
            case StreamError():
                reply = response.reply
                message_id = reply.message_id or self._double._next_message_id()
                events = _stream_events(reply, request, message_id)[: response.after_events]
                events.append(_sse("error", _error_json(response.error_type, response.message)))
                await self._send_stream(events, reply)
            case _:
                assert_never(response)

    def _headers(self, content_type: str) -> list[tuple[str, str]]:
        request_id = f"req_double_{self._double.received:04d}"
        return [("content-type", content_type), ("request-id", request_id)]

    async def _send(self, event: h11.Event) -> None:
        data = self._conn.send(event)
        if data:
            await self._stream.send_all(data)
        else:
            await trio.lowlevel.checkpoint()

    async def _send_json(
        self, status: int, payload: Mapping[str, Any], *, extra_headers: Mapping[str, str] = {}
    ) -> None:
        body = json.dumps(payload).encode()
        headers = [
            *self._headers("application/json"),
            ("content-length", str(len(body))),
            *extra_headers.items(),
        ]
        await self._send(h11.Response(status_code=status, headers=headers))
        await self._send(h11.Data(data=body))
        await self._send(h11.EndOfMessage())

    async def _send_stream(self, events: list[bytes], reply: Reply) -> None:
        headers = [*self._headers("text/event-stream"), ("cache-control", "no-cache")]
        # No content-length: h11 frames the body with chunked transfer encoding, as the API does.
        await self._send(h11.Response(status_code=200, headers=headers))
        for i, event in enumerate(events):
            if i == 1 and reply.gate is not None:
                await reply.gate.wait()
            if i >= 1 and reply.event_delay:
                await trio.sleep(reply.event_delay)
            await self._send(h11.Data(data=event))
        await self._send(h11.EndOfMessage())
