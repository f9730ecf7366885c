"""The session's traces: its events as OpenTelemetry spans (the GenAI agent conventions).

claude-trio instruments with ``opentelemetry-api`` only: nothing is recorded until the
application configures an OpenTelemetry SDK (a ``TracerProvider``), globally or passed as
``open_session(tracer_provider=...)``. :func:`session_tracer` looks at the provider once per
session; with the API's default (proxy or no-op) provider it returns ``None`` and the session
does no tracing work at all.

The spans follow the OpenTelemetry semantic conventions for generative AI, version
:data:`SEMCONV_VERSION` (development status: the attribute names are those of that version):

* ``invoke_agent claude-code``: one per execution (``open_session``), from the open to its
  terminal event. ``gen_ai.operation.name``, ``gen_ai.provider.name`` (``anthropic``),
  ``gen_ai.agent.name``, ``gen_ai.conversation.id`` (the CLI's session id), the request and
  response model, the execution's input, output and cache token counts (the exact figures of
  the CLI's results, ``Result.execution_usage``), its cost as ``claude_trio.cost_usd`` and how
  it ended as ``claude_trio.outcome`` (:class:`~claude_trio.protocol.session.outcomes.Outcome`).
  A failed execution has an error status and ``error.type``; an aborted one does not (a stop
  is no error: the ``claude_trio.stop`` event says why).
* ``chat <model>``: one per model call (one assistant message), a child of its agent's span,
  from the first thing it streamed to the whole message; the call's input and cache token
  counts (a call's output tokens are not in the CLI's assistant frames, which carry the
  ``message_start`` snapshot, and come later in its ``message_delta`` stream event, after the
  span's message; the exact output counts are the turn's, on the agent span),
  ``gen_ai.response.id``, ``gen_ai.response.finish_reasons``.
* ``execute_tool <tool>``: one per tool call, a child of its agent's span, from the model's
  ``tool_use`` to its ``tool_result``; ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type`` (``function`` for MCP tools, the session's custom tools included, which
  the application provides; ``extension`` for the CLI's own). An error result sets an error
  status (``error.type`` ``tool_error``).
* A subagent is an ``invoke_agent <type>`` span under the ``execute_tool`` span of the tool
  call that started it (``gen_ai.agent.id`` its task id); its model calls and tool calls nest
  under it.

Span events: ``claude_trio.push.accepted`` / ``.delivered`` / ``.undelivered`` (a push's
uuid), ``claude_trio.user_input.requested`` and ``.resolved`` (an approval or a question: on the
tool call's span when it names one; the outcome, who settled it - ``handler`` (the session's
``on_user_input``), ``caller`` (``Session.answer``, which a fleet's or gateway's client
reaches; the principal is not recorded), ``timeout``, ``session`` (it ended) or ``cli`` (it
withdrew the request) - and the wait in seconds), ``claude_trio.warning``
and ``claude_trio.error`` (non-fatal), ``claude_trio.compaction``, ``claude_trio.retry``, and
``claude_trio.stop`` (an abort's reason, phase and outcome, and ``claude_trio.stop.seconds``:
from the stop to its terminal event, when the CLI's tools are reaped and the CLI settled; the
CLI's own exit comes after, at the session's close, which the metric
``claude_trio.session.stop.duration`` measures).

Content (the prompt, the model's text, tool inputs and results, pushes' text, a subagent's
task) is recorded only when asked for: ``open_session(trace_content=True)``, or by default the
conventions' switch ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``; even then every
value goes through :func:`~claude_trio.protocol.config.redact.redact_secrets`.

Cost: :meth:`SessionTracer.observe` runs inline where the session queues each event (the event
stream), never in a task of its own; deltas only open a model call's span once.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from claude_trio.protocol.config.redact import redact_secrets, redact_text
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    AssistantMessage,
    Error,
    Event,
    Flush,
    Result,
    Retry,
    SubagentCompleted,
    SubagentStarted,
    TextContent,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    TurnStarted,
    UserInputRequest,
    UserInputResolved,
    UserMessage,
    WarningEvent,
)
from claude_trio.protocol.session.outcomes import Outcome
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage, add_usage, normalize_usage

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "SEMCONV_VERSION",
    "SessionTracer",
    "check_tracing_options",
    "session_tracer",
]

_log = logging.getLogger(__name__)

SEMCONV_VERSION = "1.41.0"
"""The version of the OpenTelemetry semantic conventions (GenAI) the spans follow."""

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CAPTURE_ON = frozenset({"true", "1", "span_only", "span_and_event"})

AGENT_NAME = "claude-code"
PROVIDER = "anthropic"
_MCP_PREFIX = "mcp__"
_SUBAGENT_FAILED = frozenset({"failed", "killed"})
# Who settled a request that was not answered (an answer's, or a failed one's, is the
# session's answerer: SessionTracer.answerer).
_ANSWERED_BY = {"expired": "timeout", "cancelled": "session", "withdrawn": "cli"}


def capture_content_default(environ: Mapping[str, str] = os.environ) -> bool:
    """The conventions' content capture switch, read from the environment."""
    return environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _CAPTURE_ON


