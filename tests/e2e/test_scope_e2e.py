"""Path scope through the real CLI against the Messages API double
(``protocol/extensions/scope.py``).

The double asks for Read, Write and Bash calls inside and outside the scope; each test asserts
what the model got back in its next request (the tool result the CLI sent) and what is on disk.
The Bash sandbox needs bubblewrap and socat (``scripts/bootstrap`` installs them); a test that
needs it fails where they are missing, naming what to install (the ``bash_sandbox`` fixture),
and the hard/soft tests hide them from the CLI's ``PATH`` to check the refusal and the warning
on any machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import dump, of_type, params, run_session, workdir

from claude_trio import allow_tool
from claude_trio.protocol.session.events import (
    AdapterReady,
    Error,
    ToolResult,
    UserInputRequest,
    WarningEvent,
)
from claude_trio.testing.model_double import ModelDouble, Reply, turns

pytestmark = pytest.mark.e2e


def _tree(tmp_path: Path) -> dict[str, Path]:
    """The test's folders: the cwd, an allowed folder beside it, one outside every scope."""
    work = Path(workdir(tmp_path))
    folders = {"work": work, "extra": tmp_path / "extra", "out": tmp_path / "out"}
    for name, folder in folders.items():
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.txt").write_text(name.upper())
    return folders


def _results(double: ModelDouble, count: int) -> list[tuple[str | None, bool]]:
    """The text and error flag of tool results ``toolu_0`` .. ``toolu_<count-1>`` in the
    model's last request."""
    last = double.message_requests[-1]
    return [
        (
            last.tool_result_text(f"toolu_{n}"),
            bool(last.tool_results.get(f"toolu_{n}", {}).get("is_error")),
        )
        for n in range(count)
    ]


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[Reply]:
    return [Reply.tool_use(name, args, id=f"toolu_{n}") for n, (name, args) in enumerate(calls)]


