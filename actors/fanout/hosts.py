"""The session-host interface: what every place that hosts sessions offers, whichever it is.

A *session host* starts sessions, finds them again by id and lists them; a *session handle*
is one session of a host: you push to it, answer its questions, abort it, follow its events
and wait for its result. Three hosts implement it, with the same names and the same meaning:

==================  ==============================  ==================================
host                handle                          where the sessions run
==================  ==============================  ==================================
``Fleet``           ``FleetSession``                this process (``open_fleet``)
``RedisFleet``      ``RedisSession``                a cluster's workers (``open_redis_fleet``)
``GatewayClient``   ``RemoteSession``               behind a gateway (``connect_gateway``)
==================  ==============================  ==================================

::

    async def review(host: SessionHost, path: str) -> str:
        handle = await host.open(ExecuteParams(prompt=f"review {path}"), label=path)
        transcript = await handle.result()          # waits for the execution's final event
        return transcript.text

Code written against :class:`SessionHost` runs on any of them (``run_batch`` does), and
``claude_trio.testing.host_conformance`` checks that a host keeps every promise below: run it
against a host of your own.

The promises:

* ``await host.open(params, label=None)`` starts a session (it runs as soon as the host has
  room; ``open`` never waits for that) and returns its handle.
* ``await host.continue_(session_id, prompt)`` runs the next execution of an ended session's
  conversation; its events continue the session's ``seq``. A session still running, or one
  with no conversation to resume, is refused with a ``ClaudeTrioError``. ``model=`` and
  ``permission_mode=`` replace the session's from that execution on (``None``: kept), and
  ``images=`` go with the prompt, checked as ``ExecuteParams`` checks them.
* Both take ``idempotency_key=``: the same request again with the key returns the session the
  first one created and starts nothing; the key with another request raises
  ``IdempotencyConflictError`` (``protocol/fanout/idempotency.py``).
* ``await host.get(session_id)`` is the handle of a session the host knows;
  ``UnknownSessionError`` (a ``KeyError`` too) when it knows none by that id.
* ``await host.list()`` is a :class:`~claude_trio.protocol.fanout.wire.SessionInfo` per session,
  oldest first: state, label, executions, first and last seq, usage, created and ended times.
* ``handle.subscribe(last_seq=None)`` is an async context manager yielding a receive channel
  of the session's events: exactly those with a seq above ``last_seq`` (everything the host
  still holds for ``None``), then live ones, ending after the current execution's final event.
  Questions still pending may be shown again ahead of the replay. When the host no longer
  holds the events after ``last_seq``, entering raises
  :class:`~claude_trio.protocol.errors.ReplayGapError`. A consumer that falls behind costs a
  replay, never unbounded memory.
* ``await handle.result()`` waits for the current execution's final event and returns its
  :class:`~claude_trio.protocol.session.transcript.Transcript`.
* ``await handle.push(text, images=())`` is ``Accepted`` or ``Rejected(reason)`` (a session
  waiting for room, or whose execution ended, rejects), decided at once.
* ``await handle.answer(request_id, answer)`` answers a pending ``user_input_request``.
* ``await handle.abort()`` ends the current execution with exactly one ``aborted`` event and
  returns once that event is the host's; after the end it does nothing.
* ``host.inbox()`` is an async context manager yielding an
  :class:`~claude_trio.actors.fanout.inbox.InboxChannel`: the user-input requests (tool
  approvals, questions, elicitations) waiting across every session the caller may see, as a
  snapshot first, then each arrival and resolution (answered, here or elsewhere; expired;
  cancelled; withdrawn; failed; ``ended`` with its execution), each request leaving exactly
  once (``protocol/fanout/inbox.py``). ``inbox.answer(session_id, request_id, answer)`` goes
  through the session's broker, as ``handle.answer`` does (the first answer wins, the deadline
  is the request's). A consumer that falls behind gets a fresh snapshot, never unbounded memory.
* ``handle.usage`` is every turn of every execution so far (interrupted turns included), as the
  host knows it: the same figures on every host, and the ``usage`` that ``list`` shows.

A gateway serves a host through the wider :class:`ServedHost`: owners (who opened a session:
fair turns, principals, per-client limits), a subscription that never waits (one writer per
client follows many sessions), and what its ``hello`` says. ``Fleet`` and ``RedisFleet`` are
served hosts. What differs between them is declared, not found out by type: a session whose host
offers live controls (``set_model``, ``set_permission_mode``) returns them from
``live_controls()``, one that does not returns ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

import trio

from claude_trio.actors.extensions.broker import AnswerAccepted, AnswerRejected
from claude_trio.actors.fanout.fleet import HostDescription, HostLoad
from claude_trio.actors.fanout.inbox import InboxChannel, MaySee
from claude_trio.actors.fanout.subscription import ResyncRequired, Subscription
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PermissionMode
from claude_trio.protocol.fanout.wire import SessionInfo, SessionState
from claude_trio.protocol.session.events import Event
from claude_trio.protocol.session.lifecycle import Accepted, Rejected
from claude_trio.protocol.session.transcript import Transcript
from claude_trio.protocol.session.usage import Usage

__all__ = [
    "HostDescription",
    "HostLoad",
    "LiveControls",
    "ServedHost",
    "ServedSession",
    "SessionHandle",
    "SessionHost",
]


@runtime_checkable
class SessionHandle(Protocol):
    """One session of a :class:`SessionHost` (see the module docstring for the promises)."""

    @property
    def id(self) -> str:
        """The session's id, as ``host.get`` and ``host.list`` know it."""
        ...

    @property
    def usage(self) -> Usage:
        """Every turn of every execution so far, interrupted turns included."""
        ...

    async def push(
        self, text: str, *, images: Sequence[ImageInput] = ()
    ) -> Accepted | Rejected: ...

    async def answer(self, request_id: str, answer: Any) -> AnswerAccepted | AnswerRejected: ...

    async def abort(self) -> None: ...

    def subscribe(
        self, last_seq: int | None = None
    ) -> AbstractAsyncContextManager[trio.abc.ReceiveChannel[Event]]: ...

    async def result(self) -> Transcript: ...


