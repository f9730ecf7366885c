"""The recorder: a transport wrapper that writes a cassette of the CLI's traffic.

``open_session(params, record_to=PATH)`` wraps the CLI's transport (the one the tap wraps in
turn) in a :class:`RecordingTransport`, so the cassette holds exactly what crossed the CLI's
stdio: every frame it wrote, as the SDK parsed it, every line written to it, its stderr lines,
the end of its input and how it ended, each with its time on the trio clock since
``connect()``. The format is ``protocol/cassettes/format.py``'s, how secrets are scrubbed
``protocol/cassettes/scrub.py``'s;
``claude_trio.testing.replay`` plays a cassette back.

The header names the CLI version the session actually ran: the one its first ``init`` frame
reports. Until that frame comes (a handful of records: the ``initialize`` exchange and the
prompt) the records wait in memory, at most :data:`MAX_BEFORE_HEADER` of them; a CLI that
never says is recorded with the bundled CLI's version (or none, for a CLI of the caller's).

Writing. Records go through a 64 KiB file buffer, synchronously: the reader of the CLI's
output (the SDK's task) appends each frame without a task switch, and the disk sees one
write per 64 KiB, as with a logging handler. Buffering the session in memory instead would
grow with it. The file is opened when the transport is built (so a bad path fails before
anything starts) and closed, flushed, when the transport is closed.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import IO, Any

import claude_agent_sdk
import trio
from claude_agent_sdk import ClaudeAgentOptions, CLIJSONDecodeError, ProcessError, Transport

from claude_trio.actors.session.process import Killable, kill_tools, kills_processes
from claude_trio.actors.session.sdk_private import BUNDLED_CLI_VERSION
from claude_trio.protocol.cassettes.format import (
    CassetteHeader,
    RecordKind,
    encode_header,
    encode_record,
)
from claude_trio.protocol.cassettes.scrub import Scrubber
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.session.transport import TransportFactory

__all__ = ["MAX_BEFORE_HEADER", "CassetteWriter", "RecordingTransport", "recording"]

MAX_BEFORE_HEADER = 256
"""Records kept in memory, at most, until the CLI names its version (its ``init`` frame)."""

_BUFFER = 64 * 1024


def _claude_trio_version() -> str | None:
    try:
        return importlib.metadata.version("claude-trio")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_record_to(record_to: object) -> Path:
    """The cassette's path; refuses one that cannot be written, naming it and the fix."""
    if not isinstance(record_to, str | os.PathLike) or not os.fspath(record_to):
        raise InvalidParamsError("record_to", record_to, "None or the path of a file to write")
    path = Path(os.fspath(record_to))
    if path.is_dir():
        raise InvalidParamsError("record_to", record_to, "a file path, not a folder")
    if not path.parent.is_dir():
        raise InvalidParamsError(
            "record_to", record_to, f"a path in an existing folder ({path.parent} does not exist)"
        )
    return path


class CassetteWriter:
    """Appends records to one cassette file (see the module docstring)."""

    def __init__(self, path: Path, scrubber: Scrubber, *, fallback_cli_version: str | None) -> None:
        self.path = path
        self._scrubber = scrubber
        self._fallback = fallback_cli_version
        try:
            self._file: IO[str] | None = path.open("w", encoding="utf-8", buffering=_BUFFER)
        except OSError as exc:
            raise InvalidParamsError(
                "record_to", str(path), f"a file that can be written ({exc})"
            ) from None
        self._pending: list[str] | None = []
        self._t0: float | None = None
        #: How many records were written (the header excluded).
        self.records = 0

    def start(self) -> None:
        """The CLI is being connected: times count from now."""
        if self._t0 is None:
            self._t0 = trio.current_time()

    def record(self, kind: RecordKind, value: Any) -> None:
        if self._file is None:
            return  # closed: the transport's owner is done with it
        if self._t0 is None:
            self.start()
        assert self._t0 is not None
        clean = (
            self._scrubber.text(value) if isinstance(value, str) else self._scrubber.value(value)
        )
        line = encode_record(trio.current_time() - self._t0, kind, clean)
        self.records += 1
        pending = self._pending
        if pending is None:
            self._file.write(line + "\n")
            return
        pending.append(line)
        version = _reported_version(kind, value)
        if version is not None:
            self._write_header(version)
        elif len(pending) >= MAX_BEFORE_HEADER:
            self._write_header(self._fallback)

    def _write_header(self, cli_version: str | None) -> None:
        assert self._file is not None
        assert self._pending is not None
        header = CassetteHeader(
            cli_version=cli_version,
            sdk_version=claude_agent_sdk.__version__,
            claude_trio_version=_claude_trio_version(),
        )
        self._file.write(encode_header(header) + "\n")
        for line in self._pending:
            self._file.write(line + "\n")
        self._pending = None

    def close(self) -> None:
        """Write what is left and close the file. Idempotent."""
        if self._file is None:
            return
        if self._pending is not None:
            self._write_header(self._fallback)
        file, self._file = self._file, None
        file.close()


