"""The SDK options a session can be given beyond the basics: conversation addressing
(``session_id``, ``resume_session_at``, ``resume_drops_turn``), ``strict_mcp_config``, ``betas``,
``task_budget``, ``include_hook_events``, ``verbatim_prompts``, ``client_app`` and every form of
``system_prompt``: each validated, built into the options, on the CLI's command line (the SDK's
own ``_build_command``, pure), reported by ``adapter_ready``, carried by the wire and the
``run`` flags, and kept or dropped as a continuation should.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
import sdk_frames as f
from claude_agent_sdk import ClaudeAgentOptions

from claude_trio import cli
from claude_trio.actors.session.sdk_private import SubprocessCLITransport
from claude_trio.errors import InvalidParamsError, WireError
from claude_trio.protocol.checks import MAX_ARGUMENT_BYTES
from claude_trio.protocol.config.options import build_options
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.ready import adapter_ready
from claude_trio.protocol.config.resume import START_ONLY, continuation
from claude_trio.protocol.fanout.remote import RemotePolicy, remote_params
from claude_trio.protocol.fanout.wire import params_from_json, params_to_json
from claude_trio.protocol.session import events as ev
from claude_trio.protocol.session.events import AdapterReady
from claude_trio.protocol.session.mapper import Mapper

SID = "123e4567-e89b-42d3-a456-426614174000"
AT = "0b6f6a1e-5d2c-4b8e-9f1a-2c3d4e5f6a7b"
DROP = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


def argv(params: ExecuteParams) -> list[str]:
    """The argv the SDK would start the CLI with for ``params`` (no process is started)."""
    options = dataclasses.replace(build_options(params), cli_path="/opt/claude")
    return SubprocessCLITransport(prompt="unused", options=options)._build_command()


def ready(params: ExecuteParams) -> AdapterReady:
    return adapter_ready(params, build_options(params), sdk_version=None, cli_version=None)


# -- strict_mcp_config ----------------------------------------------------------------------------


def test_strict_mcp_config_reaches_the_cli_and_keeps_the_settings_files() -> None:
    params = ExecuteParams(
        prompt="x", strict_mcp_config=True, mcp_servers={"mine": {"command": "srv"}}
    )
    command = argv(params)
    assert "--strict-mcp-config" in command
    assert any(arg.startswith("--mcp-config") for arg in command)  # our own servers still go
    # the CLI's default settings files still load (no --setting-sources, which would narrow them)
    assert not any(arg.startswith("--setting-sources") for arg in command)
    assert ready(params).strict_mcp_config is True


def test_without_strict_mcp_config_the_flag_is_absent() -> None:
    params = ExecuteParams(prompt="x")
    assert "--strict-mcp-config" not in argv(params)
    assert ready(params).strict_mcp_config is False


def test_a_read_only_gateway_starts_no_mcp_server_of_its_configuration() -> None:
    served = remote_params(ExecuteParams(prompt="x"), RemotePolicy(), None)
    assert served.strict_mcp_config is True
    assert "--strict-mcp-config" in argv(served)


# -- conversation addressing ----------------------------------------------------------------------


def test_a_chosen_session_id_reaches_the_cli_and_adapter_ready() -> None:
    params = ExecuteParams(prompt="x", session_id=SID)
    assert f"--session-id={SID}" in argv(params)
    assert ready(params).session_id == SID


def test_a_fork_from_a_message_that_drops_a_turn_reaches_the_cli() -> None:
    params = ExecuteParams(
        prompt="x",
        resume_session_id="old-session",
        fork_session=True,
        session_id=SID,
        resume_session_at=AT,
        resume_drops_turn=DROP,
    )
    command = argv(params)
    assert "--resume=old-session" in command
    assert "--fork-session" in command
    assert f"--session-id={SID}" in command
    assert f"--resume-session-at={AT}" in command
    assert f"--resume-drops-turn={DROP}" in command
    event = ready(params)
    assert (event.fork_session, event.resume_session_at, event.resume_drops_turn) == (
        True,
        AT,
        DROP,
    )


@pytest.mark.parametrize("field", ["session_id", "resume_session_at", "resume_drops_turn"])
@pytest.mark.parametrize("value", ["not-a-uuid", "", SID + "0", SID.replace("-", ""), 7, "-" + SID])
def test_addressing_values_must_be_uuids(field: str, value: object) -> None:
    extra: dict[str, Any] = {"resume_session_id": "s1", "fork_session": True}
    if field == "resume_drops_turn":
        extra["resume_session_at"] = AT
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(prompt="x", **extra, **{field: value})
    assert info.value.field == field
    assert "a UUID such as" in str(info.value)


def test_a_session_id_with_a_resume_in_place_is_refused_naming_the_fork() -> None:
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(prompt="x", resume_session_id="s1", session_id=SID)
    assert info.value.field == "session_id"
    assert "fork_session=True" in str(info.value)


def test_resume_session_at_needs_a_resume() -> None:
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(prompt="x", resume_session_at=AT)
    assert info.value.field == "resume_session_at"
    assert "only with resume_session_id" in str(info.value)


def test_resume_drops_turn_needs_resume_session_at() -> None:
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(prompt="x", resume_session_id="s1", resume_drops_turn=DROP)
    assert info.value.field == "resume_drops_turn"
    assert "only with resume_session_at" in str(info.value)


def test_a_truncating_resume_in_place_is_allowed() -> None:
    params = ExecuteParams(prompt="x", resume_session_id="s1", resume_session_at=AT)
    assert f"--resume-session-at={AT}" in argv(params)
    assert "--fork-session" not in argv(params)


def test_a_continuation_drops_what_addressed_the_first_start() -> None:
    first = ExecuteParams(
        prompt="first",
        resume_session_id="s0",
        fork_session=True,
        session_id=SID,
        resume_session_at=AT,
        resume_drops_turn=DROP,
        strict_mcp_config=True,
        betas=["context-1m-2025-08-07"],
    )
    later = continuation(first, "next", SID)
    assert later.prompt == "next"
    assert later.resume_session_id == SID
    assert {name: getattr(later, name) for name in START_ONLY} == dict(START_ONLY)
    # the settings of the session go on
    assert later.strict_mcp_config is True
    assert later.betas == ("context-1m-2025-08-07",)
    assert f"--resume={SID}" in argv(later)
    assert not any(arg.startswith("--session-id") for arg in argv(later))


# -- betas, task_budget, hook events, verbatim prompts, client_app --------------------------------


def test_request_options_reach_the_cli_and_adapter_ready() -> None:
    params = ExecuteParams(
        prompt="x",
        betas=["context-1m-2025-08-07", "some-new-beta-2027-01-01"],
        task_budget=50_000,
        include_hook_events=True,
        verbatim_prompts=True,
        client_app="my-app/1.0.0",
    )
    options = build_options(params)
    assert options.task_budget == {"total": 50_000}
    assert options.verbatim_prompts is True  # the SDK marks each user message client_composed
    assert options.client_app == "my-app/1.0.0"  # the SDK's CLAUDE_AGENT_SDK_CLIENT_APP
    command = argv(params)
    assert command[command.index("--betas") + 1] == "context-1m-2025-08-07,some-new-beta-2027-01-01"
    assert command[command.index("--task-budget") + 1] == "50000"
    assert "--include-hook-events" in command
    event = ready(params)
    assert event.betas == ("context-1m-2025-08-07", "some-new-beta-2027-01-01")
    assert event.task_budget == 50_000
    assert (event.include_hook_events, event.verbatim_prompts) == (True, True)
    assert event.client_app == "my-app/1.0.0"


def test_the_defaults_add_nothing_to_the_command_line() -> None:
    command = argv(ExecuteParams(prompt="x"))
    for flag in ("--betas", "--task-budget", "--include-hook-events", "--session-id"):
        assert flag not in command
    options = build_options(ExecuteParams(prompt="x"))
    assert (options.verbatim_prompts, options.client_app, options.task_budget) == (
        False,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("betas", ["has space"], "beta header names"),
        ("betas", [""], "beta header names"),
        ("betas", "context-1m-2025-08-07", "a list of beta header names"),
        ("betas", ["a", "a"], "each beta named once"),
        ("task_budget", 0, "a positive int"),
        ("task_budget", True, "a positive int"),
        ("client_app", "app\n", "printable Latin-1"),
        ("client_app", "app\u2603", "printable Latin-1"),
        ("client_app", "x" * 257, "at most 256"),
        ("client_app", 3, "printable Latin-1"),
        ("strict_mcp_config", "yes", "True or False"),
        ("include_hook_events", 1, "True or False"),
        ("verbatim_prompts", None, "True or False"),
    ],
)
def test_bad_request_options_name_the_field(field: str, value: object, fragment: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(prompt="x", **{field: value})
    assert info.value.field.startswith(field)
    assert fragment in str(info.value)


def test_an_empty_client_app_sends_no_identifier() -> None:
    assert build_options(ExecuteParams(prompt="x", client_app="")).client_app == ""


# -- system_prompt: every form --------------------------------------------------------------------


def test_a_preset_form_with_append_reaches_the_cli() -> None:
    form = {
        "type": "preset",
        "preset": "claude_code",
        "append": "Be brief.",
        "exclude_dynamic_sections": True,
    }
    params = ExecuteParams(prompt="x", system_prompt=form)
    assert build_options(params).system_prompt == form
    command = argv(params)
    assert command[command.index("--append-system-prompt") + 1] == "Be brief."
    assert "--system-prompt" not in command  # Claude Code's own prompt, not an empty one
    assert ready(params).system_prompt == "preset+append"


def test_a_custom_form_replaces_the_prompt() -> None:
    params = ExecuteParams(
        prompt="x", system_prompt={"type": "custom", "prompt": "You are terse.", "snapshot": False}
    )
    command = argv(params)
    assert command[command.index("--system-prompt") + 1] == "You are terse."
    assert ready(params).system_prompt == "custom"


def test_a_file_form_is_read_by_the_cli() -> None:
    params = ExecuteParams(prompt="x", system_prompt={"type": "file", "path": "/srv/prompt.md"})
    command = argv(params)
    assert command[command.index("--system-prompt-file") + 1] == "/srv/prompt.md"
    assert ready(params).system_prompt == "file:/srv/prompt.md"


def test_a_preset_form_agrees_with_claude_use_preset_and_the_others_do_not() -> None:
    config = ArchitectureConfig(claude_use_preset=True)
    preset = {"type": "preset", "preset": "claude_code"}
    params = ExecuteParams(prompt="x", system_prompt=preset, architecture_config=config)
    assert build_options(params).system_prompt == preset
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(
            prompt="x",
            system_prompt={"type": "custom", "prompt": "p"},
            architecture_config=config,
        )
    assert info.value.field == "system_prompt"
    assert "drop one of the two" in str(info.value)


def test_the_string_forms_are_unchanged() -> None:
    assert build_options(ExecuteParams(prompt="x", system_prompt="S")).system_prompt == "S"
    assert build_options(ExecuteParams(prompt="x")).system_prompt is None
    appended = ExecuteParams(
        prompt="x",
        system_prompt="S",
        architecture_config=ArchitectureConfig(claude_use_preset=True),
    )
    assert build_options(appended).system_prompt == {
        "type": "preset",
        "preset": "claude_code",
        "append": "S",
    }
    assert ready(ExecuteParams(prompt="x")).system_prompt is None


def test_a_mapping_form_is_copied_so_the_callers_dict_cannot_change_it() -> None:
    form: dict[str, Any] = {"type": "custom", "prompt": "p"}
    params = ExecuteParams(prompt="x", system_prompt=form)
    form["prompt"] = "changed"
    assert params.system_prompt is not None
    assert not isinstance(params.system_prompt, str)
    assert params.system_prompt["prompt"] == "p"


@pytest.mark.parametrize(
    ("value", "field", "fragment"),
    [
        ({"type": "nope"}, "system_prompt.type", "'preset', 'custom' or 'file'"),
        ({"prompt": "p"}, "system_prompt.type", "'preset', 'custom' or 'file'"),
        ({"type": "preset", "preset": "other"}, "system_prompt.preset", "'claude_code'"),
        ({"type": "preset"}, "system_prompt", "needs 'preset'"),
        ({"type": "custom"}, "system_prompt", "needs 'prompt'"),
        ({"type": "custom", "prompt": " "}, "system_prompt.prompt", "a non-empty prompt"),
        ({"type": "file", "path": "rel/p.md"}, "system_prompt.path", "an absolute path"),
        ({"type": "custom", "prompt": "p", "append": "a"},
         "system_prompt['append']", "no such key"),
        ({"type": "preset", "preset": "claude_code", "snapshot": "yes"},
         "system_prompt.snapshot", "a bool"),
        ({"type": "preset", "preset": "claude_code", "append": "a\0b"},
         "system_prompt.append", "no NUL"),
        ({"type": "custom", "prompt": "x" * (MAX_ARGUMENT_BYTES + 1)},
         "system_prompt.prompt", "command-line argument"),
        (["a"], "system_prompt", "a string, None"),
    ],
)
def test_bad_system_prompt_forms_name_the_key(value: object, field: str, fragment: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        ExecuteParams(prompt="x", system_prompt=value)
    assert info.value.field == field
    assert fragment in str(info.value)


# -- the wire and the run flags -------------------------------------------------------------------


def test_every_new_option_travels_over_the_wire() -> None:
    params = ExecuteParams(
        prompt="x",
        system_prompt={"type": "preset", "preset": "claude_code", "append": "A"},
        strict_mcp_config=True,
        resume_session_id="s1",
        fork_session=True,
        session_id=SID,
        resume_session_at=AT,
        resume_drops_turn=DROP,
        betas=["context-1m-2025-08-07"],
        task_budget=1000,
        include_hook_events=True,
        verbatim_prompts=True,
        client_app="app/1",
    )
    obj = params_to_json(params)
    assert obj["system_prompt"] == {"type": "preset", "preset": "claude_code", "append": "A"}
    assert obj["betas"] == ["context-1m-2025-08-07"]
    assert params_from_json(obj) == params


def test_a_remote_client_cannot_have_the_server_read_a_prompt_file() -> None:
    obj = {"prompt": "x", "system_prompt": {"type": "file", "path": "/etc/shadow"}}
    with pytest.raises(WireError) as info:
        params_from_json(obj)
    assert info.value.code == "forbidden_field"
    assert "params.system_prompt" in str(info.value)
    # a gateway that lets clients name folders lets them name a prompt file too
    assert params_from_json(obj, allow_cwd=True).system_prompt == obj["system_prompt"]


def test_a_bad_uuid_over_the_wire_is_an_invalid_params_error() -> None:
    with pytest.raises(WireError) as info:
        params_from_json({"prompt": "x", "session_id": "abc"})
    assert info.value.code == "invalid_params"
    assert "params.session_id" in str(info.value)


def run_params(*argv_: str) -> ExecuteParams:
    return cli.build_execute_params(cli.parse_args(["run", "hi", *argv_]))


def test_run_flags_reach_the_params() -> None:
    params = run_params(
        "--strict-mcp-config",
        "--session-id", SID,
        "--beta", "context-1m-2025-08-07",
        "--beta", "other-beta",
        "--task-budget", "2000",
        "--include-hook-events",
        "--verbatim",
        "--client-app", "me/1",
    )
    assert params.strict_mcp_config is True
    assert params.session_id == SID
    assert params.betas == ("context-1m-2025-08-07", "other-beta")
    assert params.task_budget == 2000
    assert (params.include_hook_events, params.verbatim_prompts) == (True, True)
    assert params.client_app == "me/1"
    assert "--strict-mcp-config" in argv(params)


def test_run_flags_fork_from_a_message() -> None:
    params = run_params(
        "--resume", "s1", "--fork-session", "--resume-session-at", AT, "--resume-drops-turn", DROP
    )
    assert (params.resume_session_id, params.fork_session) == ("s1", True)
    assert (params.resume_session_at, params.resume_drops_turn) == (AT, DROP)


def test_run_system_prompt_flags() -> None:
    appended = run_params("--append-system-prompt", "Be brief.")
    assert build_options(appended).system_prompt == {
        "type": "preset",
        "preset": "claude_code",
        "append": "Be brief.",
    }
    from_file = run_params("--system-prompt-file", "p.md")
    assert from_file.system_prompt is not None
    assert not isinstance(from_file.system_prompt, str)
    assert from_file.system_prompt["type"] == "file"
    assert from_file.system_prompt["path"].endswith("/p.md")
    assert from_file.system_prompt["path"].startswith("/")
    assert from_file.architecture_config.preset is None  # the file replaces Claude Code's
    with pytest.raises(SystemExit):
        cli.parse_args(["run", "hi", "--system-prompt", "a", "--append-system-prompt", "b"])


def test_a_bad_session_id_flag_names_the_field() -> None:
    with pytest.raises(InvalidParamsError) as info:
        run_params("--session-id", "nope")
    assert info.value.field == "session_id"


def test_uuid_values_of_any_case_are_accepted() -> None:
    upper = str(uuid.uuid4()).upper()
    assert ExecuteParams(prompt="x", session_id=upper).session_id == upper


def test_the_sdk_options_carry_every_new_field() -> None:
    """Nothing is lost between the params and ClaudeAgentOptions."""
    options: ClaudeAgentOptions = build_options(
        ExecuteParams(prompt="x", resume_session_id="s", resume_session_at=AT)
    )
    assert (options.resume, options.resume_session_at, options.session_id) == ("s", AT, None)


# -- include_hook_events: the CLI's hook frames become events --------------------------------------


def test_hook_frames_are_events_with_include_hook_events_even_without_passthrough() -> None:
    started = f.system_other("hook_started", hook_event="PreToolUse", hook_name="gate")
    status = f.system_other("status", status="compacting")
    with_hooks = Mapper(passthrough=False, hook_events=True)
    (event,) = with_hooks.feed(started)
    assert isinstance(event, ev.Passthrough)
    assert event.frame_type == "system:hook_started"
    assert event.data["hook_event"] == "PreToolUse"
    assert with_hooks.feed(status) == []  # other chatter stays off
    assert Mapper(passthrough=False).feed(started) == []
