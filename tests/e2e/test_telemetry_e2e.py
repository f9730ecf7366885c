"""The commands' OpenTelemetry as a user runs them (the ``otel`` extra is in the dev venv).

``run --offline`` with ``OTEL_TRACES_EXPORTER=console`` prints its spans, one JSON object per
line on standard error, standard output staying the events; without an exporter asked for it
prints none. And the bundled CLI's own tracing reads ``TRACEPARENT`` as its parent (pinned
in the binary: the session passes it, the CLI joins when the application turns its
telemetry on).
"""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from claude_trio.actors.session.trace_context import cli_trace_env
from claude_trio.offline.hermetic import bundled_cli_path

pytestmark = pytest.mark.e2e

COMMAND = (sys.executable, "-m", "claude_trio.cli")


def spans_in(text: str) -> list[dict[str, Any]]:
    spans = []
    for line in text.splitlines():
        if line.startswith("{") and '"context"' in line:
            span = json.loads(line)
            if "span_id" in span.get("context", {}):
                spans.append(span)
    return spans


def run_offline(extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OTEL_", "CLAUDE_CODE_"))
    }
    return subprocess.run(
        [*COMMAND, "run", "--offline", "--json", "say hello"],
        env={**env, **extra_env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_run_with_the_console_exporter_prints_its_spans_as_json_lines() -> None:
    done = run_offline({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "trio-test"})
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["kind"] == "result"  # standard output is the events only
    spans = spans_in(done.stderr)
    (agent,) = [span for span in spans if span["name"] == "invoke_agent claude-code"]
    assert agent["parent_id"] is None
    assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert agent["attributes"]["gen_ai.conversation.id"] == events[-1]["session_id"]
    assert agent["attributes"]["claude_trio.outcome"] == "completed"
    assert agent["resource"]["attributes"]["service.name"] == "trio-test"
    chats = [span for span in spans if span["name"].startswith("chat")]
    assert chats
    assert {chat["parent_id"] for chat in chats} == {agent["context"]["span_id"]}
    assert {span["context"]["trace_id"] for span in spans} == {agent["context"]["trace_id"]}
    # The CLI was given the execution's span as its parent.
    (ready,) = [event for event in events if event["kind"] == "adapter_ready"]
    trace_id = agent["context"]["trace_id"].removeprefix("0x")
    span_id = agent["context"]["span_id"].removeprefix("0x")
    assert ready["env"]["TRACEPARENT"].startswith(f"00-{trace_id}-{span_id}-")


def test_run_without_an_exporter_asked_for_records_nothing() -> None:
    done = run_offline({})
    assert done.returncode == 0, done.stderr
    assert spans_in(done.stderr) == []
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (ready,) = [event for event in events if event["kind"] == "adapter_ready"]
    assert "TRACEPARENT" not in ready["env"]  # no SDK: no span, nothing to pass on


NEEDLES = (
    b"{traceparent:s.TRACEPARENT,tracestate:s.TRACESTATE}",
    b"claude_code.interaction",
    b'"parent.source"',
    b"CLAUDE_CODE_ENHANCED_TELEMETRY_BETA",
    b"CLAUDE_CODE_ENABLE_TELEMETRY",
)


def test_the_bundled_cli_reads_traceparent_as_the_parent_of_its_own_spans() -> None:
    """What the session's ``TRACEPARENT`` is for (``cli_trace_env``): the bundled CLI's
    tracing (``CLAUDE_CODE_ENABLE_TELEMETRY=1`` with ``CLAUDE_CODE_ENHANCED_TELEMETRY_BETA``
    and ``OTEL_TRACES_EXPORTER``) extracts it with the W3C propagator as the parent of its
    ``claude_code.interaction`` span (else it ignores it). Pinned in the binary of this SDK
    version (a version that drops it fails here): the CLI's spans need its own exporter
    configured, which a test cannot reach without network, so the code is what is checked."""
    with Path(bundled_cli_path()).open("rb") as file, mmap.mmap(
        file.fileno(), 0, access=mmap.ACCESS_READ
    ) as binary:
        found = {needle: binary.find(needle) >= 0 for needle in NEEDLES}
    assert found == dict.fromkeys(NEEDLES, True)
    assert cli_trace_env.__doc__ is not None
    assert "TRACEPARENT" in cli_trace_env.__doc__

