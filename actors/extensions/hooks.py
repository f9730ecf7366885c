"""The hooks' side of the callback runner: a session's hooks, run as trio code in its nursery.

The CLI calls a hook with a ``hook_callback`` control request; the SDK calls the callback it was
given from a task of its own (outside every nursery of ours). That callback
(:meth:`SessionHooks.call`) does not run the user's function: it hands it to the session's
:class:`~claude_trio.actors.extensions.tool_runner.CallbackRunner` as a :class:`Job`, so the
function runs in a child task of the session, under its deadline, and is cancelled on abort and at
the end of the execution. Every call gets exactly one answer to the CLI and one ``hook_invoked``
event:

* what the hook decided (``protocol/extensions/hooks.py``, ``hook_output``),
* the safe answer (``failure_output``: deny for ``PreToolUse``, no opinion otherwise) and a
  non-fatal ``error`` event (``code="callback"``) naming the hook, when it raised, returned
  something its event cannot take, or ran past its timeout,
* for ``PreToolUse`` and ``PermissionRequest``, the stop gate's deny once the execution is
  stopping, whatever the hook returned (the hook is then cancelled, or never started): the
  stop gate always wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

import trio
from claude_agent_sdk import HookMatcher
from claude_agent_sdk.types import HookCallback

from claude_trio.actors.extensions.tool_runner import MAX_CALLS, CallbackRunner, Job
from claude_trio.protocol.errors import HookDecisionError
from claude_trio.protocol.extensions.custom_tools import failure_text
from claude_trio.protocol.extensions.hooks import (
    PERMISSION_EVENTS,
    Hook,
    decision_name,
    failure_output,
    hook_input,
    hook_output,
    output_reason,
    stopped_output,
)
from claude_trio.protocol.session.events import Error, Event, HookInvoked

# How much longer than our own deadline the CLI waits for a hook's answer: ours always comes
# first, so a slow hook is our timeout (an event, the safe answer), never the CLI's.
CLI_TIMEOUT_MARGIN = 10.0


class SessionHooks:
    """A session's hooks, registered with the CLI as the SDK's ``HookMatcher``s.

    Channels: none of its own; each call goes through the runner's inbox and reply.
    Cancellation: the runner's ``close`` (abort, end of the execution) cancels running hooks;
    their answer is then the safe one (see the module docstring).
    Error handling: a hook's failure is an ``error`` event and the safe answer; nothing
    reaches the session.
    """

    def __init__(
        self,
        hooks: Sequence[Hook],
        *,
        runner: CallbackRunner,
        timeout: float,
        emit: Callable[[Event], Any],
        stopping: Callable[[], bool],
        stopped_reason: str,
    ) -> None:
        self._hooks = tuple(hooks)
        self._runner = runner
        self._timeout = timeout
        self._emit = emit
        self._stopping = stopping
        self._stopped_reason = stopped_reason

    @property
    def hooks(self) -> tuple[Hook, ...]:
        return self._hooks

    def matchers(self) -> dict[str, list[HookMatcher]]:
        """The SDK's ``hooks`` option: one ``HookMatcher`` per hook, in the given order."""
        out: dict[str, list[HookMatcher]] = {}
        for hook in self._hooks:
            timeout = self._timeout_of(hook)
            out.setdefault(hook.event, []).append(
                HookMatcher(
                    matcher=hook.matcher,
                    hooks=[cast(HookCallback, partial(self.call, hook))],
                    timeout=timeout + CLI_TIMEOUT_MARGIN,
                )
            )
        return out

    def _timeout_of(self, hook: Hook) -> float:
        return hook.timeout if hook.timeout is not None else self._timeout

    async def call(
        self, hook: Hook, data: Any, tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """The callback the SDK calls (in its own task) for a ``hook_callback`` request."""
        event = hook.event
        call = hook_input(event, data, tool_use_id)
        timeout = self._timeout_of(hook)
        failure: list[str] = []

        def failed(why: str) -> dict[str, Any]:
            failure.append(why)
            self._emit(Error(message=f"the {hook.label} {why}", code="callback", fatal=False))
            return failure_output(event, f"the {hook.label} {why}")

        def returned(value: Any) -> dict[str, Any]:
            try:
                return hook_output(event, value)
            except HookDecisionError as exc:
                return failed(f"returned a decision its event cannot take: {exc}")

        def stopped(reason: str) -> dict[str, Any]:
            failure.append("stopped")
            return stopped_output(event, self._stopped_reason)

        await trio.lowlevel.checkpoint()
        output: dict[str, Any]
        gates_a_tool = event in PERMISSION_EVENTS
        if gates_a_tool and self._stopping():
            output = stopped("")  # the stop gate answers; the hook never runs
        else:
            output = await self._runner.run(
                Job(
                    name=f"hook {hook.name}",
                    function=partial(hook.callback, call),
                    timeout=timeout,
                    returned=returned,
                    raised=lambda exc: failed(f"raised {failure_text(exc)}"),
                    timed_out=lambda: failed(
                        f"did not answer within {timeout:g} s and was cancelled"
                    ),
                    stopped=stopped,
                    busy=lambda: failed(f"was not run: {MAX_CALLS} callbacks are running"),
                )
            )
            if gates_a_tool and self._stopping() and not failure:
                # The execution began stopping while the hook ran: no tool starts after a stop.
                failure.append("stopped")
                output = stopped_output(event, self._stopped_reason)
        decision = {"stopped": "stopped"}.get(failure[0], "failed") if failure else None
        self._emit(
            HookInvoked(
                hook_event=event,
                hook_name=hook.name,
                decision=decision or decision_name(output),
                tool_name=call.tool_name,
                tool_use_id=call.tool_use_id,
                reason=output_reason(output),
                # The CLI names the subagent a tool call comes from (its agent_id), not the
                # task: attributed to a subagent, task unknown.
                is_subagent=call.agent_id is not None,
            )
        )
        return output
