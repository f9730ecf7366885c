"""A scripted Anthropic Messages API, served on 127.0.0.1, for running the real ``claude`` CLI.

Point the CLI at it with :func:`claude_trio.offline.hermetic.hermetic_env` and it needs no key and
no network. The double speaks just enough of the Messages API for the bundled CLI:

* ``POST /v1/messages`` with ``stream: true`` answers Server-Sent Events in the API's order:
  ``message_start``, per block ``content_block_start`` / ``content_block_delta`` (``text_delta``,
  ``thinking_delta`` + ``signature_delta``, ``input_json_delta``) / ``content_block_stop``, then
  ``message_delta`` (stop reason and final usage) and ``message_stop``.
* ``POST /v1/messages`` without ``stream`` answers the same reply as one JSON message.
* ``POST /v1/messages/count_tokens`` answers a rough estimate (the responder is not asked).
* Anything else answers an HTTP error with the API's JSON error body: another method on those
  two paths 405 (``allow: POST``), another path 404, a body that is not a JSON object 400, a
  request that is not HTTP 400 (and the connection is closed). A ``HEAD`` request gets the
  headers of its answer and no body. Every request is recorded.

No request kills the double: a responder that raises (or returns something that is not a
response) is answered 500, and :meth:`ModelDouble.check` raises that exception at the end of
the test, so a bug in a script still fails the test that has it.

A *responder* decides each ``/v1/messages`` answer: ``Callable[[ModelRequest], Response | None]``.
It gets the parsed request and returns a :class:`Reply`, an :class:`HttpError` or a
:class:`StreamError`; ``None`` means "not in my script". The CLI's tool-use summary label requests
(``CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES=true``) that the responder leaves alone get
``summary_reply``. Other unscripted requests get ``unscripted_reply`` up to ``max_unscripted``
times, then an HTTP 500, and the double flags a runaway (:meth:`ModelDouble.check` raises): a CLI
that keeps asking (a 400 makes it resend with fallbacks) would otherwise spin until the test's
deadline and fail with no clue. :class:`Script` and :func:`turns` build responders from rules.

With ``rate_limits`` (:class:`RateLimits`) the double pushes back as a rate-limited account
does: 429 above K requests at once or N a minute, 529 in bursts, each with ``retry-after``,
before the responder is asked (:mod:`claude_trio.offline.rate_limits`);
:meth:`ModelDouble.rate_limit_statistics` counts what it served.

The request, the answers and the scripts are plain values, in
:mod:`claude_trio.offline.model_script`; this module holds the server (and encodes the answers)
and re-exports every one of them.

HTTP is h11 over trio streams; keep-alive works (the CLI reuses connections). Streaming replies use
chunked transfer encoding, as the real API does.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, assert_never

import attrs
import h11
import trio

from claude_trio.offline.model_script import (
    HttpError,
    ModelRequest,
    Reply,
    ReplyBlock,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    ReplyUsage,
    Responder,
    Response,
    Rule,
    Script,
    StreamError,
    default_stop_reason,
    is_main_agent,
    is_subagent,
    prompt_too_long,
    turns,
)
from claude_trio.offline.rate_limits import RateLimiter, RateLimits, RateLimitStatistics
from claude_trio.protocol.errors import InvalidParamsError, ModelDoubleRunaway

__all__ = [
    "HttpError",
    "ModelDouble",
    "ModelRequest",
    "RateLimitStatistics",
    "RateLimits",
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

_MAX_FAILURES = 8  # a long-running double keeps the first few only
_MAX_BODY = 64 * 1024 * 1024  # the CLI posts whole conversations; a compaction test can be large
_RECEIVE_SIZE = 64 * 1024


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
    message["stop_reason"] = reply.stop_reason or default_stop_reason(reply.blocks)
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
    stop_reason = reply.stop_reason or default_stop_reason(reply.blocks)
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


_ROUTES = frozenset({"/v1/messages", "/v1/messages/count_tokens"})


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
    #: Answer 429/529 as a rate-limited account would, before the responder is asked
    #: (:mod:`claude_trio.offline.rate_limits`); None: never. May be set before a test's CLI
    #: starts, like ``responder``.
    rate_limits: RateLimits | None = None
    requests: list[ModelRequest] = attrs.field(factory=list, init=False)
    #: Requests received so far (``requests`` may hold fewer: ``keep_requests``).
    received: int = attrs.field(default=0, init=False)
    unscripted: list[ModelRequest] = attrs.field(factory=list, init=False)
    runaway: bool = attrs.field(default=False, init=False)
    #: What the responder (or the double itself) raised while answering, the first few; each
    #: such request was answered 500. :meth:`check` raises the first.
    failures: list[Exception] = attrs.field(factory=list, init=False)
    port: int | None = attrs.field(default=None, init=False)
    _limiter: RateLimiter | None = attrs.field(default=None, init=False)
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
        return [r for r in self.requests if r.route == "/v1/messages" and not r.is_tool_use_summary]

    @property
    def summary_requests(self) -> list[ModelRequest]:
        """The CLI's side requests for tool-use summary labels."""
        return [r for r in self.requests if r.route == "/v1/messages" and r.is_tool_use_summary]

    def rate_limit_statistics(self) -> RateLimitStatistics:
        """What ``rate_limits`` made the double answer so far: requests admitted, 429s and
        529s served, the most answered at once (all zero without ``rate_limits``)."""
        return self._rate_limiter().statistics()

    def _rate_limiter(self) -> RateLimiter:
        limits = self.rate_limits or RateLimits()
        if self._limiter is None or self._limiter.limits is not limits:
            self._limiter = RateLimiter(limits)  # new limits, new counts
        return self._limiter

    def check(self) -> None:
        """Raise what the responder raised while answering (the first such exception), or
        :class:`ModelDoubleRunaway` if the CLI ran past the script."""
        if self.failures:
            raise self.failures[0]
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
                try:
                    await _HttpConnection(stream, self).serve()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    raise
                except Exception as exc:
                    # A bug of ours on one connection: that connection ends, the double serves
                    # on, and the test fails at check().
                    self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        if len(self.failures) < _MAX_FAILURES:
            self.failures.append(exc)

    def _respond_safely(self, request: ModelRequest) -> Response:
        """The responder's answer; a 500 when it raises or answers something else."""
        try:
            response = self._respond(request)
            if not isinstance(response, HttpError | Reply | StreamError):
                raise TypeError(
                    f"the responder answered {response!r}: expected a Reply, an HttpError, a "
                    "StreamError or None"
                )
        except Exception as exc:
            self._failed(exc)
            return HttpError(
                status=500,
                error_type="api_error",
                message=f"model double: the responder raised {type(exc).__name__}: {exc}",
            )
        return response

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
    responder: Responder, *, max_unscripted: int = 3, rate_limits: RateLimits | None = None
) -> AsyncIterator[ModelDouble]:
    """Serve a :class:`ModelDouble` for the block; when the block ends it stops and is checked."""
    double = ModelDouble(responder, max_unscripted=max_unscripted, rate_limits=rate_limits)
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
        #: The request being answered is a HEAD: its answer has headers and no body.
        self._head = False
        #: Why the body of the request being answered is not a JSON object (None: it is).
        self._body_problem: str | None = None

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
        self._head = False
        try:
            event = await self._next_event()
            if not isinstance(event, h11.Request):
                return None  # ConnectionClosed
            self._head = event.method == b"HEAD"
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
        self._body_problem = None
        if body:
            try:
                parsed = json.loads(body)
            except ValueError as exc:
                self._body_problem = f"the body is not JSON ({exc})"
                parsed = {"_unparsed": body.decode(errors="replace")}
        if not isinstance(parsed, dict):
            self._body_problem = f"the body is JSON but not an object ({type(parsed).__name__})"
            parsed = {"_body": parsed}
        request = ModelRequest(
            index=self._double.received,
            method=event.method.decode(errors="replace"),
            path=event.target.decode(errors="replace"),
            headers=tuple(
                (k.decode(errors="replace").lower(), v.decode(errors="replace"))
                for k, v in event.headers
            ),
            body=parsed,
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
        if request.route not in _ROUTES:
            message = f"model double: no route {request.method} {request.path}"
            await self._send_json(404, _error_json("not_found_error", message))
            return
        if request.method != "POST":
            message = f"model double: {request.route} takes POST, not {request.method}"
            await self._send_json(
                405,
                _error_json("invalid_request_error", message),
                extra_headers={"allow": "POST"},
            )
            return
        if self._body_problem is not None:
            message = f"model double: {self._body_problem}"
            await self._send_json(400, _error_json("invalid_request_error", message))
            return
        if request.route == "/v1/messages/count_tokens":
            # Four characters a token is the API's own rule of thumb; the CLI only displays it.
            estimate = max(1, len(json.dumps(dict(request.body))) // 4)
            await self._send_json(200, {"input_tokens": estimate})
            return
        if self._double.rate_limits is None:
            await self._send_response(request, self._double._respond_safely(request))
            return
        limiter = self._double._rate_limiter()
        refusal = limiter.admit(trio.current_time())
        if refusal is not None:
            await self._send_response(request, refusal)
            return
        try:  # in flight until its answer is sent, or the client hung up on it
            await self._send_response(request, self._double._respond_safely(request))
        finally:
            limiter.release()

    async def _send_response(self, request: ModelRequest, response: Response) -> None:
        await trio.lowlevel.checkpoint()
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
        if not self._head:  # the answer to a HEAD has the headers of a GET's, and no body
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