def _reported_version(kind: str, value: Any) -> str | None:
    if kind != "read" or not isinstance(value, Mapping):
        return None
    if value.get("type") != "system" or value.get("subtype") != "init":
        return None
    version = value.get("claude_code_version")
    return version if isinstance(version, str) else None


class _RecordingReader:
    """The inner transport's output, each frame recorded as it passes (an iterator class, not
    an async generator: the SDK cancels its reader at any await)."""

    def __init__(self, inner: AsyncIterator[dict[str, Any]], writer: CassetteWriter) -> None:
        self._inner = inner
        self._writer = writer
        self._ended = False

    def __aiter__(self) -> _RecordingReader:
        return self

    async def __anext__(self) -> dict[str, Any]:
        try:
            frame = await anext(self._inner)
        except StopAsyncIteration:
            self._end("exit", 0)
            raise
        except ProcessError as exc:
            self._end("exit", exc.exit_code if exc.exit_code is not None else 1)
            raise
        except CLIJSONDecodeError as exc:
            self._end(
                "error", {"type": "CLIJSONDecodeError", "message": str(exc), "line": exc.line}
            )
            raise
        except Exception as exc:
            self._end("error", {"type": type(exc).__name__, "message": str(exc)})
            raise
        self._writer.record("read", frame)
        return frame

    def _end(self, kind: RecordKind, value: Any) -> None:
        if not self._ended:
            self._ended = True
            self._writer.record(kind, value)


class RecordingTransport(Transport):
    """The CLI's transport, with everything that crosses it recorded (see the module
    docstring). Kills reach the inner transport when it can be killed
    (:class:`~.process.Killable`).

    Channels: none of its own; it owns the cassette file, closed (flushed) by :meth:`close`.
    Cancellation: it adds no checkpoint: a read or write cancelled in the inner transport is
    not recorded (only what crossed is).
    Error handling: the inner transport's errors pass through unchanged; how its output ended
    (exit code, or the failure) is recorded first.
    """

    def __init__(self, inner: Transport, writer: CassetteWriter) -> None:
        self.inner = inner
        self.writer = writer

    async def connect(self) -> None:
        self.writer.start()
        await self.inner.connect()

    async def write(self, data: str) -> None:
        await self.inner.write(data)
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                frame = _loads(line)
            except ValueError:
                self.writer.record("write_text", line)
            else:
                self.writer.record("write", frame)

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return _RecordingReader(aiter(self.inner.read_messages()), self.writer)

    async def end_input(self) -> None:
        self.writer.record("end_input", True)
        await self.inner.end_input()

    async def close(self) -> None:
        try:
            await self.inner.close()
        finally:
            self.writer.close()

    def is_ready(self) -> bool:
        return self.inner.is_ready()

    def kill_now(self) -> None:
        if isinstance(self.inner, Killable):
            self.inner.kill_now()

    def kill_tools(self) -> None:
        if isinstance(self.inner, Killable):
            self.inner.kill_tools()

    @property
    def kills_processes(self) -> bool:
        return kills_processes(self.inner)

    def kill_children(self, *, tools_only: bool = False) -> tuple[int, ...]:
        return kill_tools(self.inner, tools_only=tools_only)


def _loads(line: str) -> Any:
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def recording(
    factory: TransportFactory,
    record_to: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    bundled_cli: bool = True,
) -> TransportFactory:
    """``factory`` with the transport it builds recorded into ``record_to`` (each transport
    built writes the file anew: one cassette is one CLI process).

    ``env``: the CLI's extra environment, whose secret values are scrubbed along with this
    process's. ``bundled_cli``: the CLI is the bundled one (its version is the fallback for the
    header when the CLI never names its own).
    """
    path = check_record_to(record_to)

    def build(options: ClaudeAgentOptions) -> Transport:
        scrubber = Scrubber.for_environment(os.environ, options.env or {}, env or {})
        writer = CassetteWriter(
            path, scrubber, fallback_cli_version=BUNDLED_CLI_VERSION if bundled_cli else None
        )
        stderr = options.stderr

        def on_stderr(line: str) -> None:
            writer.record("stderr", line.rstrip("\r\n"))
            if stderr is not None:
                stderr(line)

        options = dataclasses.replace(options, stderr=on_stderr)
        return RecordingTransport(factory(options), writer)

    return build
