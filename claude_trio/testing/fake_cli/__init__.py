"""A scripted fake ``claude`` CLI behind the SDK's ``Transport`` interface.

Use it to test code that drives ``ClaudeSDKClient`` without a real CLI: the real SDK (its
``Query`` control protocol and ``parse_message``) parses every frame, and every scripted delay is
a ``trio.sleep`` on the run's clock, so races (a push against the end of a turn, an abort
against a result, a question against a cancel) run the same way every time under
``trio.testing.MockClock(autojump_threshold=0)``. The fake speaks the CLI's stream-JSON on the
wire: the SDK writes JSON lines to it and reads JSON lines from it, exactly as it does with
``SubprocessCLITransport``::

    async def script(turn: FakeTurn) -> None:
        await turn.text("Hello", chunk=2, delay=0.1)
        await turn.result()

    fake = FakeCLI(script)
    options = ClaudeAgentOptions(include_partial_messages=True)
    async with ClaudeSDKClient(options, transport=fake.transport_for(options)) as client:
        ...

Model of one fake process (:class:`FakeTransport`):

* ``write()`` is the CLI's stdin. Each line is parsed and recorded at once (``written``), then
  handed to the process: ``initialize`` and other control requests are answered, ``interrupt``
  aborts the running turn, ``control_response`` frames wake a pending ``ask_permission``/``elicit``/
  ``hook_callback``, and user messages are queued.
* The turn loop takes one queued user message at a time and runs the *responder* (the test's
  script) with a :class:`FakeTurn` handle. Messages that arrive while a turn runs stay queued; a
  ``tool_result`` (the point where the real CLI goes back to the model) FOLDS every queued message
  into the running turn (echo + listed in this turn's ``user_message_uuids``). Messages still
  queued at the result become the next turn (QUEUED). This is what the real CLI does with
  streaming input.
* ``read_messages()`` is the CLI's stdout, read through the SDK's own line framer and line parser
  (``_LineFramer`` / ``_parse_stdout_line``) with the same buffer guard as the real transport, so
  oversize, malformed, blank, noise and CRLF lines behave exactly as with the real process:

  - a line longer than ``options.max_buffer_size`` (default 1 MiB) raises ``CLIJSONDecodeError``
    "JSON message exceeded maximum buffer size of N bytes" (also for a partial line that grew past
    the cap before its newline arrived);
  - a COMPLETE line that starts with ``{`` but is not JSON raises ``CLIJSONDecodeError`` (the SDK
    treats it as corruption, never drops it);
  - a complete line that does not start with ``{`` (``[SandboxDebug] ...``) and blank lines are
    skipped; the ``\\r`` of CRLF is stripped;
  - a PARTIAL line still pending when stdout closes is dropped silently (debug log only) if it
    does not parse, and yielded if it does;
  - when stdout closes and the exit code is not 0, reading raises
    ``ProcessError("Command failed with exit code N", exit_code=N, stderr="Check stderr output for
    details")`` - the real transport's exact error; the stderr lines go to ``options.stderr``.

The process runs as a trio *system* task started by ``connect()`` (the SDK's own tasks are system
tasks too, so no nursery of the test is needed); ``close()`` cancels it and bounds its wait.

Faults: ``FakeCLI(unanswered=...)`` leaves control requests unanswered, ``line_ending="\\r\\n"``
writes CRLF, :meth:`FakeTransport.kill` and :meth:`FakeTurn.exit` end the process,
:meth:`FakeTurn.raw` writes any bytes (partial, noise or oversize lines), and a script that raises
makes the process exit with 1 (:class:`ScriptError`, ``FakeCLI.script_errors``).

The frames themselves come from :mod:`claude_trio.testing.frames`.
"""

from claude_trio.testing.fake_cli._cli import FakeCLI
from claude_trio.testing.fake_cli._control import PendingRequest
from claude_trio.testing.fake_cli._errors import RequestCancelledError, ScriptError, SDKControlError
from claude_trio.testing.fake_cli._input import UserInput, prompt_stream, user_message
from claude_trio.testing.fake_cli._transport import (
    CLOSE_GRACE_SECONDS,
    DEFAULT_MODEL,
    SIGKILL_EXIT_CODE,
    SIGTERM_EXIT_CODE,
    FakeTransport,
)
from claude_trio.testing.fake_cli._turn import BackgroundJob, FakeTurn, Responder
from claude_trio.testing.fake_cli._turn_content import (
    DEFAULT_MESSAGE_COST_USD,
    DEFAULT_MESSAGE_USAGE,
)
from claude_trio.testing.fake_cli._turn_mcp import ToolCall
from claude_trio.testing.frames import CLAUDE_CODE_VERSION

__all__ = [
    "CLAUDE_CODE_VERSION",
    "CLOSE_GRACE_SECONDS",
    "DEFAULT_MESSAGE_COST_USD",
    "DEFAULT_MESSAGE_USAGE",
    "DEFAULT_MODEL",
    "SIGKILL_EXIT_CODE",
    "SIGTERM_EXIT_CODE",
    "BackgroundJob",
    "FakeCLI",
    "FakeTransport",
    "FakeTurn",
    "PendingRequest",
    "RequestCancelledError",
    "Responder",
    "SDKControlError",
    "ScriptError",
    "ToolCall",
    "UserInput",
    "prompt_stream",
    "user_message",
]