def check_tracing_options(
    tracer_provider: object, trace_content: object, meter_provider: object = None
) -> None:
    """``open_session``'s tracing and metrics options, checked before anything starts."""
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise InvalidParamsError(
            "tracer_provider",
            type(tracer_provider).__name__,
            "pass an OpenTelemetry TracerProvider (opentelemetry.sdk.trace.TracerProvider), "
            "or None for the global one",
        )
    if meter_provider is not None and not callable(getattr(meter_provider, "get_meter", None)):
        raise InvalidParamsError(
            "meter_provider",
            type(meter_provider).__name__,
            "pass an OpenTelemetry MeterProvider (opentelemetry.sdk.metrics.MeterProvider), "
            "or None for the global one",
        )
    if trace_content is not None and not isinstance(trace_content, bool):
        raise InvalidParamsError(
            "trace_content",
            repr(trace_content),
            f"use True, False or None (None: the {CAPTURE_CONTENT_ENV} variable decides)",
        )


def session_tracer(
    tracer_provider: trace.TracerProvider | None,
    *,
    prompt: str,
    model: str | None,
    trace_content: bool | None = None,
) -> SessionTracer | None:
    """The session's tracer, or None when nothing would record its spans (no SDK configured:
    the API's proxy or no-op provider). Starts the execution's ``invoke_agent`` span."""
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    tracer = provider.get_tracer("claude_trio", schema_url=_SCHEMA_URL)
    capture = capture_content_default() if trace_content is None else trace_content
    return SessionTracer(tracer, prompt=prompt, request_model=model, capture=capture)


_SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"


@attrs.define(eq=False)
class _Agent:
    """The main agent or a subagent: its span, and its model call's span while one is open."""

    span: Span
    context: Any
    chat: Span | None = None


def _json(value: Any) -> str:
    return json.dumps(redact_secrets(value), default=str, ensure_ascii=False)


