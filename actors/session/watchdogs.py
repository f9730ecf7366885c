"""The execution's two watchdogs: its time limits, and the CLI's liveness.

* :func:`watch_timeouts`: ``ExecuteParams.run_timeout`` (from the start of the execution) and
  ``idle_timeout`` (since the CLI's last frame) end the execution the way ``abort()`` does,
  with one ``aborted`` event whose ``outcome`` (``RUN_TIMEOUT``, ``IDLE_TIMEOUT``) and reason
  say which limit it was.
* :func:`watch_liveness`: a CLI silent for ``DriverConfig.stall_timeout`` while a turn is open
  is asked a cheap control request; one that does not answer within ``control_timeout`` is
  wedged (stopped, hung): it is killed, and the execution ends with a ``cli_timeout`` error.

Both run beside the driver's read loop (``actors/session/driver.py``, :func:`~.driver.drain_client`)
until the end of the execution cancels it; they read the time of the CLI's last frame, which the
mapping (``actors/session/core.py``) writes on every frame.

Channels: none of their own; they end the execution through the stopper
(``actors/session/stopper.py``) and ``actors/session/ending.py``.
Cancellation: cancelled with the read loop; nothing to clean up.
Error handling: a refusal or a broken pipe answering the liveness probe counts as an answer (the
CLI is alive enough to say so); nothing is raised.
"""

from __future__ import annotations

import contextlib
import math
from functools import partial

import trio
from claude_agent_sdk import ClaudeSDKClient

from claude_trio.actors.session.config import DriverConfig
from claude_trio.actors.session.core import SessionCore
from claude_trio.actors.session.sdk_private import send_control_request
from claude_trio.protocol.session.events import Error
from claude_trio.protocol.session.outcomes import Outcome


async def watch_timeouts(core: SessionCore) -> None:
    """End the execution at ``run_timeout`` after it started, or after ``idle_timeout``
    without any frame from the CLI (every frame resets it). Runs until cancelled."""
    run_timeout, idle_timeout = core.run_timeout, core.idle_timeout
    never = math.inf
    run_deadline = core.started_at + run_timeout if run_timeout is not None else never
    while True:
        idle_deadline = core.last_output_at + idle_timeout if idle_timeout is not None else never
        deadline = min(run_deadline, idle_deadline)
        if deadline == never:
            await trio.sleep_forever()
        await trio.sleep_until(deadline)
        if core.end.finished:
            return
        now = trio.current_time()
        if now >= run_deadline:
            assert run_timeout is not None
            reason = f"run_timeout: the execution ran for {run_timeout:g} s"
            outcome = Outcome.RUN_TIMEOUT
        elif idle_timeout is not None and now >= core.last_output_at + idle_timeout:
            reason = f"idle_timeout: no event from the CLI for {idle_timeout:g} s"
            outcome = Outcome.IDLE_TIMEOUT
        else:
            continue  # the CLI spoke meanwhile: a new idle deadline
        await core.stopper.abort(reason, decided=True, outcome=outcome)
        return


async def watch_liveness(core: SessionCore, client: ClaudeSDKClient) -> None:
    """Probe a CLI that went silent while a turn is open; end the execution if it is wedged
    (see ``DriverConfig.stall_timeout``). Runs until cancelled."""
    config = core.config
    end = core.end
    while True:
        quiet_since = core.last_output_at
        await trio.sleep_until(quiet_since + config.stall_timeout)
        if end.finished or core.stopper.machine.exited:
            return
        if core.last_output_at != quiet_since or not core.mapper.turn_open:
            continue
        if await _answers(client, config):
            # Alive and silent (a long tool): wait for another stall_timeout of silence.
            core.last_output_at = max(core.last_output_at, trio.current_time())
            continue
        silent = trio.current_time() - quiet_since
        core.stopper.wedged()
        error = Error(
            message=f"the CLI stopped responding: no output for {silent:g} s while turn "
            f"{core.mapper.turn} was running, and no answer to a liveness check within "
            f"{config.control_timeout:g} s; it was killed",
            code="cli_timeout",
        )
        lost = core.lifecycle.cli_died(error.message)
        end.report_lost_pushes(lost, "the CLI stopped responding")
        end.finish("cli_died", partial(core.mapper.stream_ended, error))
        return


async def _answers(client: ClaudeSDKClient, config: DriverConfig) -> bool:
    """Whether the CLI answers a cheap control request within ``control_timeout``."""
    await trio.lowlevel.checkpoint()
    with trio.move_on_after(config.control_timeout):  # noqa: ASYNC912 - awaits inside
        # A refusal or a broken pipe is an answer: the CLI is alive enough to say so.
        with contextlib.suppress(Exception):
            await send_control_request(client, {"subtype": "mcp_status"})
        return True
    return False