async def test_reads_and_writes_outside_the_scope_are_refused_and_the_model_sees_why(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    dirs = _tree(tmp_path)
    outside, extra, work = dirs["out"], dirs["extra"], dirs["work"]
    model_double.responder = turns(
        *_calls(
            ("Read", {"file_path": str(outside / "out.txt")}),
            ("Write", {"file_path": str(outside / "new.txt"), "content": "x"}),
            ("Read", {"file_path": str(work / "work.txt")}),
            ("Read", {"file_path": str(extra / "extra.txt")}),
            ("Write", {"file_path": str(extra / "new.txt"), "content": "written"}),
        ),
        Reply.text("done"),
    )
    execute = params(
        tmp_path, "look around", allowed_paths=[str(extra)], scope_enforcement="soft"
    )

    events = await run_session(execute, hermetic)

    (read_out, read_out_error), (write_out, write_out_error), *inside = _results(model_double, 5)
    assert (read_out_error, write_out_error) == (True, True), dump(events)
    assert read_out is not None
    assert write_out is not None
    assert f"{outside / 'out.txt'} is outside {work}, {extra}" in read_out
    assert "blocks reads outside the working directories" in read_out
    assert f"{outside / 'new.txt'} is outside" in write_out
    assert "blocks writes outside the working directories" in write_out
    assert not (outside / "new.txt").exists()
    assert inside[0] == ("1\tWORK", False)
    assert inside[1] == ("1\tEXTRA", False)
    assert inside[2][1] is False
    assert (extra / "new.txt").read_text() == "written"
    # The events say the same as the model's request.
    refused = [r for r in of_type(events, ToolResult) if r.tool_use_id in ("toolu_0", "toolu_1")]
    assert [r.is_error for r in refused] == [True, True]
    [ready] = of_type(events, AdapterReady)
    assert ready.allowed_paths == (str(extra),)
    assert ready.add_dirs == (str(extra),)
    assert ready.scope_enforcement == "soft"
    assert ready.setting_sources == ()


async def test_the_scope_holds_under_an_asking_mode_even_when_every_call_would_be_allowed(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    """The CLI refuses outside paths before it would ask: an ``on_user_input`` that allows
    everything is never asked about them, and the model gets the same refusal."""
    dirs = _tree(tmp_path)
    outside = dirs["out"]
    model_double.responder = turns(
        *_calls(
            ("Read", {"file_path": str(outside / "out.txt")}),
            ("Write", {"file_path": str(outside / "new.txt"), "content": "x"}),
        ),
        Reply.text("done"),
    )
    asked: list[UserInputRequest] = []

    async def allow_everything(request: UserInputRequest) -> Any:
        asked.append(request)
        await trio.lowlevel.checkpoint()
        return allow_tool()

    execute = params(
        tmp_path,
        "look around",
        allowed_paths=[str(dirs["extra"])],
        scope_enforcement="soft",
        permission_mode="default",
    )

    events = await run_session(execute, hermetic, on_user_input=allow_everything)

    read, write = _results(model_double, 2)
    assert read[1] is True, dump(events)
    assert "blocks reads outside the working directories" in (read[0] or "")
    assert write[1] is True
    assert "blocks writes outside the working directories" in (write[0] or "")
    assert not (outside / "new.txt").exists()
    assert asked == []
    [ready] = of_type(events, AdapterReady)
    assert ready.permission_mode == "default"


async def test_a_disallowed_path_is_refused_inside_the_cwd_and_a_read_only_one_is_not_written(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    dirs = _tree(tmp_path)
    work, extra = dirs["work"], dirs["extra"]
    secret = work / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("KEY")
    model_double.responder = turns(
        *_calls(
            ("Read", {"file_path": str(secret / "key.txt")}),
            ("Read", {"file_path": str(extra / "extra.txt")}),
            ("Write", {"file_path": str(extra / "new.txt"), "content": "x"}),
            ("Edit", {"file_path": str(extra / "extra.txt"), "old_string": "EXTRA",
                      "new_string": "CHANGED"}),
        ),
        Reply.text("done"),
    )
    execute = params(
        tmp_path,
        "look around",
        read_only_paths=[str(extra)],
        disallowed_paths=[str(secret) + "/"],
        scope_enforcement="soft",
    )

    events = await run_session(execute, hermetic)

    denied, read, write, edit = _results(model_double, 4)
    assert denied == (
        "<tool_use_error>File is in a directory that is denied by your permission "
        "settings.</tool_use_error>",
        True,
    ), dump(events)
    assert read == ("1\tEXTRA", False)
    assert (write[1], edit[1]) == (True, True), (write, edit)
    assert not (extra / "new.txt").exists()
    assert (extra / "extra.txt").read_text() == "EXTRA"
    [ready] = of_type(events, AdapterReady)
    assert ready.disallowed_paths == (str(secret),)
    assert ready.read_only_paths == (str(extra),)


async def test_a_scope_loads_the_projects_settings_only_when_the_caller_names_them(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    """A project's ``.claude/settings.json`` (here a deny rule, which shows whether it was
    read) is loaded with ``setting_sources=["project"]`` and not by a scoped execution that
    names no sources."""
    dirs = _tree(tmp_path)
    work = dirs["work"]
    (work / ".claude").mkdir()
    (work / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": [f"Read(/{work}/work.txt)"]}})
    )
    read = ("Read", {"file_path": str(work / "work.txt")})
    outcomes = []
    for sources in (["project"], None):
        model_double.responder = turns(*_calls(read), Reply.text("done"))
        execute = params(
            tmp_path,
            "read it",
            disallowed_paths=[str(dirs["out"])],
            scope_enforcement="soft",
            setting_sources=sources,
        )
        events = await run_session(execute, hermetic)
        outcomes.append(_results(model_double, 1)[0])
        warnings = [w.message for w in of_type(events, WarningEvent)]
        assert any("may widen it" in w for w in warnings) == bool(sources), warnings
        [ready] = of_type(events, AdapterReady)
        assert ready.setting_sources == tuple(sources or ())

    assert outcomes[0][1] is True
    assert "denied by your permission settings" in (outcomes[0][0] or "")
    assert outcomes[1] == ("1\tWORK", False)


def _path_without_sandbox(tmp_path: Path) -> str:
    """A ``PATH`` with no bubblewrap or socat on it."""
    empty = tmp_path / "bin-without-sandbox"
    empty.mkdir()
    return str(empty)


async def test_a_hard_scope_without_the_sandbox_fails_at_start_naming_what_to_install(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    env = {**hermetic, "PATH": _path_without_sandbox(tmp_path)}
    execute = params(tmp_path, "hello", allowed_paths=[str(tmp_path / "extra")])

    events = await run_session(execute, env)

    [error] = events
    assert isinstance(error, Error)
    assert (error.code, error.fatal) == ("config", True)
    assert "scope_enforcement='hard'" in error.message
    assert "bwrap, socat" in error.message
    assert "apt-get install bubblewrap socat" in error.message
    assert "scope_enforcement='soft'" in error.message
    assert model_double.requests == []


async def test_a_soft_scope_without_the_sandbox_warns_before_adapter_ready_and_runs(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = turns(Reply.text("hi"))
    env = {**hermetic, "PATH": _path_without_sandbox(tmp_path)}
    execute = params(
        tmp_path, "hello", disallowed_paths=["/etc/shadow"], scope_enforcement="soft"
    )

    events = await run_session(execute, env)

    kinds = [e.kind for e in events]
    [warning] = [e for e in of_type(events, WarningEvent) if e.code == "scope_unconfined"]
    assert kinds.index("warning") < kinds.index("adapter_ready")
    assert "Bash is not confined" in warning.message
    assert "bwrap, socat" in warning.message
    [ready] = of_type(events, AdapterReady)
    assert ready.bash_sandboxed is False
    assert events[-1].kind == "result"


async def test_a_hard_scope_confines_bash_writes_denied_reads_and_network_in_the_sandbox(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path, bash_sandbox: None
) -> None:
    dirs = _tree(tmp_path)
    work, outside = dirs["work"], dirs["out"]
    denied = tmp_path / "denied"
    denied.mkdir()
    (denied / "key.txt").write_text("KEY")
    port = model_double.base_url.rsplit(":", 1)[1]
    # $(echo ...) hides the paths from the CLI's check of the command's literal paths, so
    # only the OS sandbox stands between these commands and the files.
    model_double.responder = turns(
        *_calls(
            ("Bash", {"command": f"echo x > $(echo {outside})/bash.txt", "description": "w"}),
            ("Bash", {"command": f"cat $(echo {denied})/key.txt", "description": "r"}),
            ("Bash", {"command": f"echo y > {work}/ok.txt && cat {work}/ok.txt",
                      "description": "w"}),
            ("Bash", {"command": f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected",
                      "description": "net"}),
        ),
        Reply.text("done"),
    )
    execute = params(
        tmp_path, "run", allowed_paths=[str(dirs["extra"])], disallowed_paths=[str(denied)]
    )

    events = await run_session(execute, hermetic)

    write_out, read_denied, write_in, network = _results(model_double, 4)
    assert write_out[1] is True, dump(events)
    assert "Read-only file system" in (write_out[0] or "")
    assert not (outside / "bash.txt").exists()
    assert read_denied[1] is True
    assert "KEY" not in (read_denied[0] or "")
    assert write_in == ("y", False)
    # No network in the sandbox, not even the model double on 127.0.0.1.
    assert network[1] is True
    assert "connected" not in (network[0] or "")
    assert "/dev/tcp/127.0.0.1" in (network[0] or "")
    [ready] = of_type(events, AdapterReady)
    assert ready.bash_sandboxed is True
    assert ready.scope_enforcement == "hard"
