"""The offline model's tool marks (``claude_trio/offline/model.py``): ``#write PATH`` and
``#bash COMMAND`` make it call that tool, and its answer quotes what the tool said."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from claude_trio.offline import ModelRequest, Reply, ReplyText, ReplyToolUse, offline_responder


def request(messages: Sequence[Mapping[str, Any]]) -> ModelRequest:
    body = {"model": "claude-opus-5-5", "stream": True, "messages": list(messages)}
    return ModelRequest(index=0, method="POST", path="/v1/messages", headers=(), body=body)


def reply(messages: Sequence[Mapping[str, Any]]) -> Reply:
    response = offline_responder()(request(messages))
    assert isinstance(response, Reply)
    return response


def test_write_and_bash_marks_call_the_tool_and_the_answer_quotes_its_result() -> None:
    prompt = {"role": "user", "content": "please #write /w/a.txt"}
    first = reply([prompt])
    (use,) = [b for b in first.blocks if isinstance(b, ReplyToolUse)]
    assert (use.name, dict(use.input)) == (
        "Write",
        {"file_path": "/w/a.txt", "content": "written by the offline model\n"},
    )
    (bash,) = [
        b
        for b in reply([{"role": "user", "content": "#bash sleep 1; ls\nmore"}]).blocks
        if isinstance(b, ReplyToolUse)
    ]
    assert (bash.name, bash.input["command"]) == ("Bash", "sleep 1; ls")
    denied = reply(
        [
            prompt,
            {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": "Write"}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "is_error": True,
                        "content": "The user said no.",
                    }
                ],
            },
        ]
    )
    (text,) = denied.blocks
    assert isinstance(text, ReplyText)
    assert text.text == (
        "You said: please #write /w/a.txt (the tool said: error: The user said no.)"
    )
