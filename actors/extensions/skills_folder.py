"""The private folder that carries a session's inline skills to the CLI.

``open_skills_folder(skills)`` writes the plugin of ``protocol/extensions/skills.py`` (rule 2) into
a new temporary folder only this user can read (``tempfile.mkdtemp``: mode 0700) and removes it when
the block is left, whatever way: ``open_session`` holds it around its nursery, so the CLI that
reads the skills is gone before the folder is. Writing and removing run in a worker thread
(the filesystem may be slow); the removal is shielded from cancellation, so a cancelled or
failed session still removes it.

Cancellation: writing finishes before a cancellation is seen (the folder is then removed at
once); removing is shielded. Error handling: a folder that cannot be written (a full disk) is
an ``OSError`` naming the path, raised by ``open_session`` before anything else starts, and
what was written is removed. A folder that cannot be removed afterwards is logged (logger
``claude_trio.actors.extensions.skills_folder``, a warning naming it and the cause), not raised: the
session is over, and the caller's own outcome must not be replaced by it.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path

import trio

from claude_trio.protocol.extensions.skills import InlineSkill, plugin_files

FOLDER_PREFIX = "claude-trio-skills-"

log = logging.getLogger(__name__)


def _write(skills: Sequence[InlineSkill]) -> str:
    folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)
    try:
        for relative, data in plugin_files(skills).items():
            path = Path(folder, relative)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _remove(folder: str) -> None:
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove the inline skills' folder %s: %s", folder, exc)


def open_skills_folder(skills: Sequence[InlineSkill]) -> AbstractAsyncContextManager[str | None]:
    """The folder of ``skills`` for the block (``None`` without any), removed afterwards."""
    if not skills:
        return nullcontext(None)  # nothing to write: nothing to enter (no step per session)
    return _open_skills_folder(skills)


@asynccontextmanager
async def _open_skills_folder(skills: Sequence[InlineSkill]) -> AsyncIterator[str]:
    folder = await trio.to_thread.run_sync(_write, skills)
    try:
        yield folder
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_remove, folder)
