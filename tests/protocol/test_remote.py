"""The remote-session policy and the admission counts (pure)."""

from __future__ import annotations

import json

import pytest

from claude_trio.protocol.cluster.records import encode_event, stored_entry
from claude_trio.protocol.config.options import READONLY_BUILTINS, build_options
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.remote import (
    Admission,
    RemotePolicy,
    TokenBucket,
    cwd_candidate,
    is_inside,
    remote_event,
    remote_params,
)
from claude_trio.protocol.fanout.wire import (
    EventFrame,
    decode_frame,
    event_frame_text,
    remote_entry_frame,
    remote_event_frame,
)
from claude_trio.protocol.session.events import Error, TextDelta


def test_the_default_policy_forces_read_only_tools_and_no_skill_shell() -> None:
    asked = ExecuteParams(
        prompt="x",
        plan_mode=False,
        architecture_config=ArchitectureConfig(claude_disable_skill_shell_execution=False),
    )
    params = remote_params(asked, RemotePolicy(), None)
    assert params.plan_mode is True
    assert params.architecture_config.claude_disable_skill_shell_execution is True
    options = build_options(params)
    assert options.tools == list(READONLY_BUILTINS)
    assert json.loads(options.settings or "{}") == {"disableSkillShellExecution": True}
    assert params.cwd is None


def test_all_tools_is_an_explicit_opt_in_and_changes_nothing() -> None:
    asked = ExecuteParams(prompt="x")
    assert remote_params(asked, RemotePolicy(tools="all"), None) == asked


