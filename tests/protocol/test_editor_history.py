"""Finding and reading the CLI's transcript for ``session/load`` (``protocol/editor/history``)."""

from __future__ import annotations

from pathlib import Path

from claude_agent_sdk import SessionMessage

from claude_trio.protocol.editor.history import (
    config_dir,
    find_transcript,
    read_entries,
    transcript_updates,
)


def test_the_config_folder_is_the_sessions_then_this_processs_then_home() -> None:
    assert config_dir({"CLAUDE_CONFIG_DIR": "/a"}, {"CLAUDE_CONFIG_DIR": "/b"}) == Path("/a")
    assert config_dir({}, {"CLAUDE_CONFIG_DIR": "/b", "HOME": "/h"}) == Path("/b")
    assert config_dir({"HOME": "/s"}, {"HOME": "/h"}) == Path("/s/.claude")
    assert config_dir({}, {"HOME": "/h"}) == Path("/h/.claude")


def test_a_transcript_is_found_in_any_project_and_only_by_a_plain_name(tmp_path: Path) -> None:
    folder = tmp_path / "projects" / "-some-project"
    folder.mkdir(parents=True)
    (folder / "abc.jsonl").write_text('{"type":"user"}\nnot json\n[1]\n')
    assert find_transcript(tmp_path, "abc") == folder / "abc.jsonl"
    assert find_transcript(tmp_path, "other") is None
    assert find_transcript(tmp_path, "../-some-project/abc") is None
    assert find_transcript(tmp_path / "missing", "abc") is None
    assert read_entries(folder / "abc.jsonl") == [{"type": "user"}]


def test_a_failed_tool_result_and_image_blocks() -> None:
    messages = [
        SessionMessage(
            type="user",
            uuid="u",
            session_id="s",
            message={"content": [{"type": "image", "source": {}}, {"type": "text", "text": "hi"}]},
        ),
        SessionMessage(
            type="assistant",
            uuid="a",
            session_id="s",
            message={
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t",
                        "name": "Write",
                        "input": {"file_path": "/w/a.py", "content": "x = 1\n"},
                    },
                ]
            },
        ),
        SessionMessage(
            type="user",
            uuid="r",
            session_id="s",
            message={
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "is_error": True,
                        "content": [{"type": "text", "text": "denied"}],
                    },
                ]
            },
        ),
    ]
    user, call, done = (u.model_dump(by_alias=True) for u in transcript_updates(messages))
    assert (user["sessionUpdate"], user["content"]["text"]) == ("user_message_chunk", "hi")
    assert (call["kind"], call["locations"][0]["path"]) == ("edit", "/w/a.py")
    assert call["content"][0]["newText"] == "x = 1\n"
    assert (done["status"], done["content"][0]["content"]["text"]) == ("failed", "denied")
