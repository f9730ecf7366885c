"""actors/session/sdk_private.py: the private names of claude-agent-sdk claude-trio relies on exist,
and an SDK without one gives an error that names it and what to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

from claude_trio.actors.session import sdk_private
from claude_trio.protocol.config.versions import VERIFIED_SDK


def test_every_private_name_is_there_in_the_installed_sdk() -> None:
    for name in ("parse_message", "SubprocessCLITransport", "LineFramer", "parse_stdout_line"):
        assert getattr(sdk_private, name) is not None
    transport = sdk_private.SubprocessCLITransport(prompt="", options=ClaudeAgentOptions())
    assert sdk_private.subprocess_of(transport) is None  # the attribute exists: not spawned


def test_a_client_that_is_not_connected_is_a_clear_local_error() -> None:
    client = ClaudeSDKClient(ClaudeAgentOptions())
    with pytest.raises(Exception, match="not connected"):
        sdk_private.message_receive(client)


def test_an_sdk_without_a_private_name_fails_at_import_naming_it() -> None:
    code = textwrap.dedent(
        """
        import claude_agent_sdk._internal.transport.subprocess_cli as m
        del m._LineFramer
        try:
            import claude_trio.actors.session.sdk_private
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "_LineFramer" in out
    assert f"claude-agent-sdk=={VERIFIED_SDK[1]}" in out


def test_an_sdk_object_without_a_private_attribute_names_it() -> None:
    class Bare:
        pass

    with pytest.raises(ImportError, match=r"ClaudeSDKClient\._query"):
        sdk_private.message_receive(Bare())  # type: ignore[arg-type]
