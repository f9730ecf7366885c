"""A conversation continues on another machine through ``RedisSessionStore``: the real CLI
(against the Messages API double) runs a first execution whose transcript the SDK mirrors to a
real Redis from its own tasks under trio; a second execution, in a config folder that never saw
the session (another machine), resumes it from the store, and the model sees the first turn."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import coredis
import pytest
import trio

from claude_trio import ExecuteParams, open_session
from claude_trio.actors.cluster.store import RedisSessionStore
from claude_trio.protocol.session.events import Event, Result
from claude_trio.testing import RedisServer, hermetic_env
from claude_trio.testing.model_double import ModelDouble, Reply, turns

pytestmark = pytest.mark.e2e


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[coredis.Redis[str]]:
    async with coredis.Redis.from_url(redis_server.url, decode_responses=True) as client:
        yield client


async def run(params: ExecuteParams, env: dict[str, str], store: RedisSessionStore) -> list[Event]:
    events: list[Event] = []
    with trio.fail_after(60):
        async with open_session(params, env=env, session_store=store) as session:
            events = [event async for event in session.events]
    return events


async def test_a_conversation_continues_in_a_config_folder_that_never_saw_it(
    model_double: ModelDouble,
    redis: coredis.Redis[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scratch = tmp_path / "scratch"  # where the SDK materializes the resumed transcript
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    model_double.responder = turns(Reply.text("noted: 42"), Reply.text("it was 42"))
    store = RedisSessionStore(redis)
    work = tmp_path / "work"
    work.mkdir()
    first_machine = hermetic_env(model_double.base_url, tmp_path / "one", sandbox=True)
    second_machine = hermetic_env(model_double.base_url, tmp_path / "two", sandbox=True)
    first_params = ExecuteParams(prompt="remember the number 42", cwd=str(work))

    first = [e for e in await run(first_params, first_machine, store) if isinstance(e, Result)]

    sid = first[-1].session_id
    assert sid is not None
    (listed,) = [
        key async for key in redis.scan_iter(match=f"ct:tx:{{{sid}}}:*") if key.endswith(":")
    ]
    assert len(await redis.lrange(listed, 0, -1)) >= 2  # the first turn, mirrored
    second_params = ExecuteParams(
        prompt="which number was it?", cwd=str(work), resume_session_id=sid
    )
    second = [e for e in await run(second_params, second_machine, store) if isinstance(e, Result)]

    assert (second[-1].text, second[-1].is_error) == ("it was 42", False)
    _, resumed = model_double.message_requests
    assert resumed.user_texts[-2:] == ["remember the number 42", "which number was it?"]
    assert "noted: 42" in json.dumps([m for m in resumed.messages if m.get("role") == "assistant"])
    # The second machine's own config folder never held the transcript: it came from Redis.
    assert not list((tmp_path / "two" / "config").rglob(f"{sid}.jsonl"))
    assert list((tmp_path / "one" / "config").rglob(f"{sid}.jsonl"))
    # The materialized folder is gone once the session ended.
    assert list(scratch.iterdir()) == []
