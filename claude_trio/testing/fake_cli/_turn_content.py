"""What the model streams in a fake turn: API calls and their content blocks.

Each block is written as the CLI writes it: ``stream_event`` frames (``content_block_start``,
the deltas, ``content_block_stop``), then one ``assistant`` frame with the whole block; a
subagent's block (``parent_tool_use_id=...``) is only the ``assistant`` frame. An API call
(``message_start`` ... ``message_delta``/``message_stop``) opens before the first block and
closes after a tool use, before a tool result and before the turn's result, unless the script
opens and closes it itself (:meth:`begin_message`, :meth:`end_message`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import trio

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.testing import frames
from claude_trio.testing.fake_cli._turn_core import TurnCore

#: Usage of one scripted API call when the script does not give one.
DEFAULT_MESSAGE_USAGE: Mapping[str, int] = {
    "input_tokens": 10,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 5,
}
DEFAULT_MESSAGE_COST_USD = 0.001


def add_usage(total: dict[str, int], usage: Mapping[str, int]) -> None:
    for key in DEFAULT_MESSAGE_USAGE:
        total[key] = total.get(key, 0) + int(usage.get(key, 0))


class ContentMixin(TurnCore):
    """The content methods of :class:`~claude_trio.testing.fake_cli.FakeTurn`."""

    async def begin_message(
        self,
        *,
        usage: Mapping[str, int] | None = None,
        cost_usd: float = DEFAULT_MESSAGE_COST_USD,
    ) -> None:
        """Start one API call (``message_start``); closes an open one first."""
        if self._message_id is not None:
            await self.end_message(stop_reason="tool_use" if self._open_tools else "end_turn")
        self._api_calls += 1
        self._message_id = f"msg_fake_{self.process._next_id()[-12:]}"
        self._message_usage = dict(DEFAULT_MESSAGE_USAGE)
        self._message_usage.update(usage or {})
        self._cost += cost_usd
        self._block_index = 0
        await self._stream(
            frames.message_start_event(
                message_id=self._message_id, model=self.process.model, usage=self._snapshot_usage()
            )
        )

    def _snapshot_usage(self) -> dict[str, int]:
        # message_start carries the input side and a token or so of output; the final usage
        # comes in message_delta (the SDK's per-block AssistantMessage keeps this snapshot).
        output = min(1, self._message_usage["output_tokens"])
        return {**self._message_usage, "output_tokens": output}

    async def end_message(self, *, stop_reason: str = "end_turn") -> None:
        """Finish the open API call (``message_delta`` with the final usage, ``message_stop``)."""
        await trio.lowlevel.checkpoint()
        if self._message_id is None:
            return
        add_usage(self._usage, self._message_usage)
        await self._stream(
            frames.message_delta_event(stop_reason=stop_reason, usage=self._message_usage)
        )
        await self._stream(frames.message_stop_event())
        self._message_id = None

    async def _stream(self, event: Mapping[str, Any], parent: str | None = None) -> None:
        await self._emit(
            frames.stream_event(
                event,
                parent_tool_use_id=parent,
                **self._ids(),
            )
        )

    async def _ensure_message(self) -> None:
        await trio.lowlevel.checkpoint()
        if self._message_id is None:
            await self.begin_message()

    async def _assistant(self, block: Mapping[str, Any], parent: str | None) -> None:
        message_id = self._message_id or f"msg_fake_{self.process._next_id()[-12:]}"
        usage = self._snapshot_usage() if self._message_id else dict(DEFAULT_MESSAGE_USAGE)
        await self._emit(
            frames.assistant(
                [block],
                message_id=message_id,
                model=self.process.model,
                usage=usage,
                parent_tool_use_id=parent,
                **self._ids(),
            )
        )

    async def _block(
        self,
        start: Mapping[str, Any],
        deltas: Iterable[Mapping[str, Any]],
        final: Mapping[str, Any],
        *,
        delay: float,
        parent_tool_use_id: str | None,
    ) -> None:
        if parent_tool_use_id is not None:
            # A subagent's stream events are never forwarded; only its complete messages are.
            await self._assistant(final, parent_tool_use_id)
            return
        await self._ensure_message()
        index = self._block_index
        self._block_index += 1
        await self._stream(frames.content_block_start_event(index, start))
        for delta in deltas:
            if delay:
                await trio.sleep(delay)
            await self._stream(frames.content_block_delta_event(index, delta))
        await self._stream(frames.content_block_stop_event(index))
        await self._assistant(final, None)

    @staticmethod
    def _chunks(text: str, chunk: int | None) -> list[str]:
        if chunk is not None and chunk < 1:
            raise InvalidParamsError("chunk", chunk, "use a positive number of characters")
        if not chunk or not text:
            return [text]
        return [text[i : i + chunk] for i in range(0, len(text), chunk)]

    async def text(
        self,
        text: str,
        *,
        chunk: int | None = None,
        delay: float = 0.0,
        parent_tool_use_id: str | None = None,
    ) -> None:
        """A text block: ``text_delta`` stream events of ``chunk`` characters, ``delay`` seconds
        before each, then one ``assistant`` frame with the whole block."""
        self._texts.append(text)
        await self._block(
            frames.text_block(""),
            [frames.text_delta(c) for c in self._chunks(text, chunk)],
            frames.text_block(text),
            delay=delay,
            parent_tool_use_id=parent_tool_use_id,
        )

    async def thinking(
        self,
        thinking: str,
        *,
        signature: str = "fake-signature",
        chunk: int | None = None,
        delay: float = 0.0,
        parent_tool_use_id: str | None = None,
    ) -> None:
        """A thinking block: ``thinking_delta`` events, one ``signature_delta``, the block."""
        deltas = [frames.thinking_delta(c) for c in self._chunks(thinking, chunk)]
        deltas.append(frames.signature_delta(signature))
        await self._block(
            frames.thinking_block("", ""),
            deltas,
            frames.thinking_block(thinking, signature),
            delay=delay,
            parent_tool_use_id=parent_tool_use_id,
        )

    async def tool_use(
        self,
        name: str,
        input: Mapping[str, Any],
        *,
        id: str | None = None,
        parent_tool_use_id: str | None = None,
        end_message: bool = True,
    ) -> str:
        """A tool_use block (``input_json_delta`` streamed); returns its id. The API call then
        ends with stop_reason ``tool_use`` (pass ``end_message=False`` for parallel tool uses)."""
        tool_use_id = id or f"toolu_fake_{self.process._next_id()[-12:]}"
        if parent_tool_use_id is None:
            self._open_tools.add(tool_use_id)
        await self._block(
            frames.tool_use_block(tool_use_id, name, {}),
            [frames.input_json_delta(json.dumps(dict(input)))],
            frames.tool_use_block(tool_use_id, name, input),
            delay=0.0,
            parent_tool_use_id=parent_tool_use_id,
        )
        if end_message and parent_tool_use_id is None:
            await self.end_message(stop_reason="tool_use")
        return tool_use_id

    async def tool_result(
        self,
        tool_use_id: str,
        content: str | list[Any],
        *,
        is_error: bool = False,
        tool_use_result: Any = None,
        parent_tool_use_id: str | None = None,
        fold: bool = True,
    ) -> None:
        """The tool's result as a ``user`` frame. Closes the open API call (stop_reason
        ``tool_use``) and, with ``fold=True``, folds queued pushes into this turn, as the real
        CLI does when it goes back to the model."""
        if parent_tool_use_id is None and self._message_id is not None:
            await self.end_message(stop_reason="tool_use")
        self._open_tools.discard(tool_use_id)
        await self._emit(
            frames.tool_result(
                tool_use_id,
                content,
                is_error=is_error,
                tool_use_result=tool_use_result,
                parent_tool_use_id=parent_tool_use_id,
                timestamp=self._now_iso(),
                **self._ids(),
            )
        )
        if fold and parent_tool_use_id is None:
            await self.fold_pending()
