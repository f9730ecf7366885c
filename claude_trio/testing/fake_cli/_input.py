"""User messages: the ones a test sends through the SDK, and the ones the fake CLI took in.

``client.query(prompt_stream(user_message("hi", uuid="u-1")))`` sends a message with a uuid of
your choosing, so a test can find it again in the echo and in the result's
``user_message_uuids``. The fake records what it took in as :class:`UserInput`
(``FakeTurn.messages``).
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Mapping
from typing import Any

import attrs

from claude_trio.actors.session.input_channel import MessageStream
from claude_trio.testing import frames


@attrs.frozen(kw_only=True)
class UserInput:
    """One user message the SDK wrote to the fake CLI's stdin."""

    uuid: str | None
    content: str | list[Any]
    raw: Mapping[str, Any]

    @property
    def text(self) -> str:
        """The message text (text blocks joined when the content is a list)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(b.get("text", "") for b in self.content if isinstance(b, dict))


def user_message(
    text: str, *, uuid: str | None = None, session_id: str = "default"
) -> dict[str, Any]:
    """The user-message dict an application sends through the SDK, with a ``uuid`` of your
    choosing (a fresh one by default)."""
    message_uuid = uuid if uuid is not None else str(uuid_module.uuid4())
    return frames.user_input(text, uuid=message_uuid, session_id=session_id)


def prompt_stream(*messages: dict[str, Any]) -> MessageStream:
    """Wrap message dicts so ``client.query(prompt_stream(user_message("hi", uuid=u)))`` works."""
    return MessageStream(*messages)
