"""The recorded stream and the replay transport the scripted benchmarks share.

Why record instead of hand-writing frames: the hot path's cost depends on what the real CLI
sends (its ``thinking_tokens`` / ``status`` / ``command_lifecycle`` side frames, the size of its
``init`` and ``result`` frames, the fields on every ``stream_event``). So :func:`record_stream`
runs the bundled ``claude`` once against the Messages API double (a few model calls with tool
round trips, mostly text deltas), keeps every stdout frame, and the benchmarks replay that list.
Recording is setup: it is never inside a measured interval.

Why a replay transport instead of ``claude_trio.testing.FakeCLI``: the fake builds each frame
while the turn runs (its script, its clock), which would put the fake's own work inside both
measurements and shrink the ratio we want to see. :class:`ReplayTransport` only hands out
pre-built dicts, so nearly all the CPU measured is the SDK's and the adapter's.
"""

from __future__ import annotations

import collections
import json
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
from claude_agent_sdk import ClaudeAgentOptions, Transport

from claude_trio import ExecuteParams, open_session
from claude_trio.actors.session.sdk_private import SubprocessCLITransport, route_permission_prompts
from claude_trio.testing.hermetic import hermetic_env
from claude_trio.testing.model_double import (
    ModelDouble,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    turns,
)

# One sentence of prose; the replies repeat it. chunk_size=8 gives deltas of about two tokens,
# close to what the API streams.
_PROSE = "The adapter maps each SDK message into unified events without blocking the reader. "


@attrs.frozen(kw_only=True)
class Recording:
    """What the CLI wrote to stdout for one prompt: the ``initialize`` answer and the turn.

    ``turn`` holds every frame after ``initialize`` up to and including the last one the CLI
    wrote (the ``command_lifecycle`` "completed" frame comes after the result).
    ``prompt_uuid`` is the uuid our push carried; replay swaps it for the uuid being answered.
    """

    initialize_response: dict[str, Any]
    turn: tuple[dict[str, Any], ...]
    prompt_uuid: str
    cli_version: str
    #: Indexes in ``turn`` of the frames that mention ``prompt_uuid`` (patched on replay).
    mentions: frozenset[int]

    def kinds(self) -> dict[str, int]:
        """Frame counts by type (``stream_event`` split by its delta type), for the report."""
        counts: dict[str, int] = {}
        for frame in self.turn:
            kind = str(frame.get("type"))
            if kind == "stream_event":
                event = frame.get("event", {})
                kind = str(event.get("delta", {}).get("type") or event.get("type"))
            elif kind == "system":
                kind = f"system/{frame.get('subtype')}"
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def first_text_delta_index(self) -> int:
        """Index in ``turn`` of the first text delta of the main thread."""
        for i, frame in enumerate(self.turn):
            event = frame.get("event") if frame.get("type") == "stream_event" else None
            if isinstance(event, dict) and event.get("delta", {}).get("type") == "text_delta":
                return i
        raise ValueError("the recording has no text delta")


async def _no_prompt() -> AsyncIterator[dict[str, Any]]:
    nothing: tuple[dict[str, Any], ...] = ()
    for item in nothing:
        yield item


def subprocess_transport(options: ClaudeAgentOptions) -> SubprocessCLITransport:
    """The real CLI transport, built as ``open_session`` builds it (so a bench can hold it)."""
    return SubprocessCLITransport(prompt=_no_prompt(), options=route_permission_prompts(options))


