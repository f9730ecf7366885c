"""Inline skills over the fake CLI: the private folder exists while the session runs, holds the
plugin, and is gone afterwards, whatever way the session ended."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from session_kit import CONFIG, assert_no_leak, collect, fake_session

from claude_trio import ExecuteParams, InvalidParamsError, open_cli_pool
from claude_trio.actors.extensions.skills_folder import FOLDER_PREFIX
from claude_trio.protocol.extensions.skills import InlineSkill
from claude_trio.protocol.session.events import AdapterReady
from claude_trio.testing import FakeCLI, FakeTurn

SKILL = InlineSkill(
    name="house-style",
    description="How we name things: ünïcode, \"quotes\" and: colons",
    body="Use snake_case.",
    files={"examples/good.py": "answer_value = 42\n", "logo.bin": b"\x89\x00"},
)
PARAMS = ExecuteParams(prompt="hi", inline_skills=[SKILL])


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where this test's temporary folders go (so a left-over one can be seen)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def leftovers(root: Path) -> list[Path]:
    return list(root.iterdir())


def plugin_path(fake: FakeCLI) -> Path:
    [plugin] = fake.transports[0].options.plugins
    return Path(plugin["path"])


async def test_the_skills_folder_holds_the_plugin_while_the_session_runs(
    autojump_clock: trio.testing.MockClock, temp_root: Path
) -> None:
    seen: dict[str, Any] = {}

    async def script(cli: FakeTurn) -> None:
        folder = plugin_path(fake)
        seen["folder"] = folder
        seen["files"] = sorted(
            p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
        )
        seen["skill_md"] = (folder / "skills/house-style/SKILL.md").read_text()
        seen["logo"] = (folder / "skills/house-style/logo.bin").read_bytes()
        seen["mode"] = folder.stat().st_mode & 0o777
        await cli.text("ok")

    fake = FakeCLI(script)
    async with fake_session(fake, params=PARAMS) as session:
        events = await collect(session)
    folder = seen["folder"]
    assert folder.parent == temp_root
    assert folder.name.startswith(FOLDER_PREFIX)
    assert seen["files"] == [
        ".claude-plugin/plugin.json",
        "skills/house-style/SKILL.md",
        "skills/house-style/examples/good.py",
        "skills/house-style/logo.bin",
    ]
    assert seen["skill_md"] == SKILL.skill_md()
    assert seen["logo"] == b"\x89\x00"
    assert seen["mode"] == 0o700  # only this user can read it
    assert not folder.exists()
    assert leftovers(temp_root) == []
    ready = events[0]
    assert isinstance(ready, AdapterReady)
    assert ready.inline_skills == ("inline:house-style",)
    assert_no_leak(fake)


class Boom(Exception):
    pass


@pytest.mark.parametrize(
    "ending", ["abort", "exception", "deadline", "cli-crash", "no-connect", "break"]
)
async def test_the_skills_folder_is_gone_however_the_session_ended(
    autojump_clock: trio.testing.MockClock, temp_root: Path, ending: str
) -> None:
    folders: list[Path] = []

    async def script(cli: FakeTurn) -> None:
        folders.append(plugin_path(fake))
        await cli.text("working", chunk=2, delay=1.0)
        if ending == "cli-crash":
            await cli.exit(1, stderr=["boom"])
        await cli.sleep(3600)

    fake = FakeCLI(script, unanswered={"initialize"} if ending == "no-connect" else ())
    # The folder is written in a worker thread, and autojump_clock jumps while a task waits
    # for a thread: the deadline starts once the session is open.
    with trio.CancelScope() as deadline:  # noqa: ASYNC912 - the session awaits inside
        try:
            async with fake_session(fake, params=PARAMS) as session:
                deadline.deadline = trio.current_time() + 30
                if ending == "no-connect":
                    folders.append(plugin_path(fake))
                async for event in session.events:
                    if event.kind != "text_delta":
                        continue
                    assert plugin_path(fake).is_dir()
                    if ending == "abort":
                        await session.abort()
                    elif ending == "exception":
                        raise Boom
                    elif ending == "break":
                        break
        except Boom:
            pass
    assert deadline.cancelled_caught == (ending == "deadline")
    assert len(folders) == 1
    assert not folders[0].exists()
    assert leftovers(temp_root) == []
    assert_no_leak(fake)


async def test_nothing_is_written_when_the_arguments_are_refused(
    autojump_clock: trio.testing.MockClock, temp_root: Path
) -> None:
    template = ExecuteParams(prompt="-")
    async with open_cli_pool(template, size=1, transport_factory=FakeCLI()) as pool:
        with pytest.raises(InvalidParamsError, match="None with custom_tools or inline_skills"):
            async with fake_session(FakeCLI(), params=PARAMS, pool=pool, config=CONFIG):
                pass
    with pytest.raises(InvalidParamsError, match=r"template\.inline_skills"):
        async with open_cli_pool(PARAMS, size=1, transport_factory=FakeCLI()):
            pass  # pragma: no cover
    with pytest.raises(InvalidParamsError, match="max_buffer_size"):
        async with fake_session(FakeCLI(), params=PARAMS, max_buffer_size=1):
            pass
    assert leftovers(temp_root) == []


async def test_a_folder_that_cannot_be_removed_is_logged_not_raised(
    autojump_clock: trio.testing.MockClock,
    temp_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from claude_trio.actors.extensions import skills_folder
    def refuse(path: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(skills_folder.shutil, "rmtree", refuse)
    async with fake_session(FakeCLI(), params=PARAMS) as session:
        events = await collect(session)
    assert events[-1].kind == "result"
    [record] = caplog.records
    assert record.levelname == "WARNING"
    assert record.getMessage().startswith("could not remove the inline skills' folder")
    assert "Permission denied" in record.getMessage()
