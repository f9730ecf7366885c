"""A warm pool: pre-started, initialized CLI processes handed to new sessions.

Starting a session costs a process spawn plus the CLI's ``initialize`` handshake (~0.25 s and
~0.3 CPU-s on the real CLI) before the model sees the prompt. A pool does that ahead of time for
sessions that share one configuration (everything but the prompt)::

    async with open_cli_pool(template_params, size=2) as pool:
        async with open_session(ExecuteParams(prompt="..."), pool=pool) as session:
            ...

The TypeScript SDK has ``startup()`` for this; the Python SDK has nothing, so the pool is built
from the same pieces as a session:

* Each slot is one task that connects a ``ClaudeSDKClient`` and later disconnects it: the SDK
  wants both in one task, so the slot keeps the client while a session only *leases* it. The
  leasing session's driver drains the client's stream; at the end it releases the lease, and
  the slot disconnects and starts a fresh process.
* What a CLI's callbacks reach (``can_use_tool``, elicitations through the tap, stderr) is fixed
  when it connects, before anyone leases it. So they point at a :class:`_Route`, which the lease
  attaches to the session's broker and stderr collector.
* Leasing is synchronous and never waits: with no warm CLI ready, the session starts cold as
  usual (``statistics()`` counts hits and misses).

Sessions must end before their pool closes; a lease still running when the pool closes loses
its CLI (its session gets the ``cli_exited`` error).
"""

from __future__ import annotations

import collections
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from claude_trio.actors.extensions.broker import UserInputBroker
from claude_trio.actors.extensions.scope import probe_sandbox
from claude_trio.actors.session.boundary import open_block_nursery
from claude_trio.actors.session.core import DriverConfig, SessionCore, stop_gate
from claude_trio.actors.session.driver import (
    connect_client,
    drain_client,
    root_refusal,
    shut_down,
    subprocess_transport,
)
from claude_trio.actors.session.sdk_private import client_options
from claude_trio.actors.session.stopper import start_stopper
from claude_trio.actors.session.tap import TapTransport
from claude_trio.protocol.checks import check_env, check_int
from claude_trio.protocol.config.options import build_options, with_changes
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.ready import scope_refusal
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.approvals import ASKING_MODES
from claude_trio.protocol.extensions.user_input import ASK_USER_TOOL
from claude_trio.protocol.session.transport import TransportFactory

UNROUTED_DENIAL = "No session is attached to this CLI to approve the tool call."
_EARLY_FRAMES = 64

# Backoff after a slot failed to start a CLI, so a broken setup does not spin.
_RETRY_FIRST = 0.5
_RETRY_MAX = 30.0


