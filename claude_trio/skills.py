"""``list_skills``: the skills on disk the ``claude`` CLI would load for a session.

::

    for skill in await list_skills("/path/to/project"):
        print(skill.name, skill.source, skill.description)

The rules (where the CLI looks, which one wins a name) are ``protocol/extensions/skills.py``'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import partial

import trio

from claude_trio.protocol.extensions.skills import SkillInfo, SkillSource, scan_skills

__all__ = ["SkillInfo", "list_skills"]


async def list_skills(
    cwd: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    sources: Sequence[SkillSource] = ("user", "project"),
) -> list[SkillInfo]:
    """The skills on disk a session in ``cwd`` (default: this process's) would offer the model,
    in the CLI's order: the user's (``$CLAUDE_CONFIG_DIR/skills``, else ``~/.claude/skills``),
    then the project's (``.claude/skills`` of ``cwd`` and its parents up to the repository's
    root), each with its description. A name found twice is listed once, where the CLI takes
    it from.

    ``env``: what the session's CLI gets on top of this process's environment (as
    ``open_session(env=...)``); it decides where the user's skills are. ``sources``: the
    setting sources the session loads. Inline skills are not on disk: they are not listed.
    The disk is read in a worker thread.
    """
    folder = os.fspath(cwd) if cwd is not None else os.getcwd()
    environ = {**os.environ, **(env or {})}
    return await trio.to_thread.run_sync(
        partial(scan_skills, folder, env=environ, sources=tuple(sources))
    )