def _script(text_chars: int) -> list[Reply]:
    text = (_PROSE * (text_chars // len(_PROSE) + 1))[:text_chars]
    return [
        Reply(
            blocks=(
                ReplyThinking(thinking="I should look at the workspace first. " * 2),
                ReplyText(text=text),
                ReplyToolUse(
                    id="toolu_bench_1",
                    name="Bash",
                    input={"command": "echo hello", "description": "Say hello"},
                ),
            ),
            chunk_size=8,
        ),
        Reply(
            blocks=(
                ReplyText(text=text),
                ReplyToolUse(id="toolu_bench_2", name="Read", input={"file_path": "notes.txt"}),
            ),
            chunk_size=8,
        ),
        Reply(
            blocks=(
                ReplyText(text=text),
                ReplyToolUse(id="toolu_bench_3", name="Glob", input={"pattern": "*.txt"}),
            ),
            chunk_size=8,
        ),
        Reply(blocks=(ReplyText(text=text),), chunk_size=8),
    ]


class _Recorder(Transport):
    """Passes everything through to the real subprocess transport and keeps stdout frames."""

    def __init__(self, inner: Transport, frames: list[dict[str, Any]]) -> None:
        self.inner = inner
        self.frames = frames

    async def connect(self) -> None:
        await self.inner.connect()

    async def write(self, data: str) -> None:
        await self.inner.write(data)

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return self._read()

    async def _read(self) -> AsyncIterator[dict[str, Any]]:
        async for frame in self.inner.read_messages():
            self.frames.append(json.loads(json.dumps(frame)))
            yield frame

    async def close(self) -> None:
        await self.inner.close()

    def is_ready(self) -> bool:
        return self.inner.is_ready()

    async def end_input(self) -> None:
        await self.inner.end_input()


async def record_stream(*, text_chars: int = 3800) -> Recording:
    """Run the real CLI once against the double and keep what it wrote (about 2,000 frames).

    Four model calls: thinking + text + Bash, text + Read, text + Glob, final text. Each text
    is ``text_chars`` characters in 8-character deltas.
    """
    frames: list[dict[str, Any]] = []
    recorders: list[_Recorder] = []

    def factory(options: ClaudeAgentOptions) -> Transport:
        recorder = _Recorder(subprocess_transport(options), frames)
        recorders.append(recorder)
        return recorder

    with tempfile.TemporaryDirectory(prefix="claude-trio-bench-") as tmp:
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        (workdir / "notes.txt").write_text("benchmark notes\n" * 20)
        double = ModelDouble(turns(*_script(text_chars)))
        async with trio.open_nursery() as nursery:
            await nursery.start(double.serve)
            env = hermetic_env(double.base_url, Path(tmp), sandbox=True)
            params = ExecuteParams(prompt="Summarize the workspace.", cwd=str(workdir))
            with trio.fail_after(120):
                async with open_session(params, env=env, transport_factory=factory) as session:
                    kinds = [event.kind async for event in session.events]
            nursery.cancel_scope.cancel()
        double.check()
    if not kinds or kinds[-1] != "result":
        raise RuntimeError(f"recording failed: the session ended with {kinds[-1:]}")
    init_index = next(i for i, f in enumerate(frames) if f.get("type") == "control_response")
    echo = next(
        f for f in frames if f.get("type") == "user" and isinstance(f["message"]["content"], str)
    )
    init = next(f for f in frames if f.get("subtype") == "init")
    turn = tuple(frames[init_index + 1 :])
    return Recording(
        initialize_response=frames[init_index]["response"]["response"],
        turn=turn,
        prompt_uuid=echo["uuid"],
        cli_version=str(init.get("claude_code_version")),
        mentions=frozenset(i for i, f in enumerate(turn) if echo["uuid"] in json.dumps(f)),
    )


class ReplayTransport(Transport):
    """A scripted CLI that answers ``initialize`` and replays a recording for each user message.

    * ``write()``: an ``initialize`` (or any other) control request gets a success answer (the
      recorded one for ``initialize``); a user message queues the recorded turn, with the
      recording's prompt uuid replaced by the one written (so the lifecycle can match it).
    * ``read_messages()``: yields queued frames as fast as the SDK takes them. With
      ``pause_after=n`` only the first ``n`` frames of each turn are yielded, then the reader
      waits until ``close()``: a CLI waiting for the model in the middle of a turn.
    * ``release``: when given, nothing of a turn is yielded before it is set, so a benchmark can
      start its clock after the session's setup and before the turn's first frame.

    Frames are shared dicts (never copied) unless ``fresh=True``: then each is a new dict parsed
    from its JSON line when it is read, as the real transport does (for memory measurements,
    where a buffered frame must count).
    """

    def __init__(
        self,
        recording: Recording,
        *,
        release: trio.Event | None = None,
        pause_after: int | None = None,
        fresh: bool = False,
    ) -> None:
        self._recording = recording
        self._release = release
        self._pause_after = pause_after
        self._fresh = fresh
        self._outbox: collections.deque[dict[str, Any] | _Fresh] = collections.deque()
        self._wake = trio.Event()
        self._closed = False

    async def connect(self) -> None:
        await trio.lowlevel.checkpoint()

    async def write(self, data: str) -> None:
        await trio.lowlevel.checkpoint()
        message = json.loads(data)
        kind = message.get("type")
        if kind == "control_request":
            request = message.get("request", {})
            answer = (
                self._recording.initialize_response
                if request.get("subtype") == "initialize"
                else {}
            )
            self._put(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "success",
                        "request_id": message["request_id"],
                        "response": answer,
                    },
                }
            )
        elif kind == "user":
            uuid = message.get("uuid")
            self._queue_turn(uuid if isinstance(uuid, str) else None)

    def _queue_turn(self, uuid: str | None) -> None:
        old = self._recording.prompt_uuid
        mentions = self._recording.mentions
        frames: Sequence[dict[str, Any]] = self._recording.turn
        if self._pause_after is not None:
            frames = frames[: self._pause_after]
        for i, frame in enumerate(frames):
            patch = uuid if uuid is not None and i in mentions else None
            if self._fresh:
                self._put(_Fresh(frame=frame, old=old, new=patch))
            elif patch is not None:
                self._put(json.loads(json.dumps(frame).replace(old, patch)))
            else:
                self._put(frame)

    def _put(self, item: dict[str, Any] | _Fresh) -> None:
        self._outbox.append(item)
        self._wake.set()

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return self._read()

    async def _read(self) -> AsyncIterator[dict[str, Any]]:
        outbox = self._outbox
        while not self._closed:
            if not outbox:
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            # popleft, not a batch copy: a parked reader must not keep frames alive.
            item = outbox.popleft()
            if (
                self._release is not None
                and not self._release.is_set()
                and (isinstance(item, _Fresh) or item.get("type") != "control_response")
            ):
                await self._release.wait()
            # No checkpoint per frame: the SDK's reader checkpoints when it forwards it.
            yield item.parse() if isinstance(item, _Fresh) else item

    async def close(self) -> None:
        self._closed = True
        self._wake.set()
        await trio.lowlevel.checkpoint()

    def is_ready(self) -> bool:
        return not self._closed

    async def end_input(self) -> None:
        await trio.lowlevel.checkpoint()


@attrs.frozen(kw_only=True)
class _Fresh:
    """A frame to hand out as a new dict parsed from its JSON line, as the real transport does."""

    frame: dict[str, Any]
    old: str
    new: str | None

    def parse(self) -> dict[str, Any]:
        line = json.dumps(self.frame)
        if self.new is not None:
            line = line.replace(self.old, self.new)
        result: dict[str, Any] = json.loads(line)
        return result


def replay_factory(recording: Recording, **kwargs: Any) -> Callable[[Any], ReplayTransport]:
    """A ``transport_factory`` for ``open_session`` that builds a :class:`ReplayTransport`."""

    def factory(options: Any) -> ReplayTransport:
        return ReplayTransport(recording, **kwargs)

    return factory
