"""``claude-trio acp``: an Agent Client Protocol agent on stdio, its sessions on a session host.

Editors (Zed, JetBrains IDEs, Neovim plugins, ...) start an ACP agent as a child process and
speak JSON-RPC to it, one JSON object per line on its stdin and stdout. :func:`serve_editor`
is that agent, over any :class:`~claude_trio.actors.fanout.hosts.SessionHost`: a local fleet
(the sessions live in this process) or a gateway client (``--remote``: they live on a
``claude-trio serve``, and outlive the editor).

**Why trio streams and not the package's connection classes.** The ``agent-client-protocol``
package's ``AgentSideConnection`` runs on asyncio; under trio it would need a bridge
(trio-asyncio), a second event loop for one newline-delimited JSON stream. The framing is a few
lines (``protocol/editor/jsonrpc.py``), so the agent keeps it on trio's own streams and uses the
package for what matters: every message read is validated with the package's pydantic schema
types (a malformed one is answered ``-32602`` naming the field), and every message written is
built from them (``protocol/editor/updates.py``). The tests drive this agent with the
package's own asyncio ``ClientSideConnection``, as an editor would.

One ACP session is one host session: ``session/new`` only records the working directory, MCP
servers and mode; the first ``session/prompt`` opens the host session (labelled with the ACP
session id, which is how ``session/load`` finds it again, on a gateway after the editor
restarted too), and each later prompt continues its conversation (``host.continue_``). A prompt
follows the session's events from the last one it showed, maps each to ``session/update``
notifications and answers with the stop reason of the execution's final event.
The model is a session config option of category ``model`` (``session/set_config_option``),
as the permission mode is the session's mode: each applies to every prompt from the next one
on (a continued conversation runs with the ones chosen meanwhile; choosing the ``default``
model keeps the one the session runs with), and to a running turn where the host has live
controls (a local fleet). A prompt's images go with it, the first or a later one.
Each execution's ``adapter_ready`` carries its prompt, so a load replays the editor's prompts
as ``user_message_chunk`` between the agent's replies, on every host and after this process
restarted; a live prompt leaves out the one the editor just sent. A prompt sent while a turn
that a load found running goes on waits for that turn's end, then continues the conversation.
``session/cancel`` aborts the execution (the stop kills the tools the CLI started, so nothing
runs after it) and the prompt answers ``cancelled``. A tool approval becomes
``session/request_permission``; the editor's choice is the approval's answer. When the approval
is resolved first by someone else (another client of the gateway, an expiry), the editor's
request is dropped: its answer, when it comes, is ignored.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
from acp import schema
from acp.helpers import SessionUpdate
from claude_agent_sdk import (
    InMemorySessionStore,
    get_session_messages_from_store,
    project_key_for_directory,
)
from pydantic import BaseModel

from claude_trio.actors.fanout.hosts import SessionHandle, SessionHost
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PERMISSION_MODES, PermissionMode
from claude_trio.protocol.editor import jsonrpc
from claude_trio.protocol.editor.history import find_transcript, read_entries, transcript_updates
from claude_trio.protocol.editor.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Notification,
    Request,
    Response,
)
from claude_trio.protocol.editor.prompts import mcp_servers, prompt_parts
from claude_trio.protocol.editor.updates import (
    MODEL_CHOICES,
    MODEL_OPTION,
    UpdateMapper,
    initialize_response,
    model_option,
    permission_answer,
    permission_request,
    session_modes,
    stop_reason,
    turn_failed,
)
from claude_trio.protocol.errors import ClaudeTrioError, EditorRequestError, ReplayGapError
from claude_trio.protocol.fanout.wire import SessionInfo
from claude_trio.protocol.session.events import (
    AdapterReady,
    Event,
    UserInputRequest,
    UserInputResolved,
    is_terminal,
)

__all__ = ["MAX_LINE", "ParamsFactory", "serve_editor"]

MAX_LINE = 50 * 1024 * 1024
"""The longest line read from the editor (images travel inline, base64)."""

ParamsFactory = Callable[..., ExecuteParams]
"""Builds a session's parameters: ``factory(prompt=..., cwd=..., mcp_servers=...,
permission_mode=..., model=..., images=...)``."""

_LABEL_PREFIX = "acp:"


@attrs.define(eq=False, kw_only=True)
class _Session:
    """One ACP session, as this agent knows it."""

    id: str
    cwd: str
    mcp: dict[str, dict[str, Any]]
    mode: PermissionMode
    model: str | None = None
    host_id: str | None = None
    #: loaded from the CLI's transcript, the host having forgotten it: the first prompt
    #: resumes the conversation by its id
    resume: bool = False
    last_seq: int | None = None
    mapper: UpdateMapper = attrs.field(factory=UpdateMapper)
    handle: SessionHandle | None = None
    #: an execution is followed here (a prompt's, or one a load found running)
    running: bool = False
    #: a ``session/prompt`` is in flight (one at a time)
    prompting: bool = False
    #: set when the turn a load found running has ended here (None: no such turn)
    loaded_turn: trio.Event | None = None
    #: the prompt the editor sent, until its ``adapter_ready`` came (it is not echoed back)
    own_prompt: str | None = None
    cancelled: bool = False
    #: approval request id -> the scope of the task asking the editor
    asking: dict[str, trio.CancelScope] = attrs.field(factory=dict)
    seen_requests: set[str] = attrs.field(factory=set)
    #: while a load replays a running turn: the requests seen so far and not resolved yet,
    #: asked once the replay has caught up (None: not replaying, ask at once)
    deferred: dict[str, UserInputRequest] | None = None


@attrs.define(eq=False)
class _Pending:
    """A request this agent sent the editor, waiting for its response."""

    done: trio.Event = attrs.field(factory=trio.Event)
    response: Response | None = None


class _Agent:
    def __init__(
        self,
        host: SessionHost,
        out: trio.abc.SendStream,
        nursery: trio.Nursery,
        *,
        make_params: ParamsFactory,
        permission_mode: PermissionMode,
        version: str | None,
        transcripts: Path | None,
    ) -> None:
        self._host = host
        self._transcripts = transcripts
        self._out = out
        self._write_lock = trio.Lock()
        self._nursery = nursery
        self._make_params = make_params
        self._mode = permission_mode
        self._version = version
        self._sessions: dict[str, _Session] = {}
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)

    # -- output --------------------------------------------------------------------------------

    async def _write(self, line: bytes) -> None:
        async with self._write_lock:
            await self._out.send_all(line)

    async def _notify(self, session_id: str, update: SessionUpdate) -> None:
        note = schema.SessionNotification(session_id=session_id, update=update)
        await self._write(jsonrpc.encode_notification("session/update", note))

    async def _call(self, method: str, params: BaseModel) -> Response:
        """Send the editor a request and wait for its response (cancel the wait to drop it)."""
        id_ = next(self._ids)
        pending = self._pending[id_] = _Pending()
        try:
            await self._write(jsonrpc.encode_request(id_, method, params))
            await pending.done.wait()
        finally:
            del self._pending[id_]
        assert pending.response is not None
        return pending.response

    # -- input ---------------------------------------------------------------------------------

    async def dispatch(self, line: bytes) -> None:
        await trio.lowlevel.checkpoint()
        try:
            message = jsonrpc.decode_line(line)
        except EditorRequestError as exc:
            await self._write(jsonrpc.encode_error(exc.id, exc.code, exc.message))
            return
        match message:
            case Request():
                self._nursery.start_soon(self._answer, message)
            case Notification(method="session/cancel"):
                try:
                    cancel = jsonrpc.parse_params(schema.CancelNotification, message.params)
                except EditorRequestError:
                    return  # a notification gets no answer, even an error
                self._cancel(cancel.session_id)
            case Notification():
                pass  # unknown notifications are ignored, as JSON-RPC asks
            case Response():
                pending = self._pending.get(message.id) if isinstance(message.id, int) else None
                if pending is not None:  # else: a request we dropped, answered late
                    pending.response = message
                    pending.done.set()

    async def _answer(self, request: Request) -> None:
        handlers: Mapping[str, Callable[[Any], Any]] = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "session/new": self._new,
            "session/load": self._load,
            "session/prompt": self._prompt,
            "session/set_mode": self._set_mode,
            "session/set_config_option": self._set_config_option,
        }
        handler = handlers.get(request.method)
        try:
            if handler is None:
                raise EditorRequestError(METHOD_NOT_FOUND, f"no method {request.method!r}")
            params = jsonrpc.parse_params(
                jsonrpc.AGENT_REQUESTS[request.method], request.params, id=request.id
            )
            result = await handler(params)
        except EditorRequestError as exc:
            await self._write(jsonrpc.encode_error(request.id, exc.code, exc.message))
        except ClaudeTrioError as exc:
            code = INVALID_PARAMS if isinstance(exc, ValueError) else INTERNAL_ERROR
            await self._write(jsonrpc.encode_error(request.id, code, str(exc)))
        else:
            await self._write(jsonrpc.encode_result(request.id, result))

    # -- methods -------------------------------------------------------------------------------

    async def _initialize(self, _params: schema.InitializeRequest) -> BaseModel:
        await trio.lowlevel.checkpoint()
        return initialize_response(self._version)

    async def _authenticate(self, _params: schema.AuthenticateRequest) -> BaseModel:
        await trio.lowlevel.checkpoint()
        return schema.AuthenticateResponse()

    async def _new(self, params: schema.NewSessionRequest) -> BaseModel:
        await trio.lowlevel.checkpoint()
        session = _Session(
            id=_new_id(),
            cwd=params.cwd,
            mcp=mcp_servers(params.mcp_servers),
            mode=self._mode,
        )
        self._sessions[session.id] = session
        return schema.NewSessionResponse(
            session_id=session.id,
            modes=session_modes(session.mode),
            config_options=[model_option(session.model)],
        )

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise EditorRequestError(
                INVALID_PARAMS, f"no session {session_id!r} (session/new or session/load it first)"
            )
        return session

    async def _set_mode(self, params: schema.SetSessionModeRequest) -> BaseModel:
        await trio.lowlevel.checkpoint()
        session = self._session(params.session_id)
        if params.mode_id not in PERMISSION_MODES:
            raise EditorRequestError(
                INVALID_PARAMS,
                f"no mode {params.mode_id!r}; one of {', '.join(PERMISSION_MODES)}",
            )
        mode: PermissionMode = params.mode_id
        session.mode = mode
        controls = _live_controls(session.handle) if session.running else None
        if controls is not None:
            await controls.set_permission_mode(mode)
        return schema.SetSessionModeResponse()

    async def _set_config_option(
        self, params: schema.SetSessionConfigOptionSelectRequest
    ) -> BaseModel:
        await trio.lowlevel.checkpoint()
        session = self._session(params.session_id)
        if params.config_id != MODEL_OPTION:
            raise EditorRequestError(
                INVALID_PARAMS, f"no config option {params.config_id!r}; 'model'"
            )
        if params.value not in MODEL_CHOICES:
            raise EditorRequestError(
                INVALID_PARAMS, f"no model {params.value!r}; one of {', '.join(MODEL_CHOICES)}"
            )
        session.model = None if params.value == "default" else params.value
        controls = _live_controls(session.handle) if session.running else None
        if controls is not None:
            await controls.set_model(session.model)
        return schema.SetSessionConfigOptionResponse(config_options=[model_option(session.model)])

    async def _load(self, params: schema.LoadSessionRequest) -> BaseModel:
        info = await self._find(params.session_id)
        session = _Session(
            id=params.session_id,
            cwd=params.cwd,
            mcp=mcp_servers(params.mcp_servers),
            mode=self._mode,
            host_id=None if info is None else info.session,
        )
        if info is not None and info.state != "ended":
            self._sessions[session.id] = session
            session.handle = handle = await self._host.get(info.session)
            # A turn is running (the editor restarted mid-turn): what happened so far is the
            # load; the rest follows as the turn goes on.
            ready = trio.Event()
            session.loaded_turn = trio.Event()
            self._nursery.start_soon(self._follow_running, session, handle, info.last_seq, ready)
            await ready.wait()
        else:
            replayed = False
            if info is not None:
                session.handle = await self._host.get(info.session)
                # from the first event (a gap when the host evicted it) where a transcript can
                # stand in; else what the host holds
                replayed = await self._replay(session, 0 if self._transcripts else None)
            if not replayed:
                updates = await self._transcript_updates(session.id)
                if updates is not None:
                    for update in updates:
                        await self._notify(session.id, update)
                    if info is not None:
                        session.last_seq = info.last_seq
                    else:
                        session.resume = True
                elif info is None or not await self._replay(session, None):
                    raise self._unknown(session.id)
            self._sessions[session.id] = session
        return schema.LoadSessionResponse(
            modes=session_modes(session.mode), config_options=[model_option(session.model)]
        )

    async def _replay(self, session: _Session, after: int | None) -> bool:
        """Show the ended session's events after ``after`` (None: all the host holds); False
        when the host no longer holds the first of them."""
        handle = session.handle
        assert handle is not None
        try:
            async with handle.subscribe(after) as events:
                async for event in events:
                    await self._show(session, handle, event, None)
        except ReplayGapError:
            await trio.lowlevel.checkpoint()
            return False
        return True

    def _unknown(self, session_id: str) -> EditorRequestError:
        where = (
            f"nor a transcript of it in {self._transcripts / 'projects'}"
            if self._transcripts is not None
            else "and this agent reads no transcripts"
        )
        return EditorRequestError(
            INVALID_PARAMS,
            f"no session {session_id!r} on this host: it holds none of its events ({where}); "
            "the session ran elsewhere, or was deleted",
        )

    async def _transcript_updates(self, session_id: str) -> list[SessionUpdate] | None:
        config = self._transcripts
        if config is None:
            await trio.lowlevel.checkpoint()
            return None
        path = await trio.to_thread.run_sync(find_transcript, config, session_id)
        if path is None:
            return None
        entries = await trio.to_thread.run_sync(read_entries, path)
        # the SDK's reading of a conversation (its chain of messages, rewinds left out)
        store = InMemorySessionStore()
        key = {"project_key": project_key_for_directory("/"), "session_id": session_id}
        await store.append(key, entries)  # type: ignore[arg-type]
        messages = await get_session_messages_from_store(store, session_id, directory="/")
        return transcript_updates(messages)

    async def _follow_running(
        self, session: _Session, handle: SessionHandle, upto: int, ready: trio.Event
    ) -> None:
        session.running = True
        session.deferred = {}
        try:
            async with trio.open_nursery() as asks, handle.subscribe(None) as events:
                async for event in events:
                    await self._show(session, handle, event, asks)
                    if event.seq >= upto and session.deferred is not None:
                        # caught up: ask what is still waiting (one resolved during the
                        # turn so far was answered already, it is not asked again)
                        waiting, session.deferred = session.deferred, None
                        for request in waiting.values():
                            self._start_ask(session, handle, request, asks)
                        ready.set()
        finally:
            ready.set()
            session.running = False
            session.deferred = None
            if session.loaded_turn is not None:
                session.loaded_turn.set()

    async def _find(self, session_id: str) -> SessionInfo | None:
        for info in await self._host.list():
            if info.label == _LABEL_PREFIX + session_id:
                return info
        return None

    async def _prompt(self, params: schema.PromptRequest) -> BaseModel:
        session = self._session(params.session_id)
        if session.prompting:
            raise EditorRequestError(
                INVALID_REQUEST,
                "a prompt is already running in this session (wait for its answer, or "
                "session/cancel it)",
            )
        text, images = prompt_parts(params.prompt)
        session.prompting = True
        session.cancelled = False
        try:
            if session.loaded_turn is not None:
                # a load found a turn running: this prompt continues the conversation once
                # that turn has ended (a cancel meanwhile stops that turn, and this prompt)
                await session.loaded_turn.wait()
                session.loaded_turn = None
                if session.cancelled:
                    return schema.PromptResponse(stop_reason="cancelled")
            session.running = True
            session.own_prompt = text
            if session.host_id is None:
                # the CLI runs under the ACP session's id: its transcript is found by it
                ids = {"resume_session_id" if session.resume else "session_id": session.id}
                handle = await self._host.open(
                    self._make_params(
                        **ids,
                        prompt=text,
                        cwd=session.cwd,
                        mcp_servers=session.mcp,
                        permission_mode=session.mode,
                        model=session.model,
                        images=images,
                    ),
                    label=_LABEL_PREFIX + session.id,
                )
                session.host_id = handle.id
                session.resume = False
            else:  # the mode and model chosen now (None: the model kept), with the images
                handle = await self._host.continue_(
                    session.host_id,
                    text,
                    model=session.model,
                    permission_mode=session.mode,
                    images=images,
                )
            session.handle = handle
            if session.cancelled:  # cancelled while the execution was being started
                self._nursery.start_soon(handle.abort)
            terminal: Event | None = None
            async with trio.open_nursery() as asks:
                async with handle.subscribe(session.last_seq) as events:
                    async for event in events:
                        await self._show(session, handle, event, asks)
                        if is_terminal(event):
                            terminal = event
                asks.cancel_scope.cancel()
            if terminal is None:
                raise turn_failed("the session's events ended without a final event")
            return schema.PromptResponse(
                stop_reason=stop_reason(terminal, cancelled=session.cancelled)
            )
        finally:
            session.running = session.prompting = False
            session.own_prompt = None

    async def _show(
        self,
        session: _Session,
        handle: SessionHandle,
        event: Event,
        asks: trio.Nursery | None,
    ) -> None:
        """Show one event to the editor; a pending approval is asked (``asks`` is None for a
        replay of a finished session: nothing is pending there)."""
        await trio.lowlevel.checkpoint()
        if session.last_seq is not None and event.seq <= session.last_seq:
            if not isinstance(event, UserInputRequest):
                return  # a pending question shown again ahead of a replay
        else:
            session.last_seq = event.seq
        own = session.own_prompt
        if isinstance(event, AdapterReady) and own is not None and event.prompt == own:
            session.own_prompt = None  # the prompt the editor just sent: not echoed back
            return
        for update in session.mapper.updates(event):
            await self._notify(session.id, update)
        if isinstance(event, UserInputRequest) and asks is not None:
            if session.deferred is not None:
                session.deferred[event.request_id] = event
            else:
                self._start_ask(session, handle, event, asks)
        elif isinstance(event, UserInputResolved):
            if session.deferred is not None:
                session.deferred.pop(event.request_id, None)
            resolved = session.asking.pop(event.request_id, None)
            if resolved is not None:
                resolved.cancel()  # resolved elsewhere: the editor's answer is dropped

    def _start_ask(
        self,
        session: _Session,
        handle: SessionHandle,
        request: UserInputRequest,
        asks: trio.Nursery,
    ) -> None:
        if request.request_id in session.seen_requests:
            return
        session.seen_requests.add(request.request_id)
        scope = trio.CancelScope()
        session.asking[request.request_id] = scope
        asks.start_soon(self._ask, session, handle, request, scope)

    async def _ask(
        self,
        session: _Session,
        handle: SessionHandle,
        request: UserInputRequest,
        scope: trio.CancelScope,
    ) -> None:
        await trio.lowlevel.checkpoint()
        with scope:
            if request.source != "tool_permission":
                # The protocol has no questions nor forms for an agent to ask: no answer.
                answer: Any = {} if request.source == "model-tool" else {"action": "decline"}
            else:
                response = await self._call(
                    "session/request_permission", permission_request(session.id, request)
                )
                if response.error is not None:
                    answer = {"decision": "deny", "message": "The editor could not answer."}
                else:
                    try:
                        chosen = jsonrpc.parse_params(
                            schema.RequestPermissionResponse, response.result
                        )
                    except EditorRequestError:
                        answer = {"decision": "deny", "message": "The editor's answer was invalid."}
                    else:
                        answer = permission_answer(chosen)
            # None: resolved elsewhere (or cancelled) as the editor answered, nothing to send
            if session.asking.pop(request.request_id, None) is not None:
                with trio.CancelScope(shield=True):
                    await handle.answer(request.request_id, answer)

    def _cancel(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is None or not (session.running or session.prompting):
            return
        session.cancelled = True
        for scope in session.asking.values():
            scope.cancel()
        session.asking.clear()
        if session.running and session.handle is not None:
            # (a prompt still starting its execution aborts it once started)
            self._nursery.start_soon(session.handle.abort)


def _live_controls(handle: SessionHandle | None) -> Any:
    controls = getattr(handle, "live_controls", None)
    return controls() if callable(controls) else None


def _new_id() -> str:
    import uuid

    return str(uuid.uuid4())


class _LineReader:
    """Lines of a byte stream, the newline dropped; blank lines skipped."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._eof = False

    async def next_line(self) -> bytes | None:
        """The next line (None at the end of the stream)."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                if line.strip():
                    await trio.lowlevel.checkpoint()
                    return line
                continue
            if self._eof:
                await trio.lowlevel.checkpoint()
                line = bytes(self._buffer)
                self._buffer.clear()
                return line if line.strip() else None
            if len(self._buffer) > MAX_LINE:
                raise EditorRequestError(INVALID_REQUEST, f"a line longer than {MAX_LINE} bytes")
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                self._eof = True
            self._buffer += chunk


async def serve_editor(
    host: SessionHost,
    stdin: trio.abc.ReceiveStream,
    stdout: trio.abc.SendStream,
    *,
    make_params: ParamsFactory,
    permission_mode: PermissionMode = "default",
    version: str | None = None,
    transcripts: Path | None = None,
) -> None:
    """Be an ACP agent on ``stdin`` / ``stdout`` until the editor closes ``stdin``.

    Sessions run on ``host``; ``make_params`` builds each one's parameters, sessions start in
    ``permission_mode``. ``transcripts``: the config folder of the host's CLIs
    (``CLAUDE_CONFIG_DIR``), where ``session/load`` reads a conversation whose events the
    host no longer holds (None: the load shows what the host holds, or fails). Returning
    cancels what is still running here: prompts in flight are left to the host (a gateway's
    sessions go on; a local fleet's end with it)."""
    async with trio.open_nursery() as nursery:
        agent = _Agent(
            host,
            stdout,
            nursery,
            make_params=make_params,
            permission_mode=permission_mode,
            version=version,
            transcripts=transcripts,
        )
        lines = _LineReader(stdin)
        while (line := await lines.next_line()) is not None:
            await agent.dispatch(line)
        nursery.cancel_scope.cancel()
