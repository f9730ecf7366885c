"""The claude-trio testing kit: a scripted fake CLI transport and pytest fixtures.

``FakeCLI`` speaks the ``claude`` CLI's stream-JSON and control protocol behind the SDK's
``Transport`` interface, so the real ``ClaudeSDKClient`` parses every frame; see
:mod:`claude_trio.testing.fake_cli`.
"""

from .fake_cli import (
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
    UserInput,
    prompt_stream,
    user_message,
)

__all__ = [
    "CLAUDE_CODE_VERSION",
    "DEFAULT_MODEL",
    "FakeCLI",
    "FakeTransport",
    "FakeTurn",
    "PendingRequest",
    "RequestCancelledError",
    "Responder",
    "SDKControlError",
    "ScriptError",
    "UserInput",
    "prompt_stream",
    "user_message",
]
