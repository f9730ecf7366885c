"""The paths a remote client names, resolved on the server's disk
(``protocol/fanout/remote.py`` rule 3): the folder a session runs in and the folders of its
path scope must lie inside the folder the server runs sessions in, symlinks followed. The
gateway's connection (``gateway_connection.py``) asks these before it opens a session."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.fanout.remote import cwd_candidate, is_inside
from claude_trio.protocol.fanout.wire import quote

__all__ = ["resolve_cwd", "resolve_scope"]


async def resolve_scope(root: str, params: ExecuteParams) -> ExecuteParams | str:
    """``params`` with the scope's allowed and read-only paths resolved, or the refusal when
    one is not inside ``root`` (``protocol/fanout/remote.py`` rule 3). Disallowed paths only narrow
    the scope: they may name anything."""
    real_root = str(await trio.Path(root).resolve())
    changes: dict[str, Any] = {}
    for field in ("allowed_paths", "read_only_paths"):
        resolved = []
        for i, path in enumerate(getattr(params, field)):
            try:
                real = str(await trio.Path(path).resolve())
            except (OSError, RuntimeError, ValueError):  # RuntimeError: a symlink loop
                return f"params.{field}[{i}]={quote(path)}: cannot be resolved (a symlink loop?)"
            if not is_inside(real, real_root):
                return (
                    f"params.{field}[{i}]={quote(path)}: not inside the folder this server "
                    "runs sessions in"
                )
            resolved.append(real)
        changes[field] = tuple(resolved)
    return attrs.evolve(params, **changes)


async def resolve_cwd(root: str, requested: str | None) -> str | None:
    """The session's folder (``protocol/fanout/remote.py`` rule 3), or None when it is not
    allowed."""
    try:
        real_root = str(await trio.Path(root).resolve())
        real = str(await trio.Path(cwd_candidate(real_root, requested)).resolve())
        if not is_inside(real, real_root) or not await trio.Path(real).is_dir():
            return None
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symlink loop
        await trio.lowlevel.checkpoint()
        return None
    return real