def test_the_resolved_folder_replaces_whatever_the_client_sent() -> None:
    policy = RemotePolicy(cwd_root="/srv/work", allow_cwd=True)
    params = remote_params(ExecuteParams(prompt="x", cwd="a"), policy, "/srv/work/a")
    assert params.cwd == "/srv/work/a"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tools": "everything"}, "tools"),
        ({"allow_cwd": "false", "cwd_root": "/srv"}, "allow_cwd"),
        ({"allow_env": 0}, "allow_env"),
        ({"cwd_root": "relative"}, "cwd_root"),
        ({"allow_cwd": True}, "allow_cwd"),
    ],
)
def test_a_policy_is_checked_by_type(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        RemotePolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_paths_stay_inside_the_root() -> None:
    assert cwd_candidate("/srv/work", None) == "/srv/work"
    assert cwd_candidate("/srv/work", "a/b") == "/srv/work/a/b"
    assert cwd_candidate("/srv/work", "/etc") == "/etc"  # then refused by is_inside
    assert is_inside("/srv/work", "/srv/work")
    assert is_inside("/srv/work/a", "/srv/work")
    assert is_inside("/srv/work/a/", "/srv/work/")
    assert not is_inside("/srv/workshop", "/srv/work")
    assert not is_inside("/srv", "/srv/work")
    assert not is_inside("/etc", "/srv/work")
    assert is_inside("/anything", "/")


def test_errors_naming_server_paths_are_replaced_for_remote_clients() -> None:
    missing = Error(message="not found: /opt/x/claude (chmod +x /opt/x/claude)",
                    code="cli_not_found", detail="/opt/x", seq=3)  # fmt: skip
    shown = remote_event(missing)
    assert isinstance(shown, Error)
    assert "/opt" not in shown.message
    assert shown.detail is None
    assert (shown.seq, shown.code, shown.fatal) == (3, "cli_not_found", True)
    internal = remote_event(Error(message="the session failed: OSError('/root/.x')",
                                  code="internal"))  # fmt: skip
    assert isinstance(internal, Error)
    assert "/root" not in internal.message
    stderr = "the CLI exited with code 1; last stderr lines:\n/home/u/x: boom"
    exited = remote_event(Error(message=stderr, code="cli_exited"))
    assert isinstance(exited, Error)
    assert exited.message == "the CLI exited with code 1 (its stderr is kept on the server)"
    api = Error(message="the API said 529 overloaded", code="api_error", status=529)
    assert remote_event(api) is api
    delta = TextDelta(text="/etc/passwd is a file the model may mention")
    assert remote_event(delta) is delta


def test_admission_counts_per_peer_and_in_total_and_names_the_cap() -> None:
    admission = Admission(
        max_connections=4, max_connections_per_peer=3, max_handshakes=3, max_handshakes_per_peer=2
    )
    assert admission.admit("a") is None
    assert admission.admit("a") is None
    assert admission.admit("a") == "handshakes per peer"
    admission.handshake_done("a")
    assert admission.admit("a") is None
    assert admission.admit("a") == "connections per peer"
    assert admission.admit("b") is None
    assert admission.admit("c") == "connections"
    assert admission.of("a") == (3, 2)
    admission.closed("a", in_handshake=True)
    admission.closed("b", in_handshake=True)
    assert admission.of("a") == (2, 1)
    assert admission.of("b") == (0, 0)
    assert (admission.connections, admission.handshakes) == (2, 1)
    busy = Admission(
        max_connections=10, max_connections_per_peer=10, max_handshakes=2, max_handshakes_per_peer=2
    )
    assert busy.admit("x") is None
    assert busy.admit("y") is None
    assert busy.admit("z") == "handshakes"


def test_the_token_bucket_allows_bursts_then_the_rate() -> None:
    bucket = TokenBucket(rate=10.0, burst=3, now=100.0)
    assert [bucket.take(100.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(100.0) == pytest.approx(0.1)  # the 4th waits for one token
    assert bucket.take(100.1) == pytest.approx(0.1)  # the 5th: the 4th took the new one
    assert bucket.take(100.3) == 0.0
    # A long pause refills at most `burst` tokens.
    assert [bucket.take(200.0) for _ in range(4)] == [0.0, 0.0, 0.0, pytest.approx(0.1)]


def test_a_bucket_is_full_again_after_burst_over_rate_seconds() -> None:
    bucket = TokenBucket(rate=10.0, burst=5, now=0.0)
    assert bucket.full(0.0)
    for _ in range(5):
        bucket.take(0.0)
    assert not bucket.full(0.4)
    assert bucket.full(0.5)


def test_subagents_of_a_read_only_session_get_read_only_tools_too() -> None:
    from claude_trio.protocol.config.subagents import SubagentDefinition

    params = ExecuteParams(
        prompt="hi",
        subagents={
            "doer": SubagentDefinition(description="d", prompt="p", tools=["Bash", "Read"]),
            "anything": SubagentDefinition(description="d", prompt="p"),
        },
    )
    safe = remote_params(params, RemotePolicy(), None)
    assert safe.subagents["doer"].tools == ("Read",)
    assert safe.subagents["anything"].tools == READONLY_BUILTINS
    agents = build_options(safe).agents
    assert agents is not None
    assert agents["doer"].tools == ["Read"]


def test_an_event_read_as_text_is_framed_as_it_is_unless_it_must_be_hidden() -> None:
    # A cluster's gateway frames events from the text the stream holds: rule 5 still holds.
    delta = TextDelta(text="hi", seq=4)
    stored = encode_event(delta)["e"]
    framed = remote_event_frame("s1", delta, stored)
    assert framed == event_frame_text("s1", stored)
    assert json.loads(framed) == json.loads(remote_event_frame("s1", delta))
    internal = Error(message="the session failed: OSError('/root/.x')", code="internal", seq=9)
    shown = decode_frame(remote_event_frame("s1", internal, encode_event(internal)["e"]))
    assert isinstance(shown, EventFrame)
    assert isinstance(shown.event, Error)
    assert "/root" not in shown.event.message
    assert shown.event.seq == 9


def test_an_entry_read_from_a_stream_is_framed_by_the_same_rule() -> None:
    # A delta is kept as its text and framed without being decoded; an internal error is
    # decoded when read and still hidden.
    delta = TextDelta(text="hi", seq=4)
    kept = stored_entry(4, encode_event(delta)["e"])
    assert json.loads(remote_entry_frame("s1", kept)) == json.loads(remote_event_frame("s1", delta))
    assert not kept.decoded
    internal = Error(message="the session failed: OSError('/root/.x')", code="internal", seq=9)
    read = stored_entry(9, encode_event(internal)["e"])
    assert read.decoded
    assert remote_entry_frame("s1", read) == remote_event_frame("s1", internal)
    assert "/root" not in remote_entry_frame("s1", read)
