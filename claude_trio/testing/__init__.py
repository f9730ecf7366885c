"""The claude-trio testing kit.

* ``FakeCLI`` speaks the ``claude`` CLI's stream-JSON and control protocol behind the SDK's
  ``Transport`` interface, so the real ``ClaudeSDKClient`` parses every frame; timed on the trio
  clock, with fault modes (:mod:`claude_trio.testing.fake_cli`).
* ``frames`` builds the CLI's stream-JSON frames as plain dicts, to feed the SDK's
  ``parse_message`` or anything else that reads CLI output (:mod:`claude_trio.testing.frames`).
* ``ModelDouble`` is a scripted Anthropic Messages API served on 127.0.0.1, and ``hermetic_env``
  points the real bundled CLI at it with no key and no network; ``rate_limits=RateLimits(...)``
  makes it answer 429/529 as a rate-limited account would. Both live in the product,
  :mod:`claude_trio.offline` (the offline model of ``serve --offline`` is built on them), and
  are re-exported here (and as :mod:`claude_trio.testing.model_double`,
  :mod:`claude_trio.testing.hermetic`).
* ``replay(cassette)`` plays a recorded CLI session (a cassette, from ``claude-trio run
  --record FILE`` or ``open_session(record_to=...)``) back through the real SDK, and fails when
  a test writes what was not recorded (:mod:`claude_trio.testing.cassette`); ``DEMO_CASSETTE``
  is one of ``claude-trio demo``.
* ``check_contract`` checks that a captured event stream keeps the invariants of every
  execution's stream, and reports every violation with its seq
  (:mod:`claude_trio.testing.contract`).
* ``run_host_conformance(make_host)`` checks that a session host (a fleet, a Redis cluster's,
  a gateway client, yours) keeps every contract of the session-host interface; its sessions
  run ``conformance_cli()`` (:mod:`claude_trio.testing.host_conformance`).
* ``open_redis_server`` runs a real ``redis-server`` on a free loopback port, in a directory of
  its own, for the Redis mode's tests; with ``tls=RedisTLS(...)`` it serves TLS only and its
  ``url`` is a ``rediss://`` URL trusting the given CA (:mod:`claude_trio.testing.redis_server`).
* ``open_redis_cluster`` runs a real three-master Redis Cluster the same way; its ``url`` is a
  ``redis+cluster://`` URL (:mod:`claude_trio.testing.redis_cluster`).
* ``open_gateway_process`` and ``open_worker_process`` run ``claude-trio serve`` and ``worker``
  as child processes that die with the test, each returned once it is ready and stopped with
  Ctrl-C at the end (``CommandProcess.kill`` kills one mid-test); for tests of a deployment as
  users run it (:mod:`claude_trio.testing.processes`).
* pytest fixtures (registered automatically): ``fake_cli``, ``fake_cli_factory``,
  ``scripted_session``, ``model_double``, ``hermetic``, ``redis_server``, ``redis_cluster``,
  ``event_contract``, ``replay_cassette``; and
  ``claude_trio.testing.pytest_plugin.assert_contract``.
"""

from claude_trio.offline.hermetic import DUMMY_API_KEY, bundled_cli_path, hermetic_env
from claude_trio.offline.model_double import (
    HttpError,
    ModelDouble,
    ModelRequest,
    RateLimits,
    RateLimitStatistics,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    ReplyUsage,
    Rule,
    Script,
    StreamError,
    is_main_agent,
    is_subagent,
    open_model_double,
    prompt_too_long,
    turns,
)
from claude_trio.offline.model_double import Responder as ModelResponder
from claude_trio.protocol.cassettes.format import Cassette
from claude_trio.protocol.errors import ModelDoubleRunaway
from claude_trio.testing.cassette import (
    DEMO_ABORT_CASSETTE,
    DEMO_CASSETTE,
    CassetteMismatchError,
    CassetteVersionWarning,
    Replay,
    ReplayTransport,
    load_cassette,
    replay,
)
from claude_trio.testing.contract import (
    ContractRecorder,
    ContractViolationError,
    Violation,
    check_contract,
    contract_violations,
)
from claude_trio.testing.fake_cli import (
    CLAUDE_CODE_VERSION,
    DEFAULT_MODEL,
    FakeCLI,
    FakeTransport,
    FakeTurn,
    PendingRequest,
    RequestCancelledError,
    Responder,
    ScriptError,
    SDKControlError,
    ToolCall,
    UserInput,
    prompt_stream,
    user_message,
)
from claude_trio.testing.host_conformance import (
    HostConformanceError,
    conformance_cli,
    run_host_conformance,
)
from claude_trio.testing.redis_cluster import RedisClusterNodes, open_redis_cluster
from claude_trio.testing.redis_server import (
    RedisServer,
    RedisServerError,
    RedisTLS,
    open_redis_server,
)

__all__ = [
    "CLAUDE_CODE_VERSION",
    "DEFAULT_MODEL",
    "DEMO_ABORT_CASSETTE",
    "DEMO_CASSETTE",
    "DUMMY_API_KEY",
    "Cassette",
    "CassetteMismatchError",
    "CassetteVersionWarning",
    "ContractRecorder",
    "ContractViolationError",
    "FakeCLI",
    "FakeTransport",
    "FakeTurn",
    "HostConformanceError",
    "HttpError",
    "ModelDouble",
    "ModelDoubleRunaway",
    "ModelRequest",
    "ModelResponder",
    "PendingRequest",
    "RateLimitStatistics",
    "RateLimits",
    "RedisClusterNodes",
    "RedisServer",
    "RedisServerError",
    "RedisTLS",
    "Replay",
    "ReplayTransport",
    "Reply",
    "ReplyText",
    "ReplyThinking",
    "ReplyToolUse",
    "ReplyUsage",
    "RequestCancelledError",
    "Responder",
    "Rule",
    "SDKControlError",
    "Script",
    "ScriptError",
    "StreamError",
    "ToolCall",
    "UserInput",
    "Violation",
    "bundled_cli_path",
    "check_contract",
    "conformance_cli",
    "contract_violations",
    "hermetic_env",
    "is_main_agent",
    "is_subagent",
    "load_cassette",
    "open_model_double",
    "open_redis_cluster",
    "open_redis_server",
    "prompt_stream",
    "prompt_too_long",
    "replay",
    "run_host_conformance",
    "turns",
    "user_message",
]
