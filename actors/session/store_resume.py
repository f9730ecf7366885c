"""Resuming from a ``SessionStore``: the transcript is loaded from the store into a temporary
config folder for the CLI, so a conversation continues on a machine that never ran it.

The SDK does this itself only for a transport it builds; claude-trio builds its own (the tap),
so it calls the SDK's ``materialize_resume_session`` here (``sdk_private.py``). The folder
holds a copy of the transcript (and the caller's auth files, as the SDK copies them); the CLI
runs with ``CLAUDE_CONFIG_DIR`` pointing at it, keeps writing the transcript there (mirrored to
the store as it goes), and the folder is removed when the session ends, whatever way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

import trio
from claude_agent_sdk import ClaudeAgentOptions, SessionStore

from claude_trio.actors.session.sdk_private import materialize_resume_session
from claude_trio.protocol.config.params import ExecuteParams

__all__ = ["open_store_resume"]

CLEANUP_GRACE = 5.0


def open_store_resume(
    session_store: SessionStore | None,
    params: ExecuteParams,
    env: Mapping[str, str] | None,
    *,
    load_timeout: float = 60.0,
) -> AbstractAsyncContextManager[Mapping[str, str] | None]:
    """Yield the env to run the CLI with: ``env`` itself, or, when ``params`` resumes a session
    the store holds, ``env`` with ``CLAUDE_CONFIG_DIR`` set to a folder holding its transcript
    (removed after the block). ``load_timeout``: seconds each read of the store may take."""
    if session_store is None or params.resume_session_id is None:
        return nullcontext(env)  # nothing to load: nothing to enter (no step per session)
    return _open_store_resume(session_store, params, env, load_timeout=load_timeout)


@asynccontextmanager
async def _open_store_resume(
    session_store: SessionStore,
    params: ExecuteParams,
    env: Mapping[str, str] | None,
    *,
    load_timeout: float,
) -> AsyncIterator[Mapping[str, str] | None]:
    assert params.resume_session_id is not None
    options = ClaudeAgentOptions(
        cwd=params.cwd,
        resume=params.resume_session_id,
        session_store=session_store,
        env=dict(env or {}),
        load_timeout_ms=round(load_timeout * 1000),
    )
    materialized = await materialize_resume_session(options)
    if materialized is None:
        yield env
        return
    try:
        yield {**(env or {}), "CLAUDE_CONFIG_DIR": str(materialized.config_dir)}
    finally:
        with trio.move_on_after(CLEANUP_GRACE, shield=True):
            await materialized.cleanup()
