"""The fake process's stdout: the pipe the fake writes lines to, and the SDK's reader over it.

:class:`StdoutReader` is ``SubprocessCLITransport._read_messages_impl``, step for step: the SDK's
own line framer and line parser with the same buffer guard, so oversize, malformed, blank, noise
and CRLF lines, a partial last line and a failed exit read exactly as with the real process.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Mapping
from typing import Any

import trio
from claude_agent_sdk import CLIJSONDecodeError, ProcessError

from claude_trio.actors.session.sdk_private import LineFramer as _LineFramer
from claude_trio.actors.session.sdk_private import parse_stdout_line as _parse_stdout_line

PIPE_LINES = 64


class StdoutPipe:
    """The fake's stdout as text chunks, with every line written recorded in ``emitted``."""

    def __init__(self) -> None:
        #: Every line written, without its line ending.
        self.emitted: list[str] = []
        # Buffer 0, so a frame is "written" when the SDK's reader took it (a real pipe would
        # block the CLI the same way once full).
        self._send, self.receive = trio.open_memory_channel[str](64)

    async def write_line(self, text: str) -> None:
        """Write ``text`` as is: no line ending is added."""
        await self._send.send(text)
        self.emitted.append(text.rstrip("\r\n"))

    async def write_frame(self, frame: Mapping[str, Any], *, line_ending: str) -> None:
        """Write ``frame`` as one compact JSON line, as the CLI does."""
        line = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
        await self.write_line(line + line_ending)

    def close_write(self) -> None:
        """The process ended: the reader sees the end of stdout."""
        self._send.close()

    def close_read(self) -> None:
        """The transport was closed under the reader."""
        self.receive.close()


class StdoutReader:
    """``SubprocessCLITransport._read_messages_impl``, step for step, over the fake's stdout.

    An async iterator class rather than an async generator: the SDK cancels its read task at any
    await, which a class survives trivially. Lines are parsed lazily, one per ``__anext__``, so
    an error on a line surfaces only after every earlier line was delivered, as with the real
    generator. At the end of stdout it waits for ``exited`` (the process finished) and then, if
    ``exit_code()`` is not 0, raises ``ProcessError``.
    """

    def __init__(
        self,
        receive: trio.MemoryReceiveChannel[str],
        *,
        max_buffer_size: int,
        exited: trio.Event,
        exit_code: Callable[[], int | None],
    ) -> None:
        self._receive_channel = receive
        self._max_buffer_size = max_buffer_size
        self._exited = exited
        self._exit_code = exit_code
        self._framer = _LineFramer()
        # Complete lines to parse, or an int: the pending length to check after a chunk.
        self._todo: collections.deque[str | int] = collections.deque()
        self._finished = False

    def __aiter__(self) -> StdoutReader:
        return self

    def _guard(self, length: int) -> None:
        limit = self._max_buffer_size
        if length > limit:
            raise CLIJSONDecodeError(
                f"JSON message exceeded maximum buffer size of {limit} bytes",
                ValueError(f"Buffer size {length} exceeds limit {limit}"),
            )

    async def __anext__(self) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        while True:
            while self._todo:
                item = self._todo.popleft()
                if isinstance(item, int):
                    self._guard(item)
                    continue
                self._guard(len(item))
                data = _parse_stdout_line(item)
                if data is not None:
                    return data
            if self._finished:
                self._raise_for_exit_code()
                raise StopAsyncIteration
            await self._receive()

    async def _receive(self) -> None:
        await trio.lowlevel.checkpoint()
        try:
            chunk = await self._receive_channel.receive()
        except trio.ClosedResourceError:  # the transport was closed under the reader
            self._finished = True
            return
        except trio.EndOfChannel:
            await self._end_of_stdout()
            return
        self._todo.extend(self._framer.push(chunk))
        self._todo.append(self._framer.pending_len)

    async def _end_of_stdout(self) -> None:
        self._finished = True
        # A residual tail: yielded if it parses, dropped if it was cut off mid-write.
        tail = self._framer.flush()
        try:
            data = _parse_stdout_line(tail)
        except CLIJSONDecodeError:
            data = None
        if data is not None:
            self._todo.append(json.dumps(data))
        await self._exited.wait()

    def _raise_for_exit_code(self) -> None:
        code = self._exit_code()
        if code:
            raise ProcessError(
                f"Command failed with exit code {code}",
                exit_code=code,
                stderr="Check stderr output for details",
            )