@runtime_checkable
class SessionHost(Protocol):
    """Where sessions run: a local fleet, a Redis cluster, a gateway (module docstring)."""

    async def open(
        self, params: ExecuteParams, *, label: str | None = None, idempotency_key: str | None = None
    ) -> SessionHandle: ...

    async def continue_(
        self,
        session_id: str,
        prompt: str,
        *,
        idempotency_key: str | None = None,
        model: str | None = None,
        permission_mode: PermissionMode | None = None,
        images: Sequence[ImageInput] = (),
    ) -> SessionHandle: ...

    async def get(self, session_id: str) -> SessionHandle: ...

    async def list(self) -> Sequence[SessionInfo]: ...

    def inbox(self) -> AbstractAsyncContextManager[InboxChannel]:
        """The requests waiting across the sessions the caller may see (module docstring)."""
        ...


# -- what a gateway needs of the host it serves ---------------------------------------------------


class LiveControls(Protocol):
    """Switches of a running execution that a host may offer
    (``protocol/extensions/controls.py``)."""

    async def set_model(self, model: str | None) -> None: ...

    async def set_permission_mode(self, mode: PermissionMode) -> None: ...


@runtime_checkable
class ServedSession(SessionHandle, Protocol):
    """A session of a :class:`ServedHost`: a handle, plus what a gateway reads and follows."""

    @property
    def owner(self) -> Hashable:
        """Who opened it (``open(owner=...)``; a gateway's ``GatewayOwner``)."""
        ...

    @property
    def state(self) -> SessionState: ...

    @property
    def ended(self) -> bool: ...

    @property
    def executions(self) -> int: ...

    @property
    def first_seq(self) -> int: ...

    @property
    def last_seq(self) -> int: ...

    def live_controls(self) -> LiveControls | None:
        """The session's live controls, or ``None`` when its host offers none."""
        ...

    def subscribe_nowait(
        self,
        last_seq: int | None,
        *,
        max_queue: int,
        max_bytes: int = ...,
        notify: Callable[[], None] | None = None,
    ) -> Subscription | ResyncRequired:
        """A subscription decided at once, that never waits for its consumer: ``notify`` is
        called when it becomes readable (not for each event queued behind the first unread
        one), was dropped or ended (see ``Fleet``)."""
        ...


@runtime_checkable
class ServedHost(SessionHost, Protocol):
    """A host a gateway can serve (``serve_gateway``): ``Fleet`` and ``RedisFleet``."""

    @property
    def accepting(self) -> bool:
        """False once the host starts nothing new (it is draining or closed)."""
        ...

    async def open(
        self,
        params: ExecuteParams,
        *,
        label: str | None = None,
        owner: Hashable = None,
        idempotency_key: str | None = None,
    ) -> ServedSession: ...

    async def continue_(
        self,
        session_id: str,
        prompt: str,
        *,
        idempotency_key: str | None = None,
        model: str | None = None,
        permission_mode: PermissionMode | None = None,
        images: Sequence[ImageInput] = (),
    ) -> ServedSession: ...

    async def get(self, session_id: str) -> ServedSession: ...

    async def load(self, owner: Hashable) -> HostLoad: ...

    async def describe(self) -> HostDescription: ...

    def inbox_nowait(
        self,
        *,
        may_see: MaySee | None = None,
        max_changes: int = ...,
        notify: Callable[[], None] | None = None,
    ) -> InboxChannel:
        """An inbox decided at once, of the sessions whose principal ``may_see`` admits;
        ``notify`` is called whenever it becomes readable (a gateway's writer)."""
        ...