@attrs.define(eq=False)
class _Route:
    """Where a warm CLI's callbacks go: nowhere until leased, then to the leasing session."""

    broker: UserInputBroker | None = None
    stderr: Callable[[str], None] | None = None
    core: SessionCore | None = None
    # Frames a CLI wrote before anyone leased it (it should write none); handed on at attach.
    early: collections.deque[dict[str, Any]] = attrs.field(
        factory=lambda: collections.deque(maxlen=_EARLY_FRAMES)
    )

    def deliver(self, frame: dict[str, Any]) -> bool:
        if self.core is None:
            self.early.append(frame)
            return False
        return self.core.deliver(frame)

    async def wait_writable(self) -> None:
        if self.core is None:
            await trio.lowlevel.checkpoint()
            return
        await self.core.wait_writable()

    @property
    def exit_expected(self) -> bool:
        # Unleased, the pool is closing it; leased, the session decides.
        return self.core is None or self.core.exit_expected

    def output_ended(self) -> None:
        if self.core is not None:
            self.core.output_ended()

    async def can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        if self.broker is None:
            await trio.lowlevel.checkpoint()
            if tool_name == ASK_USER_TOOL:
                return PermissionResultAllow(updated_input=tool_input)
            # A tool approval with no session to ask: nobody approved it.
            return PermissionResultDeny(message=UNROUTED_DENIAL)
        return await self.broker.can_use_tool(tool_name, tool_input, context)

    async def on_elicitation(self, frame: dict[str, Any]) -> None:
        if self.broker is None:
            await trio.lowlevel.checkpoint()
            return
        await self.broker.on_elicitation(frame)

    def on_cancel(self, request_id: str) -> bool:
        return self.broker is not None and self.broker.on_cancel(request_id)

    async def pre_tool_use(self, hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        if self.core is None:  # an unleased CLI runs no turn
            await trio.lowlevel.checkpoint()
            return {}
        return await stop_gate(self.core.lifecycle)(hook_input, tool_use_id, context)

    def on_stderr(self, line: str) -> None:
        if self.stderr is not None:
            self.stderr(line)


@attrs.define(eq=False)
class Lease:
    """A connected CLI lent to one session. ``release()`` gives it back (it is then retired)."""

    client: ClaudeSDKClient
    tap: TapTransport
    route: _Route
    options: ClaudeAgentOptions
    released: trio.Event = attrs.field(factory=trio.Event)
    leased: bool = False
    # Whether the CLI had nothing running when it was given back (it may then exit on the end
    # of its input; otherwise it is killed at once).
    settled: bool = True

    def attach(
        self,
        *,
        core: SessionCore,
        broker: UserInputBroker | None,
        stderr: Callable[[str], None] | None,
    ) -> None:
        self.route.broker = broker
        self.route.stderr = stderr
        self.route.core = core
        while self.route.early:
            core.deliver(self.route.early.popleft())

    def release(self, *, settled: bool = True) -> None:
        self.route.broker = None
        self.route.stderr = None
        self.route.core = None
        self.settled = settled
        self.released.set()


async def run_leased_driver(
    core: SessionCore,
    lease: Lease,
    *,
    task_status: trio.TaskStatus[ClaudeSDKClient | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The driver for a warm CLI from a pool: already connected, disconnected by its pool slot
    (the SDK wants connect and disconnect in one task). Reads until the execution ends, stops
    the CLI as :func:`~.driver.run_sdk_driver` does, then gives the lease back.

    Channels, cancellation and error handling as :func:`~.driver.run_sdk_driver`.
    """
    try:
        async with trio.open_nursery() as nursery:
            start_stopper(nursery, core.stopper, lease.client, reusable=True)
            task_status.started(lease.client)
            try:
                await drain_client(core, lease.client)
            finally:
                core.stopper.teardown(keep_cli=True)
    finally:
        lease.release(settled=core.stopper.settled)


@attrs.frozen(kw_only=True)
class PoolStatistics:
    ready: int
    starting: int
    leased: int
    hits: int
    misses: int
    failures: int
    last_error: str | None


def _shape(params: ExecuteParams) -> ExecuteParams:
    # What a CLI process is started with: everything but the per-execution fields.
    return attrs.evolve(params, prompt="-", user_input_timeout=1.0, streaming_input=True)


class CLIPool:
    """Warm CLIs for sessions shaped like ``template`` (see the module docstring)."""

    def __init__(
        self,
        template: ExecuteParams,
        *,
        size: int,
        user_input: bool,
        env: Mapping[str, str] | None,
        transport_factory: TransportFactory | None,
        config: DriverConfig,
    ) -> None:
        check_int("size", size, 1, allowed="a whole number of warm CLIs, at least 1")
        if env is not None:
            check_env("env", env)
        if template.inline_skills:
            raise InvalidParamsError(
                "template.inline_skills",
                [skill.name for skill in template.inline_skills],
                "none: inline skills live in a folder of one session, and a warm CLI outlives it",
            )
        if template.scoped and template.scope_enforcement == "hard" and transport_factory is None:
            problem = probe_sandbox({**os.environ, **(env or {})})
            if problem is not None:
                raise InvalidParamsError(
                    "template.scope_enforcement", "hard", scope_refusal(problem)
                )
        if template.permission_mode in ASKING_MODES and not user_input:
            raise InvalidParamsError(
                "user_input",
                user_input,
                f"True: template.permission_mode={template.permission_mode!r} asks before tool "
                "calls, so its sessions need on_user_input (open_cli_pool(user_input=True))",
            )
        self._template = template
        self._shape = _shape(template)
        self._size = size
        self._user_input = user_input
        self._env = dict(env or {})
        self._transport_factory = transport_factory
        self._config = config
        # Ready leases: at most `size` exist, so the buffer never blocks a slot.
        self._ready_send, self._ready_recv = trio.open_memory_channel[Lease](size)
        self._starting = 0
        self._leased = 0
        self._hits = 0
        self._misses = 0
        self._failures = 0
        self._last_error: str | None = None

    @property
    def transport_factory(self) -> TransportFactory | None:
        return self._transport_factory

    @property
    def env(self) -> Mapping[str, str]:
        return self._env

    def statistics(self) -> PoolStatistics:
        return PoolStatistics(
            ready=self._ready_recv.statistics().current_buffer_used,
            starting=self._starting,
            leased=self._leased,
            hits=self._hits,
            misses=self._misses,
            failures=self._failures,
            last_error=self._last_error,
        )

    @property
    def size(self) -> int:
        """How many warm CLIs the pool keeps (idle or starting)."""
        return self._size

    def check(self, params: ExecuteParams | None = None, *, user_input: bool) -> None:
        """Raise ``InvalidParamsError`` unless sessions with ``params`` and this user-input mode
        can take this pool's CLIs (``lease_nowait`` checks the same)."""
        if params is not None and _shape(params) != self._shape:
            raise InvalidParamsError(
                "params",
                params,
                "the same settings as the pool's template except prompt, user_input_timeout "
                "and streaming_input (a warm CLI was started with them)",
            )
        if user_input != self._user_input:
            raise InvalidParamsError(
                "on_user_input",
                "set" if user_input else None,
                f"{'an' if self._user_input else 'no'} on_user_input, like the pool "
                f"(open_cli_pool(user_input={self._user_input}))",
            )

    def lease_nowait(self, params: ExecuteParams, *, user_input: bool) -> Lease | None:
        """A warm CLI for ``params``, or None when none is ready (start cold then).

        Raises ``InvalidParamsError`` when ``params`` differ from the pool's template in
        anything but the prompt, or the session's user-input mode differs from the pool's.
        """
        self.check(params, user_input=user_input)
        while True:
            try:
                lease = self._ready_recv.receive_nowait()
            except trio.WouldBlock:
                self._misses += 1
                return None
            if lease.tap.is_ready():
                self._hits += 1
                self._leased += 1
                lease.leased = True
                return lease
            lease.release()  # died while waiting: retire it, try the next one

    def _options(self, route: _Route) -> ClaudeAgentOptions:
        options = build_options(
            self._template,
            can_use_tool=route.can_use_tool if self._user_input else None,
            extra_env=self._env,
            pre_tool_use=route.pre_tool_use,
        )
        return with_changes(options, stderr=route.on_stderr)

    def _new_lease(self) -> Lease | None:
        route = _Route()
        options = self._options(route)
        if self._transport_factory is None:
            refusal = root_refusal(options)
            if refusal is not None:
                self._last_error = refusal  # sessions start cold and report it themselves
                return None
            inner = subprocess_transport(options)
        else:
            inner = self._transport_factory(options)
        tap = TapTransport(
            inner, on_elicitation=route.on_elicitation, on_cancel=route.on_cancel, sink=route
        )
        client = ClaudeSDKClient(client_options(options), transport=tap)
        return Lease(client=client, tap=tap, route=route, options=options)

    async def _run_slot(self) -> None:
        """Keep one warm CLI: connect, offer it, wait for its lease to end, disconnect, again.

        Connect and disconnect happen here, in one task, as the SDK requires.
        """
        backoff = _RETRY_FIRST
        while True:
            lease = self._new_lease()
            if lease is None:
                await trio.lowlevel.checkpoint()
                return
            connected = False
            self._starting += 1
            try:
                try:
                    await connect_client(lease.client, self._config.connect_timeout)
                    connected = True
                except Exception as exc:
                    self._failures += 1
                    self._last_error = f"{type(exc).__name__}: {exc}"
                finally:
                    self._starting -= 1
                if connected:
                    self._ready_send.send_nowait(lease)
                    await lease.released.wait()
                    if lease.leased:
                        self._leased -= 1
            finally:
                # A CLI still lent to a session when the pool closes may be working: killed.
                in_use = lease.leased and not lease.released.is_set()
                with trio.move_on_after(self._config.close_grace, shield=True):
                    await shut_down(
                        lease.client,
                        lease.tap,
                        settled=lease.settled and not in_use,
                        exit_grace=self._config.exit_grace,
                    )
            if connected:
                backoff = _RETRY_FIRST
            else:
                await trio.sleep(backoff)
                backoff = min(backoff * 2, _RETRY_MAX)


@asynccontextmanager
async def open_cli_pool(
    template: ExecuteParams,
    *,
    size: int = 2,
    user_input: bool = False,
    env: Mapping[str, str] | None = None,
    transport_factory: TransportFactory | None = None,
    config: DriverConfig | None = None,
) -> AsyncIterator[CLIPool]:
    """Keep ``size`` CLIs started and initialized for sessions shaped like ``template``.

    ``user_input``: whether the sessions pass ``on_user_input`` (it decides, at CLI start,
    whether AskUserQuestion is offered to the model). ``env`` / ``transport_factory`` as for
    :func:`~claude_trio.open_session`. Returns at once; CLIs warm up in the background.
    """
    pool = CLIPool(
        template,
        size=size,
        user_input=user_input,
        env=env,
        transport_factory=transport_factory,
        config=config or DriverConfig(),
    )
    async with open_block_nursery() as nursery:
        for _ in range(size):
            nursery.start_soon(pool._run_slot)
        yield pool