def _messages(role: str, text: str) -> str:
    """A message in the conventions' form (``gen_ai.input.messages`` / ``output.messages``)."""
    return _json([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _usage_attributes(usage: Usage) -> dict[str, Any]:
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens,
        "claude_trio.cost_usd": usage.cost_usd,
    }


class SessionTracer:
    """One execution's spans, made from its events in order (see the module docstring)."""

    def __init__(
        self, tracer: trace.Tracer, *, prompt: str, request_model: str | None, capture: bool
    ) -> None:
        self._tracer = tracer
        self._capture = capture
        self._request_model = request_model
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.agent.name": AGENT_NAME,
        }
        if request_model is not None:
            attributes["gen_ai.request.model"] = request_model
        if capture:
            attributes["gen_ai.input.messages"] = _messages("user", prompt)
        root = tracer.start_span(
            f"invoke_agent {AGENT_NAME}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        self._root = _Agent(span=root, context=trace.set_span_in_context(root))
        # Subagents by task id; a subagent's message before its task_started has no id.
        self._agents: dict[str | None, _Agent] = {}
        self._tools: dict[str, Span] = {}
        self._requests: dict[str, tuple[Span, float]] = {}
        self._pushes: set[str] = set()
        self._conversation: str | None = None
        self._usage = ZERO_USAGE
        self._done = False
        #: The stopper (its ``requested_at``), once the session has one.
        self.stop_clock: Any = None
        #: Who answers its approvals and questions: ``handler`` (``on_user_input``) or
        #: ``caller`` (``Session.answer``: a fleet's or a gateway's client).
        self.answerer = "caller"
        self._handlers: dict[type, Callable[[Any], None]] = {
            TextDelta: self._on_delta,
            ThinkingDelta: self._on_delta,
            AssistantMessage: self._on_message,
            ToolUse: self._on_tool_use,
            ToolResult: self._on_tool_result,
            AdapterReady: self._on_ready,
            TurnStarted: self._on_turn_started,
            SubagentStarted: self._on_subagent_started,
            SubagentCompleted: self._on_subagent_completed,
            UserInputRequest: self._on_request,
            UserInputResolved: self._on_resolved,
            UserMessage: self._on_push,
            WarningEvent: self._on_warning,
            Flush: self._on_flush,
            Retry: self._on_retry,
            Result: self._on_result,
            Aborted: self._on_aborted,
            Error: self._on_error,
        }

    @property
    def span(self) -> Span:
        """The execution's ``invoke_agent`` span."""
        return self._root.span

    # -- the one entry point (inline, for every event the session queues) -------------------

    def observe(self, event: Event) -> None:
        if self._done:
            return
        handler = self._handlers.get(type(event))
        if handler is not None:
            try:
                handler(event)
            except Exception:
                # A bug of the traces never stops the session: it is logged, the spans end.
                _log.exception("tracing the session failed at a %s event", event.kind)
                self._end(None, error=True)

    def close(self) -> None:
        """End whatever is still open (the session is gone); a no-op after the terminal event."""
        if not self._done:
            self._end(None)

    # -- model calls -----------------------------------------------------------------------

    def _agent(self, event: Event) -> _Agent:
        if not event.is_subagent:
            return self._root
        agent = self._agents.get(event.subagent_task_id)
        if agent is None:
            # Before its task_started: attributed to the main agent's span, kept apart.
            agent = self._agents[event.subagent_task_id] = _Agent(
                span=self._root.span, context=self._root.context
            )
        return agent

    def _chat(self, agent: _Agent) -> Span:
        chat = agent.chat
        if chat is None:
            model = self._request_model
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": PROVIDER,
            }
            if model is not None:
                attributes["gen_ai.request.model"] = model
            chat = agent.chat = self._tracer.start_span(
                f"chat {model}" if model else "chat",
                context=agent.context,
                kind=SpanKind.CLIENT,
                attributes=attributes,
            )
        return chat

    def _on_delta(self, event: TextDelta | ThinkingDelta) -> None:
        # Nearly every event of a turn: the main agent's, whose call's span is open already.
        if not event.is_subagent and self._root.chat is not None:
            return
        agent = self._agent(event)
        if agent.chat is None:
            self._chat(agent)

    def _on_message(self, event: AssistantMessage) -> None:
        message = event.message
        if message.role != "assistant":
            return
        agent = self._agent(event)
        chat = self._chat(agent)
        if message.model is not None:
            chat.set_attribute("gen_ai.response.model", message.model)
            if agent is self._root:
                self._root.span.set_attribute("gen_ai.response.model", message.model)
        if message.message_id is not None:
            chat.set_attribute("gen_ai.response.id", message.message_id)
        if message.stop_reason is not None:
            chat.set_attribute("gen_ai.response.finish_reasons", (message.stop_reason,))
        raws = event.raw if isinstance(event.raw, tuple) else ()
        usage = getattr(raws[-1], "usage", None) if raws else None
        if isinstance(usage, Mapping):
            # message_start's snapshot: the input side is the call's; its output is not final.
            call = normalize_usage(usage)
            chat.set_attribute("gen_ai.usage.input_tokens", call.input_tokens)
            chat.set_attribute("gen_ai.usage.cache_read.input_tokens", call.cache_read_input_tokens)
            chat.set_attribute(
                "gen_ai.usage.cache_creation.input_tokens", call.cache_creation_input_tokens
            )
        if message.error is not None:
            chat.set_status(Status(StatusCode.ERROR, message.error))
            chat.set_attribute("error.type", message.error)
        if self._capture:
            text = "".join(b.text for b in message.content if isinstance(b, TextContent))
            chat.set_attribute("gen_ai.output.messages", _messages("assistant", text))
        chat.end()
        agent.chat = None

    # -- tool calls ------------------------------------------------------------------------

    def _on_tool_use(self, event: ToolUse) -> None:
        agent = self._agent(event)
        self._chat(agent)  # the call that asked for the tool is under way
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.name,
            "gen_ai.tool.call.id": event.tool_use_id,
            "gen_ai.tool.type": "function" if event.name.startswith(_MCP_PREFIX) else "extension",
        }
        if self._capture:
            attributes["gen_ai.tool.call.arguments"] = _json(event.input)
        self._tools[event.tool_use_id] = self._tracer.start_span(
            f"execute_tool {event.name}",
            context=agent.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )

    def _on_tool_result(self, event: ToolResult) -> None:
        span = self._tools.pop(event.tool_use_id, None)
        if span is None:
            return
        if event.is_error:
            span.set_status(Status(StatusCode.ERROR, "the tool call failed"))
            span.set_attribute("error.type", "tool_error")
        if self._capture:
            span.set_attribute("gen_ai.tool.call.result", _json(event.content))
        span.end()

    # -- subagents -------------------------------------------------------------------------

    def _on_subagent_started(self, event: SubagentStarted) -> None:
        parent = self._tools.get(event.tool_use_id or "")
        context = trace.set_span_in_context(parent) if parent is not None else self._root.context
        name = event.task_type or "subagent"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": event.task_id,
        }
        if self._conversation is not None:
            attributes["gen_ai.conversation.id"] = self._conversation
        if self._capture:
            attributes["gen_ai.agent.description"] = redact_text(event.description)
        span = self._tracer.start_span(
            f"invoke_agent {name}", context=context, kind=SpanKind.INTERNAL, attributes=attributes
        )
        earlier = self._agents.get(event.task_id)
        self._agents[event.task_id] = _Agent(
            span=span,
            context=trace.set_span_in_context(span),
            chat=earlier.chat if earlier is not None else None,
        )

    def _on_subagent_completed(self, event: SubagentCompleted) -> None:
        agent = self._agents.pop(event.task_id, None)
        if agent is None or agent.span is self._root.span:
            return
        if agent.chat is not None:
            agent.chat.end()
        agent.span.set_attribute("claude_trio.subagent.status", event.status)
        if event.status in _SUBAGENT_FAILED:
            agent.span.set_status(Status(StatusCode.ERROR, f"the subagent {event.status}"))
            agent.span.set_attribute("error.type", event.status)
        agent.span.end()

    # -- the execution's side events -------------------------------------------------------

    def _on_ready(self, event: AdapterReady) -> None:
        if event.model is not None:
            self._request_model = event.model
            self._root.span.set_attribute("gen_ai.request.model", event.model)

    def _on_turn_started(self, event: TurnStarted) -> None:
        self._conversation_id(event.session_id)

    def _conversation_id(self, session_id: str | None) -> None:
        if session_id is not None and session_id != self._conversation:
            self._conversation = session_id
            self._root.span.set_attribute("gen_ai.conversation.id", session_id)

    def _on_request(self, event: UserInputRequest) -> None:
        span = self._tools.get(event.tool_use_id or "", self._root.span)
        attributes: dict[str, Any] = {
            "claude_trio.request.id": event.request_id,
            "claude_trio.request.source": event.source,
        }
        if event.tool_name is not None:
            attributes["gen_ai.tool.name"] = event.tool_name
        span.add_event("claude_trio.user_input.requested", attributes)
        self._requests[event.request_id] = (span, trio.current_time())

    def _on_resolved(self, event: UserInputResolved) -> None:
        span, asked_at = self._requests.pop(event.request_id, (self._root.span, None))
        if not span.is_recording():
            span = self._root.span
        attributes: dict[str, Any] = {
            "claude_trio.request.id": event.request_id,
            "claude_trio.request.outcome": event.outcome,
            "claude_trio.request.answered_by": _ANSWERED_BY.get(event.outcome, self.answerer),
        }
        if asked_at is not None:
            attributes["claude_trio.request.wait_seconds"] = trio.current_time() - asked_at
        span.add_event("claude_trio.user_input.resolved", attributes)

    def _on_push(self, event: UserMessage) -> None:
        self._pushes.add(event.uuid)
        attributes: dict[str, Any] = {"claude_trio.push.uuid": event.uuid}
        if event.images:
            attributes["claude_trio.push.images"] = event.images
        if self._capture:
            attributes["gen_ai.input.messages"] = _messages("user", event.text)
        self._root.span.add_event("claude_trio.push.accepted", attributes)

    def _on_warning(self, event: WarningEvent) -> None:
        if event.code == "push_undelivered":
            for uuid in [uuid for uuid in self._pushes if uuid in event.message]:
                self._pushes.discard(uuid)
                self._root.span.add_event(
                    "claude_trio.push.undelivered", {"claude_trio.push.uuid": uuid}
                )
            return
        attributes = {
            "claude_trio.code": event.code or "",
            "claude_trio.message": redact_text(event.message),
        }
        self._root.span.add_event("claude_trio.warning", attributes)

    def _on_flush(self, event: Flush) -> None:
        attributes: dict[str, Any] = {"claude_trio.compaction.trigger": event.trigger or ""}
        if event.pre_tokens is not None:
            attributes["claude_trio.compaction.pre_tokens"] = event.pre_tokens
        self._root.span.add_event("claude_trio.compaction", attributes)

    def _on_retry(self, event: Retry) -> None:
        attributes: dict[str, Any] = {}
        if event.attempt is not None:
            attributes["claude_trio.retry.attempt"] = event.attempt
        if event.error_status is not None:
            attributes["claude_trio.retry.status"] = event.error_status
        self._root.span.add_event("claude_trio.retry", attributes)

    # -- the end ---------------------------------------------------------------------------

    def _on_result(self, event: Result) -> None:
        self._conversation_id(event.session_id)
        self._usage = event.execution_usage
        for uuid in event.user_message_uuids:
            if uuid in self._pushes:
                self._pushes.discard(uuid)
                self._root.span.add_event(
                    "claude_trio.push.delivered", {"claude_trio.push.uuid": uuid}
                )
        if not event.final:
            return
        if self._capture and event.text is not None:
            self._root.span.set_attribute(
                "gen_ai.output.messages", _messages("assistant", event.text)
            )
        failed = event.is_error or event.outcome is not Outcome.COMPLETED
        self._end(event.outcome, error=failed)

    def _on_aborted(self, event: Aborted) -> None:
        self._conversation_id(event.session_id)
        if event.usage is not None:
            self._usage = add_usage(self._usage, event.usage)
        attributes: dict[str, Any] = {
            "claude_trio.stop.reason": redact_text(event.reason),
            "claude_trio.stop.phase": event.phase or "",
            "claude_trio.outcome": event.outcome.value,
        }
        requested_at = getattr(self.stop_clock, "requested_at", None)
        if requested_at is not None:
            attributes["claude_trio.stop.seconds"] = trio.current_time() - requested_at
        self._root.span.add_event("claude_trio.stop", attributes)
        self._end(event.outcome)

    def _on_error(self, event: Error) -> None:
        if not event.fatal:
            self._root.span.add_event(
                "claude_trio.error",
                {"claude_trio.code": event.code, "claude_trio.message": redact_text(event.message)},
            )
            return
        self._end(event.outcome, error=True, description=redact_text(event.message))

    def _end(
        self, outcome: Outcome | None, *, error: bool = False, description: str | None = None
    ) -> None:
        self._done = True
        for agent in self._agents.values():
            if agent.chat is not None:
                agent.chat.end()
        for span in self._tools.values():
            span.end()
        for agent in self._agents.values():
            if agent.span is not self._root.span:
                agent.span.end()
        if self._root.chat is not None:
            self._root.chat.end()
        self._agents.clear()
        self._tools.clear()
        root = self._root.span
        root.set_attributes(_usage_attributes(self._usage))
        if outcome is not None:
            root.set_attribute("claude_trio.outcome", outcome.value)
        if error and outcome is not None:
            root.set_status(Status(StatusCode.ERROR, description or outcome.value))
            root.set_attribute("error.type", outcome.value)
        root.end()
