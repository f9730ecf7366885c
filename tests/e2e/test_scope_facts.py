"""What the real CLI does with path rules and its Bash sandbox, through a bare SDK client.

These pin the facts ``protocol/extensions/scope.py`` is built on (``docs/sdk-facts.md``, "Path
rules, working directories and the Bash sandbox"): which rule spelling matches an absolute path,
that a deny beats an allow, that the working-directory blocks hold without asking
``can_use_tool`` in ``default`` mode, that only rules from settings reach the sandbox, and that
``failIfUnavailable`` makes the CLI refuse to run when the sandbox cannot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    ResultMessage,
    ToolPermissionContext,
)

from claude_trio.testing.model_double import ModelDouble, Reply, turns

pytestmark = pytest.mark.e2e

MODEL = "claude-sonnet-4-5"
DENIED = "<tool_use_error>File is in a directory that is denied by your permission settings."

def _folders(tmp_path: Path) -> tuple[Path, Path]:
    work, out = tmp_path / "work", tmp_path / "out"
    for folder in (work, out):
        folder.mkdir()
        (folder / "f.txt").write_text(folder.name.upper())
    return work, out


async def _turn(
    double: ModelDouble, env: dict[str, str], work: Path, calls: list[tuple[str, Any]], **kw: Any
) -> list[tuple[str | None, bool]]:
    """One turn in which the model makes ``calls``; what each tool result said, and whether
    it was an error, as the model's next request has them."""
    double.responder = turns(
        *[Reply.tool_use(name, args, id=f"toolu_{n}") for n, (name, args) in enumerate(calls)],
        Reply.text("done"),
    )
    kw.setdefault("permission_mode", "bypassPermissions")
    options = ClaudeAgentOptions(env=env, cwd=work, model=MODEL, **kw)
    with trio.fail_after(60):
        async with ClaudeSDKClient(options) as client:
            await client.query("go")
            messages = [message async for message in client.receive_response()]
    assert isinstance(messages[-1], ResultMessage)
    last = double.message_requests[-1]
    return [
        (
            last.tool_result_text(f"toolu_{n}"),
            bool(last.tool_results.get(f"toolu_{n}", {}).get("is_error")),
        )
        for n in range(len(calls))
    ]


async def test_an_absolute_path_rule_needs_two_slashes(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    work, out = _folders(tmp_path)
    read = ("Read", {"file_path": str(out / "f.txt")})
    one, two = await _turn(
        model_double,
        hermetic,
        work,
        [read, read],
        settings=json.dumps({"permissions": {"deny": [f"Read({out}/**)"]}}),
    )
    assert one == two == ("1\tOUT", False)  # '/tmp/...' is relative to the project root
    [denied] = await _turn(
        model_double,
        hermetic,
        work,
        [read],
        settings=json.dumps({"permissions": {"deny": [f"Read(/{out}/**)"]}}),
    )
    assert denied[1] is True
    assert (denied[0] or "").startswith(DENIED)


async def test_a_deny_rule_beats_an_allow_rule_so_an_allow_list_is_not_a_rule_set(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    work, _out = _folders(tmp_path)
    settings = {"permissions": {"deny": ["Read(//**)"], "allow": [f"Read(/{work}/**)"]}}
    [inside] = await _turn(
        model_double,
        hermetic,
        work,
        [("Read", {"file_path": str(work / "f.txt")})],
        settings=json.dumps(settings),
    )
    assert inside[1] is True
    assert (inside[0] or "").startswith(DENIED)


async def test_the_working_directory_blocks_hold_in_default_mode_without_asking(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    work, out = _folders(tmp_path)
    asked: list[str] = []

    async def allow(name: str, args: dict[str, Any], _ctx: ToolPermissionContext) -> Any:
        await trio.lowlevel.checkpoint()
        asked.append(name)
        return PermissionResultAllow()

    blocks = {
        "permissions": {
            "blockReadsOutsideWorkingDirectories": True,
            "blockWritesOutsideWorkingDirectories": True,
        }
    }
    read, write = await _turn(
        model_double,
        hermetic,
        work,
        [
            ("Read", {"file_path": str(out / "f.txt")}),
            ("Write", {"file_path": str(out / "new.txt"), "content": "x"}),
        ],
        settings=json.dumps(blocks),
        permission_mode="default",
        can_use_tool=allow,
    )
    assert (read[1], write[1]) == (True, True)
    assert "blockReadsOutsideWorkingDirectories" in (read[0] or "")
    assert "blockWritesOutsideWorkingDirectories" in (write[0] or "")
    assert not (out / "new.txt").exists()
    assert asked == []


async def test_only_deny_rules_from_settings_reach_the_bash_sandbox(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path, bash_sandbox: None
) -> None:
    work, out = _folders(tmp_path)
    sandbox = {"enabled": True, "autoAllowBashIfSandboxed": True, "allowUnsandboxedCommands": False}
    # $(echo ...) hides the path from the CLI's own check of a command's literal paths.
    cat = ("Bash", {"command": f"cat $(echo {out})/f.txt", "description": "read"})
    rule = f"Read(/{out}/**)"
    [flag] = await _turn(
        model_double, hermetic, work, [cat], sandbox=sandbox, disallowed_tools=[rule]
    )
    [setting] = await _turn(
        model_double,
        hermetic,
        work,
        [cat],
        settings=json.dumps({"permissions": {"deny": [rule]}, "sandbox": sandbox}),
    )
    assert flag == ("OUT", False)
    assert setting[1] is True
    assert "No such file or directory" in (setting[0] or "")


async def test_fail_if_unavailable_makes_the_cli_refuse_to_run_without_the_sandbox(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    work, _out = _folders(tmp_path)
    model_double.responder = turns(Reply.text("unreachable"))
    empty = tmp_path / "bin"
    empty.mkdir()
    settings = {"sandbox": {"enabled": True, "failIfUnavailable": True}}
    options = ClaudeAgentOptions(
        env={**hermetic, "PATH": str(empty)},
        cwd=work,
        model=MODEL,
        permission_mode="bypassPermissions",
        settings=json.dumps(settings),
    )
    failures: list[str] = []
    with trio.fail_after(60):
        await trio.lowlevel.checkpoint()
        try:
            async with ClaudeSDKClient(options) as client:
                await client.query("go")
                async for _message in client.receive_response():
                    pass
        except* Exception as group:
            failures += [str(exc) for exc in _leaves(group)]
    # The CLI answers with an error result and exits 1 (the SDK raises both).
    assert any("Sandbox required but unavailable" in failure for failure in failures), failures
    assert any("bubblewrap (bwrap) not installed" in failure for failure in failures)
    assert model_double.requests == []


def _leaves(group: BaseExceptionGroup[Exception]) -> list[Exception]:
    out: list[Exception] = []
    for exc in group.exceptions:
        out += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return out
