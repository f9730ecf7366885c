"""Sessions with no API key and no network: the real ``claude`` CLI against a model on 127.0.0.1.

Three parts, each of which the testing kit (``claude_trio.testing``) re-exports:

* :mod:`claude_trio.offline.model` - the built-in offline model that ``claude-trio serve
  --offline``, ``worker --offline``, ``batch --offline`` and ``run --offline`` talk to: it
  answers any prompt. ``async with open_offline_model() as offline:`` serves it; pass
  ``offline.env`` as a session's or a fleet's ``env``.
* :mod:`claude_trio.offline.model_double` - ``ModelDouble``, a scripted Anthropic Messages API
  served on 127.0.0.1, which the offline model (and ``claude-trio demo``) is built on; a
  responder decides each answer (``Script`` and ``turns`` build one from rules); with
  ``rate_limits=RateLimits(...)`` it answers 429/529 as a rate-limited account would.
* :mod:`claude_trio.offline.hermetic` - ``hermetic_env``, the environment that points the
  bundled CLI at such a server and keeps its files in a folder of its own.
"""

from claude_trio.offline.hermetic import DUMMY_API_KEY, bundled_cli_path, hermetic_env
from claude_trio.offline.model import (
    OFFLINE_ENV,
    OVERLOADED_MARK,
    RATE_LIMITED_MARK,
    Offline,
    OfflineModel,
    offline_responder,
    open_offline_model,
)
from claude_trio.offline.model_double import (
    HttpError,
    ModelDouble,
    ModelRequest,
    RateLimits,
    RateLimitStatistics,
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
    is_main_agent,
    is_subagent,
    open_model_double,
    prompt_too_long,
    turns,
)

__all__ = [
    "DUMMY_API_KEY",
    "OFFLINE_ENV",
    "OVERLOADED_MARK",
    "RATE_LIMITED_MARK",
    "HttpError",
    "ModelDouble",
    "ModelRequest",
    "Offline",
    "OfflineModel",
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
    "bundled_cli_path",
    "hermetic_env",
    "is_main_agent",
    "is_subagent",
    "offline_responder",
    "open_model_double",
    "open_offline_model",
    "prompt_too_long",
    "turns",
]
