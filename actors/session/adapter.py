"""The TypeScript library's adapter face, for code ported from it.

The TypeScript adapter's ``execute(params)`` returns an async iterable; trio code must not hand
out async generators (their cleanup escapes the nursery), so ``execute`` is an async context
manager that yields the event stream (a receive channel)::

    adapter = ClaudeCodeAdapter()
    async with adapter.execute(params) as events:
        async for event in events:
            if wants_more(event):
                adapter.push_message("and the tests")   # True when accepted
    adapter.architecture_capabilities().mid_turn_push  # True
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from claude_trio.actors.session.event_stream import EventStream
from claude_trio.actors.session.open import Session, open_session
from claude_trio.protocol.config.capabilities import (
    ArchitectureCapabilities,
    architecture_capabilities,
)
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.protocol.session.lifecycle import Accepted


class ClaudeCodeAdapter:
    """One execution at a time; ``session_options`` are passed to :func:`open_session`."""

    def __init__(self, **session_options: Any) -> None:
        self._session_options = session_options
        self._session: Session | None = None

    @asynccontextmanager
    async def execute(self, params: ExecuteParams) -> AsyncIterator[EventStream]:
        if self._session is not None:
            raise LocalProtocolError("this adapter is already running an execution")
        async with open_session(params, **self._session_options) as session:
            self._session = session
            try:
                yield session.events
            finally:
                self._session = None

    def push_message(self, text: str) -> bool:
        """The TypeScript library's ``pushMessage``: True when accepted, False when it will not
        be delivered."""
        if self._session is None:
            return False
        return isinstance(self._session.push_nowait(text), Accepted)

    async def abort(self) -> None:
        if self._session is None:
            await trio.lowlevel.checkpoint()
            return
        await self._session.abort()

    def architecture_capabilities(self) -> ArchitectureCapabilities:
        return architecture_capabilities()
