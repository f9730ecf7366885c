"""Every exception claude-trio raises on purpose, and the one base they share.

Catch :class:`ClaudeTrioError` for all of them. The tree (a name in parentheses is a second,
built-in base, kept for callers that catch those)::

    ClaudeTrioError
    ├── InvalidParamsError (ValueError) ── a parameter is invalid: field, value, what is allowed
    │   └── UnknownModelError
    ├── BatchFileError (ValueError) ── a line of a batch file that is not an item
    ├── CassetteError ── a cassette that cannot be read
    ├── ServeUsageError ── `claude-trio serve` cannot start as asked
    ├── RedisUsageError ── a Redis URL that cannot be used
    ├── LocalProtocolError ── the API used in a way it does not allow
    │   ├── ControlRefusedError ── a live control of a session that cannot take it
    │   └── HookDecisionError (ValueError) ── a hook returned what its event cannot take
    ├── RemoteProtocolError ── the peer sent something we cannot understand
    │   └── WireError ── a websocket client's op the gateway refuses
    ├── EditorRequestError ── `claude-trio acp` answers an editor's request with an error
    ├── CLIError ── the CLI could not start, died, or did not answer in time
    │   └── ControlFailedError ── the CLI refused a live control, or did not answer it
    ├── ClusterUnavailableError ── the cluster (Redis) does not answer: try again later
    │   └── RedisUnavailableError ── a Redis that could not be used at start
    ├── StreamEndedError ── a stream ended before the event waited for
    ├── SlowSubscriberError ── a subscription dropped: its consumer fell too far behind
    ├── ReplayGapError ── the events after last_seq are no longer held by the host
    ├── UnknownSessionError (KeyError) ── no session with this id
    ├── IdempotencyConflictError (ValueError) ── an idempotency key reused for another request
    ├── GatewayError ── between the gateway client and the gateway
    │   ├── GatewayRefusedError ── the handshake was refused (HTTP status)
    │   ├── GatewayUnavailableError ── could not connect (again), or closed
    │   ├── ConnectionLostError ── the connection dropped before an op's reply
    │   ├── RemoteOpError ── the gateway answered an op with an error
    │   ├── ResyncRequiredError (ReplayGapError) ── events after last_seq can no longer be replayed
    │   └── SessionLostError ── the server no longer knows the session
    └── ModelDoubleRunaway (AssertionError) ── the CLI ran past a ModelDouble's script

The testing kit's own errors derive from it too; import them from ``claude_trio.testing``::

    ClaudeTrioError
    ├── CassetteMismatchError (CLIConnectionError) ── a test wrote what was not recorded
    ├── ContractViolationError (AssertionError) ── a stream broke the events' contract
    ├── HostConformanceError (AssertionError) ── a session host broke one of its contracts
    ├── ScriptError ── a fake CLI's responder raised
    ├── SDKControlError ── the SDK refused a fake CLI's control request
    ├── RequestCancelledError ── the fake CLI withdrew its own control request
    └── RedisServerError (RuntimeError) ── redis-server is missing or did not start

Events are not exceptions: a session that fails reports it as an ``error`` event in its stream
(``claude_trio.events.Error``), and raises only what it cannot report there.
"""

# The classes are defined in protocol/errors.py, where the sans-I/O layer can raise them too.
from claude_trio.protocol.errors import *  # noqa: F403
from claude_trio.protocol.errors import __all__ as __all__
